#include "e2b/E2bWatchers.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "core/Ids.hpp"
#include "e2b/E2bWire.hpp"

namespace airlock::e2b {
namespace {
std::string newWatcherId() {
    // envd's shape: "w" and 20 characters of [a-z0-9].
    std::string id = newId("w");
    for (auto& ch : id) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return id;
}
}  // namespace

E2bWatchers::~E2bWatchers() {
    std::map<std::string, std::shared_ptr<Watcher>> all;
    {
        std::lock_guard lock(mutex_);
        all.swap(watchers_);
    }
    for (auto& [id, w] : all) {
        std::shared_ptr<AgentStream> stream;
        {
            std::lock_guard own(w->mutex);
            stream = w->stream;
        }
        if (stream) stream->reset("cancelled", "the server is stopping");
    }
}

void E2bWatchers::pruneLocked() {
    auto now = std::chrono::steady_clock::now();
    std::erase_if(watchers_, [&](const auto& entry) {
        std::lock_guard lock(entry.second->mutex);
        return entry.second->endedAt && now - *entry.second->endedAt > kKeepEnded;
    });
}

std::string E2bWatchers::create(const std::string& tenant, const std::string& sandboxId,
                                const protocol::DirWatchRequest& request, bool includeEntry) {
    auto w = std::make_shared<Watcher>();
    w->sandboxId = sandboxId;
    w->includeEntry = includeEntry;
    std::string id = newWatcherId();
    {
        std::lock_guard lock(mutex_);
        pruneLocked();
        std::size_t live = 0;
        // Ended ones wait to be polled, events and all: beyond a few per
        // sandbox, the oldest go first, whatever their age.
        std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> ended;
        for (const auto& [otherId, other] : watchers_) {
            std::lock_guard own(other->mutex);
            if (other->sandboxId != sandboxId) continue;
            if (other->endedAt)
                ended.emplace_back(*other->endedAt, otherId);
            else
                ++live;
        }
        if (live >= kMaxLivePerSandbox)
            throw Error(ErrorCode::too_many_requests,
                        "too many watchers in this sandbox (remove one first)");
        std::sort(ended.begin(), ended.end());
        for (std::size_t i = 0; i + kMaxEndedPerSandbox < ended.size(); ++i)
            watchers_.erase(ended[i].second);
        watchers_[id] = w;
    }
    std::weak_ptr<Watcher> weak = w;
    GuestFiles::WatchHandlers handlers;
    handlers.record = [weak](protocol::WatchRecord r, std::shared_ptr<void> hold) {
        auto w = weak.lock();
        if (!w) return;
        std::lock_guard lock(w->mutex);
        if (r.kind == protocol::WatchRecord::Kind::started) {
            w->started = true;
            w->started_.notify_all();
            return;
        }
        w->waiting.emplace_back(watchEvent(r, w->includeEntry), std::move(hold));
    };
    handlers.ended = [weak](std::optional<Error> error) {
        auto w = weak.lock();
        if (!w) return;
        std::lock_guard lock(w->mutex);
        w->failure = error ? *error : Error(ErrorCode::internal, "the watch ended");
        w->endedAt = std::chrono::steady_clock::now();
        w->started_.notify_all();
    };
    try {
        auto stream = files_.openWatch(tenant, sandboxId, request, handlers);
        std::unique_lock lock(w->mutex);
        w->stream = stream;
        if (!w->started_.wait_for(lock, kStartWait, [&] { return w->started || w->endedAt; }))
            w->failure = Error(ErrorCode::agent_timeout, "the guest did not start the watch");
        if (!w->started) {
            Error failure = *w->failure;
            lock.unlock();
            stream->reset("cancelled", "the watch did not start");
            throw failure;
        }
    } catch (...) {
        std::lock_guard lock(mutex_);
        watchers_.erase(id);
        throw;
    }
    return id;
}

std::shared_ptr<E2bWatchers::Watcher> E2bWatchers::find(const std::string& sandboxId,
                                                        const std::string& watcherId) {
    auto it = watchers_.find(watcherId);
    if (it == watchers_.end() || it->second->sandboxId != sandboxId)
        throw Error(ErrorCode::not_found, "watcher with id " + watcherId + " not found");
    return it->second;
}

nlohmann::json E2bWatchers::events(const std::string& sandboxId, const std::string& watcherId) {
    std::deque<std::pair<nlohmann::json, std::shared_ptr<void>>> taken;
    {
        std::lock_guard lock(mutex_);
        pruneLocked();
        auto w = find(sandboxId, watcherId);
        std::lock_guard own(w->mutex);
        taken.swap(w->waiting);
        // What came before the failure is still answered, once.
        if (taken.empty() && w->failure) throw *w->failure;
    }
    nlohmann::json out = nlohmann::json::object();
    if (taken.empty()) return out;
    nlohmann::json list = nlohmann::json::array();
    for (auto& [event, hold] : taken) list.push_back(std::move(event));
    out["events"] = std::move(list);
    return out;  // the holds go with `taken`: the guest's window comes back
}

void E2bWatchers::remove(const std::string& sandboxId, const std::string& watcherId) {
    std::shared_ptr<Watcher> w;
    {
        std::lock_guard lock(mutex_);
        w = find(sandboxId, watcherId);
        watchers_.erase(watcherId);
    }
    std::shared_ptr<AgentStream> stream;
    {
        std::lock_guard own(w->mutex);
        stream = w->stream;
    }
    if (stream) stream->reset("cancelled", "the watcher was removed");
}

}  // namespace airlock::e2b
