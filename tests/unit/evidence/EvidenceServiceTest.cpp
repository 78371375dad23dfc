#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../controller/ControllerFixture.hpp"
#include "core/Clock.hpp"
#include "evidence/BundleVerifier.hpp"
#include "evidence/Dsse.hpp"
#include "evidence/EvidenceService.hpp"
#include "store/EvidenceStore.hpp"

namespace airlock {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kSecret = "evCanary-4242-9191-zq";

class EvidenceServiceTest : public test::ControllerFixture {
  protected:
    EvidenceServiceTest() {
        evidenceStore = std::make_unique<EvidenceStore>(*db);
        EvidenceConfig config;
        config.dataDir = dir.path() + "/evidence";
        config.defaultArtifactRoot = dir.path() + "/work";
        config.artifactUser = "root";  // the in-process agent runs on the host
        config.retentionDays = 1;
        service = std::make_unique<EvidenceService>(config, controller->evidenceSource(), nullptr, *evidenceStore);
        controller->setDeleteHooks([this](const SandboxRecord& r) { service->beforeDelete(r); },
                                   [this](const std::string& id) { service->afterDelete(id); });
        fs::create_directories(dir.path() + "/work/reports");
        fs::create_directories(dir.path() + "/work/out");
        std::ofstream(dir.path() + "/work/reports/junit.xml")
            << R"(<testsuites><testsuite name="demo"><testcase classname="demo" name="test_add_ints"/>)"
               R"(<testcase classname="demo" name="test_add_strings"><failure message="expected ab"/></testcase>)"
               R"(</testsuite></testsuites>)";
        std::ofstream(dir.path() + "/work/out/screenshot.png") << "PNG";
        std::ofstream(dir.path() + "/work/out/debug.log")
            << "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n";
        std::ofstream(dir.path() + "/work/out/leak.txt") << "token " << kSecret << "\n";
        std::ofstream(dir.path() + "/work/notes.md") << "not an artifact";
    }
    ~EvidenceServiceTest() override { controller->setDeleteHooks(nullptr, nullptr); }

    SandboxRecord taskSandbox() {
        CreateSandboxRequest r;
        r.secrets["TOKEN"] = SecretSpec{kSecret, {}};
        r.policy.deny = {"rm -rf *"};
        {
            TaskSpec task;
            task.id = "task-ev";
            task.prompt = std::string("Fix add(); the token is ") + kSecret;
            task.requestedBy = "unit";
            task.testCommands = {"echo tests-ran"};
            task.sensitivePaths = {"auth/**"};
            r.task = task;
        }
        r.artifacts = {"reports/*.xml", "out/*"};
        return controller->create("t1", r);
    }
    ExecOptions shell(const std::string& s) {
        ExecOptions o;
        o.shell = s;
        o.user = "root";
        return o;
    }
    std::map<std::string, std::string> unpack(const EvidenceRecord& r) {
        return BundleVerifier::unpack(service->bundleBytes(r));
    }
    std::vector<std::string> publicKeys() {
        std::vector<std::string> keys;
        for (const auto& k : service->keys()) keys.push_back(k.publicKeyPem);
        return keys;
    }

    // The bundle's signed test-result statement (the second attestation), verified.
    json testResultStatement(std::map<std::string, std::string>& files) {
        std::istringstream att(files["attestations.intoto.jsonl"]);
        std::string provenance, testResult;
        std::getline(att, provenance);
        std::getline(att, testResult);
        return json::parse(dsse::verify(json::parse(testResult), publicKeys()[0]));
    }

    std::unique_ptr<EvidenceStore> evidenceStore;
    std::unique_ptr<EvidenceService> service;
};

const json* finding(const json& findings, const std::string& kind) {
    for (const auto& f : findings["findings"])
        if (f["kind"] == kind) return &f;
    return nullptr;
}

TEST_F(EvidenceServiceTest, ASealedBundleHoldsTheSessionVerifiesAndLeaksNoSecret) {
    auto s = taskSandbox();
    EXPECT_EQ(test::codeOf([&] { controller->commands().submit("t1", s.id, shell("rm -rf /tmp/x")); }),
              ErrorCode::policy_denied);
    controller->commands().submit("t1", s.id, shell("echo tests-ran"));
    auto failing = shell("echo $TOKEN; exit 1");
    failing.purpose = "test";
    controller->commands().submit("t1", s.id, failing);

    auto rec = service->seal("t1", s.id);
    EXPECT_EQ(rec.id.rfind("evd-", 0), 0u);
    EXPECT_EQ(rec.sha256.size(), 64u);
    auto bytes = service->bundleBytes(rec);
    auto verified = BundleVerifier::verify(bytes, publicKeys());
    for (const auto& p : verified.problems) ADD_FAILURE() << p;
    EXPECT_TRUE(verified.ok());

    auto files = unpack(rec);
    for (const char* f :
         {"manifest.json", "commands/commands.jsonl", "approvals/approvals.jsonl",
          "network/egress.jsonl", "packages/packages.jsonl", "files/activity.jsonl",
          "previews.json", "tests/summary.json", "findings.json", "report.html",
          "attestations.intoto.jsonl", "changes/changes.patch", "changes/files.json"})
        EXPECT_TRUE(files.count(f)) << f;
    auto manifest = json::parse(files["manifest.json"]);
    EXPECT_EQ(manifest["task"]["id"], "task-ev");
    EXPECT_EQ(manifest["sandbox"], s.id);
    EXPECT_TRUE(manifest["workspace"].is_null()) << "no workspace: the section says so";
    EXPECT_EQ(manifest["counts"]["denied"], 1);
    EXPECT_NE(files["commands/commands.jsonl"].find("rm -rf /tmp/x"), std::string::npos);

    // Artifacts: the screenshot and the JUnit report in; the key and the
    // file with the secret listed, withheld; nothing outside the globs.
    EXPECT_TRUE(files.count("artifacts/out/screenshot.png"));
    EXPECT_TRUE(files.count("artifacts/reports/junit.xml"));
    EXPECT_FALSE(files.count("artifacts/out/debug.log"));
    EXPECT_FALSE(files.count("artifacts/out/leak.txt"));
    EXPECT_FALSE(files.count("artifacts/notes.md"));

    auto tests = json::parse(files["tests/summary.json"]);
    EXPECT_EQ(tests["result"], "failed");
    EXPECT_EQ(tests["passed"], 0) << "no recorded test run wrote the JUnit file: not counted";
    EXPECT_EQ(tests["failed"], 0);
    ASSERT_EQ(tests["reports"].size(), 1u);
    EXPECT_EQ(tests["reports"][0]["counted"], false);
    EXPECT_EQ(tests["runs"].size(), 2u)
        << "the task's test command and the one marked purpose test";
    auto findings = json::parse(files["findings.json"]);
    ASSERT_NE(finding(findings, "tests_failed"), nullptr);
    ASSERT_NE(finding(findings, "test_report_not_from_test_run"), nullptr);
    EXPECT_NE(finding(findings, "test_report_not_from_test_run")->dump().find("reports/junit.xml"),
              std::string::npos);
    ASSERT_NE(finding(findings, "commands_denied"), nullptr);
    ASSERT_NE(finding(findings, "sensitive_artifacts"), nullptr);
    EXPECT_NE(finding(findings, "sensitive_artifacts")->dump().find("debug.log"),
              std::string::npos);
    EXPECT_NE(finding(findings, "sensitive_artifacts")->dump().find("leak.txt"), std::string::npos);

    for (const auto& [path, content] : files)
        EXPECT_EQ(content.find(kSecret), std::string::npos) << path;
    EXPECT_EQ(files["report.html"].find("<script"), std::string::npos);
    // The DSSE attestations verify with the published key.
    std::size_t lines = 0;
    std::istringstream att(files["attestations.intoto.jsonl"]);
    for (std::string line; std::getline(att, line);) {
        ++lines;
        EXPECT_NO_THROW(dsse::verify(json::parse(line), publicKeys()[0]));
    }
    EXPECT_EQ(lines, 2u);
    // The audit log says a bundle was sealed.
    AuditQuery q;
    q.type = "evidence.sealed";
    EXPECT_EQ(controller->audit("t1", s.id, q).size(), 1u);
}

TEST_F(EvidenceServiceTest, DeleteSealsAFinalBundleThatOutlivesTheSandboxUntilItsRetention) {
    auto s = taskSandbox();
    auto manual = service->seal("t1", s.id);
    EXPECT_EQ(test::codeOf([&] { service->get("t2", manual.id); }), ErrorCode::not_found)
        << "another tenant never sees it";
    EXPECT_EQ(test::codeOf([&] { service->list("t2", s.id); }), ErrorCode::not_found);
    controller->destroy("t1", s.id);
    auto list = service->list("t1", s.id);
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[1].kind, "final");
    EXPECT_GT(list[0].expiresAt, nowUnixSeconds());
    EXPECT_TRUE(BundleVerifier::verify(service->bundleBytes(list[1]), publicKeys()).ok());

    // A human's review: signed, kept with the bundle.
    auto review = service->review("t1", manual.id, ReviewDecision::approve, "diff and tests read",
                                  "key:k1 (ana, approver)");
    EXPECT_EQ(review.decision, ReviewDecision::approve);
    auto payload = json::parse(dsse::verify(review.attestation, publicKeys()[0]));
    EXPECT_EQ(payload["predicate"]["result"], "approved");
    EXPECT_EQ(payload["subject"][0]["digest"]["sha256"], manual.sha256);
    auto kept = service->reviewOf("t1", manual.id);
    EXPECT_EQ(kept.reason, "diff and tests read");
    EXPECT_EQ(kept.attestation, review.attestation);
    EXPECT_EQ(test::codeOf([&] { parseReviewDecision("maybe"); }), ErrorCode::bad_request);

    // Past the retention: the files and rows go.
    db->exec("UPDATE evidence SET expires_at = 1");
    service->collectExpired();
    EXPECT_EQ(test::codeOf([&] { service->get("t1", manual.id); }), ErrorCode::not_found);
    EXPECT_TRUE(fs::is_empty(dir.path() + "/evidence/bundles"));
}

TEST_F(EvidenceServiceTest, ASandboxWithoutTaskOrWorkspaceSealsNothingAtDelete) {
    auto s = controller->create("t1", CreateSandboxRequest{});
    controller->destroy("t1", s.id);
    EXPECT_EQ(test::codeOf([&] { service->list("t1", s.id); }), ErrorCode::not_found);
    EXPECT_TRUE(fs::is_empty(dir.path() + "/evidence/bundles"));
}


// --- The record the agent cannot bend (issue 29) ---------------------------

// The names of every tag's attributes in an HTML page (text between tags is
// not an attribute, whatever it says).
std::vector<std::string> attributeNames(const std::string& html) {
    std::vector<std::string> names;
    static const std::regex tag(R"(<[A-Za-z][^>]*>)");
    static const std::regex attr(R"(\s([A-Za-z_:][-A-Za-z0-9_:.]*)\s*(=\s*("[^"]*"|'[^']*'|[^\s>]+))?)");
    for (auto t = std::sregex_iterator(html.begin(), html.end(), tag); t != std::sregex_iterator(); ++t) {
        std::string text = t->str();
        auto space = text.find_first_of(" \t\n");
        if (space == std::string::npos) continue;
        std::string rest = text.substr(space);
        for (auto a = std::sregex_iterator(rest.begin(), rest.end(), attr); a != std::sregex_iterator(); ++a)
            names.push_back((*a)[1].str());
    }
    return names;
}

TEST_F(EvidenceServiceTest, RecordIntegritySecretValuesCannotEditTheRenderedOrSignedRecord) {
    CreateSandboxRequest req;
    for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
             {"S1", "Content-Security-Policy"},
             {"S2", "class=\"artifact\" alt=\""},
             {"S3", "tests_failed"},
             {"S4", "\">zz-quote"},
             {"S5", "\"exit_code\":"},
             {"S6", "exit_code"},
             {"S7", "FAILED\"}"}})
        req.secrets[name] = SecretSpec{value, {}};
    {
        TaskSpec task;
        task.id = "t-record";
        task.prompt = "record integrity";
        req.task = task;
    }
    req.artifacts = {"attack/**"};
    auto s = controller->create("t1", req);
    fs::create_directories(dir.path() + "/work/attack");
    std::ofstream(dir.path() + "/work/attack/zz2 onfocus=alert(1) autofocus x.png") << "\x89PNG";
    auto failing = shell("echo running the suite; exit 1");
    failing.purpose = "test";
    EXPECT_EQ(controller->commands().submit("t1", s.id, failing).output->result.exit_code, 1);
    auto typed = shell("echo 'exit_code tests_failed FAILED\"}'");
    controller->commands().submit("t1", s.id, typed);

    auto rec = service->seal("t1", s.id);
    auto files = unpack(rec);
    const std::string& html = files["report.html"];
    EXPECT_NE(html.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'"),
              std::string::npos)
        << "a secret named like the page's CSP does not remove it";
    for (const auto& a : attributeNames(html))
        EXPECT_TRUE(a.rfind("on", 0) != 0 && a != "autofocus") << "attribute from data: " << a;
    auto findings = json::parse(files["findings.json"]);
    EXPECT_NE(finding(findings, "tests_failed"), nullptr) << "a secret equal to a finding's kind";
    EXPECT_EQ(json::parse(files["tests/summary.json"])["result"], "failed");
    EXPECT_EQ(json::parse(files["manifest.json"])["tests"]["result"], "failed");
    EXPECT_EQ(json::parse(rec.summaryJson)["tests"], "failed");
    auto statement = testResultStatement(files);
    EXPECT_EQ(statement["predicate"]["result"], "FAILED");
    // Every command keeps its exit code, and a masked field says so.
    std::istringstream cmds(files["commands/commands.jsonl"]);
    std::size_t withExit = 0, annotated = 0;
    for (std::string line; std::getline(cmds, line);) {
        auto c = json::parse(line);
        withExit += c.contains("exit_code");
        annotated += c.contains("masked");
    }
    EXPECT_EQ(withExit, 2u);
    EXPECT_GE(annotated, 1u) << "the command that printed secrets says how many were masked";
    EXPECT_TRUE(BundleVerifier::verify(service->bundleBytes(rec), publicKeys()).ok());
}

TEST_F(EvidenceServiceTest, RecordIntegrityGuestFileNamesCannotBreakTheSealOrLeaveTheBundle) {
    CreateSandboxRequest req;
    req.task.emplace().id = "t-names";
    req.artifacts = {"names/**"};
    auto s = controller->create("t1", req);
    std::string root = dir.path() + "/work/names";
    std::string deep = root;
    for (int i = 0; i < 40; ++i) deep += "/d";
    fs::create_directories(deep);
    std::vector<std::string> names = {"a\\b.xml", "q\"uote.txt",  "<script>.txt", "-dash.txt",
                                      "new\nline.txt", "bad\xff\xfeutf8.txt", std::string(251, '7') + ".txt",
                                      "...",           "%2E%2E",      "it's & <b>.png"};
    for (const auto& n : names) std::ofstream(root + "/" + n) << "x";
    std::ofstream(deep + "/deep.txt") << "x";

    auto rec = service->seal("t1", s.id);
    auto verified = BundleVerifier::verify(service->bundleBytes(rec), publicKeys());
    for (const auto& p : verified.problems) ADD_FAILURE() << p;
    auto files = unpack(rec);
    auto manifest = json::parse(files["manifest.json"]);
    std::size_t listed = 0, collected = 0;
    for (const auto& a : manifest["artifacts"]) {
        listed += a["path"].get<std::string>().rfind("names/", 0) == 0;
        if (a["collected"] == true) {
            ++collected;
            EXPECT_TRUE(files.count(a["bundle_path"].get<std::string>())) << a.dump();
        }
    }
    EXPECT_EQ(listed, names.size() + 1) << "every name is listed";
    EXPECT_EQ(collected, names.size() + 1) << "every name Linux allows is carried, not UTF-8 too";
    for (const auto& [path, content] : files) {
        EXPECT_EQ(path.find('\\'), std::string::npos) << path;
        EXPECT_EQ(path.find('\n'), std::string::npos) << path;
        for (std::size_t at = 0;;) {
            auto end = path.find('/', at);
            std::string part = path.substr(at, end == std::string::npos ? end : end - at);
            EXPECT_TRUE(part != ".." && part != "." && !part.empty()) << path;
            if (end == std::string::npos) break;
            at = end + 1;
        }
    }
    for (const auto& a : attributeNames(files["report.html"]))
        EXPECT_TRUE(a.rfind("on", 0) != 0) << a;
    // The final bundle at delete is written too.
    controller->destroy("t1", s.id);
    auto list = service->list("t1", s.id);
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[1].kind, "final");
}

// A line typed at a terminal is the guest shell's account of what it ran:
// the bundle says so wherever it lists it, so a guest that invents lines
// cannot pass them off as commands the host ran.
TEST_F(EvidenceServiceTest, RecordIntegrityATerminalLineIsMarkedAsTheGuestShellsAccount) {
    auto s = taskSandbox();
    ExecOptions terminal;
    terminal.argv = {"bash", "-l"};
    terminal.user = "root";
    auto decided = controller->commands().judgeLine("t1", s.id, terminal, "ex-terminal-1",
                                                    "echo typed-line", nullptr);
    ASSERT_EQ(decided.state, "allow");
    auto files = unpack(service->seal("t1", s.id));
    std::istringstream lines(files["commands/commands.jsonl"]);
    std::string line;
    bool found = false;
    while (std::getline(lines, line)) {
        auto c = json::parse(line);
        if (c["command"] != "echo typed-line") continue;
        found = true;
        EXPECT_EQ(c["reported_by"], "guest shell");
        EXPECT_EQ(c["terminal"], "ex-terminal-1");
        EXPECT_EQ(c["decision"], "allow");
    }
    EXPECT_TRUE(found) << files["commands/commands.jsonl"];
    EXPECT_NE(files["report.html"].find("typed at a terminal, as reported by the guest shell"),
              std::string::npos);
}

TEST_F(EvidenceServiceTest, RecordIntegrityAHandWrittenTestReportCountsForNothing) {
    CreateSandboxRequest req;
    req.task.emplace().id = "t-junit";
    req.artifacts = {"reports/*.xml"};
    auto s = controller->create("t1", req);
    // The fixture's report, written by no recorded test run (as an agent's
    // plain exec would): one passing, one failing case.
    controller->commands().submit("t1", s.id, shell("echo no test here"));
    auto rec = service->seal("t1", s.id);
    auto files = unpack(rec);
    auto tests = json::parse(files["tests/summary.json"]);
    EXPECT_EQ(tests["result"], "not_run");
    EXPECT_EQ(json::parse(files["manifest.json"])["tests"]["result"], "not_run");
    EXPECT_EQ(json::parse(rec.summaryJson)["tests"], "not_run");
    auto findings = json::parse(files["findings.json"]);
    EXPECT_NE(finding(findings, "tests_not_run"), nullptr);
    ASSERT_NE(finding(findings, "test_report_not_from_test_run"), nullptr);
    auto statement = testResultStatement(files);
    EXPECT_NE(statement["predicate"]["result"], "PASSED");
    EXPECT_TRUE(statement["predicate"]["passedTests"].empty());
}

TEST_F(EvidenceServiceTest, RecordIntegrityAReportCountsOnlyWhenATestRunWroteItLast) {
    CreateSandboxRequest req;
    req.task.emplace().id = "t-junit-watched";
    req.artifacts = {"reports/*.xml"};
    auto s = controller->create("t1", req);
    std::string work = dir.path() + "/work";
    if (!controller->files().watchFiles("t1", s.id, work)) GTEST_SKIP() << "no file watch here";
    AuditQuery q;
    q.type = "file.watch_started";
    auto started = controller->audit("t1", s.id, q);
    ASSERT_EQ(started.size(), 1u);
    if (json::parse(started[0].dataJson)["mechanism"] != "fanotify")
        GTEST_SKIP() << "fanotify is not available to this test (inotify names no command)";
    const std::string report =
        "<testsuites><testsuite name=\"s\"><testcase classname=\"c\" name=\"ok\"/>"
        "</testsuite></testsuites>";
    auto run = shell("printf '%s' '" + report + "' > " + work + "/reports/junit.xml");
    run.purpose = "test";
    controller->commands().submit("t1", s.id, run);
    auto counted = json::parse(unpack(service->seal("t1", s.id))["tests/summary.json"]);
    EXPECT_EQ(counted["result"], "passed") << counted.dump();
    EXPECT_EQ(counted["passed"], 1);

    // The agent then rewrites the same file by hand: the report is its own.
    controller->commands().submit(
        "t1", s.id, shell("printf '%s' '" + report + "' > " + work + "/reports/junit.xml"));
    auto after = json::parse(unpack(service->seal("t1", s.id))["tests/summary.json"]);
    EXPECT_EQ(after["passed"], 0) << after.dump();
    EXPECT_EQ(after["reports"][0]["counted"], false);
}

}  // namespace
}  // namespace airlock
