#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace airlock {

// One thread for the daemon's background duties: one-off tasks first, in
// order (warming templates), then periodic ones, each at its own interval
// from the start (the timeout sweep every second, retention every few
// minutes). A task's exception is logged with its name and never ends the
// thread; stop() wakes it at once and waits for the task that runs.
class Housekeeping {
  public:
    explicit Housekeeping(std::string name);
    ~Housekeeping();  // stops
    Housekeeping(const Housekeeping&) = delete;
    Housekeeping& operator=(const Housekeeping&) = delete;

    // Before start().
    void once(std::string what, std::function<void()> task);
    void every(std::chrono::milliseconds interval, std::string what, std::function<void()> task);

    void start();
    void stop();

  private:
    struct Periodic {
        std::chrono::milliseconds interval;
        std::string what;
        std::function<void()> task;
        std::chrono::steady_clock::time_point next;
    };
    void run();
    void runLogged(const std::string& what, const std::function<void()>& task);

    std::string name_;
    std::vector<std::pair<std::string, std::function<void()>>> onceTasks_;
    std::vector<Periodic> periodic_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace airlock
