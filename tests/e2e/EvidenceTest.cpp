// The evidence bundle end to end: a real airlockd, a real debian VM, a real
// smart-HTTP git server, fixture npm and PyPI registries and a web server on
// 127.0.0.1. A small agent session (workspace with a write scope, a denied
// command, a gated install approved by a human, egress allowed and refused,
// a test run with a JUnit report and a failing test, an edit outside the
// scope, a lockfile change, artifacts) is sealed, then checked with the
// tools a third party would use: sha256sum, openssl, git, headless
// Chromium and `airlock evidence verify`, and tampered with.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/ApiClient.hpp"
#include "support/BuildPaths.hpp"
#include "support/DaemonProcess.hpp"
#include "support/GitServer.hpp"
#include "support/HelperProcess.hpp"
#include "support/TestEnv.hpp"

extern char** environ;

namespace airlock {
namespace {
using nlohmann::json;
using namespace std::chrono_literals;

int status(const std::string& cmd) {
    int s = std::system(cmd.c_str());
    return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

std::string readFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), {});
}

std::vector<json> jsonl(const std::string& path) {
    std::vector<json> out;
    std::istringstream in(readFile(path));
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(json::parse(line, nullptr, false));
    return out;
}

class Evidence : public ::testing::Test {
  protected:
    struct World {
        test::TempDir tmp;
        std::string canary, repos, base, dataDir, key;
        int gitPort = 0, npmPort = 0, pypiPort = 0, webPort = 0;
        std::unique_ptr<test::GitServer> git;
        std::vector<test::HelperProcess> helpers;
        std::unique_ptr<test::Daemon> daemon;
    };
    static inline World* world = nullptr;

    static void SetUpTestSuite() {
        world = new World();
        World& w = *world;
        w.canary = "evd-Canary-" + std::to_string(::getpid()) + "-zq";
        std::string fixtures = test::sourceDir() + "/tests/fixtures";
        w.git = std::make_unique<test::GitServer>(
            test::GitServer::Options{"127.0.0.1", "git-" + w.canary, "", {}});
        w.repos = w.git->repos;
        w.gitPort = w.git->port;
        w.base = w.git->revParse("demo.git", "main");
        ASSERT_EQ(w.base.size(), 40u);
        w.npmPort = test::freePort();
        w.pypiPort = test::freePort();
        w.webPort = test::freePort();
        std::string web = w.tmp.path() + "/web";
        std::filesystem::create_directories(web);
        std::ofstream(web + "/index.html") << "egress-ok\n";
        using Argv = std::vector<std::string>;
        w.helpers.emplace_back(Argv{"python3", fixtures + "/package-registry.py", "--npm-port",
                                    std::to_string(w.npmPort), "--pypi-port",
                                    std::to_string(w.pypiPort)});
        w.helpers.emplace_back(Argv{"python3", "-m", "http.server", std::to_string(w.webPort),
                                    "--bind", "127.0.0.1", "--directory", web});
        ASSERT_TRUE(test::waitFor(
            [&] {
                return w.git->up && test::loopbackPortOpen(w.npmPort) &&
                       test::loopbackPortOpen(w.pypiPort) && test::loopbackPortOpen(w.webPort);
            },
            30s))
            << "the fixture servers did not start";
        w.dataDir = w.tmp.path() + "/data";
        w.daemon = std::make_unique<test::Daemon>(
            w.dataDir, test::freePort(),
            std::vector<std::string>{
                "--egress-allow-cidr", "127.0.0.1/32", "--package-upstream",
                "npm=http://127.0.0.1:" + std::to_string(w.npmPort) + "/", "--package-upstream",
                "pypi=http://127.0.0.1:" + std::to_string(w.pypiPort) + "/simple/"});
        std::ifstream keyFile(w.dataDir + "/admin.key");
        std::getline(keyFile, w.key);
    }
    static void TearDownTestSuite() {
        World& w = *world;
        EXPECT_EQ(w.daemon->shutDown(::testing::UnitTest::GetInstance()->failed_test_count() > 0),
                  "")
            << "airlockd died during the tests";
        w.daemon.reset();
        delete world;  // its helpers stop with it
        world = nullptr;
    }

    static cli::HttpResult api(const std::string& method, const std::string& path,
                               const std::string& body = {}) {
        test::ApiClient c(world->daemon->url(), world->key);
        return c.request(method, path, body);
    }
    static json exec(const std::string& id, const json& request) {
        auto r = api("POST", "/v1/sandboxes/" + id + "/exec", request.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        auto j = json::parse(r.body, nullptr, false);
        return j.is_object() ? j : json::object();
    }
    static json sh(const std::string& id, const std::string& script) {
        return exec(id, {{"cmd", {"sh", "-c", script}}, {"timeout_s", 300}});
    }
};

const json* finding(const json& findings, const std::string& kind) {
    for (const auto& f : findings["findings"])
        if (f["kind"] == kind) return &f;
    return nullptr;
}

TEST_F(Evidence, ASmallAgentSessionSealsIntoABundleAThirdPartyCanVerifyAndRead) {
    World& w = *world;
    auto cred = api("POST", "/v1/credentials",
                    json{{"name", "fx"},
                         {"kind", "https-basic"},
                         {"host", "127.0.0.1:" + std::to_string(w.gitPort)},
                         {"username", "git"},
                         {"secret", "git-" + w.canary}}
                        .dump());
    ASSERT_EQ(cred.status, 201) << cred.body;
    json spec = {
        {"template", "debian"},
        {"workspace",
         {{"repo", "http://127.0.0.1:" + std::to_string(w.gitPort) + "/demo.git"},
          {"ref", "main"},
          {"branch", "agent/task-e2e"},
          {"path", "/workspace"},
          {"credential", "fx"},
          {"write_scope",
           {"src/**", "tests/**", "package.json", "package-lock.json", "reports/**", "dist/**"}}}},
        {"network", {{"allow", {"localhost"}}}},
        {"secrets", {{"TOKEN", w.canary}}},
        {"task",
         {{"id", "task-e2e"},
          {"prompt", "Make add() robust (token " + w.canary + ")"},
          {"requested_by", "e2e"},
          {"test_commands", {"python3 tests/run_junit.py"}},
          {"sensitive_paths", {".github/**"}}}},
        {"artifacts", {"reports/*.xml", "out/**"}}};
    auto created = api("POST", "/v1/sandboxes", spec.dump());
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];

    // The session.
    EXPECT_EQ(sh(id, "cd /workspace && cat src/app.py >/dev/null && echo read")["stdout"],
              "read\n");
    EXPECT_EQ(api("POST", "/v1/sandboxes/" + id + "/exec", R"({"shell":"rm -rf /"})").status, 403);
    auto gated =
        api("POST", "/v1/sandboxes/" + id + "/exec",
            json{{"shell", "cd /workspace && npm install airlock-fixture-ok --no-audit --no-fund"},
                 {"timeout_s", 300}}
                .dump());
    ASSERT_EQ(gated.status, 202) << gated.body;
    auto g = json::parse(gated.body);
    ASSERT_EQ(api("POST", "/v1/approvals/" + g["approval_id"].get<std::string>(),
                  R"({"decision":"approve","reason":"e2e"})")
                  .status,
              200);
    json installed;
    ASSERT_TRUE(test::waitFor(
        [&] {
            installed = json::parse(
                api("GET", "/v1/sandboxes/" + id + "/execs/" + g["exec_id"].get<std::string>())
                    .body,
                nullptr, false);
            return installed.is_object() && installed.value("state", "") != "running" &&
                   installed.value("state", "") != "pending_approval";
        },
        300s, 500ms));
    EXPECT_EQ(installed.value("exit_code", -1), 0) << installed.dump();
    std::string port = std::to_string(w.webPort);
    auto egress =
        sh(id, "wget -q -T 10 -O- http://localhost:" + port +
                   "/; wget -q -T 5 -O- http://127.0.0.2:" + port + "/ 2>/dev/null; echo $TOKEN");
    EXPECT_NE(egress.value("stdout", "").find("egress-ok"), std::string::npos) << egress.dump();
    EXPECT_EQ(egress.value("stdout", "").find(w.canary), std::string::npos);
    auto edits = sh(
        id,
        R"SH(cd /workspace && printf "def add(a, b):\n    return int(a) + int(b)\n" > src/app.py &&
mkdir -p docs .github/workflows out && echo notes > docs/notes.md && echo "on: push" > .github/workflows/x.yml &&
cat > tests/run_junit.py <<'PY'
import os
os.makedirs("reports", exist_ok=True)
open("reports/junit.xml", "w").write("""<?xml version="1.0"?>
<testsuites><testsuite name="demo" tests="2" failures="1">
<testcase classname="demo" name="test_add_ints"/>
<testcase classname="demo" name="test_add_strings"><failure message="expected ab">AssertionError</failure></testcase>
</testsuite></testsuites>""")
raise SystemExit(1)
PY
printf PNG > out/screenshot.png && echo edited)SH");
    ASSERT_EQ(edits.value("stdout", ""), "edited\n") << edits.dump();
    // The task's test command is a test run without being told.
    auto tests = sh(id, "cd /workspace && python3 tests/run_junit.py");
    EXPECT_EQ(tests.value("exit_code", 0), 1);

    // Seal, download, unpack.
    auto sealed = api("POST", "/v1/sandboxes/" + id + "/evidence", "{}");
    ASSERT_EQ(sealed.status, 201) << sealed.body;
    std::string evd = json::parse(sealed.body)["id"];
    auto bundle = api("GET", "/v1/evidence/" + evd);
    ASSERT_EQ(bundle.status, 200);
    std::string dir = w.tmp.path() + "/check";
    std::filesystem::create_directories(dir + "/x");
    std::ofstream(dir + "/bundle.tar.gz", std::ios::binary) << bundle.body;
    ASSERT_EQ(status("tar -xzf " + dir + "/bundle.tar.gz -C " + dir + "/x"), 0);
    std::string root =
        test::commandLine("dirname \"$(find " + dir + "/x -name SHA256SUMS | head -1)\"");

    // Every file summed, the sums check, the signature verifies with openssl.
    EXPECT_EQ(status("cd " + root + " && sha256sum --quiet -c SHA256SUMS"), 0);
    EXPECT_EQ(
        test::commandLine(
            "cd " + root +
            " && find . -type f ! -name SHA256SUMS ! -name SHA256SUMS.sig | sed 's|^\\./||' "
            "| sort"),
        test::commandLine("awk '{print $2}' " + root + "/SHA256SUMS | sed 's|^\\*||' | sort"));
    auto keys = json::parse(api("GET", "/v1/evidence/keys").body);
    std::ofstream(dir + "/pub.pem") << keys["keys"][0]["public_key_pem"].get<std::string>();
    EXPECT_EQ(test::commandLine("openssl dgst -sha256 -verify " + dir + "/pub.pem -signature " +
                                root + "/SHA256SUMS.sig " + root + "/SHA256SUMS"),
              "Verified OK");

    // The patch applied to the base commit with git gives the recorded tree.
    auto manifest = json::parse(readFile(root + "/manifest.json"));
    EXPECT_EQ(manifest["workspace"]["base_commit"], w.base);
    EXPECT_EQ(manifest["workspace"]["repo"].get<std::string>().find(w.canary), std::string::npos);
    std::string clone = dir + "/repo";
    ASSERT_EQ(status("git clone -q " + w.repos + "/demo.git " + clone + " && git -C " + clone +
                     " checkout -q " + w.base),
              0);
    EXPECT_EQ(test::commandLine("cd " + clone + " && git apply --index " + root +
                                "/changes/changes.patch && git write-tree"),
              manifest["workspace"]["final_tree"].get<std::string>());

    // Each finding is there with the evidence it rests on.
    auto findings = json::parse(readFile(root + "/findings.json"));
    for (const auto& [kind, mention] : std::vector<std::pair<std::string, std::string>>{
             {"tests_failed", "test_add_strings"},
             {"out_of_scope_changes", "docs/notes.md"},
             {"dependency_changes", "airlock-fixture-ok"},
             {"sensitive_paths_touched", ".github/workflows/x.yml"},
             {"network_contacted", "localhost"},
             {"network_refused", "127.0.0.2"},
             {"commands_denied", "rm -rf"},
             {"commands_gated", "npm install"}}) {
        const json* f = finding(findings, kind);
        ASSERT_NE(f, nullptr) << kind << " missing: " << findings.dump();
        EXPECT_NE(f->dump().find(mention), std::string::npos) << kind << ": " << f->dump();
        EXPECT_FALSE((*f)["evidence"].empty()) << kind;
    }
    auto summary = json::parse(readFile(root + "/tests/summary.json"));
    EXPECT_EQ(summary["failed"], 1) << summary.dump();
    EXPECT_EQ(summary["passed"], 1) << summary.dump();

    // The guest's own file activity, each path with the command that did it.
    std::map<std::string, json> activity;
    for (const auto& a : jsonl(root + "/files/activity.jsonl"))
        if (a.value("source", "") == "guest") activity[a.value("path", "")] = a;
    ASSERT_TRUE(activity.count("src/app.py")) << readFile(root + "/files/activity.jsonl");
    EXPECT_GE(activity["src/app.py"]["reads"].get<int>(), 1) << "read by the first command";
    EXPECT_GE(activity["src/app.py"]["writes"].get<int>(), 1) << "written by the edits";
    EXPECT_GE(activity["src/app.py"]["execs"].size(), 1u) << activity["src/app.py"].dump();
    ASSERT_TRUE(activity.count("reports/junit.xml"));
    std::set<std::string> commandIds;
    for (const auto& c : jsonl(root + "/commands/commands.jsonl"))
        commandIds.insert(c.value("id", ""));
    for (const auto& e : activity["reports/junit.xml"]["execs"])
        EXPECT_TRUE(commandIds.count(e.get<std::string>()))
            << "attributed to a recorded command: " << e;
    EXPECT_TRUE(manifest["file_activity"]["guest"].is_object()) << manifest["file_activity"].dump();

    // No secret anywhere, compressed or not.
    EXPECT_EQ(test::commandLine("grep -rlF --binary-files=text -- '" + w.canary + "' " + root), "");
    EXPECT_EQ(
        test::commandLine("zcat " + dir + "/bundle.tar.gz | grep -cF --binary-files=text -- '" +
                          w.canary + "'"),
        "0");

    // The report renders in headless Chromium: a screenshot, and the diff
    // and the findings are in the DOM.
    std::string report = readFile(root + "/report.html");
    EXPECT_EQ(report.find("<script"), std::string::npos);
    std::string chrome = test::commandLine("command -v chromium || command -v chromium-browser");
    ASSERT_FALSE(chrome.empty()) << "scripts/setup installs Debian's chromium";
    std::string flags =
        " --headless --no-sandbox --disable-gpu --user-data-dir=" + dir + "/chrome ";
    status("timeout 120 " + chrome + flags + "--screenshot=" + dir +
           "/report.png --window-size=1280,2000 file://" + root + "/report.html >/dev/null 2>&1");
    EXPECT_GT(std::filesystem::exists(dir + "/report.png")
                  ? std::filesystem::file_size(dir + "/report.png")
                  : 0,
              1000u);
    std::string dom = test::commandLine("timeout 120 " + chrome + flags + "--dump-dom file://" +
                                        root + "/report.html 2>/dev/null");
    EXPECT_NE(dom.find("src/app.py"), std::string::npos);
    EXPECT_NE(dom.find("+    return int(a) + int(b)"), std::string::npos) << "the diff is shown";
    EXPECT_NE(dom.find("tests_failed"), std::string::npos) << "the findings are shown";

    // airlock evidence verify: the bundle holds, a tampered one does not.
    std::string cli = test::binDir() + "/airlock evidence verify ";
    EXPECT_EQ(status(cli + dir + "/bundle.tar.gz --key " + dir + "/pub.pem >/dev/null 2>&1"), 0);
    // Is it the bundle the reviewer asked for? (issue 29: --expect-sandbox, --expect-commit)
    std::string keyed = cli + dir + "/bundle.tar.gz --key " + dir + "/pub.pem ";
    EXPECT_EQ(status(keyed + "--expect-sandbox " + id + " >/dev/null 2>&1"), 0);
    EXPECT_NE(status(keyed + "--expect-sandbox sbx-someotherone >/dev/null 2>&1"), 0)
        << "a valid bundle of another sandbox is not the one asked for";
    EXPECT_NE(status(keyed + "--expect-commit " + std::string(40, 'a') + " >/dev/null 2>&1"), 0)
        << "nor one of another commit";
    std::ofstream(dir + "/tamper.py") << R"PY(import io, sys, tarfile
src = tarfile.open(sys.argv[1]); out = tarfile.open(sys.argv[2], "w:gz")
for m in src.getmembers():
    data = src.extractfile(m).read() if m.isfile() else None
    if data is not None and sys.argv[3] == "byte" and m.name.endswith("changes.patch"):
        data = data.replace(b"int(a)", b"int(A)", 1)
    out.addfile(m, io.BytesIO(data) if data is not None else None)
if sys.argv[3] == "add":
    extra = tarfile.TarInfo(src.getmembers()[0].name.split("/")[0] + "/extra.txt")
    extra.size = 3
    out.addfile(extra, io.BytesIO(b"new"))
out.close()
)PY";
    for (const char* how : {"byte", "add"}) {
        std::string out = dir + "/tampered-" + how + ".tar.gz";
        ASSERT_EQ(
            status("python3 " + dir + "/tamper.py " + dir + "/bundle.tar.gz " + out + " " + how),
            0);
        EXPECT_NE(status(cli + out + " --key " + dir + "/pub.pem >/dev/null 2>&1"), 0) << how;
    }

    EXPECT_EQ(api("DELETE", "/v1/sandboxes/" + id).status, 204);
}

}  // namespace
}  // namespace airlock
