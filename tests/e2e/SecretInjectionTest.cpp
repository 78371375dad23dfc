// Injected secrets with a real airlockd and a debian VM: curl, python and
// node in the guest reach an HTTPS host (its CA given as the operator's)
// that answers only with the secret, while the guest holds a placeholder
// and nowhere the value; the placeholder sent elsewhere is refused and
// audited; a secret added later goes to its host at once.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/Hex.hpp"
#include "core/Ids.hpp"
#include "core/Sha256.hpp"
#include "support/ApiClient.hpp"
#include "support/DaemonProcess.hpp"
#include "support/HttpsClient.hpp"
#include "support/TestEnv.hpp"
#include "support/TlsTestServer.hpp"

namespace airlock {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;

class SecretInjection : public ::testing::Test {
  protected:
    struct World {
        test::TempDir tmp;
        std::string secret = "sk-e2e-" + hexEncode(randomBytes(16));
        std::string later = "sk-e2e-" + hexEncode(randomBytes(16));
        // The tenant's secret, before and after its rotation.
        std::array<std::string, 2> tenantValues{"sk-e2e-" + hexEncode(randomBytes(16)),
                                                "sk-e2e-" + hexEncode(randomBytes(16))};
        std::atomic<int> tenantWanted{0};
        std::unique_ptr<test::TlsTestServer> host, otherHost, tenantHost;
        std::unique_ptr<test::Daemon> daemon;
        std::string key, sandbox;
    };
    static inline World* world = nullptr;

    static void SetUpTestSuite() {
        if (!test::templatesBuilt()) return;
        world = new World();
        World& w = *world;
        ASSERT_TRUE(test::makeTestCertificates(w.tmp.path(), "DNS:localhost"));
        auto granting = [](std::string wanted) {
            return [wanted](const std::string& head) -> std::pair<std::string, std::string> {
                if (head.find("Authorization: Bearer " + wanted + "\r\n") != std::string::npos)
                    return {"200 OK", "granted"};
                return {"401 No", "denied"};
            };
        };
        w.host = std::make_unique<test::TlsTestServer>(
            w.tmp.path() + "/server.pem", w.tmp.path() + "/server.key", granting(w.secret));
        w.otherHost = std::make_unique<test::TlsTestServer>(
            w.tmp.path() + "/server.pem", w.tmp.path() + "/server.key", granting(w.later));
        w.tenantHost = std::make_unique<test::TlsTestServer>(
            w.tmp.path() + "/server.pem", w.tmp.path() + "/server.key",
            [&w](const std::string& head) -> std::pair<std::string, std::string> {
                auto wanted = "Authorization: Bearer " + w.tenantValues[w.tenantWanted] + "\r\n";
                if (head.find(wanted) != std::string::npos) return {"200 OK", "granted"};
                return {"401 No", "denied"};
            });
        std::string data = w.tmp.path() + "/data";
        w.daemon = std::make_unique<test::Daemon>(
            data, test::freePort(),
            std::vector<std::string>{"--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-file",
                                     w.tmp.path() + "/ca.pem"});
        std::ifstream keyFile(data + "/admin.key");
        std::getline(keyFile, w.key);
        auto created = api("POST", "/v1/sandboxes",
                           json{{"template", "debian"},
                                {"timeout_s", 900},
                                {"network", {{"allow", {"localhost"}}}},
                                {"secrets",
                                 {{"API_TOKEN",
                                   {{"value", w.secret},
                                    {"inject",
                                     {{"hosts", {"localhost:" + std::to_string(w.host->port())}},
                                      {"header", "Authorization"},
                                      {"format", "Bearer {value}"}}}}}}}}
                               .dump());
        ASSERT_EQ(created.status, 201) << created.body;
        w.sandbox = json::parse(created.body)["id"];
    }
    static void TearDownTestSuite() {
        if (!world) return;
        if (world->daemon) {
            // Its sandboxes are deleted first: none outlives the suite.
            test::ApiClient client(world->daemon->url(), world->key);
            world->daemon->shutDown(::testing::UnitTest::GetInstance()->failed_test_count() > 0,
                                    {&client});
        }
        delete world;
        world = nullptr;
    }
    void SetUp() override {
        if (!test::templatesBuilt()) GTEST_SKIP() << "run scripts/setup first";
        ASSERT_TRUE(world && !world->sandbox.empty()) << "the suite's sandbox was not created";
    }
    static cli::HttpResult api(const std::string& method, const std::string& path,
                               const std::string& body = {}) {
        test::ApiClient c(world->daemon->url(), world->key);
        return c.request(method, path, body);
    }
    // A shell command in the guest: its stdout (the test fails on another status).
    static std::string sh(const std::string& script, const std::string& user = "user") {
        auto r =
            api("POST", "/v1/sandboxes/" + world->sandbox + "/exec",
                json{{"cmd", {"sh", "-c", script}}, {"timeout_s", 240}, {"user", user}}.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        auto j = json::parse(r.body, nullptr, false);
        if (!j.is_object()) return "";
        EXPECT_EQ(j.value("exit_code", -1), 0) << script << ": " << j.value("stderr", "");
        return j.value("stdout", "");
    }
    static std::string url(unsigned port, const std::string& path = "/check") {
        return "https://localhost:" + std::to_string(port) + path;
    }
};

TEST_F(SecretInjection, ClientsInTheGuestGetTheSecretAddedThatTheyNeverHold) {
    const auto& w = *world;
    EXPECT_EQ(sh("curl -sS --max-time 60 " + url(w.host->port())), "granted");
    EXPECT_EQ(sh("python3 -c 'import sys, urllib.request as u; "
                 "print(u.urlopen(sys.argv[1], timeout=60).read().decode(), end=\"\")' " +
                 url(w.host->port())),
              "granted");
    EXPECT_EQ(sh("node -e 'fetch(process.argv[1]).then(r => r.text()).then(t => "
                 "process.stdout.write(t))' " +
                 url(w.host->port())),
              "granted");
    // The placeholder the guest holds is replaced where it is sent.
    EXPECT_EQ(
        sh("curl -sS --max-time 60 -H \"Authorization: Bearer $API_TOKEN\" " + url(w.host->port())),
        "granted");
    for (const auto& head : w.host->heads())
        EXPECT_EQ(head.find("airlock-secret-"), std::string::npos) << head;
    auto placeholder = sh("printf %s \"$API_TOKEN\"");
    EXPECT_EQ(placeholder.rfind("airlock-secret-API_TOKEN-", 0), 0u) << placeholder;
    // The value is nowhere in the guest: the search gets its prefix and digest only.
    std::string search =
        "import hashlib, os, sys\n"
        "want, n = sys.argv[1], int(sys.argv[2]); hits = 0\n"
        "def scan(b):\n"
        "    global hits\n"
        "    i = b.find(b'sk-e2e-')\n"
        "    while i >= 0:\n"
        "        hits += hashlib.sha256(b[i:i + n]).hexdigest() == want; i = b.find(b'sk-e2e-', i "
        "+ 1)\n"
        "for p in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    for f in ('environ', 'cmdline'):\n"
        "        try: scan(open('/proc/%s/%s' % (p, f), 'rb').read())\n"
        "        except OSError: pass\n"
        "for top in ('/etc', '/home', '/tmp', '/root', '/var/tmp'):\n"
        "    for root, dirs, names in os.walk(top):\n"
        "        for name in names:\n"
        "            try: scan(open(os.path.join(root, name), 'rb').read())\n"
        "            except OSError: pass\n"
        "print(hits)\n";
    auto r =
        api("POST", "/v1/sandboxes/" + w.sandbox + "/exec",
            json{{"cmd",
                  {"python3", "-c", search, sha256Hex(w.secret), std::to_string(w.secret.size())}},
                 {"user", "root"},
                 {"timeout_s", 240}}
                .dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["stdout"], "0\n") << r.body;

    auto audit = api("GET", "/v1/sandboxes/" + w.sandbox + "/audit?type=egress.&limit=500");
    ASSERT_EQ(audit.status, 200);
    EXPECT_NE(audit.body.find("egress.secret_injected"), std::string::npos);
    EXPECT_EQ(audit.body.find(w.secret), std::string::npos) << "no value in the record";
}

TEST_F(SecretInjection, ThePlaceholderSentElsewhereIsRefusedAndAudited) {
    const auto& w = *world;
    // Plain HTTP, to the host's own port even: never a secret in clear.
    EXPECT_EQ(sh("curl -s -o /dev/null -w '%{http_code}' --max-time 60 "
                 "\"http://localhost:" +
                 std::to_string(w.otherHost->port()) + "/?t=$API_TOKEN\""),
              "403");
    auto audit = api("GET", "/v1/sandboxes/" + w.sandbox + "/audit?type=egress.&limit=500");
    auto events = json::parse(audit.body)["events"];
    bool blocked = false;
    for (const auto& e : events)
        blocked = blocked || (e["type"] == "egress.secret_blocked" &&
                              e["data"].value("secret", "") == "API_TOKEN");
    EXPECT_TRUE(blocked) << audit.body.substr(0, 2000);
    EXPECT_TRUE(w.otherHost->heads().empty());
}

TEST_F(SecretInjection, ASecretAddedLaterGoesToItsHostAtOnce) {
    const auto& w = *world;
    auto put = api("PUT", "/v1/sandboxes/" + w.sandbox + "/secrets/LATER_TOKEN",
                   json{{"value", w.later},
                        {"inject",
                         {{"hosts", {"localhost:" + std::to_string(w.otherHost->port())}},
                          {"header", "Authorization"},
                          {"format", "Bearer {value}"}}}}
                       .dump());
    EXPECT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(put.body.find(w.later), std::string::npos);
    EXPECT_EQ(sh("curl -sS --max-time 60 " + url(w.otherHost->port())), "granted");
    // The first secret's placeholder to the second one's host: refused.
    EXPECT_EQ(sh("curl -s -o /dev/null -w '%{http_code}' --max-time 60 -H \"X-Leak: $API_TOKEN\" " +
                 url(w.otherHost->port())),
              "403");
    auto bad = api("PUT", "/v1/sandboxes/" + w.sandbox + "/secrets/BAD",
                   R"({"value":"long-enough-value","inject":{"hosts":["*"]}})");
    EXPECT_EQ(bad.status, 400) << bad.body;
}

// A tenant's admin defines a secret once: a running sandbox takes it at
// once, a rotation and a removal reach it, and no answer holds the value
// (creates taking them, and a create's own secret winning, are unit tests:
// TenantSecretsInSandboxes).
TEST_F(SecretInjection, ATenantsSecretReachesARunningSandboxAndFollowsItsChanges) {
    auto& w = *world;
    auto body = [&](const std::string& value) {
        return json{{"value", value},
                    {"inject",
                     {{"hosts", {"localhost:" + std::to_string(w.tenantHost->port())}},
                      {"header", "Authorization"},
                      {"format", "Bearer {value}"}}}}
            .dump();
    };
    auto put = api("PUT", "/v1/secrets/ORG_TOKEN", body(w.tenantValues[0]));
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(put.body.find(w.tenantValues[0]), std::string::npos);
    EXPECT_GE(json::parse(put.body)["sandboxes_updated"].get<int>(), 1) << put.body;
    EXPECT_EQ(sh("curl -sS --max-time 60 " + url(w.tenantHost->port())), "granted")
        << "the running sandbox took it at once";
    EXPECT_EQ(sh("printf %s \"$ORG_TOKEN\" | head -c 25"), "airlock-secret-ORG_TOKEN-");
    auto listed = api("GET", "/v1/secrets");
    ASSERT_EQ(listed.status, 200);
    EXPECT_EQ(json::parse(listed.body)["secrets"][0]["mode"], "header") << listed.body;
    EXPECT_EQ(listed.body.find(w.tenantValues[0]), std::string::npos);
    EXPECT_EQ(api("PUT", "/v1/secrets/PLAIN", R"({"value":"long-enough-value"})").status, 400)
        << "a tenant's secret is always injected";

    // Rotated: the host now wants the new value, and gets it.
    w.tenantWanted = 1;
    EXPECT_EQ(sh("curl -sS --max-time 60 " + url(w.tenantHost->port())), "denied");
    auto rotated = api("PUT", "/v1/secrets/ORG_TOKEN", body(w.tenantValues[1]));
    ASSERT_EQ(rotated.status, 200) << rotated.body;
    EXPECT_EQ(sh("curl -sS --max-time 60 " + url(w.tenantHost->port())), "granted");

    // Removed: no longer added, no longer in new commands' environment;
    // the create's own stays.
    auto removed = api("DELETE", "/v1/secrets/ORG_TOKEN");
    ASSERT_EQ(removed.status, 200) << removed.body;
    // An opaque tunnel again: the guest meets the host's own certificate.
    EXPECT_EQ(sh("curl -sS -k --max-time 60 " + url(w.tenantHost->port())), "denied");
    EXPECT_EQ(sh("printf %s \"${ORG_TOKEN:-none}\""), "none");
    EXPECT_EQ(api("GET", "/v1/secrets/ORG_TOKEN").status, 404);
    EXPECT_EQ(api("DELETE", "/v1/secrets/ORG_TOKEN").status, 404);
    for (const auto& head : w.tenantHost->heads())
        EXPECT_EQ(head.find("airlock-secret-"), std::string::npos) << head;
    auto audit = api("GET", "/v1/sandboxes/" + w.sandbox + "/audit?type=secret.&limit=100");
    EXPECT_NE(audit.body.find("secret.removed"), std::string::npos) << audit.body.substr(0, 2000);
    for (const auto& v : w.tenantValues) EXPECT_EQ(audit.body.find(v), std::string::npos);
}

}  // namespace
}  // namespace airlock
