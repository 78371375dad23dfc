// Nodes that advertise https: node health, placement, forwarded REST and
// WSS, and fleet-wide lists between them over TLS verified against
// --cluster-ca; a node that does not trust the fleet's CA forwards nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/beast/http/verb.hpp>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "support/DaemonProcess.hpp"
#include "support/EtcdCluster.hpp"
#include "support/HttpsClient.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using boost::beast::http::verb;
using nlohmann::json;

class FleetTls : public ::testing::Test {
  protected:
    struct Node {
        std::string name, dataDir;
        int port = 0;
        std::unique_ptr<test::Daemon> daemon;
    };

    // A node whose certificate comes from certDir, trusting caFile for others.
    static void startNode(Node& n, const std::string& name, const std::string& certDir,
                          const std::string& caFile, int index) {
        n.name = name;
        // A parent of its own: the log goes beside the data dir.
        ::mkdir((dir_->path() + "/" + name).c_str(), 0755);  // QEMU walks through it
        n.dataDir = dir_->path() + "/" + name + "/data";
        n.port = test::freePort();
        n.daemon = std::make_unique<test::Daemon>(
            n.dataDir, n.port,
            std::vector<std::string>{
                "--cluster-etcd", etcd_->clientUrl(0), "--node-name", name, "--advertise-url",
                "https://127.0.0.1:" + std::to_string(n.port), "--cluster-token-file",
                dir_->path() + "/cluster.token", "--tls-cert", certDir + "/server.pem", "--tls-key",
                certDir + "/server.key", "--cluster-ca", caFile, "--qemu-uid-range",
                std::to_string(330000 + 8192 * index) + ":4096"});
    }

    static void SetUpTestSuite() {
        if (!test::templatesBuilt() || !test::EtcdCluster::available()) return;
        dir_ = std::make_unique<test::TempDir>();
        ::mkdir((dir_->path() + "/fleet-ca").c_str(), 0700);
        ::mkdir((dir_->path() + "/other-ca").c_str(), 0700);
        if (!test::makeTestCertificates(dir_->path() + "/fleet-ca") ||
            !test::makeTestCertificates(dir_->path() + "/other-ca"))
            return;
        etcd_ = std::make_unique<test::EtcdCluster>(1);
        {
            std::ofstream out(dir_->path() + "/cluster.token");
            out << "fleet-tls-test-token-0123456789abcdef0123456789abcdef\n";
        }
        ::chmod((dir_->path() + "/cluster.token").c_str(), 0600);
        const std::string ca = dir_->path() + "/fleet-ca";
        for (int i = 0; i < 2; ++i)
            startNode(nodes_[i], i == 0 ? "tls-a" : "tls-b", ca, ca + "/ca.pem", i);
        std::ifstream keyFile(nodes_[0].dataDir + "/admin.key");
        std::getline(keyFile, key_);
    }
    static void TearDownTestSuite() {
        bool failed = ::testing::UnitTest::GetInstance()->failed_test_count() > 0;
        if (!sandbox_.empty() && nodes_[0].daemon) {
            boost::asio::io_context ioc;
            auto ctx = trusted();
            try {
                auto tls = test::connectTls(ioc, ctx, nodes_[0].port);
                test::httpsRequest(*tls, verb::delete_, "/v1/sandboxes/" + sandbox_, key_);
            } catch (const std::exception&) {
                // shutDown below kills what is left
            }
        }
        for (auto* n : {&stranger_, &nodes_[0], &nodes_[1]}) {
            if (n->daemon) n->daemon->shutDown(failed);
            n->daemon.reset();
        }
        etcd_.reset();
        dir_.reset();
    }
    void SetUp() override {
        if (!test::templatesBuilt()) GTEST_SKIP() << "run scripts/setup first";
        if (!test::EtcdCluster::available()) GTEST_SKIP() << "etcd is not installed";
        ASSERT_TRUE(nodes_[1].daemon) << "the suite's nodes did not start";
    }
    static boost::asio::ssl::context trusted() {
        return test::clientContext({dir_->path() + "/fleet-ca/ca.pem"});
    }
    // One request over its own TLS connection.
    static test::HttpsAnswer call(const Node& n, verb method, const std::string& target,
                                  const std::string& body = {}) {
        boost::asio::io_context ioc;
        auto ctx = trusted();
        auto tls = test::connectTls(ioc, ctx, n.port);
        return test::httpsRequest(*tls, method, target, key_, body);
    }

    static std::unique_ptr<test::TempDir> dir_;
    static std::unique_ptr<test::EtcdCluster> etcd_;
    static Node nodes_[2];
    static Node stranger_;
    static std::string key_, sandbox_;
};
std::unique_ptr<test::TempDir> FleetTls::dir_;
std::unique_ptr<test::EtcdCluster> FleetTls::etcd_;
FleetTls::Node FleetTls::nodes_[2];
FleetTls::Node FleetTls::stranger_;
std::string FleetTls::key_;
std::string FleetTls::sandbox_;

TEST_F(FleetTls, NodesThatAdvertiseHttpsForwardRestAndWssToEachOver) {
    // Each node reaches the other's /healthz over verified TLS to call it healthy.
    std::string listedNodes;
    bool bothHealthy = test::waitFor(
        [&] {
            auto nodes = call(nodes_[0], verb::get, "/v1/nodes");
            listedNodes = nodes.body;
            if (nodes.status != 200) return false;
            auto j = json::parse(nodes.body);
            int healthy = 0;
            for (const auto& n : j["nodes"]) healthy += n["health"] == "healthy" ? 1 : 0;
            return healthy == 2;
        },
        std::chrono::seconds(20), std::chrono::milliseconds(200));
    EXPECT_TRUE(bothHealthy) << listedNodes;

    auto created =
        call(nodes_[0], verb::post, "/v1/sandboxes", R"({"template":"minimal","timeout_s":600})");
    ASSERT_EQ(created.status, 201) << created.body;
    auto record = json::parse(created.body);
    sandbox_ = record["id"];
    const Node& through = record["node"] == nodes_[0].name ? nodes_[1] : nodes_[0];
    ASSERT_NE(record["node"], through.name);

    auto exec = call(through, verb::post, "/v1/sandboxes/" + sandbox_ + "/exec",
                     R"({"shell":"echo tls-$((6*7)) > /tmp/t; cat /tmp/t; exit 3"})");
    ASSERT_EQ(exec.status, 200) << exec.body;
    EXPECT_EQ(json::parse(exec.body)["stdout"], "tls-42\n");
    EXPECT_EQ(json::parse(exec.body)["exit_code"], 3);

    auto list = call(through, verb::get, "/v1/sandboxes");
    ASSERT_EQ(list.status, 200);
    bool listed = false;
    auto listJson = json::parse(list.body);
    for (const auto& s : listJson["sandboxes"])
        listed = listed || (s["id"] == sandbox_ && s["node"] == record["node"]);
    EXPECT_TRUE(listed) << list.body;

    // A WebSocket upgrade carried through the forwarding node's TLS pipe.
    boost::asio::io_context ioc;
    auto ctx = trusted();
    auto run = test::runOverWss(ioc, ctx, through.port, key_, sandbox_,
                                R"({"cmd":["sh","-c","cat /tmp/t; exit 4"]})");
    EXPECT_EQ(run.output, "tls-42\n");
    EXPECT_EQ(run.exitCode, 4);
}

TEST_F(FleetTls, ANodeThatDoesNotTrustTheFleetsCaForwardsNothing) {
    ASSERT_FALSE(sandbox_.empty()) << "runs after the forwarding test, on its sandbox";
    // Its own certificate and --cluster-ca come from a CA the others do not share.
    const std::string other = dir_->path() + "/other-ca";
    startNode(stranger_, "tls-stranger", other, other + "/ca.pem", 2);
    boost::asio::io_context ioc;
    auto ctx = test::clientContext({other + "/ca.pem"});
    auto tls = test::connectTls(ioc, ctx, stranger_.port);
    auto got = test::httpsRequest(*tls, verb::get, "/v1/sandboxes/" + sandbox_, key_);
    EXPECT_EQ(got.status, 503) << got.body;
    EXPECT_EQ(json::parse(got.body)["error"]["code"], "node_unavailable") << got.body;
    EXPECT_NE(got.body.find("TLS"), std::string::npos) << got.body;
}

}  // namespace
}  // namespace airlock
