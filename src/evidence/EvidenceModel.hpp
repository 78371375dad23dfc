#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evidence/DependencyChanges.hpp"
#include "evidence/JunitReport.hpp"

namespace airlock {

// Everything a bundle says, gathered before it is written: the findings and
// the report are computed from this alone (pure functions, unit-tested),
// and the same records are written as the bundle's JSON Lines files.
struct EvidenceModel {
    nlohmann::json manifest =
        nlohmann::json::object();                    // id, sandbox, task, workspace, times, counts
    nlohmann::json files = nlohmann::json::array();  // changes/files.json
    std::string patch;                               // changes/changes.patch
    std::vector<nlohmann::json>
        commands;  // commands.jsonl: id, at, command, decision, exit_code, purpose, ...
    std::vector<nlohmann::json> approvals;
    std::vector<nlohmann::json> egress;    // at, host, port, decision (allowed|denied), reason
    std::vector<nlohmann::json> packages;  // the package proxy's records
    std::vector<nlohmann::json> activity;  // per path: path, reads, writes, first, last
    std::vector<DependencyChange> dependencyChanges;

    struct TestRun {
        std::string commandId, command, endedAt;
        int exitCode = 0;
        bool timedOut = false;
    };
    std::vector<TestRun> testRuns;
    struct TestFile {
        std::string path, error;  // error: why it was not read as JUnit
        std::vector<JunitCase> cases;
        // Its cases count only when a recorded test run wrote it last: the
        // run's exec id, or why not (a report the agent wrote by hand).
        std::string writtenBy = {}, notCounted = {};
        bool counted() const { return notCounted.empty(); }
    };
    std::vector<TestFile> junit;

    struct Artifact {
        std::string path, type;  // workspace-relative; media type by name
        std::uint64_t size = 0;
        bool collected = false;
        std::string skipped;    // why it is not in the bundle (cap, size)
        std::string sensitive;  // why it looks like a secret ("" when not)
        std::string bundlePath = {};  // its file in the bundle (bundleSafePath), when collected
    };
    std::vector<Artifact> artifacts;
    std::uint64_t largeArtifactBytes = 10u << 20;
    std::vector<std::string> previews;  // informational
};

}  // namespace airlock
