#include "store/Database.hpp"

#include <sqlite3.h>

#include "core/Error.hpp"
#include "store/Schema.hpp"

namespace airlock {

Database::Database(const std::string& path) : Database(path, kLatestSchemaVersion) {}

Database::Database(const std::string& path, int schemaVersion) {
    if (sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
        std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        throw Error(ErrorCode::internal, "cannot open database " + path + ": " + msg);
    }
    try {
        sqlite3_busy_timeout(db_, 5000);
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA synchronous=NORMAL");
        exec("PRAGMA foreign_keys=ON");
        bringSchemaUpTo(*this, schemaVersion);
    } catch (...) {
        sqlite3_close(db_);
        throw;
    }
}

Database::~Database() { sqlite3_close(db_); }

void Database::exec(const std::string& sql) {
    std::lock_guard lock(mutex_);
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : "unknown";
        sqlite3_free(err);
        throw Error(ErrorCode::internal, "database: " + msg);
    }
}

int Database::schemaVersion() {
    return static_cast<int>(*one("PRAGMA user_version", integerColumn));
}

int Database::changes(sqlite3* db) { return sqlite3_changes(db); }

Database::Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) !=
        SQLITE_OK)
        throw Error(ErrorCode::internal, std::string("database: ") + sqlite3_errmsg(db));
}

Database::Statement::~Statement() { sqlite3_finalize(stmt_); }

Database::Statement& Database::Statement::bind(int index, std::string_view value) {
    sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    return *this;
}

Database::Statement& Database::Statement::bind(int index, std::int64_t value) {
    sqlite3_bind_int64(stmt_, index, value);
    return *this;
}

void Database::Statement::bindParam(int index, const Param& value) {
    std::visit([&](const auto& v) { bind(index, v); }, value);
}

bool Database::Statement::step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw Error(ErrorCode::internal, std::string("database: ") + sqlite3_errmsg(db_));
}

std::string Database::Statement::text(int column) const {
    const auto* p = sqlite3_column_text(stmt_, column);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)))
             : std::string();
}

std::int64_t Database::Statement::integer(int column) const {
    return sqlite3_column_int64(stmt_, column);
}

std::string textColumn(const Database::Statement& st) { return st.text(0); }
std::int64_t integerColumn(const Database::Statement& st) { return st.integer(0); }

}  // namespace airlock
