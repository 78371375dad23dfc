#include <gtest/gtest.h>

#include "evidence/Findings.hpp"
#include "evidence/ReportHtml.hpp"

namespace airlock {
namespace {

using json = nlohmann::json;

// The acceptance scenario's records, by hand.
EvidenceModel session() {
    EvidenceModel m;
    m.manifest = {{"id", "evd-1"},
                  {"sandbox", "sbx-1"},
                  {"tenant", "default"},
                  {"task", {{"id", "task-ev"}, {"prompt", "Make add() robust <b>now</b>"}}},
                  {"workspace", {{"base_commit", "abc"}, {"final_tree", "def"}}}};
    m.files = json::array({
        {{"path", "src/app.py"},
         {"status", "modified"},
         {"in_scope", true},
         {"additions", 1},
         {"deletions", 1}},
        {{"path", "docs/notes.md"}, {"status", "added"}, {"in_scope", false}},
        {{"path", ".github/workflows/x.yml"},
         {"status", "added"},
         {"in_scope", false},
         {"sensitive", true}},
        {{"path", "dist/bundle.js"},
         {"status", "modified"},
         {"in_scope", true},
         {"generated", true}},
        {{"path", "package-lock.json"},
         {"status", "modified"},
         {"in_scope", true},
         {"generated", true},
         {"lockfile", true}},
    });
    m.patch =
        "diff --git a/src/app.py b/src/app.py\nindex 1..2 100644\n--- a/src/app.py\n+++ "
        "b/src/app.py\n@@ -1 +1 @@\n"
        "-    return a + b\n+    return int(a) + int(b)\n";
    m.commands = {
        {{"id", "c1"},
         {"at", "2026-01-01T00:00:01Z"},
         {"command", "cat src/app.py"},
         {"decision", "allow"},
         {"exit_code", 0},
         {"ended_at", "2026-01-01T00:00:01Z"}},
        {{"id", "c2"},
         {"at", "2026-01-01T00:00:02Z"},
         {"command", "rm -rf /"},
         {"decision", "deny"},
         {"reason", "destructive"}},
        {{"id", "c3"},
         {"at", "2026-01-01T00:00:03Z"},
         {"command", "npm install airlock-fixture-ok"},
         {"decision", "approve"},
         {"approval_id", "apr-1"},
         {"approval", "approved"},
         {"exit_code", 0},
         {"ended_at", "2026-01-01T00:00:09Z"}},
        {{"id", "c4"},
         {"at", "2026-01-01T00:00:10Z"},
         {"command", "python3 tests/run_junit.py"},
         {"decision", "allow"},
         {"purpose", "test"},
         {"exit_code", 1},
         {"ended_at", "2026-01-01T00:00:11Z"}},
    };
    m.egress = {{{"at", "t"}, {"host", "localhost"}, {"port", 8000}, {"decision", "allowed"}},
                {{"at", "t"},
                 {"host", "127.0.0.2"},
                 {"port", 8000},
                 {"decision", "denied"},
                 {"reason", "not allowed"}}};
    m.packages = {{{"ecosystem", "npm"},
                   {"name", "airlock-fixture-ok"},
                   {"version", "1.0.0"},
                   {"decision", "allowed"}}};
    m.dependencyChanges = {
        {"npm", "package-lock.json", "airlock-fixture-ok", "", "1.0.0", "added"}};
    m.testRuns = {{"c4", "python3 tests/run_junit.py", "2026-01-01T00:00:11Z", 1, false}};
    m.junit = {{"reports/junit.xml",
                "",
                {{"demo", "demo", "test_add_ints", "passed", "", 0.01},
                 {"demo", "demo", "test_add_strings", "failed", "expected ab", 0.01}},
                "c4",
                ""}};
    m.artifacts = {{"out/screenshot.png", "image/png", 3, true, "", "", "artifacts/out/screenshot.png"},
                   {"out/debug.log", "text/plain", 90, true, "", "holds a PEM private key", ""},
                   {"out/huge.bin", "application/octet-stream", 50u << 20, false,
                    "larger than the 10 MiB cap", "", ""}};
    return m;
}

const json* byKind(const json& findings, const std::string& kind) {
    for (const auto& f : findings["findings"])
        if (f["kind"] == kind) return &f;
    return nullptr;
}

TEST(Findings, EachQuestionIsAnsweredWithTheEvidenceItRestsOn) {
    auto m = session();
    auto f = computeFindings(m);
    for (auto [kind, mention] : std::vector<std::pair<std::string, std::string>>{
             {"tests_failed", "test_add_strings"},
             {"out_of_scope_changes", "docs/notes.md"},
             {"dependency_changes", "airlock-fixture-ok"},
             {"generated_files_changed", "dist/bundle.js"},
             {"sensitive_paths_touched", ".github/workflows/x.yml"},
             {"network_contacted", "localhost"},
             {"network_refused", "127.0.0.2"},
             {"commands_denied", "rm -rf /"},
             {"commands_gated", "apr-1"},
             {"large_artifacts", "out/huge.bin"},
             {"sensitive_artifacts", "out/debug.log"},
         }) {
        const json* found = byKind(f, kind);
        ASSERT_NE(found, nullptr) << kind;
        EXPECT_NE(found->dump().find(mention), std::string::npos) << kind << ": " << found->dump();
        EXPECT_FALSE((*found)["evidence"].empty()) << kind;
    }
    EXPECT_EQ(byKind(f, "tests_not_run"), nullptr);
    EXPECT_EQ(byKind(f, "unverified_changes"), nullptr) << "the test ran after the last command";
    auto dep = byKind(f, "dependency_changes");
    EXPECT_EQ((*dep)["evidence"][0]["through_proxy"], true)
        << "cross-checked with the package records";
    auto s = testSummary(m);
    EXPECT_EQ(s["result"], "failed");
    EXPECT_EQ(s["passed"], 1);
    EXPECT_EQ(s["failed"], 1);
    EXPECT_EQ(s["failed_tests"][0]["name"], "test_add_strings");
}

TEST(Findings, NoTestsOrAChangeAfterTheLastTestIsUnverified) {
    auto m = session();
    m.testRuns.clear();
    m.junit.clear();
    auto f = computeFindings(m);
    EXPECT_NE(byKind(f, "tests_not_run"), nullptr);
    EXPECT_NE(byKind(f, "unverified_changes"), nullptr);
    EXPECT_EQ(byKind(f, "tests_failed"), nullptr);

    auto later = session();
    later.commands.push_back({{"id", "c5"},
                              {"command", "sed -i s/a/b/ src/app.py"},
                              {"decision", "allow"},
                              {"exit_code", 0},
                              {"ended_at", "2026-01-01T00:00:20Z"}});
    auto laterFindings = computeFindings(later);
    auto u = byKind(laterFindings, "unverified_changes");
    ASSERT_NE(u, nullptr);
    EXPECT_NE(u->dump().find("c5"), std::string::npos);
    // With the guest's file activity, the last write decides, not the last
    // command: c5 wrote nothing, an unattributed write came before the test.
    later.activity = {{{"path", "src/app.py"},
                       {"source", "guest"},
                       {"writes", 1},
                       {"last_write", "2026-01-01T00:00:05Z"},
                       {"execs", json::array()}}};
    EXPECT_EQ(byKind(computeFindings(later), "unverified_changes"), nullptr);
    // Files API records are not the guest's watch: the commands decide again.
    auto apiOnly = later;
    apiOnly.activity = {{{"path", "src/app.py"}, {"source", "api"}, {"event", "file.written"}}};
    EXPECT_NE(byKind(computeFindings(apiOnly), "unverified_changes"), nullptr);
    // A write by a command counts at that command's end (the host's clock),
    // whatever the guest's clock said.
    later.activity[0]["execs"] = json::array({"c5"});
    auto byC5 = computeFindings(later);  // byKind points into it
    u = byKind(byC5, "unverified_changes");
    ASSERT_NE(u, nullptr);
    EXPECT_NE(u->dump().find("src/app.py"), std::string::npos) << u->dump();
    // A test run's own writes (its reports) are no change after the tests.
    later.activity[0]["execs"] = json::array({"c4"});  // the test run
    EXPECT_EQ(byKind(computeFindings(later), "unverified_changes"), nullptr)
        << computeFindings(later).dump();
    // A clean session: passing tests, nothing odd.
    EvidenceModel clean;
    clean.files = json::array({{{"path", "src/a.py"}, {"status", "modified"}, {"in_scope", true}}});
    clean.testRuns = {{"c1", "pytest", "2026-01-01T00:00:11Z", 0, false}};
    EXPECT_TRUE(computeFindings(clean)["findings"].empty()) << computeFindings(clean).dump();
}

TEST(ReportHtml, EverythingIsEscapedNothingRunsAndTheReviewerSeesTheDiffAndFailures) {
    auto m = session();
    m.files.push_back(
        {{"path", "src/<script>alert(1)</script>.py"}, {"status", "added"}, {"in_scope", true}});
    m.commands.push_back(
        {{"id", "c9"}, {"command", "echo '<img src=x onerror=alert(1)>'"}, {"decision", "allow"}});
    m.artifacts.push_back({"out/x.svg", "image/svg+xml", 10, true, "", "", "artifacts/out/x.svg"});
    m.patch += "diff --git a/evil.html b/evil.html\n+<script>steal()</script>\n";
    auto findings = computeFindings(m);
    std::string html = renderReport(m, findings, testSummary(m));
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_EQ(html.find("<img src=x"), std::string::npos);
    EXPECT_EQ(html.find("<b>now</b>"), std::string::npos);
    EXPECT_NE(html.find("&lt;script&gt;steal()"), std::string::npos);
    EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
    EXPECT_EQ(html.find("http://"), std::string::npos) << "no external resource";
    EXPECT_EQ(html.find("https://"), std::string::npos);
    EXPECT_NE(html.find("src/app.py"), std::string::npos);
    EXPECT_NE(html.find("test_add_strings"), std::string::npos);
    EXPECT_NE(html.find("src=\"artifacts/out/screenshot.png\""), std::string::npos) << "PNG shown";
    EXPECT_EQ(html.find("artifacts/out/x.svg\""), std::string::npos)
        << "SVG never inlined or shown";
    EXPECT_EQ(html.find("artifacts/out/debug.log\""), std::string::npos);
    // Sections in the reviewer's order.
    std::vector<std::string> order = {"id=\"summary\"",  "id=\"findings\"",  "id=\"diff\"",
                                      "id=\"tests\"",    "id=\"commands\"",  "id=\"network\"",
                                      "id=\"packages\"", "id=\"artifacts\"", "id=\"verify\""};
    std::size_t last = 0;
    for (const auto& s : order) {
        auto at = html.find(s);
        ASSERT_NE(at, std::string::npos) << s;
        EXPECT_GT(at, last) << s;
        last = at;
    }
}

}  // namespace
}  // namespace airlock
