#pragma once
#include <nlohmann/json.hpp>

#include "evidence/EvidenceModel.hpp"

namespace airlock {

// The reviewer's questions answered from the records, each finding with the
// evidence it rests on (bundle file + the record or path):
//   {"findings":[{"kind","severity","summary","evidence":[{"file","ref",...}]}]}
// Kinds: tests_failed, tests_not_run, out_of_scope_changes,
// dependency_changes, generated_files_changed, sensitive_paths_touched,
// network_contacted, network_refused, commands_denied, commands_gated,
// large_artifacts, sensitive_artifacts, unverified_changes,
// test_report_not_from_test_run (a JUnit file no recorded test run wrote last).
nlohmann::json computeFindings(const EvidenceModel& model);

// tests/summary.json: the runs (exec purpose test: exit codes) and the
// JUnit cases (passed, failed, errors, skipped, and the failing names) of
// the reports a recorded test run wrote; the others are listed, not counted.
nlohmann::json testSummary(const EvidenceModel& model);

}  // namespace airlock
