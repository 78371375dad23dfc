// Where a create goes: eligible nodes only, the least loaded of a sample
// first, warm templates and held snapshots preferred, recent sends counted.
#include <gtest/gtest.h>

#include <map>

#include "fleet/Placement.hpp"

using namespace airlock::fleet;

namespace {

NodeStatus node(const std::string& name, unsigned freeVcpus, std::uint64_t freeMib = 8000) {
    NodeStatus s;
    s.record.name = name;
    s.up = true;
    s.record.capacity.vcpus = 8;
    s.record.capacity.freeVcpus = freeVcpus;
    s.record.capacity.memoryMib = 16000;
    s.record.capacity.freeMemoryMib = freeMib;
    s.record.capacity.templates = {"minimal", "debian"};
    return s;
}

PlacementRequest minimal() { return PlacementRequest{"minimal", "", 1, 256}; }

TEST(Placement, OnlyNodesThatAreUpNotDrainingAndAbleToRunItAreRanked) {
    auto down = node("down", 8);
    down.up = false;
    auto draining = node("draining", 8);
    draining.draining = true;
    auto full = node("full", 8, 100);
    auto other = node("other", 8);
    other.record.capacity.templates = {"debian"};
    auto ok = node("ok", 8);
    Placement p(10, 1);
    auto ranked = p.rank({down, draining, full, other, ok}, minimal());
    ASSERT_EQ(ranked.size(), 1u);
    EXPECT_EQ(ranked[0].node, "ok");
    EXPECT_NE(ranked[0].why.find("cpu"), std::string::npos);
    EXPECT_TRUE(p.rank({down, draining}, minimal()).empty());
}

TEST(Placement, TheLeastLoadedOfTheSampleGoesFirst) {
    Placement p(3, 7);
    auto ranked = p.rank({node("busy", 0), node("idle", 8), node("half", 4)}, minimal());
    ASSERT_EQ(ranked.size(), 3u);
    EXPECT_EQ(ranked[0].node, "idle");
    EXPECT_EQ(ranked[1].node, "half");
    EXPECT_EQ(ranked[2].node, "busy");
}

TEST(Placement, AWarmTemplateOrAHeldSnapshotDecides) {
    auto cold = node("cold", 8);
    auto warm = node("warm", 6);
    warm.record.capacity.warmTemplates = {"minimal"};
    Placement p(3, 3);
    EXPECT_EQ(p.rank({cold, warm}, minimal())[0].node, "warm");
    auto holder = node("holder", 0);
    holder.record.capacity.snapshots = {"snap-1"};
    auto clone = p.rank({cold, warm, holder}, PlacementRequest{"minimal", "snap-1", 1, 256});
    ASSERT_EQ(clone.size(), 1u) << "only the node with the snapshot's files can clone it";
    EXPECT_EQ(clone[0].node, "holder");
}

TEST(Placement, CreatesSentMomentsAgoSpreadABurstOverEqualNodes) {
    Placement p(3, 11);
    std::vector<NodeStatus> nodes{node("a", 8), node("b", 8), node("c", 8)};
    std::map<std::string, int> landed;
    for (int i = 0; i < 6; ++i) {
        auto first = p.rank(nodes, minimal()).at(0).node;
        p.sent(first, 1);
        ++landed[first];
    }
    EXPECT_EQ(landed.size(), 3u);
    for (const auto& [name, n] : landed) EXPECT_EQ(n, 2) << name;
}

TEST(Placement, OnlyKAreSampledFirstAndTheRestFollowForRetries) {
    std::vector<NodeStatus> nodes;
    for (int i = 0; i < 20; ++i) nodes.push_back(node("n" + std::to_string(i), 8 - i % 8));
    Placement p(3, 5);
    std::map<std::string, int> firsts;
    for (int round = 0; round < 200; ++round) {
        auto ranked = p.rank(nodes, minimal());
        ASSERT_EQ(ranked.size(), 20u);
        for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(ranked[i].why.rfind("best of 3", 0), 0u);
        EXPECT_EQ(ranked[3].why.rfind("fallback", 0), 0u);
        EXPECT_LE(ranked[0].score, ranked[1].score);
        EXPECT_LE(ranked[1].score, ranked[2].score);
        ++firsts[ranked[0].node];
    }
    // A sample, not a scan: the busiest nodes still win when drawn with busier ones.
    EXPECT_GT(firsts.size(), 3u);
}

}  // namespace
