#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
        service = std::make_unique<EvidenceService>(config, *controller, nullptr, *evidenceStore);
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
        r.task = json{{"id", "task-ev"},
                      {"prompt", std::string("Fix add(); the token is ") + kSecret},
                      {"requested_by", "unit"},
                      {"test_commands", {"echo tests-ran"}},
                      {"sensitive_paths", {"auth/**"}}};
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
        json all = service->keys();
        for (const auto& k : all["keys"]) keys.push_back(k["public_key_pem"]);
        return keys;
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
    EXPECT_EQ(tests["passed"], 1);
    EXPECT_EQ(tests["failed"], 1);
    EXPECT_EQ(tests["runs"].size(), 2u)
        << "the task's test command and the one marked purpose test";
    auto findings = json::parse(files["findings.json"]);
    ASSERT_NE(finding(findings, "tests_failed"), nullptr);
    EXPECT_NE(finding(findings, "tests_failed")->dump().find("test_add_strings"),
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
    auto review = service->review("t1", manual.id, "approve", "diff and tests read",
                                  "key:k1 (ana, approver)");
    EXPECT_EQ(review["decision"], "approve");
    auto payload = json::parse(dsse::verify(review["attestation"], publicKeys()[0]));
    EXPECT_EQ(payload["predicate"]["result"], "approved");
    EXPECT_EQ(payload["subject"][0]["digest"]["sha256"], manual.sha256);
    EXPECT_EQ(service->reviewOf("t1", manual.id)["reason"], "diff and tests read");
    EXPECT_EQ(test::codeOf([&] { service->review("t1", manual.id, "maybe", "", "x"); }),
              ErrorCode::bad_request);

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

}  // namespace
}  // namespace airlock
