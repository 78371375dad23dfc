// End to end: the real airlockd binary, driven over real HTTP by the CLI's
// HTTP client and by the CLI itself; then SIGKILLed and restarted on the
// same data dir to show that running sandboxes are adopted.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "cli/CliApp.hpp"
#include "cli/ExecStreamClient.hpp"
#include "core/SecretCipher.hpp"
#include "core/Sha256.hpp"
#include "support/ApiClient.hpp"
#include "support/DaemonProcess.hpp"
#include "support/OpenApiRoutes.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using test::Daemon;
using test::freePort;
using test::openWsExec;
using test::rawHttp;
using namespace std::chrono_literals;

class DaemonHttp : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(test::templatesBuilt()) << "run scripts/setup first";
        dataDir = tmp.path() + "/data";
        daemon = std::make_unique<Daemon>(dataDir, freePort(), daemonArgs);
        std::ifstream keyFile(dataDir + "/admin.key");
        std::getline(keyFile, key);
        client = std::make_unique<test::ApiClient>(daemon->url(), key);
    }

    void TearDown() override {
        // A daemon that died under a test fails it, even if every request
        // before the crash was answered.
        if (daemon) {
            EXPECT_EQ(daemon->shutDown(HasFailure(), {client.get()}), "")
                << "airlockd died during the test";
        }
        daemon.reset();
    }

    std::vector<std::string> daemonArgs;
    test::TempDir tmp;
    std::string dataDir, key;
    std::unique_ptr<Daemon> daemon;
    std::unique_ptr<test::ApiClient> client;
};

TEST_F(DaemonHttp, AdminKeyIsPrivateAndAuthIsEnforced) {
    auto perms = fs::status(dataDir + "/admin.key").permissions();
    EXPECT_EQ(perms, fs::perms::owner_read | fs::perms::owner_write);
    EXPECT_EQ(key.rfind("ak_", 0), 0u);
    std::ifstream db(dataDir + "/state.db", std::ios::binary);
    std::string dbBytes((std::istreambuf_iterator<char>(db)), std::istreambuf_iterator<char>());
    EXPECT_EQ(dbBytes.find(key), std::string::npos) << "the key must be stored hashed";

    test::ApiClient anonymous(daemon->url(), "");
    auto health = anonymous.request("GET", "/healthz");
    EXPECT_EQ(health.status, 200);
    EXPECT_TRUE(json::parse(health.body)["accel"] == "tcg" ||
                json::parse(health.body)["accel"] == "kvm");
    EXPECT_EQ(anonymous.request("GET", "/v1/sandboxes").status, 401);
    EXPECT_EQ(test::ApiClient(daemon->url(), "wrong").request("GET", "/v1/sandboxes").status, 401);
    auto templates = client->request("GET", "/v1/templates");
    ASSERT_EQ(templates.status, 200);
    bool hasMinimal = false;
    json templateList = json::parse(templates.body);
    for (const auto& t : templateList["templates"])
        hasMinimal = hasMinimal || t["name"] == "minimal";
    EXPECT_TRUE(hasMinimal) << templates.body;
}

TEST_F(DaemonHttp, BadRequestsGetJsonErrors) {
    auto malformed = client->request("POST", "/v1/sandboxes", R"({"template": "minimal",)");
    EXPECT_EQ(malformed.status, 400);
    EXPECT_EQ(json::parse(malformed.body)["error"]["code"], "bad_request");
    EXPECT_EQ(
        client->request("POST", "/v1/sandboxes", R"({"template":"minimal","bogus":1})").status,
        400);
    EXPECT_EQ(client->request("POST", "/v1/sandboxes", R"({"template":"no-such"})").status, 404);
    EXPECT_EQ(client->request("GET", "/v1/sandboxes/sbx-does-not-exist").status, 404);
    auto huge = client->request("POST", "/v1/sandboxes", std::string(17 * 1024 * 1024, ' '));
    EXPECT_EQ(huge.status, 413);
    EXPECT_EQ(json::parse(huge.body)["error"]["code"], "payload_too_large");
}

TEST_F(DaemonHttp, SandboxLifecycleOverHttpAndCliAndAdoptionAfterSigkill) {
    auto created =
        client->request("POST", "/v1/sandboxes", R"({"template":"minimal","env":{"WHO":"e2e"}})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];

    auto ran = client->request("POST", "/v1/sandboxes/" + id + "/exec",
                               R"({"shell":"echo hello-$((6*7)) $WHO"})");
    ASSERT_EQ(ran.status, 200) << ran.body;
    EXPECT_EQ(json::parse(ran.body)["stdout"], "hello-42 e2e\n");

    std::ostringstream out, err;
    int code = cli::runCli({"exec", id, "--", "sh", "-c", "echo via-cli; exit 5"}, daemon->url(),
                           key, out, err);
    EXPECT_EQ(code, 5);
    EXPECT_EQ(out.str(), "via-cli\n");

    auto started = client->request("POST", "/v1/sandboxes/" + id + "/processes",
                                   R"({"shell":"while true; do echo beat; sleep 0.2; done"})");
    ASSERT_EQ(started.status, 201) << started.body;
    std::string procId = json::parse(started.body)["id"];

    // SIGKILL the controller: the VM keeps running and the next airlockd adopts it.
    daemon->stop(SIGKILL);
    EXPECT_EQ(test::countQemuProcesses(id), 1);
    daemon->start();
    auto got = client->request("GET", "/v1/sandboxes/" + id);
    ASSERT_EQ(got.status, 200);
    EXPECT_EQ(json::parse(got.body)["state"], "running");
    auto again =
        client->request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd":["echo","adopted"]})");
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(json::parse(again.body)["stdout"], "adopted\n");
    // The background process started before the SIGKILL still runs and still logs.
    auto proc = client->request("GET", "/v1/sandboxes/" + id + "/processes/" + procId);
    ASSERT_EQ(proc.status, 200) << proc.body;
    EXPECT_EQ(json::parse(proc.body)["state"], "running");
    std::uint64_t before = json::parse(proc.body)["output_bytes"];
    ASSERT_TRUE(test::waitFor(
        [&] {
            return json::parse(
                       client->request("GET", "/v1/sandboxes/" + id + "/processes/" + procId)
                           .body)["output_bytes"]
                       .get<std::uint64_t>() > before;
        },
        10s));

    EXPECT_EQ(client->request("DELETE", "/v1/sandboxes/" + id).status, 204);
    EXPECT_EQ(test::countQemuProcesses(id), 0);
    EXPECT_FALSE(fs::exists(dataDir + "/sandboxes/" + id));
    EXPECT_EQ(client->request("GET", "/v1/sandboxes/" + id).status, 404);
    EXPECT_EQ(
        client->request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd":["true"]})").status,
        404);
}

// Crash safety: SIGKILL while a clone is being made, with a paused sandbox and
// a snapshot on disk; the restarted daemon must list exactly what exists.
// The daemon as it runs by default, with a spare VM per shape.
class DaemonHttpWithSpares : public DaemonHttp {
  protected:
    DaemonHttpWithSpares() { daemonArgs = {"--spare-vms", "1"}; }
};

TEST_F(DaemonHttpWithSpares, SigkillMidCloneLeavesAConsistentStateAndNoOrphans) {
    auto created = client->request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string source = json::parse(created.body)["id"];
    auto marked =
        client->request("POST", "/v1/sandboxes/" + source + "/exec",
                        R"({"shell":"echo m-$$ > /dev/shm/marker; cat /dev/shm/marker"})");
    std::string marker = json::parse(marked.body)["stdout"];
    auto snap = client->request("POST", "/v1/sandboxes/" + source + "/snapshots");
    ASSERT_EQ(snap.status, 201) << snap.body;
    std::string snapId = json::parse(snap.body)["id"];
    ASSERT_EQ(client->request("POST", "/v1/sandboxes/" + source + "/pause").status, 200);

    std::thread inFlight([&] {
        try {
            test::ApiClient(daemon->url(), key)
                .request("POST", "/v1/sandboxes", R"({"snapshot":")" + snapId + R"("})", {}, 30s);
        } catch (...) {
        }
    });
    std::this_thread::sleep_for(250ms);
    daemon->stop(SIGKILL);
    inFlight.join();
    daemon->start();

    std::set<std::string> listed;
    auto listing = client->request("GET", "/v1/sandboxes");
    ASSERT_EQ(listing.status, 200) << listing.body;
    json listedJson =
        json::parse(listing.body);  // named: a temporary would die before the loop body
    for (const auto& s : listedJson["sandboxes"]) {
        listed.insert(s["id"].get<std::string>());
        if (s["id"] == source) {
            EXPECT_EQ(s["state"], "paused");
        } else {
            EXPECT_EQ(s["state"], "running") << "a clone is either whole or gone";
            auto r =
                client->request("POST", "/v1/sandboxes/" + s["id"].get<std::string>() + "/exec",
                                R"({"cmd":["cat","/dev/shm/marker"]})");
            EXPECT_EQ(json::parse(r.body)["stdout"], marker);
        }
    }
    EXPECT_TRUE(listed.count(source)) << listing.body;
    std::set<std::string> dirs;
    for (const auto& e : fs::directory_iterator(dataDir + "/sandboxes"))
        dirs.insert(e.path().filename().string());
    EXPECT_EQ(dirs, listed) << "no sandbox dir without a sandbox, no sandbox without its dir";
    EXPECT_EQ(test::countQemuProcesses(dataDir), static_cast<int>(listed.size()))
        << "no orphan QEMU";

    // The paused source kept its memory; the snapshot still clones.
    ASSERT_EQ(client->request("POST", "/v1/sandboxes/" + source + "/resume").status, 200);
    auto again = client->request("POST", "/v1/sandboxes/" + source + "/exec",
                                 R"({"cmd":["cat","/dev/shm/marker"]})");
    EXPECT_EQ(json::parse(again.body)["stdout"], marker);
    auto clone = client->request("POST", "/v1/sandboxes", R"({"snapshot":")" + snapId + R"("})");
    ASSERT_EQ(clone.status, 201) << clone.body;

    json remaining = json::parse(client->request("GET", "/v1/sandboxes").body);
    for (const auto& s : remaining["sandboxes"])
        EXPECT_EQ(client->request("DELETE", "/v1/sandboxes/" + s["id"].get<std::string>()).status,
                  204);
    EXPECT_EQ(client->request("DELETE", "/v1/snapshots/" + snapId).status, 204);
    EXPECT_EQ(client->request("GET", "/v1/snapshots/" + snapId).status, 404);
    EXPECT_TRUE(test::waitFor([&] { return test::countQemuProcesses(dataDir) == 0; }, 20s))
        << "spares go too";
    EXPECT_TRUE(fs::is_empty(dataDir + "/sandboxes"));
    EXPECT_TRUE(fs::is_empty(dataDir + "/snapshots"));
}

std::string firstLine(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

TEST_F(DaemonHttp, HostMemoryLeversReachEveryQemuAndKsmReturnsToTheHost) {
    const std::string ksmRun = "/sys/kernel/mm/ksm/run";
    std::string before = firstLine(ksmRun);
    bool weTurnItOn = before == "0" && ::access(ksmRun.c_str(), W_OK) == 0;
    daemon.reset();  // one daemon at a time: KSM is host-wide
    auto ownDir = tmp.path() + "/ksm-data";
    auto ksmDaemon = std::make_unique<Daemon>(ownDir, freePort(), std::vector<std::string>{"--ksm", "auto"});
    std::string ownKey = firstLine(ownDir + "/admin.key");
    test::ApiClient c(ksmDaemon->url(), ownKey);
    auto health = json::parse(c.request("GET", "/healthz").body);
    auto memory = health["limits"]["host_memory"];
    EXPECT_EQ(memory["free_page_reporting"], true);
    EXPECT_EQ(memory["tcg_cache_mib"], health["accel"] == "tcg" ? 16 : 0);
    if (weTurnItOn) {
        EXPECT_EQ(memory["kernel_samepage_merging"], "on (airlockd)");
        EXPECT_EQ(firstLine(ksmRun), "1");
        EXPECT_TRUE(fs::exists(ownDir + "/ksm-host-settings")) << "the host's values, kept for a crash";
    }

    auto created = c.request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];
    // The guest's side: the balloon driver bound, reporting in 128 KiB blocks.
    auto probe = c.request("POST", "/v1/sandboxes/" + id + "/exec",
                           R"({"shell":"cat /sys/module/page_reporting/parameters/page_reporting_order; ls /sys/bus/virtio/drivers/virtio_balloon | grep -c virtio"})");
    ASSERT_EQ(probe.status, 200) << probe.body;
    EXPECT_EQ(json::parse(probe.body)["stdout"], "5\n1\n");
    // QEMU's side: forked by the embedded driver from airlockd, it inherits
    // no-THP and (where the kernel has it) merge-any.
    int qemus = 0;
    for (const auto& p : fs::directory_iterator("/proc")) {
        std::ifstream cmd(p.path() / "cmdline");
        std::string line((std::istreambuf_iterator<char>(cmd)), {});
        if (line.find("qemu-system") == std::string::npos || line.find(ownDir) == std::string::npos) continue;
        ++qemus;
        std::ifstream status(p.path() / "status");
        std::string text((std::istreambuf_iterator<char>(status)), {});
        EXPECT_NE(text.find("THP_enabled:\t0"), std::string::npos) << text;
        std::ifstream ksmStat(p.path() / "ksm_stat");
        std::string stat((std::istreambuf_iterator<char>(ksmStat)), {});
        if (!stat.empty()) {
            EXPECT_NE(stat.find("ksm_merge_any: yes"), std::string::npos) << stat;
        }
    }
    EXPECT_GE(qemus, 1);  // the sandbox, and its shape's spare if one started
    EXPECT_EQ(c.request("DELETE", "/v1/sandboxes/" + id).status, 204);
    ksmDaemon.reset();
    EXPECT_EQ(firstLine(ksmRun), before) << "the host's KSM setting is back";
    EXPECT_FALSE(fs::exists(ownDir + "/ksm-host-settings"));
    test::killQemusOf(ownDir);
}

TEST_F(DaemonHttp, CliManagesKeysTenantsAndListsApprovals) {
    std::ostringstream out, err;
    ASSERT_EQ(
        cli::runCli({"keys", "create", "acme", "approver", "alice"}, daemon->url(), key, out, err),
        0)
        << err.str();
    std::istringstream created(out.str());
    std::string id, secret;
    created >> id >> secret;
    EXPECT_EQ(id.rfind("key-", 0), 0u);
    std::ostringstream listed, e2;
    ASSERT_EQ(cli::runCli({"keys", "ls", "--tenant", "acme"}, daemon->url(), key, listed, e2), 0)
        << e2.str();
    EXPECT_NE(listed.str().find(id + "  acme  approver  alice  never"), std::string::npos)
        << listed.str();
    EXPECT_EQ(listed.str().find(secret), std::string::npos) << "no secret in a listing";
    std::ostringstream approvals, e3;
    EXPECT_EQ(cli::runCli({"approvals", "ls"}, daemon->url(), secret, approvals, e3), 0)
        << e3.str();
    std::ostringstream o4, e4;
    EXPECT_EQ(cli::runCli({"keys", "ls"}, daemon->url(), secret, o4, e4), 1)
        << "an approver manages no keys";
    EXPECT_NE(e4.str().find("HTTP 403"), std::string::npos) << e4.str();
    std::ostringstream o5, e5;
    ASSERT_EQ(cli::runCli({"keys", "rm", id}, daemon->url(), key, o5, e5), 0) << e5.str();
    std::ostringstream o6, e6;
    EXPECT_EQ(cli::runCli({"approvals", "ls"}, daemon->url(), secret, o6, e6), 1);
    EXPECT_NE(e6.str().find("HTTP 401"), std::string::npos) << "revoked at once: " << e6.str();

    std::ostringstream o7, e7;
    ASSERT_EQ(cli::runCli({"tenants", "set", "acme", R"({"quota":{"sandboxes":3}})"}, daemon->url(),
                          key, o7, e7),
              0)
        << e7.str();
    std::ostringstream o8, e8;
    ASSERT_EQ(cli::runCli({"tenants", "get", "acme"}, daemon->url(), key, o8, e8), 0) << e8.str();
    auto tenant = json::parse(o8.str());
    EXPECT_EQ(tenant["quota"]["sandboxes"], 3);
    EXPECT_EQ(tenant["usage"]["sandboxes"], 0);
    std::ostringstream o9, e9;
    EXPECT_EQ(cli::runCli({"tenants", "set", "acme", R"({"quota":{"bogus":1}})"}, daemon->url(),
                          key, o9, e9),
              1);
    EXPECT_NE(e9.str().find("HTTP 400"), std::string::npos) << e9.str();
}

TEST_F(DaemonHttp, CliRunCreatesExecsAndDeletes) {
    std::ostringstream out, err;
    int code = cli::runCli({"run", "--", "sh", "-c", "echo in-run"}, daemon->url(), key, out, err);
    EXPECT_EQ(code, 0) << err.str();
    EXPECT_EQ(out.str(), "in-run\n");
    EXPECT_EQ(json::parse(client->request("GET", "/v1/sandboxes").body)["sandboxes"].size(), 0u);
    EXPECT_TRUE(fs::is_empty(dataDir + "/sandboxes"));
}

std::string sha256File(const std::string& path) {
    std::string cmd = "sha256sum '" + path + "'";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    char buf[65] = {};
    if (!p || std::fread(buf, 1, 64, p) != 64) return "";
    ::pclose(p);
    return std::string(buf, 64);
}

// One sandbox driven through every v1 endpoint over real HTTP.
class ChannelOverHttp : public DaemonHttp {
  protected:
    void SetUp() override {
        DaemonHttp::SetUp();
        auto created = client->request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
        ASSERT_EQ(created.status, 201) << created.body;
        id = json::parse(created.body)["id"];
        port = std::stoi(daemon->url().substr(daemon->url().rfind(':') + 1));
    }
    cli::HttpResult call(const std::string& method, const std::string& path,
                         const std::string& body = {}) {
        return client->request(method, "/v1/sandboxes/" + id + path, body);
    }
    std::string id;
    int port = 0;
};

TEST_F(ChannelOverHttp, WebSocketExecStreamsAndNeedsTheKey) {
    std::string upgrade = "GET /v1/sandboxes/" + id +
                          "/exec/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                          "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
                          "dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    std::string answer = rawHttp(port, upgrade);
    EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << answer.substr(0, 80);

    std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> chunks;
    cli::StreamExecOptions o;
    o.argv = {"sh", "-c", "echo first; sleep 2; echo second >&2; exit 7"};
    o.output = [&](int channel, const char* d, std::size_t n) {
        chunks.push_back(
            {std::chrono::steady_clock::now(), std::to_string(channel) + ":" + std::string(d, n)});
    };
    auto t0 = std::chrono::steady_clock::now();
    int code = cli::runStreamExec(daemon->url(), key, id, o);
    auto t1 = std::chrono::steady_clock::now();
    EXPECT_EQ(code, 7);
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[0].second, "1:first\n");
    EXPECT_EQ(chunks[1].second, "2:second\n");
    EXPECT_GT(t1 - chunks[0].first, 1500ms) << "the first line must arrive long before the exit";
    EXPECT_LT(chunks[0].first - t0, 1500ms);

    std::string tty;
    cli::StreamExecOptions t;
    t.argv = {"sh", "-c", "test -t 0 && test -t 1 && echo has-tty"};
    t.tty = true;
    t.output = [&](int, const char* d, std::size_t n) { tty.append(d, n); };
    EXPECT_EQ(cli::runStreamExec(daemon->url(), key, id, t), 0);
    EXPECT_EQ(tty, "has-tty\r\n");

    EXPECT_THROW(cli::runStreamExec(daemon->url(), "wrong-key", id, o), std::runtime_error);
}

// Streams check roles and tenants before anything else: a key that may not
// use the route never gets a 101, and a revoked key stops at once.
TEST_F(ChannelOverHttp, StreamsNeverUpgradeForAWrongRoleTenantOrRevokedKey) {
    auto mint = [&](const std::string& tenant, const std::string& role) {
        auto r = client->request(
            "POST", "/v1/keys",
            R"({"tenant":")" + tenant + R"(","role":")" + role + R"(","name":"e2e"})");
        EXPECT_EQ(r.status, 201) << r.body;
        return json::parse(r.body);
    };
    auto upgrade = [&](const std::string& k) {
        // The head is enough (a 101 stays open).
        std::string answer = test::rawHttpUntil(
            port,
            "GET /v1/sandboxes/" + id +
                "/exec/ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + k +
                "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
                "dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
            [](const std::string& a) { return a.find("\r\n\r\n") != std::string::npos; });
        return answer.substr(0, 12);
    };
    auto approver = mint("admin", "approver");
    auto stranger = mint("elsewhere", "agent");
    auto revoked = mint("admin", "agent");
    EXPECT_EQ(upgrade(approver["key"]), "HTTP/1.1 101")
        << "an approver steps into the terminal (the console's), under its own key";
    EXPECT_EQ(upgrade(stranger["key"]), "HTTP/1.1 404")
        << "another tenant's sandbox does not exist for it";
    ASSERT_EQ(client->request("DELETE", "/v1/keys/" + revoked["id"].get<std::string>()).status,
              204);
    EXPECT_EQ(upgrade(revoked["key"]), "HTTP/1.1 401");
    test::ApiClient approverClient(daemon->url(), approver["key"]);
    EXPECT_EQ(
        approverClient.request("PUT", "/v1/sandboxes/" + id + "/files?path=/tmp/x", "data").status,
        403);
    EXPECT_EQ(
        approverClient.request("GET", "/v1/sandboxes/" + id + "/files?path=/etc/hostname").status,
        403);
    EXPECT_EQ(approverClient.request("GET", "/v1/sandboxes/" + id).status, 200)
        << "it may read the sandbox";
}

// Every route of api/openapi.yaml (kept equal to the route table by a unit
// test), walked with no key, a revoked key, each role and another tenant's
// key: 401, 403 and 404 exactly where the roles say, never a 101 for a key
// that may not open the stream. Allowed calls name objects that do not exist
// or carry a body with an unknown field, so the walk changes nothing.
TEST_F(ChannelOverHttp, EveryRouteAnswersEachKindOfKeyAsItsRolesSay) {
    auto mint = [&](const std::string& tenant, const std::string& role) {
        auto r = client->request("POST", "/v1/keys",
                                 R"({"tenant":")" + tenant + R"(","role":")" + role +
                                     R"(","name":"walk"})");
        EXPECT_EQ(r.status, 201) << r.body;
        return json::parse(r.body);
    };
    // The fixture's sandbox belongs to the admin key's tenant: the walk's
    // own, made by its agent key.
    std::string agentKey = mint("acme", "agent")["key"];
    std::string approverKey = mint("acme", "approver")["key"];
    std::string otherKey = mint("globex", "agent")["key"];
    auto revoked = mint("acme", "agent");
    ASSERT_EQ(client->request("DELETE", "/v1/keys/" + revoked["id"].get<std::string>()).status,
              204);
    test::ApiClient agent(daemon->url(), agentKey);
    auto created = agent.request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    ASSERT_EQ(created.status, 201) << created.body;
    const std::string real = json::parse(created.body)["id"];
    const std::string fake = "sbx-aaaaaaaaaaaaaaaaaaaa";

    // The path with its parameters filled: the sandbox's id first, harmless
    // values for the rest.
    auto fill = [](const std::string& pattern, const std::string& sandbox) {
        std::string out;
        bool firstParam = true;
        for (std::size_t i = 0; i < pattern.size(); ++i) {
            if (pattern[i] != '{') {
                out += pattern[i];
                continue;
            }
            std::size_t close = pattern.find('}', i);
            std::string name = pattern.substr(i + 1, close - i - 1);
            i = close;
            bool sandboxParam = firstParam && out == "/v1/sandboxes/";
            firstParam = false;
            if (sandboxParam) out += sandbox;
            else if (name == "name") out += "acme";
            else if (name == "pid" || name == "port") out += "4242";
            else if (out.rfind("/v1/snapshots/", 0) == 0) out += "snap-aaaaaaaaaaaaaaaaaaaa";
            else if (out.rfind("/v1/approvals/", 0) == 0) out += "apr-aaaaaaaaaaaaaaaaaaaa";
            else if (out.rfind("/v1/keys/", 0) == 0) out += "key-aaaaaaaaaaaaaaaaaaaa";
            else out += "x-aaaaaaaaaaaaaaaaaaaa";
        }
        return out;
    };
    auto statusOf = [&](const test::DocumentedRoute& route, const std::string& path,
                        const std::string& withKey) {
        if (route.path.size() > 3 && route.path.substr(route.path.size() - 3) == "/ws") {
            std::string head = "GET " + path +
                               " HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: "
                               "websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
                               "dGhlIHNhbXBsZSBub25jZQ==\r\n";
            if (!withKey.empty()) head += "Authorization: Bearer " + withKey + "\r\n";
            std::string answer = rawHttp(port, head + "\r\n");
            if (answer.size() < 12) return 0;
            return std::stoi(answer.substr(9, 3));
        }
        if (route.path == "/v1/events") {  // an answer that never ends: its head is enough
            std::string head = "GET " + path + " HTTP/1.1\r\nHost: x\r\n";
            if (!withKey.empty()) head += "Authorization: Bearer " + withKey + "\r\n";
            std::string answer = test::rawHttpUntil(
                port, head + "\r\n",
                [](const std::string& a) { return a.find("\r\n\r\n") != std::string::npos; });
            if (answer.size() < 12) return 0;
            return std::stoi(answer.substr(9, 3));
        }
        test::ApiClient c(daemon->url(), withKey);
        std::string body = route.method == "GET" || route.method == "DELETE" ? "" : R"({"walk":true})";
        return c.request(route.method, path, body).status;
    };

    struct Caller {
        std::string name, key, role;
        bool otherTenant = false;
    };
    std::vector<Caller> callers{{"no key", "", ""},
                                {"a revoked key", revoked["key"], ""},
                                {"an agent key", agentKey, "agent"},
                                {"an approver key", approverKey, "approver"},
                                {"an admin key", key, "admin"},
                                {"another tenant's agent key", otherKey, "agent", true}};
    std::size_t walked = 0;
    for (const auto& route : test::documentedRoutes()) {
        if (route.roles.empty()) continue;  // public
        bool sandboxRoute = route.path.rfind("/v1/sandboxes/{", 0) == 0;
        for (const auto& caller : callers) {
            std::string what = route.method + " " + route.path + " with " + caller.name;
            if (caller.role.empty()) {
                EXPECT_EQ(statusOf(route, fill(route.path, real), caller.key), 401) << what;
            } else if (caller.otherTenant && sandboxRoute) {
                EXPECT_EQ(statusOf(route, fill(route.path, real), caller.key), 404)
                    << what << ": another tenant's sandbox does not exist for it";
            } else if (!route.has(caller.role)) {
                EXPECT_EQ(statusOf(route, fill(route.path, real), caller.key), 403) << what;
            } else {
                int status = statusOf(route, fill(route.path, fake), caller.key);
                EXPECT_TRUE(status != 401 && status != 403 && status != 101 && status >= 200 &&
                            status < 500)
                    << what << " answered " << status;
            }
            ++walked;
        }
    }
    EXPECT_GT(walked, 6u * 40u);
    // Nothing the walk was refused touched the sandbox.
    EXPECT_EQ(agent.request("GET", "/v1/sandboxes/" + real).status, 200);
    EXPECT_EQ(agent.request("DELETE", "/v1/sandboxes/" + real).status, 204);
}

// The guest's refusal of an upload can reach the daemon before the body
// does: with the cores busy (as on a loaded host) that ordering is common,
// and it once crashed airlockd. Every refused upload is a 403, and the
// daemon stays up.
TEST_F(ChannelOverHttp, RefusedUploadsUnderLoadNeverTakeTheDaemonDown) {
    std::atomic<bool> spin{true};
    std::vector<std::thread> spinners;
    for (int i = 0; i < 3; ++i)
        spinners.emplace_back([&] {
            while (spin.load(std::memory_order_relaxed)) {
            }
        });
    std::map<int, int> statuses;
    for (int i = 0; i < 150; ++i) {
        try {
            ++statuses[call("PUT", "/files?path=/etc/passwd", "x").status];
        } catch (const std::exception&) {
            ++statuses[0];  // no answer at all
        }
    }
    spin = false;
    for (auto& t : spinners) t.join();
    EXPECT_EQ(statuses, (std::map<int, int>{{403, 150}}));
    EXPECT_EQ(daemon->endedHow(), "");
    EXPECT_EQ(call("POST", "/exec", R"({"cmd":["true"]})").status, 200);
}

TEST_F(ChannelOverHttp, ClientDisconnectKillsTheCommandsProcessGroup) {
    namespace beast = boost::beast;
    namespace websocket = beast::websocket;
    boost::asio::io_context ioc;
    {
        auto wsOwner = openWsExec(
            ioc, port, key, id, R"({"shell":"(sleep 300; echo never) & echo started; sleep 301"})");
        auto& ws = *wsOwner;
        std::string output;  // binary messages only: the "started" text message comes first
        while (output.find("started\n") == std::string::npos) {
            beast::flat_buffer b;
            ws.read(b);
            if (ws.got_binary())
                output += beast::buffers_to_string(b.data());
            else
                ASSERT_EQ(beast::buffers_to_string(b.data()).find("\"exit\""), std::string::npos);
        }
        auto running =
            json::parse(call("POST", "/exec", R"({"shell":"ps | grep -c '[s]leep 30'"})").body);
        EXPECT_GE(std::stoi(running["stdout"].get<std::string>()), 2)
            << "both sleeps (and their shells) run: "
            << call("POST", "/exec", R"({"shell":"ps"})").body;
        beast::get_lowest_layer(ws)
            .socket()
            .close();  // no close handshake: the client just vanishes
    }
    EXPECT_TRUE(test::waitFor(
        [&] {
            return call("POST", "/exec", R"({"shell":"ps | grep -c '[s]leep 30'"})")
                       .body.find("\"stdout\":\"0\\n\"") != std::string::npos;
        },
        15s))
        << "the command and its background child must die with the client";
}

TEST_F(ChannelOverHttp, FilesAndDirectories) {
    test::TempDir local;
    std::string src = local.path() + "/in.bin";
    {
        std::ofstream f(src, std::ios::binary);
        for (std::uint64_t i = 0; i < 3000000; ++i) f.put(static_cast<char>(i * 7919 % 251));
    }
    auto put = client->putFile("/v1/sandboxes/" + id + "/files?path=/tmp/up/../data/in.bin", src);
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(json::parse(put.body)["path"], "/tmp/data/in.bin")
        << "'..' is resolved inside the guest";
    std::string got;
    auto get = client->getStreaming("/v1/sandboxes/" + id + "/files?path=/tmp/data/in.bin",
                                    [&](const char* d, std::size_t n) { got.append(d, n); });
    EXPECT_EQ(get.status, 200);
    std::ifstream in(src, std::ios::binary);
    std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(got, original);

    auto listing = call("GET", "/fs?path=/tmp/data");
    ASSERT_EQ(listing.status, 200);
    EXPECT_EQ(json::parse(listing.body)["entries"][0]["name"], "in.bin");
    EXPECT_EQ(call("GET", "/fs?path=relative").status, 400);
    EXPECT_EQ(call("GET", "/fs").status, 400);
    EXPECT_EQ(call("GET", "/files?path=/tmp/none").status, 404);
    EXPECT_EQ(call("GET", "/files?path=/tmp").status, 409);
    EXPECT_EQ(call("POST", "/fs/mkdir", R"({"path":"/tmp/newdir/sub"})").status, 201);
    EXPECT_EQ(
        call("POST", "/fs/move", R"({"from":"/tmp/data/in.bin","to":"/tmp/newdir/sub/moved.bin"})")
            .status,
        200);
    EXPECT_EQ(call("DELETE", "/files?path=/tmp/newdir").status, 409) << "not empty, not recursive";
    EXPECT_EQ(call("DELETE", "/files?path=/tmp/newdir&recursive=1").status, 204);
    EXPECT_EQ(call("GET", "/fs?path=/tmp/newdir").status, 404);
    EXPECT_EQ(call("PUT", "/files?path=/etc/passwd", "x").status, 403)
        << "the default user cannot write there";
    // Process environments hold secrets, unmasked: procfs is not downloadable, not even through a
    // symlink.
    EXPECT_EQ(call("GET", "/files?path=/proc/self/environ").status, 403);
    EXPECT_EQ(
        call("POST", "/exec", R"({"cmd":["ln","-s","/proc/1/environ","/tmp/env-link"]})").status,
        403)
        << "the command policy already refuses naming an environ file";
    EXPECT_EQ(call("POST", "/exec", R"({"cmd":["ln","-s","/proc/self","/tmp/proc-link"]})").status,
              200);
    EXPECT_EQ(call("GET", "/files?path=/tmp/proc-link/environ").status, 403);

    // Every change made through the API is in the audit log, the upload with its digest.
    auto audit = json::parse(call("GET", "/audit?type=file.").body)["events"];
    std::vector<std::string> types;
    for (const auto& e : audit) types.push_back(e["type"]);
    EXPECT_EQ(types,
              (std::vector<std::string>{"file.written", "file.mkdir", "file.move", "file.remove"}));
    ASSERT_FALSE(audit.empty());
    EXPECT_EQ(audit[0]["data"]["path"], "/tmp/data/in.bin");
    EXPECT_EQ(audit[0]["data"]["size"], original.size());
    EXPECT_EQ(audit[0]["data"]["sha256"], sha256Hex(original));
    EXPECT_EQ(json::parse(put.body)["sha256"], sha256Hex(original));
}

TEST_F(DaemonHttp, WebSocketExecWaitsForApprovalThenStreams) {
    auto created = client->request(
        "POST", "/v1/sandboxes",
        R"({"template":"minimal","policy":{"approve":["echo gated*"]},"secrets":{"TOKEN":"s3cr3t-Value-9137"}})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];
    int port = std::stoi(daemon->url().substr(daemon->url().rfind(':') + 1));
    namespace beast = boost::beast;
    boost::asio::io_context ioc;
    auto wsOwner = openWsExec(ioc, port, key, id, R"({"shell":"echo gated $TOKEN; cat"})");
    auto& ws = *wsOwner;
    auto readText = [&] {
        beast::flat_buffer b;
        ws.read(b);
        EXPECT_FALSE(ws.got_binary());
        return json::parse(beast::buffers_to_string(b.data()));
    };
    json pending = readText();
    ASSERT_EQ(pending["type"], "pending_approval") << pending.dump();
    // stdin typed while waiting reaches the command once it runs.
    ws.text(true);
    ws.write(boost::asio::buffer(std::string(R"({"type":"stdin","data":"typed early\n"})")));
    ws.write(boost::asio::buffer(std::string(R"({"type":"eof"})")));
    auto approvals = json::parse(client->request("GET", "/v1/approvals").body)["approvals"];
    ASSERT_EQ(approvals.size(), 1u);
    EXPECT_EQ(approvals[0]["id"], pending["approval_id"]);
    auto decided =
        client->request("POST", "/v1/approvals/" + pending["approval_id"].get<std::string>(),
                        R"({"decision":"approve","reason":"ok for the test"})");
    ASSERT_EQ(decided.status, 200) << decided.body;
    EXPECT_EQ(readText()["type"], "approved");
    std::string output;
    json exitMessage;
    while (true) {
        beast::flat_buffer b;
        ws.read(b);
        std::string m = beast::buffers_to_string(b.data());
        if (ws.got_binary()) {
            output += m.substr(1);
            continue;
        }
        auto j = json::parse(m);
        if (j["type"] == "exit") {
            exitMessage = j;
            break;
        }
    }
    EXPECT_EQ(output, "gated ***\ntyped early\n") << "the secret is masked in the stream";
    EXPECT_EQ(exitMessage["exit_code"], 0);
    auto state = json::parse(client
                                 ->request("GET", "/v1/sandboxes/" + id + "/execs/" +
                                                      pending["exec_id"].get<std::string>())
                                 .body);
    EXPECT_EQ(state["state"], "exited");
    EXPECT_EQ(client->request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// A human (or an agent) at a terminal is judged line by line: the shell asks
// the command policy before each line, as a REST exec of it would be judged,
// and each line is recorded under the key that opened the terminal.
TEST_F(DaemonHttp, ATerminalJudgesEachLineItRuns) {
    auto created = client->request(
        "POST", "/v1/sandboxes",
        R"({"template":"minimal","policy":{"deny":["touch /tmp/forbidden*"],"approve":["echo gated*"]}})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];
    int port = std::stoi(daemon->url().substr(daemon->url().rfind(':') + 1));
    namespace beast = boost::beast;
    boost::asio::io_context ioc;
    auto wsOwner = openWsExec(ioc, port, key, id, R"({"cmd":["bash","-l"],"tty":true})");
    auto& ws = *wsOwner;
    std::string screen;
    std::vector<json> messages;
    // Reads until `enough`, the end of the command or a minute without a message.
    auto readUntil = [&](const std::function<bool()>& enough) {
        while (!enough()) {
            beast::flat_buffer b;
            std::optional<beast::error_code> read;
            ws.async_read(b, [&](beast::error_code ec, std::size_t) { read = ec; });
            ioc.restart();
            ioc.run_for(60s);
            if (!read) {
                beast::get_lowest_layer(ws).cancel();
                ioc.restart();
                ioc.run();
                ADD_FAILURE() << "nothing for a minute; the screen:\n" << screen;
                return false;
            }
            if (*read) {
                ADD_FAILURE() << read->message() << "; the screen:\n" << screen;
                return false;
            }
            std::string m = beast::buffers_to_string(b.data());
            if (ws.got_binary())
                screen += m.substr(1);
            else
                messages.push_back(json::parse(m));
            if (!messages.empty() && messages.back()["type"] == "exit") return enough();
        }
        return true;
    };
    auto type = [&](const std::string& line) {
        ws.binary(true);
        ws.write(boost::asio::buffer(line + "\r"));
    };
    auto has = [&](const std::string& text) {
        return [&, text] { return screen.find(text) != std::string::npos; };
    };
    ASSERT_TRUE(readUntil([&] { return !messages.empty(); }));
    ASSERT_EQ(messages[0]["type"], "started") << messages[0].dump();
    EXPECT_EQ(messages[0]["lines_judged"], true);

    type("echo hi-$((6*7))");
    ASSERT_TRUE(readUntil(has("hi-42"))) << screen;

    type("touch /tmp/forbidden-ran; echo after-$((1+1))");
    ASSERT_TRUE(readUntil(has("airlock: not run: denied by the command policy"))) << screen;
    type("echo next-$((3*3))");
    ASSERT_TRUE(readUntil(has("next-9"))) << screen;
    EXPECT_EQ(screen.find("after-2"), std::string::npos) << "the whole denied line was skipped";
    auto probe = client->request("POST", "/v1/sandboxes/" + id + "/exec",
                                 R"({"shell":"test -e /tmp/forbidden-ran"})");
    EXPECT_EQ(json::parse(probe.body)["exit_code"], 1) << "the denied line never ran";

    type("echo gated-$((2+3))");
    ASSERT_TRUE(readUntil([&] {
        return !messages.empty() && messages.back()["type"] == "line_pending_approval";
    })) << screen;
    std::string approval = messages.back()["approval_id"];
    ASSERT_TRUE(readUntil(has("held for approval " + approval))) << screen;
    EXPECT_EQ(screen.find("gated-5"), std::string::npos) << "nothing runs before the decision";
    auto decided = client->request("POST", "/v1/approvals/" + approval,
                                   R"({"decision":"approve","reason":"fine"})");
    ASSERT_EQ(decided.status, 200) << decided.body;
    ASSERT_TRUE(readUntil(has("gated-5"))) << screen;
    auto decided_ = std::find_if(messages.begin(), messages.end(),
                                 [](const json& m) { return m["type"] == "line_decided"; });
    ASSERT_NE(decided_, messages.end());
    EXPECT_EQ((*decided_)["decision"], "allow");
    EXPECT_EQ((*decided_)["approval_id"], approval);

    // The record: each line, its verdict, the terminal it came from, the key that typed it.
    auto lines = json::parse(
        client->request("GET", "/v1/sandboxes/" + id + "/audit?type=exec.line").body)["events"];
    std::vector<std::pair<std::string, std::string>> seen;
    for (const auto& e : lines) {
        seen.push_back({e["data"]["command"], e["data"]["policy"]["decision"]});
        EXPECT_EQ(e["data"]["reported_by"], "guest shell");
        EXPECT_EQ(e["data"]["by"].get<std::string>().rfind("key:", 0), 0u) << e.dump();
        EXPECT_FALSE(e["data"]["terminal"].get<std::string>().empty());
    }
    EXPECT_EQ(seen, (std::vector<std::pair<std::string, std::string>>{
                        {"echo hi-$((6*7))", "allow"},
                        {"touch /tmp/forbidden-ran; echo after-$((1+1))", "deny"},
                        {"echo next-$((3*3))", "allow"}}));
    auto gate = json::parse(client->request("GET", "/v1/approvals/" + approval).body);
    EXPECT_EQ(gate["command"], "echo gated-$((2+3))") << gate.dump();

    type("exit 3");
    readUntil([&] { return !messages.empty() && messages.back()["type"] == "exit"; });
    ASSERT_FALSE(messages.empty());
    EXPECT_EQ(messages.back()["type"], "exit");
    EXPECT_EQ(messages.back()["exit_code"], 3);
    EXPECT_EQ(client->request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// A terminal that leaves while a line waits for approval withdraws it; and a
// terminal whose shell is still running when its client vanishes ends cleanly.
TEST_F(DaemonHttp, ATerminalThatLeavesWithdrawsItsHeldLine) {
    auto created = client->request("POST", "/v1/sandboxes",
                                   R"({"template":"minimal","policy":{"approve":["echo gated*"]}})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];
    int port = std::stoi(daemon->url().substr(daemon->url().rfind(':') + 1));
    namespace beast = boost::beast;
    boost::asio::io_context ioc;
    std::string approval;
    {
        auto wsOwner = openWsExec(ioc, port, key, id, R"({"cmd":["bash"],"tty":true})");
        auto& ws = *wsOwner;
        ws.binary(true);
        ws.write(boost::asio::buffer(std::string("echo gated-1\r")));
        while (approval.empty()) {
            beast::flat_buffer b;
            ws.read(b);
            if (ws.got_binary()) continue;
            auto m = json::parse(beast::buffers_to_string(b.data()));
            ASSERT_NE(m["type"], "exit") << m.dump();
            if (m["type"] == "line_pending_approval") approval = m["approval_id"];
        }
        beast::get_lowest_layer(ws).socket().close();  // gone, no close handshake
    }
    EXPECT_TRUE(test::waitFor(
        [&] {
            auto a = json::parse(client->request("GET", "/v1/approvals/" + approval).body);
            return a["state"] == "cancelled";
        },
        15s))
        << client->request("GET", "/v1/approvals/" + approval).body;
    EXPECT_TRUE(test::waitFor(
        [&] {
            auto ps = client->request("POST", "/v1/sandboxes/" + id + "/exec",
                                      R"({"shell":"ps | grep -c '[b]ash --rcfile'"})");
            return json::parse(ps.body)["stdout"] == "0\n";
        },
        15s))
        << "the shell dies with its client";
    EXPECT_EQ(daemon->endedHow(), "");
    EXPECT_EQ(client->request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// A canary secret goes through every path that handles command text or
// output (REST exec, stderr and a failing exit, base64 and hex forms, a
// denied command and a gated one that names it, a background process's
// logs, the audit), then is looked for in every response, airlockd's log
// and every file under the data dir, in each of its forms.
TEST_F(DaemonHttp, ASecretCanaryIsInNoResponseLogOrFile) {
    const std::string canary = "canary-7f3a9c1e5b";
    auto created = client->request(
        "POST", "/v1/sandboxes",
        R"({"template":"minimal","policy":{"deny":["echo forbidden*"],"approve":["echo gated*"]},)"
        R"("secrets":{"CANARY":")" +
            canary + R"("}})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];
    std::vector<std::string> bodies{created.body};
    auto call = [&](const std::string& method, const std::string& path, const std::string& body) {
        auto r = client->request(method, "/v1/sandboxes/" + id + path, body);
        bodies.push_back(r.body);
        return r;
    };
    auto shell = [](const std::string& s) { return json{{"shell", s}}.dump(); };
    auto ran = call("POST", "/exec",
                    shell("echo \"$CANARY\"; printf %s \"$CANARY\" | base64; "
                          "printf %s \"$CANARY\" | od -An -tx1 | tr -d ' \\n'; echo; echo "
                          "\"$CANARY\" >&2; exit 3"));
    ASSERT_EQ(ran.status, 200) << ran.body;
    EXPECT_EQ(json::parse(ran.body)["exit_code"], 3);
    EXPECT_EQ(json::parse(ran.body)["stdout"], "***\n***\n***\n");
    EXPECT_EQ(json::parse(ran.body)["stderr"], "***\n");
    EXPECT_EQ(call("POST", "/exec", shell("echo literal " + canary)).status, 200);
    EXPECT_EQ(call("POST", "/exec", shell("echo forbidden " + canary)).status, 403);
    auto gated = call("POST", "/exec", shell("echo gated " + canary + " \"$CANARY\""));
    ASSERT_EQ(gated.status, 202) << gated.body;
    auto approvals = client->request("GET", "/v1/approvals");
    bodies.push_back(approvals.body);
    auto decided = client->request(
        "POST", "/v1/approvals/" + json::parse(gated.body)["approval_id"].get<std::string>(),
        R"({"decision":"approve","reason":"canary test"})");
    ASSERT_EQ(decided.status, 200) << decided.body;
    bodies.push_back(decided.body);
    std::string execPath = "/execs/" + json::parse(gated.body)["exec_id"].get<std::string>();
    ASSERT_TRUE(test::waitFor(
        [&] { return json::parse(call("GET", execPath, {}).body)["state"] == "exited"; }, 30s));
    EXPECT_EQ(json::parse(bodies.back())["stdout"], "gated *** ***\n");
    auto proc = call("POST", "/processes", shell("echo \"bg $CANARY\""));
    ASSERT_EQ(proc.status, 201) << proc.body;
    std::string procPath = "/processes/" + json::parse(proc.body)["id"].get<std::string>();
    ASSERT_TRUE(test::waitFor(
        [&] { return json::parse(call("GET", procPath, {}).body)["state"] == "exited"; }, 30s));
    auto logs = call("GET", procPath + "/logs", {});
    EXPECT_EQ(logs.body, "bg ***\n");
    call("GET", "", {});
    auto audit = call("GET", "/audit", {});
    EXPECT_NE(audit.body.find("echo literal ***"), std::string::npos)
        << "the audit keeps the command, masked";
    EXPECT_EQ(call("DELETE", "", {}).status, 204);

    std::string hex;
    for (unsigned char c : canary)
        hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
    std::string b64 = base64Encode(canary);
    std::string upperHex = hex;
    for (auto& c : upperHex) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    auto clean = [&](const std::string& where, const std::string& bytes) {
        for (const auto& form : {canary, hex, upperHex, b64.substr(0, b64.find('='))})
            if (auto at = bytes.find(form); at != std::string::npos)
                ADD_FAILURE() << where << " holds " << form << ": ..."
                              << bytes.substr(at < 100 ? 0 : at - 100, 200) << "...";
    };
    for (const auto& b : bodies) clean("a response", b);
    daemon.reset();  // its log complete, the database closed
    std::ifstream log(tmp.path() + "/airlockd.log");
    std::stringstream logBytes;
    logBytes << log.rdbuf();
    ASSERT_FALSE(logBytes.str().empty());
    clean("airlockd.log", logBytes.str());
    for (const auto& f : fs::recursive_directory_iterator(dataDir)) {
        if (!f.is_regular_file()) continue;
        std::ifstream in(f.path(), std::ios::binary);
        clean(f.path().string(), std::string(std::istreambuf_iterator<char>(in), {}));
    }
}

TEST_F(ChannelOverHttp, BackgroundProcessesAndPreviewPorts) {
    auto web = call(
        "POST", "/processes",
        R"({"shell":"mkdir -p /tmp/www && echo preview-ok > /tmp/www/index.html && exec busybox httpd -f -p 127.0.0.1:8000 -h /tmp/www"})");
    ASSERT_EQ(web.status, 201) << web.body;
    auto echo =
        call("POST", "/processes", R"({"cmd":["busybox","nc","-ll","-p","9000","-e","cat"]})");
    ASSERT_EQ(echo.status, 201) << echo.body;
    auto listed = json::parse(call("GET", "/processes").body)["processes"];
    EXPECT_EQ(listed.size(), 2u);

    auto exposed = call("POST", "/ports", R"({"port":8000})");
    ASSERT_EQ(exposed.status, 201) << exposed.body;
    std::string url = json::parse(exposed.body)["url"];
    std::string path = url.substr(url.find("/preview/"));
    test::ApiClient anonymous(daemon->url(), "");
    ASSERT_TRUE(
        test::waitFor([&] { return anonymous.request("GET", path).body == "preview-ok\n"; }, 10s));
    std::string wrongToken = path.substr(0, path.size() - 5) + "xxxx/";
    EXPECT_EQ(anonymous.request("GET", wrongToken).status, 404);
    std::string otherPort = path;
    otherPort.replace(otherPort.find("/8000/"), 6, "/9000/");
    EXPECT_EQ(anonymous.request("GET", otherPort).status, 404) << "port 9000 is not exposed";

    // An upgrade keeps the connection open and pipes bytes both ways: the
    // guest side here echoes everything it receives.
    auto exposed9000 = json::parse(call("POST", "/ports", R"({"port":9000})").body);
    std::string p9000 =
        std::string(exposed9000["url"]).substr(std::string(exposed9000["url"]).find("/preview/"));
    std::string answer;
    ASSERT_TRUE(test::waitFor(
        [&] {
            answer = test::rawHttpUntil(
                port,
                "GET " + p9000 +
                    "chat HTTP/1.1\r\nHost: x\r\nConnection: "
                    "Upgrade\r\nUpgrade: websocket\r\n\r\nframe-bytes",
                [](const std::string& a) {
                    return a.find("frame-bytes") != std::string::npos || a.rfind("HTTP/1.1 5", 0) == 0;
                });
            return answer.find("frame-bytes") != std::string::npos;
        },
        15s))
        << answer;
    EXPECT_EQ(answer.rfind("GET /chat HTTP/1.1", 0), 0u)
        << "the guest sees the path without the preview prefix";

    EXPECT_EQ(json::parse(call("GET", "/ports").body)["ports"].size(), 2u);
    EXPECT_EQ(call("DELETE", "/ports/8000").status, 204);
    EXPECT_EQ(anonymous.request("GET", path).status, 404) << "a closed port is gone";
    EXPECT_EQ(call("POST", "/ports", R"({"port":70000})").status, 400);

    // Logs, following until the process ends after a signal.
    std::string webId = json::parse(web.body)["id"];
    auto ticker = call("POST", "/processes",
                       R"({"shell":"for i in 1 2 3; do echo tick $i; sleep 0.3; done"})");
    std::string tickerId = json::parse(ticker.body)["id"];
    std::string followed;
    auto logs =
        client->getStreaming("/v1/sandboxes/" + id + "/processes/" + tickerId + "/logs?follow=1",
                             [&](const char* d, std::size_t n) { followed.append(d, n); });
    EXPECT_EQ(logs.status, 200);
    EXPECT_EQ(followed, "tick 1\ntick 2\ntick 3\n");
    EXPECT_EQ(json::parse(call("GET", "/processes/" + tickerId).body)["exit_code"], 0);
    EXPECT_EQ(call("POST", "/processes/" + webId + "/signal", R"({"signal":"TERM"})").status, 200);
    EXPECT_TRUE(test::waitFor(
        [&] { return json::parse(call("GET", "/processes/" + webId).body)["state"] == "exited"; },
        10s));
    EXPECT_EQ(call("GET", "/processes/424242").status, 404);
    EXPECT_EQ(call("POST", "/processes/" + webId + "/signal", R"({"signal":"NOPE"})").status, 400);
}

// /tmp in the minimal guest is a tmpfs (half the RAM): 2600 MiB holds 1 GiB.
// CI moves 256 MiB (the same streamed path, a quarter of the time);
// scripts/soak sets AIRLOCK_LONG_TESTS=1 for the full gigabyte.
TEST_F(DaemonHttp, GigabyteFileRoundTripKeepsItsSha256) {
    const bool full = std::getenv("AIRLOCK_LONG_TESTS") != nullptr;
    const std::uint64_t size = full ? (1ull << 30) : (256ull << 20);
    auto created = client->request(
        "POST", "/v1/sandboxes",
        full ? R"({"template":"minimal","memory_mib":2600})" : R"({"template":"minimal","memory_mib":900})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];
    std::string src = tmp.path() + "/gig.bin", back = tmp.path() + "/gig.back";
    ASSERT_EQ(std::system(("head -c " + std::to_string(size) + " /dev/urandom > " + src).c_str()), 0);
    auto put = client->putFile("/v1/sandboxes/" + id + "/files?path=/tmp/gig.bin", src);
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(json::parse(put.body)["size"], size);
    std::FILE* f = std::fopen(back.c_str(), "wb");
    auto get = client->getStreaming("/v1/sandboxes/" + id + "/files?path=/tmp/gig.bin",
                                    [f](const char* d, std::size_t n) { std::fwrite(d, 1, n, f); });
    std::fclose(f);
    EXPECT_EQ(get.status, 200);
    EXPECT_EQ(sha256File(back), sha256File(src));
    fs::remove(src);
    fs::remove(back);
}

}  // namespace
}  // namespace airlock
