#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/SecretMasker.hpp"

namespace airlock {

struct SandboxRecord;

// The task a sandbox serves, as its creator gave it (the API validated
// it): who asked for what, the commands that count as its test runs, the
// paths a reviewer must look at. Stored in the record as its JSON.
struct TaskSpec {
    std::optional<std::string> id, prompt, requestedBy;
    std::vector<std::string> testCommands;
    std::vector<std::string> sensitivePaths;

    // Every string masked (the creator's text may hold a secret's value).
    TaskSpec masked(const SecretMasker& masker) const;
    // {"id"?, "prompt"?, "requested_by"?, "test_commands", "sensitive_paths"}
    nlohmann::json toJson() const;
};

// A record's task; nullopt when it has none (or its stored text is not a
// task: rows are written validated, so that is a damaged row, read as none).
std::optional<TaskSpec> taskOf(const SandboxRecord& r);

}  // namespace airlock
