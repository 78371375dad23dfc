// Tenants: their rules are the floor under every sandbox's own, and their
// quotas are checked before anything starts.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "ControllerFixture.hpp"
#include "core/Error.hpp"
#include "store/TenantStore.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using test::codeOf;

class SandboxTenantsTest : public test::ControllerFixture {
  protected:
    SandboxTenantsTest() : tenants(*db) {
        ControllerConfig config;
        config.dataDir = dir.path();
        config.tenants = &tenants;
        config.operatorRules.approve = {"shutdown*"};
        controller = makeController(config);
        TenantRecord acme;
        acme.name = "acme";
        acme.deny = {"curl *"};
        acme.approve = {"git push*"};
        acme.quota.sandboxes = 2;
        acme.quota.snapshots = 1;
        acme.quota.vcpus = 3;
        acme.quota.concurrentExecs = 1;
        controller->tenants().put(acme);
    }
    static CreateSandboxRequest allowing(std::vector<std::string> allow) {
        CreateSandboxRequest r;
        r.policy.allow = std::move(allow);
        return r;
    }
    static ExecOptions shell(const std::string& s) {
        ExecOptions o;
        o.shell = s;
        o.user = "root";
        return o;
    }
    TenantStore tenants;
};

TEST_F(SandboxTenantsTest, ASandboxMayTightenButNeverOpenWhatItsTenantOrTheOperatorCloses) {
    for (auto allow : {std::vector<std::string>{"*"},
                       {"curl *"},
                       {"curl -s*"},
                       {"git *"},
                       {"git push --force*"},
                       {"shutdown now"},
                       {" * "}}) {
        EXPECT_EQ(codeOf([&] { controller->create("acme", allowing(allow)); }),
                  ErrorCode::forbidden)
            << allow[0];
    }
    try {
        controller->create("acme", allowing({"git push*"}));
        FAIL() << "expected forbidden";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("the tenant's approve rule 'git push*'"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(store->list(TenantScope::all()).size(), 0u) << "nothing was created";

    CreateSandboxRequest tighter;
    tighter.policy.deny = {"wget *"};
    tighter.policy.allow = {"make test"};
    auto s = controller->create("acme", tighter);
    // The tenant's rules apply at exec time, above the sandbox's own.
    EXPECT_EQ(codeOf([&] { controller->commands().exec("acme", s.id, shell("curl http://x/")); }),
              ErrorCode::policy_denied);
    auto gated = controller->commands().submit("acme", s.id, shell("git push origin HEAD"));
    EXPECT_TRUE(gated.pending) << "the tenant's approve rule gates it";
    EXPECT_EQ(controller->commands().exec("acme", s.id, shell("echo fine")).stdoutData, "fine\n");
    // Another tenant has no such floor.
    EXPECT_NO_THROW(controller->create("other", allowing({"curl *"})));
}

// A fork takes its source's package rules whole, unless the tenant's have
// tightened past them since: no fork runs under what the tenant no longer allows.
TEST_F(SandboxTenantsTest, AForkIsRefusedWhenTheTenantsPackageRulesTightenedPastItsSource) {
    auto rulesJson = [](const char* text) {
        return packages::PackageRules::parse(nlohmann::json::parse(text)).toJson().dump();
    };
    TenantRecord gamma;
    gamma.name = "gamma";
    gamma.packagesJson = rulesJson(R"({"npm":{"min_age_days":7}})");
    controller->tenants().put(gamma);
    auto src = controller->create("gamma", CreateSandboxRequest{});
    auto snap = controller->snapshot("gamma", src.id);
    CreateSandboxRequest fork;
    fork.snapshot = snap.id;
    fork.settingsFrom = src.id;
    EXPECT_EQ(controller->create("gamma", fork).packagesJson, src.packagesJson);
    gamma.packagesJson = rulesJson(R"({"npm":{"min_age_days":30}})");
    controller->tenants().put(gamma);
    EXPECT_EQ(codeOf([&] { controller->create("gamma", fork); }), ErrorCode::forbidden);
}

TEST_F(SandboxTenantsTest, PackageRulesStartFromTheTenantsAndAnAgentMayOnlyTightenThem) {
    TenantRecord beta;
    beta.name = "beta";
    beta.packagesJson =
        packages::PackageRules::parse(
            nlohmann::json::parse(R"({"npm":{"deny":["left-pad"],"min_age_days":7}})"))
            .toJson()
            .dump();
    controller->tenants().put(beta);
    auto rulesOf = [&](const SandboxRecord& r) {
        return packages::PackageRules::fromStored(r.packagesJson);
    };
    auto plain = controller->create("beta", CreateSandboxRequest{});
    EXPECT_EQ(rulesOf(plain).npm.minAgeDays, 7u) << "the tenant's rules are the default";
    ASSERT_EQ(rulesOf(plain).npm.deny.size(), 1u);

    CreateSandboxRequest tighter;
    tighter.packagesTightenOnly = true;
    tighter.packages = packages::PackageRulesChange::parse(nlohmann::json::parse(
        R"({"npm":{"deny":["evil"],"min_age_days":10},"apt":{"mode":"deny"}})"));
    auto t = rulesOf(controller->create("beta", tighter));
    EXPECT_EQ(t.npm.deny.size(), 2u) << "deny entries add to the tenant's";
    EXPECT_EQ(t.npm.minAgeDays, 10u);
    EXPECT_EQ(t.apt.aptMode, packages::Gate::deny);

    for (const char* looser :
         {R"({"npm":{"min_age_days":1}})", R"({"npm":{"install_scripts":"allow"}})",
          R"({"pypi":{"only_binary":false}})", R"({"apt":{"mode":"allow"}})",
          R"({"dry_run":true})"}) {
        CreateSandboxRequest r;
        r.packagesTightenOnly = true;
        r.packages = packages::PackageRulesChange::parse(nlohmann::json::parse(looser));
        EXPECT_EQ(codeOf([&] { controller->create("beta", r); }), ErrorCode::forbidden) << looser;
        // An admin may set them.
        r.packagesTightenOnly = false;
        EXPECT_NO_THROW(controller->create("other", r)) << looser;
    }
}

TEST_F(SandboxTenantsTest, QuotasAreCheckedBeforeAnythingStartsAndFreedWithTheirObjects) {
    auto a = controller->create("acme", CreateSandboxRequest{});
    CreateSandboxRequest two;
    two.vcpus = 2;
    auto b = controller->create("acme", two);
    auto domains = hypervisor.count();
    try {
        controller->create("acme", CreateSandboxRequest{});
        FAIL() << "expected quota_exceeded";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::quota_exceeded);
        EXPECT_NE(std::string(e.what()).find("sandboxes"), std::string::npos) << e.what();
    }
    EXPECT_EQ(hypervisor.count(), domains) << "no VM was started";
    auto u = controller->tenants().usageOf("acme");
    EXPECT_EQ(u.sandboxes, 2u);
    EXPECT_EQ(u.vcpus, 3u);
    controller->destroy("acme", a.id);
    CreateSandboxRequest big;
    big.vcpus = 2;
    EXPECT_EQ(codeOf([&] { controller->create("acme", big); }), ErrorCode::quota_exceeded)
        << "vcpus: 2 + 2 > 3";
    auto c = controller->create("acme", CreateSandboxRequest{});  // 1 + 2 vcpus fit

    auto snap = controller->snapshot("acme", b.id);
    EXPECT_EQ(codeOf([&] { controller->snapshot("acme", c.id); }), ErrorCode::quota_exceeded);
    controller->deleteSnapshot("acme", snap.id);
    EXPECT_NO_THROW(controller->deleteSnapshot("acme", controller->snapshot("acme", c.id).id));
    EXPECT_EQ(controller->tenants().usageOf("acme").snapshots, 0u);
    controller->destroy("acme", b.id);
    controller->destroy("acme", c.id);
    EXPECT_EQ(controller->tenants().usageOf("acme").sandboxes, 0u);
}

// Two snapshots at once (of two sandboxes, so no sandbox lock orders them)
// cannot both take the tenant's last snapshot.
TEST_F(SandboxTenantsTest, SimultaneousSnapshotsCannotBothTakeTheLastOne) {
    auto a = controller->create("acme", CreateSandboxRequest{});
    auto b = controller->create("acme", CreateSandboxRequest{});
    for (int round = 0; round < 20; ++round) {
        std::atomic<int> taken{0}, refused{0};
        std::vector<std::string> ids(2);
        std::vector<std::thread> threads;
        for (int i = 0; i < 2; ++i)
            threads.emplace_back([&, i] {
                try {
                    ids[i] = controller->snapshot("acme", i == 0 ? a.id : b.id).id;
                    ++taken;
                } catch (const Error& e) {
                    if (e.code() == ErrorCode::quota_exceeded) ++refused;
                }
            });
        for (auto& t : threads) t.join();
        ASSERT_EQ(taken.load(), 1) << "round " << round;
        ASSERT_EQ(refused.load(), 1);
        for (const auto& id : ids)
            if (!id.empty()) controller->deleteSnapshot("acme", id);
    }
}

TEST_F(SandboxTenantsTest, ConcurrentExecsAreHeldToTheQuotaAndReleasedWhenTheyEnd) {
    auto s = controller->create("acme", CreateSandboxRequest{});
    std::promise<void> ended;
    auto pending = controller->commands().submitAsync(
        "acme", s.id, shell("sleep 1"),
        [&](std::optional<ExecOutput>, std::exception_ptr) { ended.set_value(); });
    ASSERT_FALSE(pending);
    EXPECT_EQ(controller->tenants().usageOf("acme").concurrentExecs, 1u);
    EXPECT_EQ(codeOf([&] { controller->commands().submit("acme", s.id, shell("true")); }),
              ErrorCode::quota_exceeded);
    ended.get_future().wait();
    ASSERT_TRUE(
        test::waitFor([&] { return controller->tenants().usageOf("acme").concurrentExecs == 0; },
                      std::chrono::seconds(5)));
    auto again = controller->commands().submit("acme", s.id, shell("echo again"));
    ASSERT_TRUE(again.output);
    EXPECT_EQ(again.output->stdoutData, "again\n");
}

}  // namespace
}  // namespace airlock
