#include "store/Database.hpp"

#include <sqlite3.h>

#include "core/Error.hpp"

namespace airlock {

Database::Database(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
        std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        throw Error(ErrorCode::internal, "cannot open database " + path + ": " + msg);
    }
    sqlite3_busy_timeout(db_, 5000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    exec("PRAGMA foreign_keys=ON");
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

Database::Statement::Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
        throw Error(ErrorCode::internal, std::string("database: ") + sqlite3_errmsg(db));
}

Database::Statement::~Statement() { sqlite3_finalize(stmt_); }

Database::Statement& Database::Statement::bind(int index, const std::string& value) {
    sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    return *this;
}

Database::Statement& Database::Statement::bind(int index, std::int64_t value) {
    sqlite3_bind_int64(stmt_, index, value);
    return *this;
}

bool Database::Statement::step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw Error(ErrorCode::internal, std::string("database: ") + sqlite3_errmsg(db_));
}

std::string Database::Statement::text(int column) const {
    const auto* p = sqlite3_column_text(stmt_, column);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)))
             : std::string();
}

std::int64_t Database::Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }

}  // namespace airlock

namespace airlock {

void Database::addColumnIfMissing(const std::string& table, const std::string& columnDefinition) {
    std::string column = columnDefinition.substr(0, columnDefinition.find(' '));
    bool present = locked([&](sqlite3* db) {
        Statement st(db, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
        st.bind(1, table).bind(2, column);
        return st.step();
    });
    if (!present) exec("ALTER TABLE " + table + " ADD COLUMN " + columnDefinition);
}

}  // namespace airlock
