// A fleet of three real airlockd nodes on three real etcd members:
// membership, any node answering for a sandbox of another (exec, files,
// WebSocket exec, lists, snapshots, approvals), node-to-node calls refused
// without the fleet's signature, a drain that moves a running sandbox, one
// etcd member lost without effect and quorum lost with clear refusals, and
// a SIGKILLed node's sandbox unavailable until the node is back.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/beast/websocket.hpp>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/Clock.hpp"
#include "core/SecretCipher.hpp"
#include "core/Sha256.hpp"
#include "fleet/NodeCredential.hpp"
#include "support/ApiClient.hpp"
#include "support/DaemonProcess.hpp"
#include "support/EtcdCluster.hpp"
#include "support/GitServer.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;

const std::string kToken = "fleet-test-token-0123456789abcdef0123456789abcdef";

int statusOf(const std::string& response) {
    if (response.rfind("HTTP/1.1 ", 0) != 0) return 0;
    return std::stoi(response.substr(9, 3));
}

class Fleet : public ::testing::Test {
  protected:
    struct Node {
        std::string name, dataDir, key;
        std::unique_ptr<test::Daemon> daemon;
        std::unique_ptr<test::ApiClient> admin;
    };

    static void SetUpTestSuite() {
        if (!test::templatesBuilt() || !test::EtcdCluster::available()) return;
        dir_ = std::make_unique<test::TempDir>();
        etcd_ = std::make_unique<test::EtcdCluster>(3);
        std::string members =
            etcd_->clientUrl(0) + "," + etcd_->clientUrl(1) + "," + etcd_->clientUrl(2);
        std::string tokenFile = dir_->path() + "/cluster.token";
        {
            std::ofstream out(tokenFile);
            out << kToken << "\n";
        }
        ::chmod(tokenFile.c_str(), 0600);
        git_ = std::make_unique<test::GitServer>();
        for (int i = 0; i < kNodes; ++i) {
            auto& n = nodes_[i];
            n.name = "node" + std::to_string(i + 1);
            n.dataDir = dir_->path() + "/" + n.name;
            int port = test::freePort();
            n.daemon = std::make_unique<test::Daemon>(
                n.dataDir, port,
                std::vector<std::string>{
                    "--cluster-etcd", members, "--node-name", n.name, "--advertise-url",
                    "http://127.0.0.1:" + std::to_string(port), "--cluster-token-file", tokenFile,
                    "--qemu-uid-range", std::to_string(230000 + 8192 * i) + ":4096",
                    // The fixture git server is on this host's loopback.
                    "--egress-allow-cidr", "127.0.0.1/32"});
            // The first node mints the fleet's first admin key; it works on every node.
            if (i == 0) {
                std::ifstream keyFile(n.dataDir + "/admin.key");
                std::getline(keyFile, n.key);
            } else {
                n.key = nodes_[0].key;
            }
            n.admin = std::make_unique<test::ApiClient>(n.daemon->url(), n.key);
        }
        auto created = nodes_[0].admin->request("POST", "/v1/sandboxes",
                                                R"({"template":"minimal","timeout_s":900})");
        if (created.status == 201) {
            auto j = json::parse(created.body);
            sandbox_ = j.value("id", "");
            // Placed by node1 on any node: the tests go through another.
            owner_ = indexOf(j.value("node", ""));
        }
    }
    static void TearDownTestSuite() {
        for (auto& n : nodes_) {
            if (n.daemon)
                n.daemon->shutDown(::testing::UnitTest::GetInstance()->failed_test_count() > 0,
                                   {n.admin.get()});
            n.daemon.reset();
            n.admin.reset();
        }
        etcd_.reset();
        git_.reset();
        dir_.reset();
    }
    void SetUp() override {
        if (!test::templatesBuilt()) GTEST_SKIP() << "run scripts/setup first";
        if (!test::EtcdCluster::available()) GTEST_SKIP() << "etcd is not installed";
        ASSERT_FALSE(sandbox_.empty()) << "the suite's sandbox was not created";
    }
    // A signed node-to-node request head as a node would send it.
    static std::map<std::string, std::string> signedBy(const std::string& token,
                                                       const std::string& method,
                                                       const std::string& target,
                                                       const std::string& to = owner().name) {
        fleet::NodeCredential credential(token);
        return credential.sign("node2", to, method, target,
                               fleet::ForwardedCaller{"key-x", "forger", "admin", "admin"},
                               nowUnixSeconds());
    }
    static std::string headOf(const std::string& method, const std::string& target,
                              const std::map<std::string, std::string>& headers) {
        std::string head = method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
        for (const auto& [k, v] : headers) head += k + ": " + v + "\r\n";
        return head + "\r\n";
    }

    // Waits until `id` runs on a node other than `from`; its last answer.
    static cli::HttpResult waitMovedOff(test::ApiClient& client, const std::string& id,
                                        const std::string& from, std::chrono::seconds within) {
        cli::HttpResult got;
        EXPECT_TRUE(test::waitFor(
            [&] {
                got = client.request("GET", "/v1/sandboxes/" + id);
                auto j = json::parse(got.body, nullptr, false);
                return got.status == 200 && j.is_object() && j.value("node", "") != from &&
                       j.value("state", "") == "running";
            },
            within, 500ms))
            << got.status << " " << got.body;
        return got;
    }
    static constexpr int kNodes = 3;
    static int indexOf(const std::string& name) {
        return name.size() == 5 && name[4] >= '1' && name[4] <= '3' ? name[4] - '1' : 0;
    }
    static std::unique_ptr<test::TempDir> dir_;
    static std::unique_ptr<test::EtcdCluster> etcd_;
    static std::unique_ptr<test::GitServer> git_;
    static Node nodes_[kNodes];
    static std::string sandbox_;
    static int owner_;  // the index of the node that holds sandbox_
    static Node& owner() { return nodes_[owner_]; }
    static Node& other() { return nodes_[(owner_ + 1) % kNodes]; }
};
int Fleet::owner_ = 0;
std::unique_ptr<test::TempDir> Fleet::dir_;
std::unique_ptr<test::EtcdCluster> Fleet::etcd_;
std::unique_ptr<test::GitServer> Fleet::git_;
Fleet::Node Fleet::nodes_[Fleet::kNodes];
std::string Fleet::sandbox_;

TEST_F(Fleet, EveryNodeListsEveryNodeHealthy) {
    EXPECT_FALSE(std::ifstream(nodes_[1].dataDir + "/admin.key").good())
        << "only the fleet's first node mints an admin key";
    for (auto& n : nodes_) {
        auto r = n.admin->request("GET", "/v1/nodes");
        ASSERT_EQ(r.status, 200) << r.body;
        auto j = json::parse(r.body);
        EXPECT_TRUE(j["cluster"].get<bool>());
        EXPECT_EQ(j["self"], n.name);
        std::set<std::string> healthy;
        for (const auto& node : j["nodes"])
            if (node["health"] == "healthy") healthy.insert(node["name"].get<std::string>());
        EXPECT_EQ(healthy, (std::set<std::string>{"node1", "node2", "node3"})) << r.body;
    }
    auto got = owner().admin->request("GET", "/v1/sandboxes/" + sandbox_);
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(json::parse(got.body)["node"], owner().name);
}

TEST_F(Fleet, TheOtherNodeAnswersForTheSandboxItDoesNotHold) {
    auto& through = *other().admin;
    auto got = through.request("GET", "/v1/sandboxes/" + sandbox_);
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(json::parse(got.body)["node"], owner().name);
    auto exec = through.request("POST", "/v1/sandboxes/" + sandbox_ + "/exec",
                                R"({"shell":"echo fleet-$((6*7)); exit 3"})");
    ASSERT_EQ(exec.status, 200) << exec.body;
    EXPECT_EQ(json::parse(exec.body)["stdout"], "fleet-42\n");
    EXPECT_EQ(json::parse(exec.body)["exit_code"], 3);
    // The list through node2 is fleet-wide.
    auto list = through.request("GET", "/v1/sandboxes");
    ASSERT_EQ(list.status, 200);
    bool listed = false;
    auto listedJson = json::parse(list.body);
    for (const auto& s : listedJson["sandboxes"])
        listed =
            listed || (s["id"] == sandbox_ && s["node"] == owner().name && s["state"] == "running");
    EXPECT_TRUE(listed) << list.body;
    // A file streamed up through node2 comes back down through node2.
    test::TempDir local;
    std::string src = local.path() + "/up.bin";
    {
        std::ofstream f(src, std::ios::binary);
        for (int i = 0; i < 3 * 1024 * 1024; ++i) f.put(static_cast<char>(i * 131 % 251));
    }
    auto put = through.putFile("/v1/sandboxes/" + sandbox_ + "/files?path=/tmp/fleet.bin", src);
    ASSERT_EQ(put.status, 201) << put.body;
    auto sum = through.request("POST", "/v1/sandboxes/" + sandbox_ + "/exec",
                               R"({"shell":"sha256sum /tmp/fleet.bin | cut -d' ' -f1"})");
    std::ifstream in(src, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(json::parse(sum.body)["stdout"], sha256Hex(bytes) + "\n");
    std::string down;
    auto got2 = through.getStreaming("/v1/sandboxes/" + sandbox_ + "/files?path=/tmp/fleet.bin",
                                     [&](const char* p, std::size_t n) { down.append(p, n); });
    EXPECT_EQ(got2.status, 200);
    EXPECT_EQ(down.size(), bytes.size());
    EXPECT_TRUE(down == bytes);
    // A WebSocket exec through node2: the upgrade and the frames go both ways.
    boost::asio::io_context ioc;
    auto ws = test::openWsExec(ioc, other().daemon->port(), other().key, sandbox_,
                               R"({"shell":"read line; echo got-$line"})");
    ws->binary(true);
    ws->write(boost::asio::buffer(std::string("hello\n")));
    std::string output;
    bool exited = false;
    while (!exited) {
        boost::beast::flat_buffer b;
        ws->read(b);
        std::string text = boost::beast::buffers_to_string(b.data());
        if (ws->got_binary() && !text.empty())
            output += text.substr(1);  // the first byte names the stream
        else if (text.find("\"exit\"") != std::string::npos)
            exited = true;
    }
    EXPECT_EQ(output, "got-hello\n");
}

TEST_F(Fleet, KeysAreFleetWideAndAnotherTenantsKeyFindsNothingThroughTheOtherNode) {
    auto minted = nodes_[0].admin->request("POST", "/v1/keys",
                                           R"({"tenant":"acme","role":"agent","name":"e2e"})");
    ASSERT_EQ(minted.status, 201) << minted.body;
    std::string acme = json::parse(minted.body)["key"];
    std::string acmeId = json::parse(minted.body)["id"];
    test::ApiClient client(other().daemon->url(), acme);
    EXPECT_EQ(client.request("GET", "/v1/nodes").status, 403) << "an agent key lists no nodes";
    EXPECT_EQ(client.request("GET", "/v1/sandboxes/" + sandbox_).status, 404);
    EXPECT_EQ(
        client.request("POST", "/v1/sandboxes/" + sandbox_ + "/exec", R"({"cmd":["id"]})").status,
        404);
    auto list = client.request("GET", "/v1/sandboxes");
    ASSERT_EQ(list.status, 200);
    EXPECT_EQ(list.body.find(sandbox_), std::string::npos) << list.body;
    auto ws = test::rawHttp(other().daemon->port(),
                            "GET /v1/sandboxes/" + sandbox_ +
                                "/exec/ws HTTP/1.1\r\nHost: x\r\n"
                                "Authorization: Bearer " +
                                acme +
                                "\r\nConnection: Upgrade\r\n"
                                "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
    EXPECT_EQ(statusOf(ws), 404) << ws.substr(0, 200);
    // Revoked through node1, refused through node2 at once.
    EXPECT_EQ(nodes_[0].admin->request("DELETE", "/v1/keys/" + acmeId).status, 204);
    EXPECT_EQ(client.request("GET", "/v1/sandboxes").status, 401);
}

TEST_F(Fleet, EvidenceSealedOnOneNodeIsFetchedReviewedAndVerifiedThroughAnother) {
    auto& through = *other().admin;
    auto sealed = through.request("POST", "/v1/sandboxes/" + sandbox_ + "/evidence", "{}");
    ASSERT_EQ(sealed.status, 201) << sealed.body;
    std::string bundle = json::parse(sealed.body)["id"];
    // Asked of the third node too: the fleet's directory says where it is.
    for (auto* node : {&other(), &nodes_[(owner_ + 2) % kNodes]}) {
        auto info = node->admin->request("GET", "/v1/evidence/" + bundle + "/info");
        ASSERT_EQ(info.status, 200) << node->name << ": " << info.body;
        EXPECT_EQ(json::parse(info.body)["sandbox_id"], sandbox_);
        std::string bytes;
        auto got = node->admin->getStreaming(
            "/v1/evidence/" + bundle, [&](const char* p, std::size_t n) { bytes.append(p, n); });
        EXPECT_EQ(got.status, 200);
        EXPECT_EQ(sha256Hex(bytes), json::parse(info.body)["sha256"]) << node->name;
    }
    auto review = through.request("POST", "/v1/evidence/" + bundle + "/review",
                                  R"({"decision":"approve","reason":"fleet e2e"})");
    EXPECT_EQ(review.status, 201) << review.body;
    // The owner's signing key is listed through any node, named by node.
    auto keys = through.request("GET", "/v1/evidence/keys");
    ASSERT_EQ(keys.status, 200) << keys.body;
    auto keysJson = json::parse(keys.body);
    std::set<std::string> signers;
    for (const auto& k : keysJson["keys"]) signers.insert(k.value("node", ""));
    EXPECT_TRUE(signers.count(owner().name)) << keys.body;
    EXPECT_TRUE(signers.count(other().name)) << keys.body;
    // Another tenant finds no such bundle through any node.
    auto minted = nodes_[0].admin->request("POST", "/v1/keys",
                                           R"({"tenant":"globex","role":"approver","name":"e2e"})");
    ASSERT_EQ(minted.status, 201) << minted.body;
    test::ApiClient globex(other().daemon->url(), json::parse(minted.body)["key"]);
    EXPECT_EQ(globex.request("GET", "/v1/evidence/" + bundle + "/info").status, 404);
    EXPECT_EQ(globex
                  .request("POST", "/v1/evidence/" + bundle + "/review",
                           R"({"decision":"reject","reason":"not mine"})")
                  .status,
              404);
}

TEST_F(Fleet, BrokeredCredentialsAreFleetWide) {
    auto made = nodes_[0].admin->request("POST", "/v1/credentials",
                                         json{{"name", "fleet-git"},
                                              {"kind", "https-token"},
                                              {"host", "git.example"},
                                              {"secret", "fleet-credential-canary-31337"}}
                                             .dump());
    ASSERT_EQ(made.status, 201) << made.body;
    EXPECT_EQ(made.body.find("canary"), std::string::npos);
    auto listed = nodes_[2].admin->request("GET", "/v1/credentials");
    ASSERT_EQ(listed.status, 200) << listed.body;
    EXPECT_NE(listed.body.find("fleet-git"), std::string::npos) << listed.body;
    EXPECT_EQ(nodes_[1]
                  .admin
                  ->request("POST", "/v1/credentials",
                            json{{"name", "fleet-git"},
                                 {"kind", "https-token"},
                                 {"host", "git.example"},
                                 {"secret", "another-secret-value-424242"}}
                                .dump())
                  .status,
              409)
        << "the name is taken on every node";
    EXPECT_EQ(nodes_[2].admin->request("DELETE", "/v1/credentials/fleet-git").status, 204);
    EXPECT_EQ(nodes_[0].admin->request("GET", "/v1/credentials").body.find("fleet-git"),
              std::string::npos);
}

// A tenant secret set through one node is kept in etcd and taken at once
// by the tenant's sandbox on another node; its removal too.
TEST_F(Fleet, ATenantSecretSetThroughOneNodeReachesTheSandboxOnAnother) {
    auto put = other().admin->request(
        "PUT", "/v1/secrets/FLEET_TOKEN",
        R"({"value":"fleet-tenant-canary-27182","inject":{"hosts":["api.example.com"]}})");
    ASSERT_EQ(put.status, 201) << put.body;
    auto j = json::parse(put.body);
    EXPECT_GE(j["sandboxes_updated"].get<int>(), 1) << put.body;
    EXPECT_TRUE(j["nodes_missed"].empty()) << put.body;
    EXPECT_EQ(put.body.find("canary"), std::string::npos);
    auto holds = [&] {
        auto r = other().admin->request(
            "POST", "/v1/sandboxes/" + sandbox_ + "/exec",
            json{{"shell",
                  "case \"$FLEET_TOKEN\" in airlock-secret-FLEET_TOKEN-*) echo placeholder;; "
                  "'') echo none;; *) echo other;; esac"}}
                .dump());
        return json::parse(r.body, nullptr, false).value("stdout", r.body);
    };
    EXPECT_EQ(holds(), "placeholder\n");
    EXPECT_NE(nodes_[2].admin->request("GET", "/v1/secrets").body.find("FLEET_TOKEN"),
              std::string::npos);
    auto removed = owner().admin->request("DELETE", "/v1/secrets/FLEET_TOKEN");
    ASSERT_EQ(removed.status, 200) << removed.body;
    EXPECT_EQ(holds(), "none\n");
}

TEST_F(Fleet, NodeCallsWithoutTheFleetsSignatureAreRefused) {
    int port = owner().daemon->port();
    std::string target = "/v1/sandboxes/" + sandbox_;
    // The real signature: the owner takes the caller it names.
    auto good = test::rawHttp(port, headOf("GET", target, signedBy(kToken, "GET", target)));
    EXPECT_EQ(statusOf(good), 200) << good.substr(0, 300);
    // Signed with another token.
    auto forged = test::rawHttp(
        port,
        headOf("GET", target, signedBy("another-token-0123456789abcdef0123456789", "GET", target)));
    EXPECT_EQ(statusOf(forged), 401) << forged.substr(0, 300);
    // A signature for one call, used for another.
    auto moved =
        test::rawHttp(port, headOf("POST", target + "/exec", signedBy(kToken, "GET", target)));
    EXPECT_EQ(statusOf(moved), 401) << moved.substr(0, 300);
    // A captured call replayed, or sent to another node than it was signed for.
    auto signedOnce = signedBy(kToken, "GET", target);
    EXPECT_EQ(statusOf(test::rawHttp(port, headOf("GET", target, signedOnce))), 200);
    EXPECT_EQ(statusOf(test::rawHttp(port, headOf("GET", target, signedOnce))), 401)
        << "a replay is refused";
    auto forAnother = signedBy(kToken, "GET", target, other().name);
    EXPECT_EQ(statusOf(test::rawHttp(port, headOf("GET", target, forAnother))), 401)
        << "a call signed for another node is refused";
    // A caller without any signature.
    auto unsigned_ = test::rawHttp(
        port, headOf("GET", target,
                     {{"x-airlock-forwarded-by", "node2"},
                      {"x-airlock-caller",
                       base64Encode(R"({"key_id":"k","tenant":"admin","role":"admin"})")}}));
    EXPECT_EQ(statusOf(unsigned_), 401) << unsigned_.substr(0, 300);
    // A client cannot slip node headers through a node either: node2 drops
    // them and signs the caller it authenticated.
    auto through =
        test::rawHttp(other().daemon->port(), headOf("GET", target,
                                                     {{"Authorization", "Bearer " + other().key},
                                                      {"x-airlock-forwarded-by", "node9"},
                                                      {"x-airlock-node-auth", "v1:0:00"}}));
    EXPECT_EQ(statusOf(through), 401) << "a client's node headers are checked, never trusted";
}

TEST_F(Fleet, CreatesThroughOneNodeArePlacedAcrossTheFleet) {
    // One node runs the suite's sandbox already: of two more creates
    // through node1, one at least goes to another node, and each says why.
    std::vector<std::string> made;
    std::map<std::string, int> on;
    for (int i = 0; i < 2; ++i) {
        auto r = nodes_[0].admin->request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
        ASSERT_EQ(r.status, 201) << r.body;
        auto j = json::parse(r.body);
        made.push_back(j["id"]);
        ++on[j["node"].get<std::string>()];
        EXPECT_EQ(j["placement"].get<std::string>().rfind("placed by node1: ", 0), 0u) << r.body;
    }
    EXPECT_LT(on[owner().name], 2) << "both creates went to " << owner().name << ", which held one";
    for (const auto& id : made) {
        auto got = nodes_[1].admin->request("GET", "/v1/sandboxes/" + id);
        EXPECT_EQ(got.status, 200);
        EXPECT_NE(json::parse(got.body).value("placement", "").find("placed by node1"),
                  std::string::npos)
            << got.body;
        EXPECT_EQ(nodes_[1].admin->request("DELETE", "/v1/sandboxes/" + id).status, 204);
    }
}

TEST_F(Fleet, ATenantsQuotaHoldsAcrossNodesUnderConcurrentCreates) {
    auto minted = nodes_[0].admin->request("POST", "/v1/keys",
                                           R"({"tenant":"quota-t","role":"agent","name":"e2e"})");
    ASSERT_EQ(minted.status, 201);
    std::string key = json::parse(minted.body)["key"];
    auto set =
        nodes_[1].admin->request("PUT", "/v1/tenants/quota-t", R"({"quota":{"sandboxes":1}})");
    ASSERT_EQ(set.status, 200) << set.body;
    // Set through node2, read through node1.
    auto shown = nodes_[0].admin->request("GET", "/v1/tenants/quota-t");
    EXPECT_EQ(json::parse(shown.body)["quota"]["sandboxes"], 1) << shown.body;
    cli::HttpResult results[2];
    std::thread racers[2];
    for (int i = 0; i < 2; ++i)
        racers[i] = std::thread([&, i] {
            test::ApiClient client(nodes_[i].daemon->url(), key);
            // Placed by either node; the count is the fleet's wherever they land
            // (FleetUsageTest races two nodes for the last unit deterministically).
            results[i] = client.request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
        });
    for (auto& t : racers) t.join();
    int created = 0, refused = 0;
    std::string id;
    for (const auto& r : results) {
        if (r.status == 201) {
            ++created;
            id = json::parse(r.body)["id"];
        }
        if (r.status == 429 && r.body.find("quota_exceeded") != std::string::npos) ++refused;
    }
    EXPECT_EQ(created, 1) << results[0].body << results[1].body;
    EXPECT_EQ(refused, 1) << results[0].body << results[1].body;
    auto usage = json::parse(nodes_[0].admin->request("GET", "/v1/tenants/quota-t").body);
    EXPECT_EQ(usage["usage"]["sandboxes"], 1) << usage.dump();
    if (!id.empty()) {
        test::ApiClient client(nodes_[1].daemon->url(), key);
        EXPECT_EQ(client.request("DELETE", "/v1/sandboxes/" + id).status, 204);
    }
    EXPECT_TRUE(test::waitFor(
        [&] {
            auto u = json::parse(nodes_[1].admin->request("GET", "/v1/tenants/quota-t").body);
            return u["usage"]["sandboxes"] == 0;
        },
        10s))
        << "a deleted sandbox no longer counts";
}

TEST_F(Fleet, ADrainedNodeGetsNoNewSandboxes) {
    auto drained = nodes_[0].admin->request("POST", "/v1/nodes/node2/drain", "{}");
    ASSERT_EQ(drained.status, 200) << drained.body;
    EXPECT_EQ(json::parse(drained.body)["health"], "draining");
    EXPECT_EQ(nodes_[0].admin->request("POST", "/v1/nodes/node9/drain", "{}").status, 404);
    EXPECT_EQ(nodes_[0].admin->request("POST", "/v1/nodes/node2/drain", R"({"moves":1})").status,
              400);
    auto r = nodes_[1].admin->request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    ASSERT_EQ(r.status, 201) << r.body;
    auto j = json::parse(r.body);
    EXPECT_NE(j["node"], "node2") << "a create through the drained node lands elsewhere";
    EXPECT_EQ(
        nodes_[1].admin->request("DELETE", "/v1/sandboxes/" + j["id"].get<std::string>()).status,
        204);
    auto undrained = nodes_[1].admin->request("DELETE", "/v1/nodes/node2/drain");
    ASSERT_EQ(undrained.status, 200);
    EXPECT_EQ(json::parse(undrained.body)["health"], "healthy");
}

TEST_F(Fleet, OneEtcdMemberLostChangesNothingQuorumLostRefusesCreatesClearly) {
    auto& client = *owner().admin;
    auto healthyNodes = [&] {
        auto r = client.request("GET", "/v1/nodes");
        auto j = json::parse(r.body, nullptr, false);
        if (r.status != 200 || !j.is_object()) return 0;
        int healthy = 0;
        for (const auto& n : j["nodes"]) healthy += n["health"] == "healthy";
        return healthy;
    };
    etcd_->stop(0);
    auto create = client.request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    ASSERT_EQ(create.status, 201) << "two of three members are a quorum: " << create.body;
    EXPECT_EQ(
        client
            .request("DELETE", "/v1/sandboxes/" + json::parse(create.body)["id"].get<std::string>())
            .status,
        204);
    EXPECT_TRUE(test::waitFor([&] { return healthyNodes() == kNodes; }, 30s, 250ms));
    // Quorum lost: running sandboxes still answer, creates are refused fast.
    etcd_->stop(1);
    auto exec = client.request("POST", "/v1/sandboxes/" + sandbox_ + "/exec",
                               R"x({"shell":"echo still-$((40+2))"})x");
    EXPECT_EQ(exec.status, 200) << exec.body;
    EXPECT_NE(exec.body.find("still-42"), std::string::npos) << exec.body;
    auto started = std::chrono::steady_clock::now();
    auto refused = client.request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 20s)
        << "a create without a quorum fails in bounded time";
    etcd_->start(0);
    etcd_->start(1);
    EXPECT_TRUE(test::waitFor([&] { return healthyNodes() == kNodes; }, 45s, 250ms));
    // Quorum back: the next create is taken, not refused for a past outage.
    auto again = client.request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    ASSERT_EQ(again.status, 201) << again.body;
    EXPECT_EQ(
        client
            .request("DELETE", "/v1/sandboxes/" + json::parse(again.body)["id"].get<std::string>())
            .status,
        204);
}

// Snapshots and approvals live on the node of their sandbox; lists show
// the whole fleet's, and any node answers for one by id.
TEST_F(Fleet, SnapshotsAndApprovalsAreListedAndAnsweredFromEitherNode) {
    auto& through = *other().admin;
    auto snap = through.request("POST", "/v1/sandboxes/" + sandbox_ + "/snapshots");
    ASSERT_EQ(snap.status, 201) << snap.body;
    auto snapId = json::parse(snap.body)["id"].get<std::string>();
    EXPECT_EQ(json::parse(snap.body)["node"], owner().name);
    cli::HttpResult got;
    EXPECT_TRUE(test::waitFor(
        [&] {
            got = through.request("GET", "/v1/snapshots/" + snapId);
            return got.status == 200;
        },
        10s, 250ms))
        << got.status << " " << got.body;
    auto listed = json::parse(through.request("GET", "/v1/snapshots").body);
    std::string listedOn;
    for (const auto& s : listed["snapshots"])
        if (s["id"] == snapId) listedOn = s.value("node", "");
    EXPECT_EQ(listedOn, owner().name) << listed.dump();
    // A clone lands where the snapshot's files are.
    auto clone = through.request("POST", "/v1/sandboxes", json{{"snapshot", snapId}}.dump());
    ASSERT_EQ(clone.status, 201) << clone.body;
    auto cloneId = json::parse(clone.body)["id"].get<std::string>();
    EXPECT_EQ(json::parse(clone.body)["node"], owner().name);
    EXPECT_EQ(through.request("DELETE", "/v1/sandboxes/" + cloneId).status, 204);
    EXPECT_EQ(through.request("DELETE", "/v1/snapshots/" + snapId).status, 204);

    // An approval parked on one node, decided through the other.
    auto gated = owner().admin->request(
        "POST", "/v1/sandboxes",
        R"({"template":"minimal","policy":{"approve":["echo gated*"]},"timeout_s":300})");
    ASSERT_EQ(gated.status, 201) << gated.body;
    auto gatedId = json::parse(gated.body)["id"].get<std::string>();
    auto gatedNode = json::parse(gated.body)["node"].get<std::string>();
    auto& farNode = nodes_[(indexOf(gatedNode) + 1) % kNodes];
    auto& far = *farNode.admin;
    auto parked =
        far.request("POST", "/v1/sandboxes/" + gatedId + "/exec", R"({"shell":"echo gated-ok"})");
    ASSERT_EQ(parked.status, 202) << parked.body;
    auto approvalId = json::parse(parked.body)["approval_id"].get<std::string>();
    auto approvals = json::parse(far.request("GET", "/v1/approvals").body);
    std::string approvalNode;
    for (const auto& a : approvals["approvals"])
        if (a["id"] == approvalId) approvalNode = a.value("node", "");
    EXPECT_EQ(approvalNode, gatedNode) << approvals.dump();
    auto one = far.request("GET", "/v1/approvals/" + approvalId);
    EXPECT_EQ(one.status, 200) << one.body;
    // Another tenant's key finds no such approval through any node.
    auto minted = nodes_[0].admin->request(
        "POST", "/v1/keys", R"({"tenant":"other-t","role":"approver","name":"e2e"})");
    ASSERT_EQ(minted.status, 201) << minted.body;
    test::ApiClient stranger(farNode.daemon->url(),
                             json::parse(minted.body)["key"].get<std::string>());
    EXPECT_EQ(stranger.request("GET", "/v1/approvals/" + approvalId).status, 404);
    auto decided = far.request("POST", "/v1/approvals/" + approvalId,
                               R"({"decision":"approve","reason":"through the other node"})");
    ASSERT_EQ(decided.status, 200) << decided.body;
    EXPECT_NE(decided.body.find("gated-ok"), std::string::npos) << decided.body;
    EXPECT_EQ(far.request("GET", "/v1/approvals/apr-nosuchapprovalxxxxxxx").status, 404);
    EXPECT_EQ(far.request("DELETE", "/v1/sandboxes/" + gatedId).status, 204);
}

// E2B's door places its creates as the native one does; the sandbox's envd
// answers through any node, its access token checked by the node that
// minted it.
TEST_F(Fleet, AnE2bCreateIsPlacedAcrossTheFleetAndItsEnvdAnswersThroughAnyNode) {
    auto& via = nodes_[0];
    ASSERT_EQ(via.admin->request("POST", "/v1/nodes/node1/drain", "{}").status, 200);
    std::string body = R"({"templateID":"minimal","timeout":300})";
    auto raw = test::rawHttp(
        via.daemon->port(),
        "POST /v2/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-KEY: e2b_" + via.key.substr(3) +
            "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\nConnection: close\r\n\r\n" + body,
        300);
    EXPECT_EQ(via.admin->request("DELETE", "/v1/nodes/node1/drain").status, 200);
    ASSERT_EQ(statusOf(raw), 201) << raw.substr(0, 400);
    auto created = json::parse(raw.substr(raw.find("\r\n\r\n") + 4));
    auto id = created["sandboxID"].get<std::string>();
    auto token = created["envdAccessToken"].get<std::string>();
    auto got = via.admin->request("GET", "/v1/sandboxes/" + id);
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_NE(json::parse(got.body)["node"], "node1") << "created through a drained node";
    auto envd = [&](const std::string& accessToken) {
        return statusOf(test::rawHttp(via.daemon->port(),
                                      "GET /files?path=/etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                      "E2b-Sandbox-Id: " +
                                          id + "\r\nE2b-Sandbox-Port: 49983\r\nX-Access-Token: " +
                                          accessToken + "\r\nConnection: close\r\n\r\n",
                                      60));
    };
    EXPECT_EQ(envd(token), 200) << "envd through node1, forwarded to the sandbox's node";
    EXPECT_EQ(envd(token + "x"), 401) << "the owner checks the token";
    // E2B's list through node1 is fleet-wide, in E2B's shape, its filters applied.
    auto list = [&](const std::string& query) {
        auto answer = test::rawHttp(via.daemon->port(),
                                    "GET /v2/sandboxes" + query +
                                        " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-KEY: e2b_" +
                                        via.key.substr(3) + "\r\nConnection: close\r\n\r\n",
                                    60);
        EXPECT_EQ(statusOf(answer), 200) << answer.substr(0, 300);
        return json::parse(answer.substr(answer.find("\r\n\r\n") + 4), nullptr, false);
    };
    auto listed = list("");
    ASSERT_TRUE(listed.is_array());
    bool found = false;
    for (const auto& s : listed)
        found = found ||
                (s["sandboxID"] == id && s["state"] == "running" && s["templateID"] == "minimal");
    EXPECT_TRUE(found) << listed.dump().substr(0, 600);
    auto paused = list("?state=paused");
    ASSERT_TRUE(paused.is_array());
    for (const auto& s : paused) EXPECT_NE(s["sandboxID"], id);
    EXPECT_EQ(via.admin->request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// A drain with move: the drained node's sandboxes go on elsewhere under
// their ids, with their files and processes; the drained node still answers
// for them (forwarded), and keeps no VM of them.
TEST_F(Fleet, ADrainWithMoveTakesARunningSandboxToTheOtherNodeWhole) {
    auto& client = *nodes_[0].admin;
    auto created =
        client.request("POST", "/v1/sandboxes", R"({"template":"minimal","timeout_s":900})");
    ASSERT_EQ(created.status, 201) << created.body;
    auto id = json::parse(created.body)["id"].get<std::string>();
    auto from = json::parse(created.body)["node"].get<std::string>();
    int fromIndex = indexOf(from);
    auto wrote = client.request("POST", "/v1/sandboxes/" + id + "/exec",
                                R"({"shell":"echo moved-whole > /tmp/keep"})");
    ASSERT_EQ(wrote.status, 200) << wrote.body;
    auto proc =
        client.request("POST", "/v1/sandboxes/" + id + "/processes", R"({"shell":"sleep 1000"})");
    ASSERT_EQ(proc.status, 201) << proc.body;
    auto idText = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    auto procId = idText(json::parse(proc.body)["id"]);

    // An admin key cannot send a sandbox anywhere: only nodes do.
    EXPECT_EQ(client.request("POST", "/v1/internal/moves", R"({"sandbox":{},"files":{}})").status,
              403);
    // Asked through the other node: it asks the drained one.
    auto drained = nodes_[(fromIndex + 1) % kNodes].admin->request(
        "POST", "/v1/nodes/" + from + "/drain", R"({"move":true})");
    ASSERT_EQ(drained.status, 202) << drained.body;
    auto moving = json::parse(drained.body)["moving"];
    EXPECT_NE(std::find(moving.begin(), moving.end(), id), moving.end()) << drained.body;

    auto got = waitMovedOff(client, id, from, 180s);
    EXPECT_NE(json::parse(got.body).value("placement", "").find("moved here from " + from),
              std::string::npos)
        << got.body;
    auto kept =
        client.request("POST", "/v1/sandboxes/" + id + "/exec", R"({"shell":"cat /tmp/keep"})");
    ASSERT_EQ(kept.status, 200) << kept.body;
    EXPECT_EQ(json::parse(kept.body)["stdout"], "moved-whole\n");
    auto procs = client.request("GET", "/v1/sandboxes/" + id + "/processes");
    ASSERT_EQ(procs.status, 200) << procs.body;
    std::string state;
    auto listed = json::parse(procs.body);
    for (const auto& p : listed["processes"])
        if (idText(p["id"]) == procId) state = p.value("state", "");
    EXPECT_EQ(state, "running") << procs.body << " (started as " << proc.body << ")";
    // Through the drained node: forwarded to where it runs now.
    auto viaOld = nodes_[fromIndex].admin->request("POST", "/v1/sandboxes/" + id + "/exec",
                                                   R"({"shell":"ps | grep -c '[s]leep 1000'"})");
    ASSERT_EQ(viaOld.status, 200) << viaOld.body;
    EXPECT_EQ(json::parse(viaOld.body)["stdout"], "1\n");
    EXPECT_TRUE(test::waitFor(
        [&] {
            struct stat st {};
            return ::stat((nodes_[fromIndex].dataDir + "/sandboxes/" + id).c_str(), &st) != 0;
        },
        30s, 250ms))
        << "the drained node keeps nothing of it";
    auto audit = client.request("GET", "/v1/sandboxes/" + id + "/audit");
    ASSERT_EQ(audit.status, 200) << audit.body;
    EXPECT_NE(audit.body.find("sandbox.created"), std::string::npos) << "its audit log came along";
    EXPECT_NE(audit.body.find("sandbox.moved"), std::string::npos) << audit.body.substr(0, 400);

    ASSERT_EQ(client.request("DELETE", "/v1/nodes/" + from + "/drain").status, 200);
    EXPECT_EQ(client.request("DELETE", "/v1/sandboxes/" + id).status, 204);
    // The suite's sandbox may have moved with it.
    auto suite = client.request("GET", "/v1/sandboxes/" + sandbox_);
    ASSERT_EQ(suite.status, 200) << suite.body;
    owner_ = indexOf(json::parse(suite.body).value("node", ""));
}

// A sandbox with a disk whose chain reads a snapshot's layer: its disk
// arrives as one image over the template's, what it wrote before and after
// the snapshot intact.
TEST_F(Fleet, ADrainWithMoveTakesADiskThatReadsASnapshotLayer) {
    auto& client = *nodes_[0].admin;
    auto created =
        client.request("POST", "/v1/sandboxes", R"({"template":"debian","timeout_s":900})");
    ASSERT_EQ(created.status, 201) << created.body;
    auto id = json::parse(created.body)["id"].get<std::string>();
    auto from = json::parse(created.body)["node"].get<std::string>();
    auto exec = [&](const std::string& shell) {
        return client.request("POST", "/v1/sandboxes/" + id + "/exec",
                              json{{"shell", shell}}.dump());
    };
    auto before = exec("echo before > ~/before && sync && cat ~/before");
    ASSERT_EQ(before.status, 200) << before.body;
    ASSERT_EQ(json::parse(before.body)["stdout"], "before\n") << before.body;
    auto snap = client.request("POST", "/v1/sandboxes/" + id + "/snapshots");
    ASSERT_EQ(snap.status, 201) << snap.body;
    auto snapId = json::parse(snap.body)["id"].get<std::string>();
    ASSERT_EQ(exec("echo after > ~/after && sync").status, 200);
    auto drained = client.request("POST", "/v1/nodes/" + from + "/drain", R"({"move":true})");
    ASSERT_EQ(drained.status, 202) << drained.body;
    waitMovedOff(client, id, from, 300s);
    auto both = exec("cat ~/before ~/after");
    ASSERT_EQ(both.status, 200) << both.body;
    EXPECT_EQ(json::parse(both.body)["stdout"], "before\nafter\n") << both.body;
    auto write = exec("echo moved > ~/moved && cat ~/moved");
    ASSERT_EQ(write.status, 200) << write.body;
    EXPECT_EQ(json::parse(write.body)["stdout"], "moved\n") << "its disk takes writes there";
    ASSERT_EQ(client.request("DELETE", "/v1/nodes/" + from + "/drain").status, 200);
    EXPECT_EQ(client.request("DELETE", "/v1/sandboxes/" + id).status, 204);
    EXPECT_EQ(client.request("DELETE", "/v1/snapshots/" + snapId).status, 204);
    auto suite = client.request("GET", "/v1/sandboxes/" + sandbox_);
    ASSERT_EQ(suite.status, 200) << suite.body;
    owner_ = indexOf(json::parse(suite.body).value("node", ""));
}

// A sandbox with a repository workspace moves whole: the host's commit on
// its task branch, the agent's uncommitted files, and the bundles sealed on
// the node it left, listed through its new one.
TEST_F(Fleet, ADrainWithMoveTakesAWorkspaceWithItsCommitsAndItsEvidenceList) {
    ASSERT_TRUE(git_ && git_->up) << "the git server did not start";
    auto& client = *nodes_[0].admin;
    auto cred = client.request("POST", "/v1/credentials",
                               json{{"name", "fleet-fx"},
                                    {"kind", "https-basic"},
                                    {"host", git_->hostPort()},
                                    {"username", "git"},
                                    {"secret", git_->password}}
                                   .dump());
    ASSERT_EQ(cred.status, 201) << cred.body;
    auto created = client.request(
        "POST", "/v1/sandboxes",
        json{{"template", "minimal"},
             {"timeout_s", 900},
             {"workspace",
              {{"repo", git_->url("demo.git")}, {"branch", "agent/moved"}, {"credential", "fleet-fx"}}}}
            .dump());
    ASSERT_EQ(created.status, 201) << created.body;
    auto id = json::parse(created.body)["id"].get<std::string>();
    auto from = json::parse(created.body)["node"].get<std::string>();
    auto exec = [&](const std::string& shell) {
        auto r = client.request("POST", "/v1/sandboxes/" + id + "/exec",
                                json{{"shell", shell}}.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body, nullptr, false);
    };
    exec("echo committed-before-the-move >> /workspace/README.md");
    auto committed = client.request("POST", "/v1/sandboxes/" + id + "/workspace/commit",
                                    R"({"message":"before","author":{"name":"A","email":"a@example.invalid"}})");
    ASSERT_EQ(committed.status, 201) << committed.body;
    auto head = json::parse(committed.body)["commit"].get<std::string>();
    exec("echo not-yet-committed > /workspace/LATER.md");
    auto sealed = client.request("POST", "/v1/sandboxes/" + id + "/evidence");
    ASSERT_EQ(sealed.status, 201) << sealed.body;
    auto bundle = json::parse(sealed.body)["id"].get<std::string>();

    auto drained = client.request("POST", "/v1/nodes/" + from + "/drain", R"({"move":true})");
    ASSERT_EQ(drained.status, 202) << drained.body;
    auto moving = json::parse(drained.body)["moving"];
    EXPECT_NE(std::find(moving.begin(), moving.end(), id), moving.end()) << drained.body;
    waitMovedOff(client, id, from, 180s);

    auto ws = client.request("GET", "/v1/sandboxes/" + id + "/workspace");
    ASSERT_EQ(ws.status, 200) << ws.body;
    EXPECT_EQ(json::parse(ws.body)["head"], head) << ws.body;
    EXPECT_EQ(json::parse(ws.body)["base_commit"], git_->revParse("demo.git", "main"));
    auto diff = client.request("GET", "/v1/sandboxes/" + id + "/workspace/diff?format=json");
    ASSERT_EQ(diff.status, 200) << diff.body;
    std::set<std::string> changed;
    auto diffJson = json::parse(diff.body);
    for (const auto& f : diffJson["files"]) changed.insert(f.value("path", ""));
    EXPECT_EQ(changed, (std::set<std::string>{"LATER.md", "README.md"})) << diff.body;
    auto again = client.request("POST", "/v1/sandboxes/" + id + "/workspace/commit",
                                R"({"message":"after","author":{"name":"A","email":"a@example.invalid"}})");
    ASSERT_EQ(again.status, 201) << again.body;
    EXPECT_EQ(json::parse(again.body)["parent"], head)
        << "the commit made on the old node is the new one's parent";

    // Listed through any node: the bundle stays with the node that sealed it.
    auto listed = nodes_[indexOf(from)].admin->request("GET", "/v1/sandboxes/" + id + "/evidence");
    ASSERT_EQ(listed.status, 200) << listed.body;
    std::string sealedOn;
    auto listedJson = json::parse(listed.body);
    for (const auto& e : listedJson["evidence"])
        if (e.value("id", "") == bundle) sealedOn = e.value("node", "");
    EXPECT_EQ(sealedOn, from) << listed.body;

    ASSERT_EQ(client.request("DELETE", "/v1/nodes/" + from + "/drain").status, 200);
    EXPECT_EQ(client.request("DELETE", "/v1/sandboxes/" + id).status, 204);
    auto suite = client.request("GET", "/v1/sandboxes/" + sandbox_);
    ASSERT_EQ(suite.status, 200) << suite.body;
    owner_ = indexOf(json::parse(suite.body).value("node", ""));
}

// Last: it kills the owner of the suite's sandbox.
TEST_F(Fleet, KilledNodesSandboxIsUnavailableUntilTheNodeIsBack) {
    auto& through = *other().admin;
    ASSERT_EQ(through
                  .request("POST", "/v1/sandboxes/" + sandbox_ + "/exec",
                           R"({"shell":"echo kept > /tmp/marker"})")
                  .status,
              200);
    owner().daemon->stop(SIGKILL);
    std::string answer;
    EXPECT_TRUE(test::waitFor(
        [&] {
            answer =
                test::rawHttp(other().daemon->port(),
                              "POST /v1/sandboxes/" + sandbox_ +
                                  "/exec HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                  "Authorization: Bearer " +
                                  other().key +
                                  "\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n"
                                  R"({"cmd":["id"]})");
            return statusOf(answer) == 503;
        },
        20s, 250ms))
        << answer.substr(0, 300);
    EXPECT_NE(answer.find("node_unavailable"), std::string::npos) << answer.substr(0, 300);
    EXPECT_NE(answer.find("Retry-After: 5"), std::string::npos) << answer.substr(0, 300);
    auto list = through.request("GET", "/v1/sandboxes");
    ASSERT_EQ(list.status, 200);
    bool unavailable = false;
    auto listed = json::parse(list.body);
    for (const auto& s : listed["sandboxes"])
        unavailable = unavailable || (s["id"] == sandbox_ && s["state"] == "unavailable");
    EXPECT_TRUE(unavailable) << list.body;
    // Its lease runs out within 9 s of the kill: then it is listed down.
    std::string health;
    EXPECT_TRUE(test::waitFor(
        [&] {
            auto nodes = json::parse(through.request("GET", "/v1/nodes").body);
            for (const auto& n : nodes["nodes"])
                if (n["name"] == owner().name) health = n["health"].get<std::string>();
            return health == "down";
        },
        15s, 250ms))
        << health;
    // Back with the same data dir: it adopts its VM and answers again.
    owner().daemon->start();
    cli::HttpResult exec;
    EXPECT_TRUE(test::waitFor(
        [&] {
            exec = through.request("POST", "/v1/sandboxes/" + sandbox_ + "/exec",
                                   R"({"shell":"cat /tmp/marker"})");
            return exec.status == 200;
        },
        60s, 500ms))
        << exec.status << " " << exec.body;
    EXPECT_EQ(json::parse(exec.body)["stdout"], "kept\n");
}

}  // namespace
}  // namespace airlock
