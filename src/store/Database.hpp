#pragma once
#include <concepts>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace airlock {

// One SQLite connection, serialised by a mutex (the daemon's worker threads
// share it), with its schema brought up to date when it opens (store/Schema).
// WAL mode: a SIGKILL never leaves a torn write behind.
//
// Stores speak to it through run/one/all: the statement, a row reader and
// the parameters in order; nothing else prepares, binds or steps.
class Database {
  public:
    // A parameter whose presence depends on the query (an optional filter).
    using Param = std::variant<std::string, std::int64_t>;
    using Params = std::vector<Param>;

    explicit Database(const std::string& path);
    // Stops at an older schema version: upgrade tests, and the reference
    // schema an unversioned file is compared with.
    Database(const std::string& path, int schemaVersion);
    ~Database();
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    class Statement {
      public:
        Statement(sqlite3* db, std::string_view sql);
        ~Statement();
        Statement(const Statement&) = delete;
        Statement& operator=(const Statement&) = delete;
        Statement& bind(int index, std::string_view value);
        Statement& bind(int index, const std::string& value) {
            return bind(index, std::string_view(value));
        }
        Statement& bind(int index, const char* value) {
            return bind(index, std::string_view(value));
        }
        Statement& bind(int index, std::int64_t value);
        template <std::integral T>
        Statement& bind(int index, T value) {
            return bind(index, static_cast<std::int64_t>(value));
        }
        // Binds every parameter in order from ?1; a Params expands in place.
        template <typename... P>
        Statement& bindAll(const P&... params) {
            [[maybe_unused]] int index = 1;
            (bindNext(index, params), ...);
            return *this;
        }
        bool step();  // true while a row is available
        std::string text(int column) const;
        std::int64_t integer(int column) const;

      private:
        template <typename T>
        void bindNext(int& index, const T& value) {
            if constexpr (std::is_same_v<T, Params>) {
                for (const auto& p : value) bindParam(index++, p);
            } else {
                bind(index++, value);
            }
        }
        void bindParam(int index, const Param& value);
        sqlite3* db_;
        sqlite3_stmt* stmt_ = nullptr;
    };

    // Runs a statement that returns no rows; the number of rows it changed.
    template <typename... P>
    int run(std::string_view sql, const P&... params) {
        return locked([&](sqlite3* db) {
            Statement st(db, sql);
            st.bindAll(params...);
            while (st.step()) {
            }
            return changes(db);
        });
    }

    // Every row of a query, each made by `read(const Statement&)`.
    template <typename Read, typename... P>
    auto all(std::string_view sql, Read read, const P&... params) {
        using Row = std::invoke_result_t<Read, const Statement&>;
        return locked([&](sqlite3* db) {
            Statement st(db, sql);
            st.bindAll(params...);
            std::vector<Row> rows;
            while (st.step()) rows.push_back(read(st));
            return rows;
        });
    }

    // The first row of a query, if there is one.
    template <typename Read, typename... P>
    auto one(std::string_view sql, Read read, const P&... params) {
        using Row = std::invoke_result_t<Read, const Statement&>;
        return locked([&](sqlite3* db) -> std::optional<Row> {
            Statement st(db, sql);
            st.bindAll(params...);
            if (!st.step()) return std::nullopt;
            return read(st);
        });
    }

    // Statements separated by semicolons, no parameters (schema changes).
    void exec(const std::string& sql);
    // PRAGMA user_version: which step of store/Schema the file has reached.
    int schemaVersion();

  private:
    template <typename F>
    auto locked(F&& work) {
        std::lock_guard lock(mutex_);
        return work(db_);
    }
    static int changes(sqlite3* db);

    sqlite3* db_ = nullptr;
    std::mutex mutex_;
};

// Row readers for queries of one column.
std::string textColumn(const Database::Statement& st);
std::int64_t integerColumn(const Database::Statement& st);

}  // namespace airlock
