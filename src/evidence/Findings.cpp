#include "evidence/Findings.hpp"

#include <set>

#include "core/JsonFields.hpp"

namespace airlock {
namespace {

using json = nlohmann::json;

json finding(const std::string& kind, const std::string& severity, const std::string& summary,
             json evidence) {
    return {{"kind", kind},
            {"severity", severity},
            {"summary", summary},
            {"evidence", std::move(evidence)}};
}

std::string joinCapped(const std::vector<std::string>& items, std::size_t cap = 5) {
    std::string out;
    for (std::size_t i = 0; i < items.size() && i < cap; ++i) out += (i ? ", " : "") + items[i];
    if (items.size() > cap) out += " and " + std::to_string(items.size() - cap) + " more";
    return out;
}

bool changedFile(const json& f) { return stringOrEmpty(f, "status") != "unmodified"; }

}  // namespace

json testSummary(const EvidenceModel& m) {
    json runs = json::array();
    std::size_t failedRuns = 0;
    for (const auto& r : m.testRuns) {
        runs.push_back({{"exec_id", r.commandId},
                        {"command", r.command},
                        {"ended_at", r.endedAt},
                        {"exit_code", r.exitCode},
                        {"timed_out", r.timedOut}});
        failedRuns += r.exitCode != 0 || r.timedOut;
    }
    std::size_t passed = 0, failed = 0, errors = 0, skipped = 0;
    json failedTests = json::array(), reports = json::array();
    std::size_t countedReports = 0;
    for (const auto& f : m.junit) {
        json report = {{"path", f.path}, {"cases", f.cases.size()}, {"counted", f.counted()}};
        if (!f.error.empty()) report["error"] = f.error;
        if (!f.writtenBy.empty()) report["written_by"] = f.writtenBy;
        if (!f.counted()) report["not_counted"] = f.notCounted;
        reports.push_back(report);
        // A report no recorded test run wrote says nothing about the tests.
        if (!f.counted()) continue;
        ++countedReports;
        for (const auto& c : f.cases) {
            if (c.status == "passed") ++passed;
            if (c.status == "skipped") ++skipped;
            if (c.status == "failed") ++failed;
            if (c.status == "error") ++errors;
            if (c.status == "failed" || c.status == "error")
                failedTests.push_back({{"name", c.name},
                                       {"classname", c.classname},
                                       {"suite", c.suite},
                                       {"status", c.status},
                                       {"message", c.message},
                                       {"report", f.path}});
        }
    }
    std::string result = m.testRuns.empty() && countedReports == 0 ? "not_run"
                         : (failedRuns || failed || errors)    ? "failed"
                                                               : "passed";
    return {{"result", result},          {"runs", runs},
            {"failed_runs", failedRuns}, {"passed", passed},
            {"failed", failed},          {"errors", errors},
            {"skipped", skipped},        {"failed_tests", failedTests},
            {"reports", reports}};
}

json computeFindings(const EvidenceModel& m) {
    json out = json::array();
    auto summary = testSummary(m);

    // Tests: what ran and what failed, from exit codes and JUnit only.
    if (summary["result"] == "failed") {
        json ev = json::array();
        std::vector<std::string> names;
        for (const auto& t : summary["failed_tests"]) {
            names.push_back(t["name"].get<std::string>());
            ev.push_back(
                {{"file", "tests/summary.json"}, {"test", t["name"]}, {"report", t["report"]}});
        }
        for (const auto& r : m.testRuns)
            if (r.exitCode != 0 || r.timedOut)
                ev.push_back({{"file", "commands/commands.jsonl"},
                              {"ref", r.commandId},
                              {"command", r.command},
                              {"exit_code", r.exitCode}});
        out.push_back(finding(
            "tests_failed", "high",
            names.empty() ? "a test run failed (exit code)"
                          : std::to_string(names.size()) + " test(s) failed: " + joinCapped(names),
            ev));
    }
    if (summary["result"] == "not_run")
        out.push_back(finding("tests_not_run", "medium", "no test was run in this sandbox",
                              json::array({{{"file", "commands/commands.jsonl"},
                                            {"ref", "no command with purpose test"}}})));
    {
        std::vector<std::string> names;
        json ev = json::array();
        for (const auto& f : m.junit) {
            if (f.counted()) continue;
            names.push_back(f.path);
            ev.push_back({{"file", "tests/summary.json"}, {"report", f.path}, {"why", f.notCounted}});
        }
        if (!names.empty())
            out.push_back(finding("test_report_not_from_test_run", "medium",
                                  std::to_string(names.size()) +
                                      " test report(s) not produced by a recorded test run, so "
                                      "not counted: " +
                                      joinCapped(names),
                                  ev));
    }

    // Changes: scope, generated files, sensitive paths, dependencies.
    std::vector<std::string> outOfScope, generated, sensitive;
    json outEv = json::array(), genEv = json::array(), sensEv = json::array();
    for (const auto& f : m.files) {
        if (!changedFile(f)) continue;
        std::string path = stringOrEmpty(f, "path");
        if (f.value("in_scope", true) == false) {
            outOfScope.push_back(path);
            outEv.push_back({{"file", "changes/files.json"},
                             {"path", path},
                             {"status", stringOrEmpty(f, "status")}});
        }
        if (f.value("generated", false)) {
            generated.push_back(path);
            genEv.push_back({{"file", "changes/files.json"}, {"path", path}});
        }
        if (f.value("sensitive", false)) {
            sensitive.push_back(path);
            sensEv.push_back({{"file", "changes/files.json"},
                              {"path", path},
                              {"status", stringOrEmpty(f, "status")}});
        }
    }
    std::set<std::string> sensitiveSeen(sensitive.begin(), sensitive.end());
    for (const auto& a : m.activity)
        if (a.value("sensitive", false) && !sensitiveSeen.count(stringOrEmpty(a, "path"))) {
            sensitive.push_back(stringOrEmpty(a, "path"));
            sensEv.push_back({{"file", "files/activity.jsonl"},
                              {"path", stringOrEmpty(a, "path")},
                              {"reads", a.value("reads", 0)},
                              {"writes", a.value("writes", 0)}});
        }
    if (!outOfScope.empty())
        out.push_back(
            finding("out_of_scope_changes", "high",
                    std::to_string(outOfScope.size()) +
                        " file(s) changed outside the write scope: " + joinCapped(outOfScope),
                    outEv));
    if (!generated.empty())
        out.push_back(finding("generated_files_changed", "low",
                              std::to_string(generated.size()) +
                                  " generated file(s) rewritten: " + joinCapped(generated),
                              genEv));
    if (!sensitive.empty())
        out.push_back(finding("sensitive_paths_touched", "high",
                              "sensitive path(s) touched: " + joinCapped(sensitive), sensEv));

    if (!m.dependencyChanges.empty()) {
        // Cross-checked with what came through the package proxy: a
        // dependency added to a lockfile that was never downloaded here
        // (or the other way round) is worth a second look.
        std::set<std::string> fetched;
        for (const auto& p : m.packages)
            if (stringOrEmpty(p, "decision") == "allow" ||
                stringOrEmpty(p, "decision") == "allowed" ||
                stringOrEmpty(p, "decision") == "approved")
                fetched.insert(stringOrEmpty(p, "name"));
        json ev = json::array();
        std::vector<std::string> names;
        for (const auto& c : m.dependencyChanges) {
            names.push_back(c.name.empty() ? c.file : c.name);
            json e = {{"file", "changes/files.json"},
                      {"path", c.file},
                      {"ecosystem", c.ecosystem},
                      {"name", c.name},
                      {"change", c.change},
                      {"before", c.before},
                      {"after", c.after}};
            if (c.change == "added" || c.change == "upgraded" || c.change == "downgraded")
                e["through_proxy"] = fetched.count(c.name) > 0;
            ev.push_back(e);
        }
        out.push_back(finding("dependency_changes", "medium",
                              std::to_string(m.dependencyChanges.size()) +
                                  " dependency change(s): " + joinCapped(names),
                              ev));
    }

    // Network.
    std::set<std::string> contacted, refused;
    json conEv = json::array(), refEv = json::array();
    for (const auto& e : m.egress) {
        std::string dest =
            stringOrEmpty(e, "host") + (e.contains("port") ? ":" + e["port"].dump() : "");
        std::string decision = stringOrEmpty(e, "decision");
        if (decision == "allowed" && contacted.insert(dest).second)
            conEv.push_back({{"file", "network/egress.jsonl"},
                             {"destination", dest},
                             {"at", stringOrEmpty(e, "at")}});
        if (decision == "denied" && refused.insert(dest).second)
            refEv.push_back({{"file", "network/egress.jsonl"},
                             {"destination", dest},
                             {"at", stringOrEmpty(e, "at")},
                             {"reason", stringOrEmpty(e, "reason")}});
    }
    if (!contacted.empty())
        out.push_back(finding("network_contacted", "info",
                              "contacted: " + joinCapped(std::vector<std::string>(contacted.begin(),
                                                                                  contacted.end())),
                              conEv));
    if (!refused.empty())
        out.push_back(finding(
            "network_refused", "medium",
            "refused: " + joinCapped(std::vector<std::string>(refused.begin(), refused.end())),
            refEv));

    // Commands the policy stopped or held for a human.
    json denEv = json::array(), gateEv = json::array();
    std::vector<std::string> denied, gated;
    for (const auto& c : m.commands) {
        std::string decision = stringOrEmpty(c, "decision");
        if (decision == "deny") {
            denied.push_back(stringOrEmpty(c, "command"));
            denEv.push_back({{"file", "commands/commands.jsonl"},
                             {"ref", stringOrEmpty(c, "id")},
                             {"command", stringOrEmpty(c, "command")},
                             {"reason", stringOrEmpty(c, "reason")}});
        } else if (decision == "approve") {
            gated.push_back(stringOrEmpty(c, "command"));
            gateEv.push_back({{"file", "commands/commands.jsonl"},
                              {"ref", stringOrEmpty(c, "id")},
                              {"command", stringOrEmpty(c, "command")},
                              {"approval_id", stringOrEmpty(c, "approval_id")},
                              {"outcome", stringOrEmpty(c, "approval")}});
        }
    }
    if (!denied.empty())
        out.push_back(finding(
            "commands_denied", "medium",
            std::to_string(denied.size()) + " command(s) denied: " + joinCapped(denied, 3), denEv));
    if (!gated.empty())
        out.push_back(finding("commands_gated", "info",
                              std::to_string(gated.size()) +
                                  " command(s) waited for a human: " + joinCapped(gated, 3),
                              gateEv));

    // Artifacts.
    json bigEv = json::array(), secEv = json::array();
    std::vector<std::string> big, secret;
    for (const auto& a : m.artifacts) {
        if (a.size >= m.largeArtifactBytes || !a.skipped.empty()) {
            big.push_back(a.path);
            json e = {{"file", "manifest.json"}, {"path", a.path}, {"size", a.size}};
            if (!a.skipped.empty()) e["skipped"] = a.skipped;
            bigEv.push_back(e);
        }
        if (!a.sensitive.empty()) {
            secret.push_back(a.path);
            secEv.push_back({{"file", a.collected ? "artifacts/" + a.path : "manifest.json"},
                             {"path", a.path},
                             {"reason", a.sensitive}});
        }
    }
    if (!big.empty())
        out.push_back(finding("large_artifacts", "low",
                              "large or capped artifact(s): " + joinCapped(big), bigEv));
    if (!secret.empty())
        out.push_back(finding("sensitive_artifacts", "high",
                              "artifact(s) that look like secrets: " + joinCapped(secret), secEv));

    // Work not verified: a change after the last test run (file activity
    // when the guest reported it, else any other command after it).
    bool anyChange = false;
    for (const auto& f : m.files) anyChange = anyChange || changedFile(f);
    if (anyChange) {
        std::string lastTest;
        for (const auto& r : m.testRuns) lastTest = std::max(lastTest, r.endedAt);
        std::string lastChange, changeRef, changeFile;
        bool guestWatched = false;
        for (const auto& a : m.activity) {
            if (stringOrEmpty(a, "source") != "guest") continue;
            guestWatched = true;
            if (a.value("writes", 0) == 0) continue;
            // A write by a command counts at that command's end (the host's
            // clock, as the test runs'); a test run's own writes (reports,
            // caches) are no change; one by no known command at its own time.
            std::string at;
            bool byCommand = false;
            for (const auto& x : a.value("execs", json::array())) {
                if (!x.is_string()) continue;
                for (const auto& c : m.commands)
                    if (stringOrEmpty(c, "id") == x.get<std::string>()) {
                        byCommand = true;
                        if (stringOrEmpty(c, "purpose") != "test")
                            at = std::max(at, stringOrEmpty(c, "ended_at"));
                    }
            }
            if (!byCommand) at = stringOrEmpty(a, "last_write");
            if (at > lastChange) {
                lastChange = at;
                changeRef = stringOrEmpty(a, "path");
                changeFile = "files/activity.jsonl";
            }
        }
        if (!guestWatched)
            for (const auto& c : m.commands)
                if (stringOrEmpty(c, "purpose") != "test" && c.contains("exit_code") &&
                    stringOrEmpty(c, "ended_at") > lastChange) {
                    lastChange = stringOrEmpty(c, "ended_at");
                    changeRef = stringOrEmpty(c, "id");
                    changeFile = "commands/commands.jsonl";
                }
        if (lastTest.empty())
            out.push_back(
                finding("unverified_changes", "medium", "files changed and no test ran",
                        json::array({{{"file", "changes/files.json"}, {"ref", "no test run"}}})));
        else if (!lastChange.empty() && lastChange > lastTest)
            out.push_back(finding(
                "unverified_changes", "medium",
                "a change came after the last test run (" + lastTest + ")",
                json::array({{{"file", changeFile}, {"ref", changeRef}, {"at", lastChange}}})));
    }
    return {{"findings", out}};
}

}  // namespace airlock
