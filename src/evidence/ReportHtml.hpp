#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "evidence/EvidenceModel.hpp"

namespace airlock {

// report.html: one self-contained page, no JavaScript, no external
// resources (a Content-Security-Policy says so too), every value escaped;
// nothing the agent produced is inlined as markup (images of the bundle's
// own PNG/JPEG artifacts are linked by relative path, SVG never). Sections
// in a reviewer's order: summary and findings, the diff per file, tests,
// the command timeline, network, packages and lockfile changes, artifacts,
// how to verify the bundle.
std::string renderReport(const EvidenceModel& model, const nlohmann::json& findings,
                         const nlohmann::json& testSummary);

}  // namespace airlock
