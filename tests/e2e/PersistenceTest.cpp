// Persistence with real VMs: volumes that outlive their sandboxes (one
// writer, many readers, host-side files that follow no link, quotas),
// sandboxes that sleep when idle and wake on use, and pause/resume and
// hibernate/resume cycles that lose nothing, across an airlockd restart.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/Sha256.hpp"
#include "core/UrlEncode.hpp"
#include "support/ApiClient.hpp"
#include "support/DaemonProcess.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

class Persistence : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        world = new World();
        world->dataDir = world->tmp.path() + "/data";
        world->daemon = std::make_unique<test::Daemon>(world->dataDir, test::freePort());
        std::ifstream keyFile(world->dataDir + "/admin.key");
        std::getline(keyFile, world->key);
    }
    static void TearDownTestSuite() {
        test::ApiClient admin(world->daemon->url(), world->key);
        EXPECT_EQ(world->daemon->shutDown(
                      ::testing::UnitTest::GetInstance()->failed_test_count() > 0, {&admin}),
                  "")
            << "airlockd died during the tests";
        world->daemon.reset();
        delete world;
        world = nullptr;
    }
    struct World {
        test::TempDir tmp;
        std::string dataDir, key;
        std::unique_ptr<test::Daemon> daemon;
    };
    static World* world;

    static cli::HttpResult api(const std::string& method, const std::string& path,
                               const std::string& body = {},
                               const std::string& type = "application/json",
                               const std::string& key = {}) {
        test::ApiClient c(world->daemon->url(), key.empty() ? world->key : key);
        return c.request(method, path, body, type);
    }
    static json body(const cli::HttpResult& r) {
        auto j = json::parse(r.body, nullptr, false);
        return j.is_discarded() ? json::object() : j;
    }
    static std::string create(const json& request, int want = 201) {
        auto r = api("POST", "/v1/sandboxes", request.dump());
        EXPECT_EQ(r.status, want) << r.body;
        return r.status == 201 ? body(r).value("id", "") : std::string();
    }
    static std::string sh(const std::string& id, const std::string& cmd, int* code = nullptr) {
        auto r = api("POST", "/v1/sandboxes/" + id + "/exec",
                     json{{"cmd", {"sh", "-c", cmd}}, {"user", "user"}, {"timeout_s", 60}}.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        auto j = body(r);
        if (code) *code = j.value("exit_code", -1);
        auto out = j.value("stdout", std::string());
        while (!out.empty() && out.back() == '\n') out.pop_back();
        return out;
    }
    static std::string state(const std::string& id) {
        return body(api("GET", "/v1/sandboxes/" + id)).value("state", "");
    }
    static bool waitState(const std::string& id, const std::string& want,
                          std::chrono::seconds within) {
        return test::waitFor([&] { return state(id) == want; }, within);
    }
    static void remove(const std::string& id) {
        if (!id.empty()) {
            EXPECT_EQ(api("DELETE", "/v1/sandboxes/" + id).status, 204);
        }
    }
    static cli::HttpResult volumeFile(const std::string& method, const std::string& volume,
                                      const std::string& path, const std::string& data = {}) {
        return api(method, "/v1/volumes/" + volume + "/files?path=" + urlEncode(path), data,
                   "application/octet-stream");
    }
    // How many QEMU processes name this sandbox ("[q]emu": not the shell
    // that runs pgrep, whose command line names it too).
    static int qemusOf(const std::string& id) {
        return std::stoi("0" + test::commandLine("pgrep -fc '[q]emu.*" + id + "' || true"));
    }
};
Persistence::World* Persistence::world = nullptr;

TEST_F(Persistence, AVolumeOutlivesItsSandboxesWithOneWriterAndManyReaders) {
    ASSERT_EQ(api("POST", "/v1/volumes", R"({"name":"cache","size_gib":1})").status, 201);
    EXPECT_EQ(api("POST", "/v1/volumes", R"({"name":"cache","size_gib":1})").status, 409);
    EXPECT_EQ(api("POST", "/v1/volumes", R"({"name":"Bad Name","size_gib":1})").status, 400);
    EXPECT_EQ(api("POST", "/v1/volumes", R"({"name":"x","size_gib":1,"filesystem":"xfs"})").status,
              400);
    EXPECT_EQ(api("POST", "/v1/volumes", R"({"name":"x","size_gib":1,"color":"red"})").status, 400);
    json rw{{"template", "minimal"}, {"volumes", {{{"name", "cache"}, {"path", "/mnt/cache"}}}}};
    json ro{{"template", "minimal"},
            {"volumes", {{{"name", "cache"}, {"path", "/mnt/cache"}, {"read_only", true}}}}};
    EXPECT_EQ(api("POST", "/v1/sandboxes",
                  json{{"template", "minimal"},
                       {"volumes", {{{"name", "cache"}, {"path", "/etc"}}}}}
                      .dump())
                  .status,
              400)
        << "not over a system directory";
    EXPECT_EQ(api("POST", "/v1/sandboxes",
                  json{{"template", "minimal"}, {"volumes", {{{"name", "nope"}, {"path", "/mnt/x"}}}}}
                      .dump())
                  .status,
              404);

    auto a = create(rw);
    EXPECT_EQ(sh(a, "echo kept > /mnt/cache/f.txt && sync && stat -c %U /mnt/cache"), "user")
        << "the sandbox user owns a fresh volume";
    remove(a);
    auto b = create(rw);
    EXPECT_EQ(sh(b, "cat /mnt/cache/f.txt"), "kept") << "the file outlived its sandbox";
    auto refused = api("POST", "/v1/sandboxes", rw.dump());
    EXPECT_EQ(refused.status, 409);
    EXPECT_NE(refused.body.find(b), std::string::npos) << "the 409 names the holder";
    EXPECT_EQ(api("POST", "/v1/sandboxes", ro.dump()).status, 409) << "no reader beside a writer";
    auto info = body(api("GET", "/v1/volumes/cache"));
    ASSERT_EQ(info["attachments"].size(), 1u);
    EXPECT_EQ(info["attachments"][0]["sandbox"], b);
    EXPECT_EQ(api("DELETE", "/v1/volumes/cache").status, 409);
    EXPECT_EQ(volumeFile("GET", "cache", "/f.txt").status, 409) << "a writer holds it";
    int code = -1;
    sh(b, "ln -s /etc/passwd /mnt/cache/evil && ln -s /etc /mnt/cache/etcdir && sync", &code);
    EXPECT_EQ(code, 0);
    remove(b);

    auto r1 = create(ro), r2 = create(ro);
    EXPECT_EQ(sh(r1, "cat /mnt/cache/f.txt"), "kept");
    EXPECT_EQ(sh(r2, "cat /mnt/cache/f.txt"), "kept");
    EXPECT_EQ(sh(r1, "touch /mnt/cache/new 2>/dev/null && echo writable || echo refused"),
              "refused");
    EXPECT_EQ(body(api("GET", "/v1/volumes/cache"))["attachments"].size(), 2u);
    EXPECT_EQ(volumeFile("GET", "cache", "/f.txt").body, "kept\n") << "readers only: readable";
    EXPECT_EQ(volumeFile("PUT", "cache", "/g.txt", "x").status, 409) << "but not written";
    remove(r1);
    remove(r2);

    // Detached: its files through the API, read and written on the host.
    std::string blob(3 << 20, '\0');
    for (std::size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 131 % 251);
    EXPECT_EQ(volumeFile("PUT", "cache", "/dir/sub/blob.bin", blob).status, 201);
    auto back = volumeFile("GET", "cache", "/dir/sub/blob.bin");
    EXPECT_EQ(back.status, 200);
    EXPECT_TRUE(back.body == blob) << "the same bytes back";
    // Past what any request body may hold whole (64 MiB): streamed both ways.
    std::string big(70 << 20, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 17 % 253);
    auto bigPut = volumeFile("PUT", "cache", "/big.bin", big);
    EXPECT_EQ(bigPut.status, 201) << bigPut.body.substr(0, 300);
    auto bigBack = volumeFile("GET", "cache", "/big.bin");
    EXPECT_EQ(bigBack.status, 200);
    EXPECT_EQ(bigBack.body.size(), big.size());
    EXPECT_TRUE(bigBack.body == big) << "the same 70 MiB back";
    EXPECT_EQ(volumeFile("DELETE", "cache", "/big.bin").status, 204);
    EXPECT_TRUE(fs::is_empty(world->dataDir + "/volumes/.staging")) << "nothing staged is left";
    auto listing = body(volumeFile("GET", "cache", "/"));
    std::set<std::string> names;
    for (const auto& e : listing["entries"]) names.insert(e.value("name", ""));
    EXPECT_TRUE(names.count("f.txt") && names.count("evil") && names.count("dir"));
    std::ifstream passwd("/etc/passwd");
    std::string hostPasswd(std::istreambuf_iterator<char>(passwd), {});
    for (const char* path : {"/evil", "/etcdir/passwd", "/../../../../etc/passwd", "/etc/passwd"}) {
        auto r = volumeFile("GET", "cache", path);
        EXPECT_NE(r.status, 200) << path << ": " << r.body.substr(0, 200);
        EXPECT_EQ(r.body.find(hostPasswd.substr(0, 20)), std::string::npos) << path;
    }
    EXPECT_EQ(volumeFile("GET", "cache", "/missing").status, 404);

    // A new sandbox sees what the API wrote, owned by its user.
    auto c = create(rw);
    EXPECT_EQ(sh(c, "stat -c %U /mnt/cache/dir/sub/blob.bin && sha256sum < /mnt/cache/dir/sub/blob.bin | cut -c1-64"),
              "user\n" + sha256Hex(blob));
    remove(c);

    // Grown while detached; deleted once detached.
    auto grown = api("PATCH", "/v1/volumes/cache", R"({"size_gib":2})");
    EXPECT_EQ(grown.status, 200) << grown.body;
    EXPECT_EQ(body(grown).value("size_gib", 0), 2);
    EXPECT_EQ(api("PATCH", "/v1/volumes/cache", R"({"size_gib":1})").status, 400) << "only grows";
    EXPECT_EQ(api("DELETE", "/v1/volumes/cache").status, 204);
    EXPECT_EQ(api("GET", "/v1/volumes/cache").status, 404);
}

TEST_F(Persistence, VolumeQuotasBindATenant) {
    auto key = api("POST", "/v1/keys", R"({"tenant":"vq","role":"agent","name":"vq-bot"})");
    ASSERT_EQ(key.status, 201) << key.body;
    std::string agent = body(key).value("key", "");
    auto set = api("PUT", "/v1/tenants/vq",
                   R"({"quota":{"volumes":1,"volume_gib":2},"idle":{"after_s":900,"action":"hibernate"}})");
    ASSERT_TRUE(set.status == 200 || set.status == 204) << set.body;
    EXPECT_EQ(api("PUT", "/v1/tenants/vq", R"({"idle":{"after_s":900,"action":"nap"}})").status, 400);
    EXPECT_EQ(api("POST", "/v1/volumes", R"({"name":"big","size_gib":3})", "application/json", agent)
                  .status,
              429);
    EXPECT_EQ(api("POST", "/v1/volumes", R"({"name":"one","size_gib":1})", "application/json", agent)
                  .status,
              201);
    auto second = api("POST", "/v1/volumes", R"({"name":"two","size_gib":1})", "application/json", agent);
    EXPECT_EQ(second.status, 429);
    EXPECT_NE(second.body.find("quota_exceeded"), std::string::npos) << second.body;
    EXPECT_EQ(api("GET", "/v1/volumes/one").status, 404) << "another tenant's volume is not found";
    EXPECT_EQ(api("DELETE", "/v1/volumes/one", "", "application/json", agent).status, 204);
    // The tenant's idle rule is its sandboxes' unless a create names one.
    auto made = api("POST", "/v1/sandboxes", R"({"template":"minimal"})", "application/json", agent);
    ASSERT_EQ(made.status, 201) << made.body;
    EXPECT_EQ(body(made)["idle"], json({{"after_s", 900}, {"action", "hibernate"}}));
    EXPECT_EQ(api("DELETE", "/v1/sandboxes/" + body(made).value("id", ""), "", "application/json", agent)
                  .status,
              204);
}

TEST_F(Persistence, AnIdleSandboxSleepsAndAnExecOrAPreviewWakesIt) {
    auto id = create({{"template", "minimal"},
                      {"idle", {{"after_s", 3}, {"action", "pause"}}},
                      {"auto_resume", true}});
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(sh(id, "echo idle-ok > /tmp/marker && cat /tmp/marker"), "idle-ok");
    ASSERT_TRUE(waitState(id, "paused", 30s)) << state(id);
    EXPECT_EQ(body(api("GET", "/v1/sandboxes/" + id)).value("pause_reason", ""), "idle");
    // A raw request: the answer's head says how long the wake took.
    std::string payload = json{{"cmd", {"cat", "/tmp/marker"}}}.dump();
    auto raw = test::rawHttp(world->daemon->port(),
                             "POST /v1/sandboxes/" + id + "/exec HTTP/1.1\r\nHost: x\r\n"
                             "Authorization: Bearer " + world->key + "\r\n"
                             "Content-Type: application/json\r\nContent-Length: " +
                                 std::to_string(payload.size()) + "\r\nConnection: close\r\n\r\n" +
                                 payload,
                             60);
    EXPECT_NE(raw.find("HTTP/1.1 200"), std::string::npos) << raw.substr(0, 300);
    EXPECT_NE(raw.find("idle-ok"), std::string::npos);
    auto header = raw.find("Airlock-Resumed-Ms: ");
    EXPECT_NE(header, std::string::npos) << raw.substr(0, 400);
    EXPECT_EQ(state(id), "running");

    // A preview request wakes it too.
    auto web = api("POST", "/v1/sandboxes/" + id + "/processes",
                   R"({"shell":"mkdir -p /tmp/www && echo preview-ok > /tmp/www/index.html && exec busybox httpd -f -p 127.0.0.1:8000 -h /tmp/www"})");
    ASSERT_EQ(web.status, 201) << web.body;
    auto exposed = api("POST", "/v1/sandboxes/" + id + "/ports", R"({"port":8000})");
    ASSERT_EQ(exposed.status, 201) << exposed.body;
    std::string url = body(exposed).value("url", "");
    std::string path = url.substr(url.find("/preview/"));
    test::ApiClient anonymous(world->daemon->url(), "");
    ASSERT_TRUE(test::waitFor([&] { return anonymous.request("GET", path).body == "preview-ok\n"; }, 20s));
    ASSERT_TRUE(waitState(id, "paused", 30s)) << state(id);
    EXPECT_EQ(anonymous.request("GET", path).body, "preview-ok\n") << "the preview woke it";
    EXPECT_EQ(state(id), "running");

    // Without auto_resume a sleeping sandbox stays asleep: 409.
    auto plain = create({{"template", "minimal"}, {"idle", {{"after_s", 2}}}});
    ASSERT_TRUE(waitState(plain, "paused", 30s));
    EXPECT_EQ(api("POST", "/v1/sandboxes/" + plain + "/exec", R"({"cmd":["true"]})").status, 409);
    EXPECT_EQ(api("POST", "/v1/sandboxes", R"({"template":"minimal","idle":{"after_s":0}})").status,
              400);
    EXPECT_EQ(api("POST", "/v1/sandboxes", R"({"template":"minimal","idle":{"action":"nap"}})").status,
              400);
    remove(plain);
    remove(id);
}

// 20 pause/resume and 5 hibernate/resume cycles of one sandbox with a
// process writing a file every 0.2 s; its disk and memory files checked
// after each; airlockd restarted in the middle, while it is hibernated.
TEST_F(Persistence, PauseAndHibernateCyclesLoseNothingAcrossARestart) {
    auto id = create({{"template", "debian"}, {"timeout_s", 1800}});
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(sh(id, "echo disk > /home/user/keep.txt && echo mem > /dev/shm/keep && sync && echo ok"),
              "ok");
    auto proc = api("POST", "/v1/sandboxes/" + id + "/processes",
                    R"({"shell":"while true; do date +%s%N >> /tmp/tick; sleep 0.2; done"})");
    ASSERT_EQ(proc.status, 201) << proc.body;
    std::string procId = body(proc).value("id", "");
    auto ticks = [&] { return std::stoi("0" + sh(id, "wc -l < /tmp/tick")); };
    ASSERT_TRUE(test::waitFor([&] { return ticks() > 0; }, 10s));
    auto check = [&](const std::string& what) {
        EXPECT_EQ(state(id), "running") << what;
        EXPECT_EQ(sh(id, "cat /home/user/keep.txt /dev/shm/keep | tr '\\n' ' '"), "disk mem ") << what;
        int before = ticks();
        EXPECT_TRUE(test::waitFor([&] { return ticks() > before; }, 10s)) << what << ": the process goes on";
        EXPECT_EQ(body(api("GET", "/v1/sandboxes/" + id + "/processes/" + procId)).value("state", ""),
                  "running")
            << what;
    };
    for (int i = 1; i <= 20; ++i) {
        ASSERT_EQ(api("POST", "/v1/sandboxes/" + id + "/pause").status, 200);
        EXPECT_EQ(state(id), "paused");
        ASSERT_EQ(api("POST", "/v1/sandboxes/" + id + "/resume").status, 200);
        if (i % 5 == 0) check("pause cycle " + std::to_string(i));
    }
    std::string stateFile = world->dataDir + "/hibernated/" + id + ".state";
    for (int i = 1; i <= 5; ++i) {
        auto h = api("POST", "/v1/sandboxes/" + id + "/pause", R"({"hibernate":true})");
        ASSERT_EQ(h.status, 200) << h.body;
        EXPECT_EQ(body(h).value("state", ""), "hibernated");
        EXPECT_EQ(qemusOf(id), 0) << "no QEMU process while hibernated";
        EXPECT_GT(fs::file_size(stateFile), 1u << 20) << "its memory is on disk";
        if (i == 3) {
            world->daemon->stop(SIGTERM);
            world->daemon->start();
            EXPECT_EQ(state(id), "hibernated") << "still hibernated after the restart";
        }
        auto r = api("POST", "/v1/sandboxes/" + id + "/resume");
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_FALSE(fs::exists(stateFile));
        check("hibernate cycle " + std::to_string(i));
    }
    remove(id);
}

}  // namespace
}  // namespace airlock
