#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace airlock::templates {

// One build's log: lines appended as the build goes, kept in a file (read
// after the build, and after a restart) and handed to followers as they come.
// Bounded: past kMaxBytes a line says so and the rest is dropped (the file,
// memory and every follower alike).
class BuildLog {
  public:
    // Under a followed stream's queue bound: a follower gets every line at once.
    static constexpr std::size_t kMaxBytes = 3u << 20;
    static constexpr std::size_t kMaxLine = 8192;
    struct Line {
        std::string time;   // RFC 3339
        std::string level;  // info | warn | error
        std::string text;
    };
    // A follower's callbacks: each line (false: it wants no more), then the end.
    struct Follower {
        std::function<bool(const Line&)> line;
        std::function<void()> end;
    };

    explicit BuildLog(std::string path);
    void append(const std::string& level, const std::string& text);
    // Output of a command, split into lines (a partial last line included).
    void appendOutput(const std::string& level, const std::string& output);
    // The build is over: followers get their end, later ones get it at once.
    void close();
    // Every line so far, then each new one, then the end (on the appending
    // thread). Returns a handle for unfollow().
    std::uint64_t follow(Follower f);
    void unfollow(std::uint64_t handle);
    std::vector<Line> lines(std::size_t from = 0) const;

    // A finished build's lines from its file.
    static std::vector<Line> readFile(const std::string& path);
    static std::string render(const Line& l);

  private:
    std::string path_;
    mutable std::mutex mutex_;
    std::vector<Line> lines_;
    std::size_t bytes_ = 0;
    bool full_ = false;
    bool closed_ = false;
    std::uint64_t nextHandle_ = 1;
    std::map<std::uint64_t, Follower> followers_;
};

}  // namespace airlock::templates
