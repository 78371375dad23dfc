#include "fleet/Placement.hpp"

#include <algorithm>
#include <cstdio>

namespace airlock::fleet {

namespace {
constexpr double kCpuOvercommit = 4.0;
constexpr double kWarmBonus = 0.25;
constexpr auto kInflightFor = std::chrono::seconds(10);

bool holds(const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
}
}  // namespace

Placement::Placement(std::size_t sample, std::uint32_t seed) : sample_(sample), rng_(seed) {}

void Placement::sent(const std::string& node, unsigned vcpus) {
    std::lock_guard lock(mutex_);
    sent_[node].push_back({std::chrono::steady_clock::now(), vcpus});
}

unsigned Placement::inflight(const std::string& node) {
    auto now = std::chrono::steady_clock::now();
    auto& list = sent_[node];
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const Sent& s) { return now - s.at > kInflightFor; }),
               list.end());
    unsigned total = 0;
    for (const auto& s : list) total += s.vcpus;
    return total;
}

std::vector<PlacementChoice> Placement::rank(const std::vector<NodeStatus>& nodes,
                                             const PlacementRequest& request) {
    std::lock_guard lock(mutex_);
    std::vector<PlacementChoice> eligible;
    for (const auto& n : nodes) {
        const auto& c = n.record.capacity;
        if (!n.up || n.draining) continue;
        if (!request.snapshot.empty() ? !holds(c.snapshots, request.snapshot)
                                      : !holds(c.templates, request.templateName))
            continue;
        if (c.freeMemoryMib < request.memoryMib) continue;
        double cpus = std::max(1u, c.vcpus);
        double allocated = double(c.vcpus > c.freeVcpus ? c.vcpus - c.freeVcpus : 0) +
                           inflight(n.record.name) + request.vcpus;
        double cpuLoad = allocated / (kCpuOvercommit * cpus);
        double memLoad =
            c.memoryMib ? 1.0 - double(c.freeMemoryMib - request.memoryMib) / double(c.memoryMib)
                        : 1.0;
        bool warm = request.snapshot.empty() && holds(c.warmTemplates, request.templateName);
        PlacementChoice choice;
        choice.node = n.record.name;
        // Both count (Daytona weighs them too): nodes that share a host, or
        // hosts with memory to spare, still differ by what they run.
        choice.score = 0.5 * cpuLoad + 0.5 * memLoad - (warm ? kWarmBonus : 0.0) +
                       // Equal loads: the node with fewer sandboxes.
                       0.001 * c.sandboxes;
        char text[200];
        std::snprintf(text, sizeof text, "cpu %.2f, memory %.2f%s%s, %u sandboxes", cpuLoad,
                      memLoad, warm ? ", warm template" : "",
                      request.snapshot.empty() ? "" : ", holds the snapshot", c.sandboxes);
        choice.why = text;
        eligible.push_back(std::move(choice));
    }
    // Best of a random sample first; the rest after, for the retries.
    std::shuffle(eligible.begin(), eligible.end(), rng_);
    auto cut = eligible.begin() + static_cast<std::ptrdiff_t>(std::min(sample_, eligible.size()));
    auto byScore = [](const PlacementChoice& a, const PlacementChoice& b) {
        return a.score < b.score;
    };
    std::sort(eligible.begin(), cut, byScore);
    std::sort(cut, eligible.end(), byScore);
    for (std::size_t i = 0; i < eligible.size(); ++i)
        eligible[i].why =
            (i < sample_
                 ? "best of " + std::to_string(std::min(sample_, eligible.size())) + " sampled: "
                 : "fallback: ") +
            eligible[i].why;
    return eligible;
}

}  // namespace airlock::fleet
