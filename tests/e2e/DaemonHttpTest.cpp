// End to end: the real airlockd binary, driven over real HTTP by the CLI's
// HTTP client and by the CLI itself; then SIGKILLed and restarted on the
// same data dir to show that running sandboxes are adopted.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <fcntl.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/CliApp.hpp"
#include "cli/HttpClient.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

int freePort() {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(s);
    return ntohs(a.sin_port);
}

class Daemon {
public:
    Daemon(const std::string& dataDir, int port) : dataDir_(dataDir), port_(port) { start(); }
    ~Daemon() { stop(SIGTERM); }

    void start() {
        pid_ = ::fork();
        if (pid_ == 0) {
            int log = ::open((dataDir_ + "/../airlockd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            ::dup2(log, 1);
            ::dup2(log, 2);
            std::string listen = "127.0.0.1:" + std::to_string(port_);
            ::execl(AIRLOCK_BIN_DIR "/airlockd", "airlockd", "--listen", listen.c_str(), "--data-dir",
                    dataDir_.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
        cli::HttpClient probe(url(), "");
        bool up = test::waitFor(
            [&] {
                try {
                    return probe.request("GET", "/healthz", {}, {}, 5s).status == 200;
                } catch (...) {
                    return false;
                }
            },
            90s, 100ms);
        if (!up) throw std::runtime_error("airlockd did not come up");
    }

    void stop(int sig) {
        if (pid_ <= 0) return;
        ::kill(pid_, sig);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
    std::string dataDir_;
    int port_;
    pid_t pid_ = -1;
};

class DaemonHttp : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(test::templatesBuilt()) << "run scripts/setup first";
        dataDir = tmp.path() + "/data";
        daemon = std::make_unique<Daemon>(dataDir, freePort());
        std::ifstream keyFile(dataDir + "/admin.key");
        std::getline(keyFile, key);
        client = std::make_unique<cli::HttpClient>(daemon->url(), key);
    }

    void TearDown() override {
        if (HasFailure()) {
            std::ifstream log(tmp.path() + "/airlockd.log");
            std::cerr << "---- airlockd log ----\n" << log.rdbuf() << "\n";
        }
        // Whatever a failed test left behind goes with the data dir's sandboxes.
        if (client) {
            try {
                auto list = json::parse(client->request("GET", "/v1/sandboxes").body);
                for (const auto& s : list["sandboxes"]) client->request("DELETE", "/v1/sandboxes/" + s["id"].get<std::string>());
            } catch (...) {
            }
        }
        daemon.reset();
    }

    test::TempDir tmp;
    std::string dataDir, key;
    std::unique_ptr<Daemon> daemon;
    std::unique_ptr<cli::HttpClient> client;
};

TEST_F(DaemonHttp, AdminKeyIsPrivateAndAuthIsEnforced) {
    auto perms = fs::status(dataDir + "/admin.key").permissions();
    EXPECT_EQ(perms, fs::perms::owner_read | fs::perms::owner_write);
    EXPECT_EQ(key.rfind("ak_", 0), 0u);
    std::ifstream db(dataDir + "/state.db", std::ios::binary);
    std::string dbBytes((std::istreambuf_iterator<char>(db)), std::istreambuf_iterator<char>());
    EXPECT_EQ(dbBytes.find(key), std::string::npos) << "the key must be stored hashed";

    cli::HttpClient anonymous(daemon->url(), "");
    auto health = anonymous.request("GET", "/healthz");
    EXPECT_EQ(health.status, 200);
    EXPECT_TRUE(json::parse(health.body)["accel"] == "tcg" || json::parse(health.body)["accel"] == "kvm");
    EXPECT_EQ(anonymous.request("GET", "/v1/sandboxes").status, 401);
    EXPECT_EQ(cli::HttpClient(daemon->url(), "wrong").request("GET", "/v1/sandboxes").status, 401);
    auto templates = client->request("GET", "/v1/templates");
    ASSERT_EQ(templates.status, 200);
    EXPECT_EQ(json::parse(templates.body)["templates"][0]["name"], "minimal");
}

TEST_F(DaemonHttp, BadRequestsGetJsonErrors) {
    auto malformed = client->request("POST", "/v1/sandboxes", R"({"template": "minimal",)");
    EXPECT_EQ(malformed.status, 400);
    EXPECT_EQ(json::parse(malformed.body)["error"]["code"], "bad_request");
    EXPECT_EQ(client->request("POST", "/v1/sandboxes", R"({"template":"minimal","bogus":1})").status, 400);
    EXPECT_EQ(client->request("POST", "/v1/sandboxes", R"({"template":"no-such"})").status, 404);
    EXPECT_EQ(client->request("GET", "/v1/sandboxes/sbx-does-not-exist").status, 404);
    auto huge = client->request("POST", "/v1/sandboxes", std::string(17 * 1024 * 1024, ' '));
    EXPECT_EQ(huge.status, 413);
    EXPECT_EQ(json::parse(huge.body)["error"]["code"], "payload_too_large");
}

TEST_F(DaemonHttp, SandboxLifecycleOverHttpAndCliAndAdoptionAfterSigkill) {
    auto created = client->request("POST", "/v1/sandboxes", R"({"template":"minimal","env":{"WHO":"e2e"}})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];

    auto ran = client->request("POST", "/v1/sandboxes/" + id + "/exec", R"({"shell":"echo hello-$((6*7)) $WHO"})");
    ASSERT_EQ(ran.status, 200) << ran.body;
    EXPECT_EQ(json::parse(ran.body)["stdout"], "hello-42 e2e\n");

    std::ostringstream out, err;
    int code = cli::runCli({"exec", id, "--", "sh", "-c", "echo via-cli; exit 5"}, daemon->url(), key, out, err);
    EXPECT_EQ(code, 5);
    EXPECT_EQ(out.str(), "via-cli\n");

    // SIGKILL the controller: the VM keeps running and the next airlockd adopts it.
    daemon->stop(SIGKILL);
    EXPECT_EQ(test::countQemuProcesses(id), 1);
    daemon->start();
    auto got = client->request("GET", "/v1/sandboxes/" + id);
    ASSERT_EQ(got.status, 200);
    EXPECT_EQ(json::parse(got.body)["state"], "running");
    auto again = client->request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd":["echo","adopted"]})");
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(json::parse(again.body)["stdout"], "adopted\n");

    EXPECT_EQ(client->request("DELETE", "/v1/sandboxes/" + id).status, 204);
    EXPECT_EQ(test::countQemuProcesses(id), 0);
    EXPECT_FALSE(fs::exists(dataDir + "/sandboxes/" + id));
    EXPECT_EQ(client->request("GET", "/v1/sandboxes/" + id).status, 404);
    EXPECT_EQ(client->request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd":["true"]})").status, 404);
}

TEST_F(DaemonHttp, CliRunCreatesExecsAndDeletes) {
    std::ostringstream out, err;
    int code = cli::runCli({"run", "--", "sh", "-c", "echo in-run"}, daemon->url(), key, out, err);
    EXPECT_EQ(code, 0) << err.str();
    EXPECT_EQ(out.str(), "in-run\n");
    EXPECT_EQ(json::parse(client->request("GET", "/v1/sandboxes").body)["sandboxes"].size(), 0u);
    EXPECT_TRUE(fs::is_empty(dataDir + "/sandboxes"));
}

}  // namespace
}  // namespace airlock
