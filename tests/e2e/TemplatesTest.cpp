// Templates tenants build, with real VMs: a real airlockd whose package
// upstreams are the host's npm registry and the fixture apt registry
// (tests/fixtures/package-registry.py), recipes and Dockerfiles built in
// sandboxes of their own, and sandboxes made from what they built.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/ApiClient.hpp"
#include "support/BuildPaths.hpp"
#include "support/DaemonProcess.hpp"
#include "support/HelperProcess.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;

// The fixture apt repository as the guest's only source (the proxy serves it at /fixture).
constexpr const char* kFixtureSources =
    "rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && "
    "echo 'deb [trusted=yes] http://127.0.0.1:3142/fixture ./' > /etc/apt/sources.list.d/fixture.list";

class Templates : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        world = new World();
        World& w = *world;
        std::string npmUpstream = test::hostNpmUpstream();
        ASSERT_FALSE(npmUpstream.empty()) << "the host has no npm registry configured";
        int npmPort = test::freePort(), pypiPort = test::freePort(), aptPort = test::freePort();
        w.registry = test::HelperProcess(
            {"python3", test::sourceDir() + "/tests/fixtures/package-registry.py", "--npm-port",
             std::to_string(npmPort), "--pypi-port", std::to_string(pypiPort), "--apt-port",
             std::to_string(aptPort)});
        ASSERT_TRUE(test::waitFor([&] { return test::loopbackPortOpen(aptPort); }, 20s));
        w.dataDir = w.tmp.path() + "/data";
        w.daemon = std::make_unique<test::Daemon>(
            w.dataDir, test::freePort(),
            std::vector<std::string>{"--package-upstream", npmUpstream, "--package-upstream",
                                     "apt=http://127.0.0.1:" + std::to_string(aptPort) + "/fixture"});
        std::ifstream keyFile(w.dataDir + "/admin.key");
        std::getline(keyFile, w.key);
    }
    static void TearDownTestSuite() {
        World& w = *world;
        test::ApiClient admin(w.daemon->url(), w.key);
        EXPECT_EQ(w.daemon->shutDown(::testing::UnitTest::GetInstance()->failed_test_count() > 0,
                                     {&admin}),
                  "")
            << "airlockd died during the tests";
        w.daemon.reset();
        delete world;
        world = nullptr;
    }

    struct World {
        test::TempDir tmp;
        std::string dataDir, key;
        int contexts = 0;
        test::HelperProcess registry;
        std::unique_ptr<test::Daemon> daemon;
    };
    static World* world;

    static cli::HttpResult api(const std::string& method, const std::string& path,
                               const std::string& body = {},
                               const std::string& type = "application/json") {
        test::ApiClient c(world->daemon->url(), world->key);
        return c.request(method, path, body, type);
    }
    // A build context: a tar of the given files.
    static std::string contextOf(const std::map<std::string, std::string>& files) {
        auto dir = world->tmp.path() + "/ctx-" + std::to_string(++world->contexts);
        for (const auto& [path, content] : files) {
            std::filesystem::create_directories(std::filesystem::path(dir + "/" + path).parent_path());
            std::ofstream(dir + "/" + path) << content;
        }
        EXPECT_EQ(test::commandLine("tar -C " + dir + " -cf " + dir + ".tar . && echo ok"), "ok");
        std::ifstream in(dir + ".tar", std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    // POST /v1/templates as multipart/form-data (spec, dockerfile?, context?).
    static cli::HttpResult postForm(const json& spec, const std::string& dockerfile,
                                    const std::string& context) {
        const std::string b = "airlock-test-boundary-7d1f";
        auto part = [&](const std::string& name, const std::string& type, const std::string& body) {
            return "--" + b + "\r\nContent-Disposition: form-data; name=\"" + name + "\"; filename=\"" +
                   name + "\"\r\nContent-Type: " + type + "\r\n\r\n" + body + "\r\n";
        };
        std::string body = part("spec", "application/json", spec.dump());
        if (!dockerfile.empty()) body += part("dockerfile", "text/plain", dockerfile);
        if (!context.empty()) body += part("context", "application/x-tar", context);
        body += "--" + b + "--\r\n";
        return api("POST", "/v1/templates", body, "multipart/form-data; boundary=" + b);
    }
    // Waits (bounded) for a build to end; its record.
    static json waitBuild(const std::string& name, const cli::HttpResult& submitted) {
        EXPECT_EQ(submitted.status, 202) << submitted.body;
        auto id = json::parse(submitted.body, nullptr, false).value("build_id", "");
        json last;
        test::waitFor(
            [&] {
                auto r = api("GET", "/v1/templates/" + name + "/builds/" + id);
                last = json::parse(r.body, nullptr, false);
                auto s = last.is_object() ? last.value("state", "") : "";
                return s == "ready" || s == "failed";
            },
            900s);
        return last;
    }
    static std::string logOf(const std::string& name, const std::string& buildId) {
        return api("GET", "/v1/templates/" + name + "/builds/" + buildId + "/logs").body;
    }
    static std::string sandboxFrom(const std::string& tmpl) {
        auto r = api("POST", "/v1/sandboxes", json{{"template", tmpl}}.dump());
        EXPECT_EQ(r.status, 201) << r.body;
        return json::parse(r.body, nullptr, false).value("id", "");
    }
    static json run(const std::string& sbx, const std::string& cmd, const std::string& user = "user") {
        auto r = api("POST", "/v1/sandboxes/" + sbx + "/exec",
                     json{{"cmd", {"sh", "-c", cmd}}, {"user", user}, {"timeout_s", 60}}.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        auto j = json::parse(r.body, nullptr, false);
        return j.is_object() ? j : json::object();
    }
    static std::string out(const std::string& sbx, const std::string& cmd) {
        auto s = run(sbx, cmd).value("stdout", "");
        while (!s.empty() && s.back() == '\n') s.pop_back();
        return s;
    }
    static std::vector<std::string> sandboxIds() {
        std::vector<std::string> ids;
        for (const auto& s : json::parse(api("GET", "/v1/sandboxes").body)["sandboxes"])
            ids.push_back(s["id"]);
        return ids;
    }
    // What a sandbox from the "full" recipe or Dockerfile must hold.
    static void expectFullTemplate(const std::string& sbx) {
        EXPECT_EQ(out(sbx, "cat /srv/built-by"), "user") << "a run step after USER runs as that user";
        EXPECT_EQ(out(sbx, "echo $GREETING"), "hello") << "the template's env reaches execs";
        EXPECT_EQ(out(sbx, "cat /srv/app/hello.txt"), "from the context");
        EXPECT_EQ(out(sbx, "stat -c '%U' /srv/app/hello.txt"), "user");
        EXPECT_NE(out(sbx, "cat /usr/share/airlock-fixture-hello/hello").find("hello from apt"),
                  std::string::npos)
            << "the apt step installed through the package proxy";
        EXPECT_EQ(out(sbx, "test -f \"$(npm root -g)/is-number/package.json\" && echo yes"), "yes")
            << "the npm step installed through the package proxy";
    }
};
Templates::World* Templates::world = nullptr;

// One debian build covers every kind of step, a start command with a port
// check (serving at a clone's first exec) and the build's evidence bundle.
TEST_F(Templates, ARecipeWithRunCopyEnvUserAptNpmStepsAndAReadyServerIsWhatItsSandboxesStartFrom) {
    json spec{{"name", "full"},
              {"from", "debian"},
              {"packages", {{"apt", {{"mode", "allow"}}}}},
              {"steps",
               {{{"run", kFixtureSources}},
                {{"run", "mkdir -p /srv && chmod 777 /srv"}},
                {{"copy", {{"src", "app/"}, {"dest", "/srv/app"}, {"owner", "user:user"}}}},
                {{"copy", {{"src", "app/"}, {"dest", "/srv/plain"}}}},
                {{"env", {{"GREETING", "hello"}}}},
                {{"user", "user"}},
                {{"run", "whoami > /srv/built-by"}},
                {{"apt", {"airlock-fixture-hello"}}},
                {{"npm", {"is-number@7.0.0"}}}}},
              {"start",
               {{"cmd", "cd /srv/plain && exec python3 -m http.server 8000"},
                {"ready", {{"port", 8000}, {"timeout_s", 60}}}}}};
    auto b = waitBuild("full", postForm(spec, "", contextOf({{"app/hello.txt", "from the context\n"}})));
    ASSERT_EQ(b.value("state", ""), "ready") << b.dump() << logOf("full", b.value("id", ""));
    auto log = logOf("full", b["id"]);
    EXPECT_NE(log.find("APT airlock-fixture-hello"), std::string::npos) << log;
    auto sbx = sandboxFrom("full");
    expectFullTemplate(sbx);
    // Without an owner: root's files in a directory as mkdir makes it, readable by the user.
    EXPECT_EQ(out(sbx, "stat -c '%a %U' /srv/plain /srv/plain/hello.txt"), "755 root\n644 root");
    EXPECT_EQ(out(sbx, "cat /srv/plain/hello.txt"), "from the context");
    // Nothing was started in this sandbox: the server runs from the snapshot.
    EXPECT_EQ(out(sbx, "curl -s -m 10 localhost:8000/hello.txt"), "from the context");
    auto t = json::parse(api("GET", "/v1/templates/full").body);
    EXPECT_EQ(t.value("kind", ""), "built");
    EXPECT_EQ(t["env"].value("GREETING", ""), "hello");
    EXPECT_EQ(t.value("digest", "").rfind("sha256:", 0), 0u);

    // The build's bundle verifies offline and records its commands and the template's digest.
    std::string evidence = t.value("evidence_id", "");
    ASSERT_EQ(evidence.rfind("evd-", 0), 0u) << t.dump();
    auto dir = world->tmp.path();
    auto bundle = api("GET", "/v1/evidence/" + evidence);
    ASSERT_EQ(bundle.status, 200);
    std::ofstream(dir + "/full.tar.gz", std::ios::binary) << bundle.body;
    auto keys = json::parse(api("GET", "/v1/evidence/keys").body);
    std::ofstream(dir + "/pub.pem") << keys["keys"][0]["public_key_pem"].get<std::string>();
    EXPECT_EQ(test::commandLine(test::binDir() + "/airlock evidence verify " + dir + "/full.tar.gz --key " +
                                dir + "/pub.pem >/dev/null 2>&1 && echo verified"),
              "verified");
    EXPECT_NE(test::commandLine("zcat " + dir + "/full.tar.gz | grep -acF -- 'whoami > /srv/built-by'"), "0")
        << "the bundle records the build's commands";
    EXPECT_NE(test::commandLine("zcat " + dir + "/full.tar.gz | grep -acF -- '" + t.value("digest", "").substr(7) + "'"),
              "0")
        << "the bundle records the template's digest";
    api("DELETE", "/v1/sandboxes/" + sbx);
}

TEST_F(Templates, TheSameAsADockerfileBuildsTheSameAndLeavesOutWhatDockerignoreSays) {
    // The recipe's package steps are the recipe test's; here RUN, COPY, ENV,
    // USER, WORKDIR, LABEL, EXPOSE and CMD, continuations and comments.
    std::string dockerfile = "FROM debian\n"
                             "RUN mkdir -p /srv && chmod 777 /srv\n"
                             "COPY --chown=user:user app/ /srv/app/\n"
                             "ENV GREETING=hello\n"
                             "USER user\n"
                             "# continuation lines and comments are Dockerfile syntax too\n"
                             "RUN whoami \\\n"
                             "    > /srv/built-by\n"
                             "WORKDIR /srv/app\n"
                             "LABEL team=agents\n"
                             "EXPOSE 8080\n"
                             "CMD [\"python3\", \"-m\", \"http.server\", \"8080\"]\n";
    json spec{{"name", "full-df"}, {"ready", {{"port", 8080}}}};
    auto context = contextOf({{"app/hello.txt", "from the context\n"},
                              {"app/secret.txt", "never copied\n"},
                              {".dockerignore", "app/secret.txt\n"}});
    auto b = waitBuild("full-df", postForm(spec, dockerfile, context));
    ASSERT_EQ(b.value("state", ""), "ready") << b.dump() << logOf("full-df", b.value("id", ""));
    auto sbx = sandboxFrom("full-df");
    EXPECT_EQ(out(sbx, "cat /srv/built-by"), "user") << "RUN after USER runs as that user";
    EXPECT_EQ(out(sbx, "echo $GREETING"), "hello");
    EXPECT_EQ(out(sbx, "stat -c '%U' /srv/app/hello.txt"), "user");
    EXPECT_EQ(out(sbx, "test -e /srv/app/secret.txt && echo there || echo absent"), "absent");
    EXPECT_EQ(out(sbx, "curl -s -m 10 localhost:8080/hello.txt"), "from the context")
        << "CMD runs in WORKDIR as USER, already serving";
    auto t = json::parse(api("GET", "/v1/templates/full-df").body);
    EXPECT_EQ(t["labels"].value("team", ""), "agents");
    EXPECT_EQ(t["exposed_ports"], json::array({8080}));
    api("DELETE", "/v1/sandboxes/" + sbx);
}

TEST_F(Templates, ARebuildAfterChangingOnlyTheLastStepReusesTheOtherLayers) {
    auto recipe = [](const std::string& last) {
        return json{{"name", "layers"},
                    {"from", "minimal"},
                    {"steps",
                     {{{"run", "echo a > /srv-a"}}, {{"env", {{"K", "v"}}}}, {{"run", "echo b > /srv-b"}},
                      {{"run", "echo " + last + " > /srv-c"}}}}};
    };
    auto first = waitBuild("layers", api("POST", "/v1/templates", recipe("v1").dump()));
    ASSERT_EQ(first.value("state", ""), "ready") << first.dump();
    EXPECT_EQ(first.value("steps_cached", 99), 0);
    auto second = waitBuild("layers", api("POST", "/v1/templates", recipe("v2").dump()));
    ASSERT_EQ(second.value("state", ""), "ready") << second.dump();
    EXPECT_EQ(second.value("steps_cached", 0), 3) << "steps 1-3 come from the cache";
    auto log = logOf("layers", second["id"]);
    EXPECT_NE(log.find("step 1/4: RUN echo a > /srv-a (cached)"), std::string::npos) << log;
    EXPECT_NE(log.find("step 3/4: RUN echo b > /srv-b (cached)"), std::string::npos) << log;
    EXPECT_NE(log.find("step 4/4: RUN echo v2 > /srv-c\n"), std::string::npos) << log;
    auto sbx = sandboxFrom("layers");
    EXPECT_EQ(out(sbx, "cat /srv-a /srv-b /srv-c; echo $K"), "a\nb\nv2\nv");
    auto forced = recipe("v2");
    forced["no_cache"] = true;
    auto third = waitBuild("layers", api("POST", "/v1/templates", forced.dump()));
    ASSERT_EQ(third.value("state", ""), "ready") << third.dump();
    EXPECT_EQ(third.value("steps_cached", 99), 0) << "no_cache runs every step";
    api("DELETE", "/v1/sandboxes/" + sbx);
}

TEST_F(Templates, AFailingStepFailsTheBuildWithItsExitCodeAndLeavesNoSandboxOrTemplate) {
    auto before = sandboxIds();
    auto b = waitBuild("broken", api("POST", "/v1/templates",
                                     R"({"name":"broken","from":"minimal","steps":[{"run":"echo about to fail"},{"run":"echo last words >&2; exit 7"}]})"));
    ASSERT_EQ(b.value("state", ""), "failed") << b.dump();
    EXPECT_EQ(b.value("exit_code", 0), 7);
    EXPECT_EQ(b["error"].value("step", 0), 2);
    EXPECT_EQ(b["error"].value("command", ""), "RUN echo last words >&2; exit 7");
    EXPECT_NE(logOf("broken", b["id"]).find("last words"), std::string::npos) << "the log keeps its output";
    EXPECT_EQ(sandboxIds(), before) << "the build sandbox is gone";
    EXPECT_EQ(api("GET", "/v1/templates/broken").status, 404);
    EXPECT_EQ(api("POST", "/v1/sandboxes", R"({"template":"broken"})").status, 404);
}

TEST_F(Templates, AFollowedLogShowsAStepsOutputWhileTheStepRuns) {
    auto submitted = api("POST", "/v1/templates",
                         R"J({"name":"live","from":"minimal","steps":[{"run":"echo early-$((20+1)); sleep 4; echo late-$((20+2))"}]})J");
    ASSERT_EQ(submitted.status, 202) << submitted.body;
    auto id = json::parse(submitted.body)["build_id"].get<std::string>();
    auto file = world->tmp.path() + "/live.log";
    test::HelperProcess follow({"curl", "-sN", "-o", file, "-H", "Authorization: Bearer " + world->key,
                                world->daemon->url() + "/v1/templates/live/builds/" + id + "/logs?follow=1"});
    auto followed = [&] {
        std::ifstream in(file);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    ASSERT_TRUE(test::waitFor([&] { return followed().find("| early-21") != std::string::npos; }, 120s))
        << followed();
    auto state = json::parse(api("GET", "/v1/templates/live/builds/" + id).body);
    EXPECT_EQ(state.value("state", ""), "building") << "the line came while its step ran";
    EXPECT_EQ(followed().find("| late-22"), std::string::npos) << followed();
    auto b = waitBuild("live", submitted);
    EXPECT_LT(logOf("live", id).find("| early-21"), logOf("live", id).find("| late-22"));
    EXPECT_EQ(b.value("state", ""), "ready") << b.dump();
    EXPECT_TRUE(test::waitFor([&] { return followed().find("is ready") != std::string::npos; }, 30s))
        << "the followed log ends with the build: " << followed();
}

TEST_F(Templates, DockerfilesThatCannotBeBuiltAreRefusedNamingTheirLine) {
    auto r = postForm({{"name", "bad"}}, "FROM debian\nRUN true\nSTOPSIGNAL SIGKILL\n", "");
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(r.body.find("line 3"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("STOPSIGNAL"), std::string::npos) << r.body;
    r = postForm({{"name", "bad"}}, "# a registry image\nFROM library/node:20\n", "");
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(r.body.find("line 2"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("registry"), std::string::npos) << r.body;
    r = postForm({{"name", "bad"}}, "FROM debian\nADD https://example.invalid/x.tar /x\n", "");
    EXPECT_EQ(r.status, 422) << r.body;
    // A copy without a context, an unknown field: 400 before anything runs.
    EXPECT_EQ(api("POST", "/v1/templates",
                  R"({"name":"bad","from":"debian","steps":[{"copy":{"src":"a","dest":"/a"}}]})")
                  .status,
              400);
    EXPECT_EQ(api("POST", "/v1/templates", R"({"name":"bad","from":"debian","stepz":[]})").status, 400);
    EXPECT_EQ(api("POST", "/v1/templates", R"({"name":"bad","from":"no-such-template"})").status, 404);
}

TEST_F(Templates, DeletingATemplateInUseKeepsItsSandboxesWorking) {
    auto b = waitBuild("doomed", api("POST", "/v1/templates",
                                     R"({"name":"doomed","from":"minimal","steps":[{"run":"echo kept > /kept"}]})"));
    ASSERT_EQ(b.value("state", ""), "ready") << b.dump();
    auto sbx = sandboxFrom("doomed");
    EXPECT_EQ(api("DELETE", "/v1/templates/doomed").status, 204);
    EXPECT_EQ(out(sbx, "cat /kept"), "kept");
    // Its disk still reads the deleted template's layers: a write and a snapshot work.
    EXPECT_EQ(out(sbx, "echo more > /tmp/more && cat /tmp/more"), "more");
    EXPECT_EQ(api("POST", "/v1/sandboxes/" + sbx + "/snapshots").status, 201);
    EXPECT_EQ(api("GET", "/v1/templates/doomed").status, 404);
    EXPECT_EQ(api("POST", "/v1/sandboxes", R"({"template":"doomed"})").status, 404);
    EXPECT_EQ(api("DELETE", "/v1/templates/debian").status, 403) << "the server's own templates stay";
    api("DELETE", "/v1/sandboxes/" + sbx);
}

TEST_F(Templates, BuildSandboxesCountInTheQuotaBuildsEndAtTheirTimeoutAndOneNameBuildsAtATime) {
    // A tenant at its sandbox quota cannot build: the build sandbox counts.
    ASSERT_EQ(api("PUT", "/v1/tenants/tq", R"({"quota":{"sandboxes":1}})").status, 200);
    auto minted = api("POST", "/v1/keys", R"({"tenant":"tq","role":"admin","name":"e2e"})");
    ASSERT_EQ(minted.status, 201) << minted.body;
    test::ApiClient tq(world->daemon->url(), json::parse(minted.body)["key"].get<std::string>());
    auto held = tq.request("POST", "/v1/sandboxes", R"({"template":"minimal"})");
    ASSERT_EQ(held.status, 201) << held.body;
    auto submitted = tq.request("POST", "/v1/templates", R"({"name":"over","from":"minimal"})");
    ASSERT_EQ(submitted.status, 202) << submitted.body;
    auto id = json::parse(submitted.body)["build_id"].get<std::string>();
    json b;
    ASSERT_TRUE(test::waitFor(
        [&] {
            b = json::parse(tq.request("GET", "/v1/templates/over/builds/" + id).body);
            return b.value("state", "") == "failed" || b.value("state", "") == "ready";
        },
        120s));
    EXPECT_EQ(b.value("state", ""), "failed") << b.dump();
    EXPECT_NE(b["error"].value("message", "").find("quota"), std::string::npos) << b.dump();
    tq.request("DELETE", "/v1/sandboxes/" + json::parse(held.body)["id"].get<std::string>());

    // A build that passes its timeout fails, its step killed.
    auto slow = waitBuild("slow", api("POST", "/v1/templates",
                                      R"({"name":"slow","from":"minimal","timeout_s":10,"steps":[{"run":"sleep 600"}]})"));
    EXPECT_EQ(slow.value("state", ""), "failed") << slow.dump();
    EXPECT_NE(slow["error"].value("message", "").find("timeout"), std::string::npos) << slow.dump();

    // Two builds of one name: the second starts when the first has ended.
    auto spec = R"({"name":"serial","from":"minimal","steps":[{"run":"sleep 1"}]})";
    auto first = api("POST", "/v1/templates", spec);
    auto second = api("POST", "/v1/templates", spec);
    auto b1 = waitBuild("serial", first);
    auto b2 = waitBuild("serial", second);
    ASSERT_EQ(b1.value("state", ""), "ready") << b1.dump();
    ASSERT_EQ(b2.value("state", ""), "ready") << b2.dump();
    auto log2 = logOf("serial", b2["id"]);
    auto started = log2.substr(0, log2.find(' '));
    EXPECT_GE(started, b1.value("finished_at", "")) << "the second build began before the first ended\n" << log2;
}

}  // namespace
}  // namespace airlock
