// The fleet at scale, on paper by simulation: NODES simulated nodes and
// SANDBOXES sandbox records in a real etcd member, then what a create and a
// list cost there, against a single etcd read measured in the same run.
//   airlock-fleet-bench [NODES] [SANDBOXES] [RUNS]
// Every figure is also printed as an "@figure {json}" line for scripts/bench.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "fleet/EtcdClient.hpp"
#include "fleet/FleetTenants.hpp"
#include "fleet/NodeMembership.hpp"
#include "fleet/Placement.hpp"
#include "fleet/SandboxDirectory.hpp"
#include "support/EtcdCluster.hpp"

using namespace airlock;
using namespace airlock::fleet;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}
double p99(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

void figure(const std::string& name, const std::string& unit, const std::vector<double>& samples,
            const std::string& baseline = {}, double baselineValue = 0) {
    std::string line = "@figure {\"name\":\"fleet." + name + "\",\"unit\":\"" + unit +
                       "\",\"value\":" + std::to_string(median(samples)) + ",\"samples\":[";
    for (std::size_t i = 0; i < samples.size(); ++i)
        line += (i ? "," : "") + std::to_string(samples[i]);
    line += "]";
    if (!baseline.empty())
        line += ",\"baseline\":\"fleet." + baseline +
                "\",\"baseline_value\":" + std::to_string(baselineValue);
    std::printf("%s}\n", line.c_str());
}

template <class F>
std::vector<double> timed(int runs, F&& f) {
    std::vector<double> out;
    for (int i = 0; i < runs; ++i) {
        auto t0 = Clock::now();
        f();
        out.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return out;
}

long rssKiB(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

NodeRecord simulatedNode(int i) {
    NodeRecord r;
    r.name = "sim-" + std::to_string(i);
    r.url = "http://10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":8080";
    r.version = "0.1.0";
    r.started = "2026-12-04T00:00:00Z";
    r.capacity.vcpus = 64;
    r.capacity.freeVcpus = 64 - i % 64;
    r.capacity.memoryMib = 256 * 1024;
    r.capacity.freeMemoryMib = 256 * 1024 - (i % 97) * 1024;
    r.capacity.accel = "kvm";
    r.capacity.templates = {"minimal", "debian"};
    if (i % 3 == 0) r.capacity.warmTemplates = {"debian"};
    r.capacity.sandboxes = static_cast<unsigned>(i % 100);
    return r;
}

// Puts in transactions of 120 (etcd allows 128 operations in one).
void putAll(EtcdClient& etcd, const std::vector<std::pair<std::string, std::string>>& kvs) {
    for (std::size_t i = 0; i < kvs.size(); i += 120) {
        std::vector<KeyOp> ops;
        for (std::size_t j = i; j < std::min(kvs.size(), i + 120); ++j)
            ops.push_back(KeyOp::put(kvs[j].first, kvs[j].second));
        etcd.txn({}, ops, {});
    }
}

}  // namespace

int main(int argc, char** argv) {
    int nodes = argc > 1 ? std::atoi(argv[1]) : 1000;
    int sandboxes = argc > 2 ? std::atoi(argv[2]) : 100000;
    int runs = argc > 3 ? std::atoi(argv[3]) : 30;
    test::EtcdCluster cluster(1);
    EtcdClient etcd(cluster.clientUrls(), {}, std::chrono::seconds(30));
    long idleRss = rssKiB(cluster.pid(0));

    auto loadStart = Clock::now();
    std::vector<std::pair<std::string, std::string>> kvs;
    for (int i = 0; i < nodes; ++i) {
        auto r = simulatedNode(i);
        kvs.emplace_back(keys::kMembers + r.name,
                         "{\"name\":\"" + r.name + "\",\"url\":\"" + r.url + "\"}");
        kvs.emplace_back(keys::kNodes + r.name, r.toJson());
    }
    putAll(etcd, kvs);
    kvs.clear();
    for (int i = 0; i < sandboxes; ++i) {
        char id[32];
        std::snprintf(id, sizeof id, "sbx-sim%013d", i);
        SandboxPlacement p{
            id, "tenant-" + std::to_string(i % 500), "sim-" + std::to_string(i % nodes),
            1000 + i % nodes,
            "placed by sim-0: best of 3 sampled: cpu 0.31, memory 0.42, 57 sandboxes"};
        kvs.emplace_back(SandboxDirectory::kPrefix + id, p.toJson());
        // Each sandbox's figures under its tenant (what a create's quota check sums).
        kvs.emplace_back("/airlock/usage/" + p.tenant + "/sbx/" + id,
                         "{\"vcpus\":1,\"memory_mib\":256,\"disk_gib\":0}");
    }
    putAll(etcd, kvs);
    double loadS = std::chrono::duration<double>(Clock::now() - loadStart).count();
    std::printf("loaded %d nodes and %d sandboxes (records and usage keys) in %.1f s\n", nodes,
                sandboxes, loadS);

    // The baseline: one linearizable read of one key.
    auto baseline = timed(runs, [&] { etcd.get(keys::kNodes + "sim-1"); });
    std::printf("%-52s median %8.2f ms (p99 %.2f)\n", "one etcd read (baseline)", median(baseline),
                p99(baseline));
    figure("etcd_get_ms", "ms", baseline);

    // Placement as a create does it: the node list from etcd, then the ranking.
    NodeMembership reader(etcd, simulatedNode(0), "", nullptr);
    Placement placement;
    auto place = timed(runs, [&] {
        auto ranked = placement.rank(reader.nodes(), PlacementRequest{"debian", "", 2, 2048});
        if (ranked.empty()) std::fprintf(stderr, "no node ranked\n");
    });
    std::printf("%-52s median %8.2f ms (p99 %.2f, %.0fx a read)\n",
                ("placement over " + std::to_string(nodes) + " nodes").c_str(), median(place),
                p99(place), median(place) / std::max(0.001, median(baseline)));
    figure("placement_ms", "ms", place, "etcd_get_ms", median(baseline));
    // The ranking alone, on a list already read.
    auto listed = reader.nodes();
    auto rankOnly = timed(runs, [&] {
        placement.rank(listed, PlacementRequest{"debian", "", 2, 2048});
    });
    std::printf("%-52s median %8.3f ms\n", "  of which ranking (no etcd)", median(rankOnly));
    figure("placement_rank_only_ms", "ms", rankOnly);

    // A create's quota admission for a tenant with sandboxes/500 sandboxes.
    FleetUsage usage(etcd);
    int created = 0;
    auto admit = timed(runs, [&] {
        SandboxRecord r;
        r.id = "sbx-bench" + std::to_string(created++);
        r.tenant = "tenant-7";
        usage.reserve(r, TenantQuota{});
    });
    std::printf("%-52s median %8.2f ms (p99 %.2f)\n",
                ("quota admission, a tenant with " + std::to_string(sandboxes / 500) + " sandboxes")
                    .c_str(),
                median(admit), p99(admit));
    figure("quota_admission_ms", "ms", admit, "etcd_get_ms", median(baseline));

    // The fleet-wide list as a node reads it from etcd: every record, in pages.
    SandboxDirectory directory(etcd);
    std::size_t seen = 0;
    auto list = timed(std::max(3, runs / 10), [&] { seen = directory.list().size(); });
    std::printf("%-52s median %8.1f ms (%zu records)\n", "list every sandbox record", median(list),
                seen);
    figure("list_all_records_ms", "ms", list, "etcd_get_ms", median(baseline));

    long loadedRss = rssKiB(cluster.pid(0));
    std::printf("%-52s %ld MiB idle, %ld MiB loaded\n", "etcd resident memory", idleRss / 1024,
                loadedRss / 1024);
    figure("etcd_rss_mib", "MiB", {double(loadedRss) / 1024.0}, "etcd_rss_idle_mib",
           double(idleRss) / 1024.0);
    figure("etcd_rss_idle_mib", "MiB", {double(idleRss) / 1024.0});
    return 0;
}
