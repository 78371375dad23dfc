#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace airlock {

// A thin RAII wrapper around one SQLite connection, serialised by a mutex
// (the daemon's worker threads share it). WAL mode: a SIGKILL never leaves a
// torn write behind.
class Database {
public:
    explicit Database(const std::string& path);
    ~Database();
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    class Statement {
    public:
        Statement(sqlite3* db, const std::string& sql);
        ~Statement();
        Statement(const Statement&) = delete;
        Statement& operator=(const Statement&) = delete;
        Statement& bind(int index, const std::string& value);
        Statement& bind(int index, std::int64_t value);
        bool step();  // true while a row is available
        std::string text(int column) const;
        std::int64_t integer(int column) const;

    private:
        sqlite3* db_;
        sqlite3_stmt* stmt_ = nullptr;
    };

    void exec(const std::string& sql);
    // ALTER TABLE ... ADD COLUMN, unless the column exists already.
    void addColumnIfMissing(const std::string& table, const std::string& columnDefinition);
    // Runs `work` with the connection locked; statements made inside use db().
    template <typename F>
    auto locked(F&& work) {
        std::lock_guard lock(mutex_);
        return work(db_);
    }

private:
    sqlite3* db_ = nullptr;
    std::mutex mutex_;
};

}  // namespace airlock
