// Egress from the controller's side: the allowlist on the record, the
// gateway told on every agent session and change, and the proxy variables
// in every command. The gateway is a recorder here (EgressProxyTest covers
// the proxy itself).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "ControllerFixture.hpp"
#include "core/Error.hpp"
#include "controller/SandboxNetwork.hpp"
#include "packages/PackageRules.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using test::codeOf;

class RecordingGateway : public egress::EgressGateway {
  public:
    struct Attach {
        std::string sandbox, tenant;
        std::vector<std::string> allow;
        AgentConnection* agent;
    };
    void attach(const std::string& id, const std::string& tenant,
                const std::shared_ptr<AgentConnection>& agent,
                const egress::EgressAllowlist& allow) override {
        std::lock_guard lock(mutex);
        attached[id] = allow.texts();
        attaches.push_back({id, tenant, allow.texts(), agent.get()});
    }
    bool update(const std::string& id, const egress::EgressAllowlist& allow) override {
        std::lock_guard lock(mutex);
        if (!attached.count(id)) return false;
        attached[id] = allow.texts();
        return true;
    }
    void detach(const std::string& id) override {
        std::lock_guard lock(mutex);
        attached.erase(id);
        detached.push_back(id);
    }
    std::mutex mutex;
    std::map<std::string, std::vector<std::string>> attached;
    std::vector<Attach> attaches;
    std::vector<std::string> detached;
};

class SandboxNetworkTest : public test::ControllerFixture {
  protected:
    SandboxNetworkTest() {
        ControllerConfig config;
        config.dataDir = dir.path();
        config.execOutputCap = 64 * 1024;
        config.egress = gateway;
        controller = makeController(config);
    }
    std::string envOf(const std::string& id) {
        ExecOptions o;
        o.argv = {"env"};
        o.user = "root";  // the in-process agent runs on the host
        return controller->commands().exec("t1", id, o).stdoutData;
    }
    std::shared_ptr<RecordingGateway> gateway = std::make_shared<RecordingGateway>();
};

TEST_F(SandboxNetworkTest, EverySandboxGetsTheProxyAndItsAllowlist) {
    CreateSandboxRequest r;
    r.networkAllow = {"Pkgs.Example.ORG", "*.mirror.example.net", "localhost:8080"};
    auto s = controller->create("t1", r);
    EXPECT_EQ(nlohmann::json(s.network),
              nlohmann::json({"pkgs.example.org", "*.mirror.example.net", "localhost:8080"}));
    ASSERT_EQ(gateway->attaches.size(), 1u);
    EXPECT_EQ(gateway->attaches[0].sandbox, s.id);
    EXPECT_EQ(gateway->attaches[0].tenant, "t1");
    EXPECT_EQ(
        gateway->attaches[0].allow,
        (std::vector<std::string>{"pkgs.example.org", "*.mirror.example.net", "localhost:8080"}));
    std::string env = envOf(s.id);
    EXPECT_NE(env.find("http_proxy=http://127.0.0.1:3128\n"), std::string::npos) << env;
    EXPECT_NE(env.find("https_proxy=http://127.0.0.1:3128\n"), std::string::npos);
    EXPECT_NE(env.find("HTTPS_PROXY=http://127.0.0.1:3128\n"), std::string::npos);
    // The allowlist names localhost: it means the host's, so it is proxied;
    // 127.0.0.1 (the package listeners) stays direct.
    EXPECT_NE(env.find("no_proxy=127.0.0.1,::1\n"), std::string::npos) << env;

    // Without an allowlist the proxy is there too, refusing everything.
    auto closed = controller->create("t1", CreateSandboxRequest{});
    EXPECT_TRUE(closed.network.empty());
    ASSERT_EQ(gateway->attaches.size(), 2u);
    EXPECT_TRUE(gateway->attaches[1].allow.empty());
    std::string closedEnv = envOf(closed.id);
    EXPECT_NE(closedEnv.find("http_proxy="), std::string::npos);
    EXPECT_NE(closedEnv.find("no_proxy=localhost,127.0.0.1,::1\n"), std::string::npos) << closedEnv;

    auto created = controller->audit("t1", s.id, AuditQuery{"sandbox.created", "", 0, 200});
    ASSERT_EQ(created.size(), 1u);
    EXPECT_EQ(nlohmann::json::parse(created[0].dataJson)["network"],
              nlohmann::json(s.network));

    controller->destroy("t1", s.id);
    EXPECT_EQ(gateway->detached, std::vector<std::string>{s.id});
}

TEST_F(SandboxNetworkTest, TheAllowlistChangesOnARunningSandbox) {
    auto s = controller->create("t1", CreateSandboxRequest{});
    auto updated = controller->setNetwork("t1", s.id, {"example.com", "*.example.org:8443"});
    EXPECT_EQ(nlohmann::json(updated.network),
              nlohmann::json({"example.com", "*.example.org:8443"}));
    EXPECT_EQ(store->find(s.id)->network, updated.network)
        << "stored: the next agent session reads it";
    EXPECT_EQ(gateway->attached[s.id],
              (std::vector<std::string>{"example.com", "*.example.org:8443"}));
    auto events = controller->audit("t1", s.id, AuditQuery{"network.updated", "", 0, 200});
    ASSERT_EQ(events.size(), 1u);
    auto data = nlohmann::json::parse(events[0].dataJson);
    EXPECT_EQ(data["allow"], nlohmann::json({"example.com", "*.example.org:8443"}));
    EXPECT_EQ(data["previous"], nlohmann::json::array());

    EXPECT_EQ(codeOf([&] { controller->setNetwork("t1", s.id, {"not a host"}); }),
              ErrorCode::bad_request);
    EXPECT_EQ(codeOf([&] { controller->setNetwork("t2", s.id, {"example.com"}); }),
              ErrorCode::not_found);
    EXPECT_EQ(gateway->attached[s.id].size(), 2u) << "a rejected change changes nothing";
    controller->pause("t1", s.id);
    EXPECT_NO_THROW(controller->setNetwork("t1", s.id, {}));
    EXPECT_TRUE(gateway->attached[s.id].empty());
}

TEST_F(SandboxNetworkTest, BadAllowlistsAreRefusedAtCreate) {
    for (const char* bad : {"*", "http://example.com", "10.0.0.0/8", "example.com:99999"}) {
        CreateSandboxRequest r;
        r.networkAllow = {bad};
        EXPECT_EQ(codeOf([&] { controller->create("t1", r); }), ErrorCode::bad_request) << bad;
    }
    EXPECT_TRUE(controller->list("t1").empty());
}

TEST_F(SandboxNetworkTest, ANewAgentSessionReopensTheListener) {
    CreateSandboxRequest r;
    r.networkAllow = {"example.com"};
    auto s = controller->create("t1", r);
    ASSERT_EQ(gateway->attaches.size(), 1u);
    // The agent connection dies (an agent restart, a daemon restart): the
    // next use connects again, and the proxy listener goes on the new session.
    controller->runningAgent("t1", s.id)->close();
    envOf(s.id);
    ASSERT_EQ(gateway->attaches.size(), 2u);
    EXPECT_EQ(gateway->attaches[1].allow, std::vector<std::string>{"example.com"});
    EXPECT_EQ(connectedSockets.size(), 2u) << "on a new connection";
}

TEST_F(SandboxNetworkTest, WithoutAProxyNoAllowlistIsAccepted) {
    ControllerConfig config;
    config.dataDir = dir.path();
    controller = makeController(config);
    CreateSandboxRequest r;
    r.networkAllow = {"example.com"};
    EXPECT_EQ(codeOf([&] { controller->create("t1", r); }), ErrorCode::bad_request);
    auto s = controller->create("t1", CreateSandboxRequest{});
    EXPECT_EQ(envOf(s.id).find("http_proxy="), std::string::npos);
}


// The class alone: what the lists and the guest's environment are.
class ServingGateway : public packages::PackageGateway {
  public:
    explicit ServingGateway(std::set<packages::Ecosystem> served) : served_(std::move(served)) {}
    void attach(const std::string&, const std::string&, const std::shared_ptr<AgentConnection>&,
                const packages::PackageRules&) override {}
    bool update(const std::string&, const packages::PackageRules&) override { return true; }
    void detach(const std::string&) override {}
    bool serves(packages::Ecosystem e) const override { return served_.count(e) > 0; }
    std::vector<unsigned> listenerPorts() const override { return {4873, 3141}; }

  private:
    std::set<packages::Ecosystem> served_;
};

packages::PackageRulesChange rulesChange(const char* text) {
    return packages::PackageRulesChange::parse(nlohmann::json::parse(text));
}

TEST(SandboxNetworkParts, RegistriesOnlyForWhatTheProxyServesAndTheSandboxsEnvLast) {
    SandboxNetwork npmOnly(nullptr, std::make_shared<ServingGateway>(
                                        std::set<packages::Ecosystem>{packages::Ecosystem::npm}));
    SandboxRecord r;
    r.envJson = R"({"PIP_INDEX_URL":"mine","FROM_SANDBOX":"yes"})";
    auto env = npmOnly.commandEnv(r);
    EXPECT_EQ(env["npm_config_registry"], "http://127.0.0.1:4873/");
    EXPECT_EQ(env["PIP_INDEX_URL"], "mine") << "the sandbox's own env wins";
    EXPECT_EQ(env.count("PIP_TRUSTED_HOST"), 0u) << "PyPI is not served";
    EXPECT_EQ(env.count("http_proxy"), 0u) << "no egress proxy, no proxy variables";
    EXPECT_EQ(env["FROM_SANDBOX"], "yes");
    EXPECT_EQ(npmOnly.internalPorts(), (std::vector<unsigned>{3128, 4873, 3141}))
        << "the egress proxy's default port stays Airlock's without a proxy";

    SandboxNetwork none(nullptr, nullptr);
    EXPECT_EQ(none.commandEnv(SandboxRecord{}).size(), 0u);
    EXPECT_EQ(none.internalPorts(), (std::vector<unsigned>{3128, 4873, 3141, 3142}));
    EXPECT_EQ(codeOf([&] { none.allowlist({"example.com"}); }), ErrorCode::bad_request);
    EXPECT_TRUE(none.allowlist({}).empty());
    EXPECT_NO_THROW(none.apply("sbx-x", none.allowlist({})));
}

TEST(SandboxNetworkParts, PackageRulesStartFromTheTenantsAndAForkKeepsOnlyWhatIsStillAllowed) {
    SandboxNetwork net(nullptr, nullptr);
    auto tenant = packages::PackageRules::parse(
                      nlohmann::json::parse(R"({"npm":{"min_age_days":7,"deny":["evil"]}})"))
                      .toJson()
                      .dump();
    auto rulesOf = [](const std::string& stored) {
        return packages::PackageRules::fromStored(stored);
    };
    CreateSandboxRequest plain;
    EXPECT_EQ(rulesOf(net.packageRules(tenant, plain, nullptr)).npm.minAgeDays, 7u);
    EXPECT_EQ(rulesOf(net.packageRules("", plain, nullptr)).npm.minAgeDays,
              packages::PackageRules().npm.minAgeDays)
        << "no tenant rules: the defaults";

    CreateSandboxRequest looser;
    looser.packages = rulesChange(R"({"npm":{"min_age_days":1}})");
    EXPECT_EQ(rulesOf(net.packageRules(tenant, looser, nullptr)).npm.minAgeDays, 1u)
        << "an admin may loosen";
    looser.packagesTightenOnly = true;
    EXPECT_EQ(codeOf([&] { net.packageRules(tenant, looser, nullptr); }), ErrorCode::forbidden);

    // A fork takes its source's rules whole, whatever the request says...
    SandboxRecord source;
    source.id = "sbx-source";
    source.packagesJson = packages::PackageRules::parse(
                              nlohmann::json::parse(R"({"npm":{"min_age_days":9,"deny":["evil"]}})"))
                              .toJson()
                              .dump();
    EXPECT_EQ(net.packageRules(tenant, looser, &source), source.packagesJson);
    // ...unless the tenant's have tightened past them since.
    auto tighter = packages::PackageRules::parse(
                       nlohmann::json::parse(R"({"npm":{"min_age_days":30,"deny":["evil"]}})"))
                       .toJson()
                       .dump();
    EXPECT_EQ(codeOf([&] { net.packageRules(tighter, plain, &source); }), ErrorCode::forbidden);
}

}  // namespace
}  // namespace airlock
