#include "daemon/Housekeeping.hpp"

#include <algorithm>

#include "core/Log.hpp"

namespace airlock {

Housekeeping::Housekeeping(std::string name) : name_(std::move(name)) {}

Housekeeping::~Housekeeping() { stop(); }

void Housekeeping::once(std::string what, std::function<void()> task) {
    onceTasks_.emplace_back(std::move(what), std::move(task));
}

void Housekeeping::every(std::chrono::milliseconds interval, std::string what,
                         std::function<void()> task) {
    periodic_.push_back(Periodic{interval, std::move(what), std::move(task), {}});
}

void Housekeeping::start() {
    thread_ = std::thread([this] { run(); });
}

void Housekeeping::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Housekeeping::runLogged(const std::string& what, const std::function<void()>& task) {
    try {
        task();
    } catch (const std::exception& e) {
        logError(name_, what + ": " + e.what());
    } catch (...) {
        logError(name_, what + ": failed");
    }
}

void Housekeeping::run() {
    auto stopping = [this] {
        std::lock_guard lock(mutex_);
        return stopping_;
    };
    for (const auto& [what, task] : onceTasks_) {
        if (stopping()) return;
        runLogged(what, task);
    }
    auto now = std::chrono::steady_clock::now();
    for (auto& p : periodic_) p.next = now;
    while (!stopping()) {
        for (auto& p : periodic_) {
            if (std::chrono::steady_clock::now() < p.next) continue;
            runLogged(p.what, p.task);
            p.next = std::chrono::steady_clock::now() + p.interval;
            if (stopping()) return;
        }
        auto next = std::chrono::steady_clock::now() + std::chrono::hours(1);
        for (const auto& p : periodic_) next = std::min(next, p.next);
        std::unique_lock lock(mutex_);
        wake_.wait_until(lock, next, [this] { return stopping_; });
    }
}

}  // namespace airlock
