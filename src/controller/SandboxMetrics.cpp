#include "controller/SandboxMetrics.hpp"

#include <algorithm>
#include <cmath>

#include "core/Log.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/Messages.hpp"

namespace airlock {
namespace {
constexpr auto kUsageWait = std::chrono::seconds(3);

std::int64_t nowUnixMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}
}  // namespace

SandboxMetrics::~SandboxMetrics() { stop(); }

void SandboxMetrics::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

protocol::GuestUsage SandboxMetrics::readUsage(const std::string& id) {
    auto agent = sandboxes_.agentFor(id);
    try {
        return protocol::parseGuestUsage(agent->call(protocol::UsageRequest{}, kUsageWait));
    } catch (const protocol::MessageError& e) {
        throw Error(ErrorCode::agent_error, std::string("the guest's usage is malformed: ") +
                                                e.what());
    }
}

void SandboxMetrics::append(const std::string& id, const protocol::GuestUsage& usage) {
    auto it = series_.find(id);
    if (it == series_.end()) return;
    Series& s = it->second;
    MetricSample m;
    m.unixMs = nowUnixMs();
    m.cpuCount = usage.cpuCount;
    // A rate needs the reading before; a guest whose counters went back (a
    // clone's, a reboot's) starts over.
    if (s.last && usage.cpuTicks > s.last->cpuTicks && usage.idleTicks >= s.last->idleTicks) {
        double total = static_cast<double>(usage.cpuTicks - s.last->cpuTicks);
        double idle = static_cast<double>(usage.idleTicks - s.last->idleTicks);
        m.cpuUsedPct = std::round(std::clamp(100.0 * (1.0 - idle / total), 0.0, 100.0) * 100) / 100;
    }
    m.memTotal = usage.memTotal;
    m.memUsed = usage.memTotal - usage.memAvailable;
    m.memCache = usage.memCached;
    m.diskTotal = usage.diskTotal;
    m.diskUsed = usage.diskTotal - usage.diskAvailable;
    bool rated = s.last && usage.cpuTicks > s.last->cpuTicks && usage.idleTicks >= s.last->idleTicks;
    s.last = usage;
    if (!rated) return;  // a first reading, or counters that went back, only start the rate
    s.samples.push_back(m);
    while (s.samples.size() > kMaxSamples) s.samples.pop_front();
}

void SandboxMetrics::evictLocked() {
    while (series_.size() >= kMaxSeries) {
        // The gone first, then the longest unasked.
        auto victim = series_.begin();
        for (auto it = series_.begin(); it != series_.end(); ++it) {
            bool itGone = it->second.goneAt.has_value(), vGone = victim->second.goneAt.has_value();
            if (itGone != vGone ? itGone : it->second.askedAt < victim->second.askedAt) victim = it;
        }
        series_.erase(victim);
    }
}

void SandboxMetrics::startThreadLocked() {
    if (thread_.joinable()) return;
    thread_ = std::thread([this] {
        std::unique_lock lock(mutex_);
        while (!stopping_) {
            wake_.wait_for(lock, kInterval, [this] { return stopping_; });
            if (stopping_) break;
            lock.unlock();
            try {
                sampleAll();
            } catch (const std::exception& e) {
                logError("metrics", std::string("a sampling round failed: ") + e.what());
            }
            lock.lock();
        }
    });
}

void SandboxMetrics::follow(const std::string& tenant, const std::string& id) {
    int readings = 2;
    {
        std::lock_guard lock(mutex_);
        auto it = series_.find(id);
        if (it != series_.end()) {
            it->second.askedAt = std::chrono::steady_clock::now();
            if (!it->second.samples.empty() || it->second.goneAt) return;
            if (it->second.last) readings = 1;
        }
    }
    // Read outside the lock: a slow guest holds up no other sandbox's answer.
    std::vector<protocol::GuestUsage> read;
    try {
        for (int i = 0; i < readings; ++i) {
            if (i) std::this_thread::sleep_for(kFirstSpan);
            read.push_back(readUsage(id));
        }
    } catch (const std::exception&) {
        return;  // no sample now (an old agent, a guest busy pausing): the history stands
    }
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (!series_.count(id)) {
        evictLocked();
        Series s;
        s.tenant = tenant;
        s.askedAt = std::chrono::steady_clock::now();
        series_.emplace(id, std::move(s));
    }
    for (const auto& usage : read) append(id, usage);
    startThreadLocked();
}

std::vector<MetricSample> SandboxMetrics::samples(const std::string& tenant,
                                                  const std::string& id,
                                                  std::optional<std::int64_t> fromMs,
                                                  std::optional<std::int64_t> toMs) {
    if (fromMs && toMs && *fromMs > *toMs)
        throw Error(ErrorCode::bad_request, "the time range ends before it starts");
    try {
        if (sandboxes_.requireOwned(tenant, id).state == SandboxState::running)
            follow(tenant, id);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::not_found) throw;
    }
    std::lock_guard lock(mutex_);
    auto it = series_.find(id);
    if (it == series_.end() || it->second.tenant != tenant) return {};
    it->second.askedAt = std::chrono::steady_clock::now();
    std::vector<MetricSample> out;
    for (const auto& m : it->second.samples)
        if ((!fromMs || m.unixMs >= *fromMs) && (!toMs || m.unixMs <= *toMs)) out.push_back(m);
    return out;
}

std::map<std::string, MetricSample> SandboxMetrics::latest(const std::string& tenant,
                                                           const std::vector<std::string>& ids) {
    // From what is stored only: a hundred guests are not asked in one request.
    std::map<std::string, MetricSample> out;
    std::lock_guard lock(mutex_);
    for (const auto& id : ids) {
        auto it = series_.find(id);
        if (it == series_.end() || it->second.tenant != tenant || it->second.samples.empty())
            continue;
        out[id] = it->second.samples.back();
    }
    return out;
}

void SandboxMetrics::sampleAll() {
    std::vector<std::string> ids;
    {
        std::lock_guard lock(mutex_);
        for (const auto& [id, s] : series_)
            if (!s.goneAt) ids.push_back(id);
    }
    for (const auto& id : ids) {
        auto r = sandboxes_.find(id);
        bool gone = !r || r->state == SandboxState::deleting;
        std::optional<protocol::GuestUsage> usage;
        if (!gone && r->state == SandboxState::running) {
            try {
                usage = readUsage(id);
            } catch (const std::exception&) {
                // A guest that does not answer this round is asked again next round.
            }
        }
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        auto it = series_.find(id);
        if (it == series_.end()) continue;
        if (gone) it->second.goneAt = std::chrono::steady_clock::now();
        else if (usage) append(id, *usage);
    }
    std::lock_guard lock(mutex_);
    auto now = std::chrono::steady_clock::now();
    std::erase_if(series_, [&](const auto& entry) {
        return entry.second.goneAt && now - *entry.second.goneAt > kKeepAfterGone;
    });
}

}  // namespace airlock
