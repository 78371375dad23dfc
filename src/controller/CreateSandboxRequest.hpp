#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "controller/SandboxSecrets.hpp"
#include "controller/WorkspaceSpec.hpp"
#include "policy/CommandPolicy.hpp"

namespace airlock {

// What a create asks for, as the front doors parsed it.
struct CreateSandboxRequest {
    std::string templateName = "minimal";
    std::string snapshot;                  // clone this snapshot instead of booting a template
    std::string boot = "auto";             // auto | cold | warm (a template's ready snapshot)
    std::optional<std::int64_t> timeoutS;  // default: the server's
    std::string onTimeout = "kill";        // kill | pause
    std::optional<unsigned> vcpus;
    std::optional<unsigned> memoryMib;
    std::optional<unsigned>
        diskGib;  // the disk's size (templates with a disk); default: the template's
    std::map<std::string, std::string> metadata;
    std::map<std::string, std::string> env;
    policy::PolicyRules policy;  // per-sandbox rules (deny > approve > allow > defaults)
    std::map<std::string, SecretSpec> secrets;
    std::vector<std::string> networkAllow;  // egress allowlist; empty: no network
    // Package rules (validated: packages::PackageRules); nullopt: the defaults.
    std::optional<nlohmann::json> packages;
    // An agent key asks: the rules may only be as strict as the tenant's or stricter.
    bool packagesTightenOnly = false;
    // A repository workspace (the workspace service prepares it; the
    // controller itself ignores it).
    std::optional<WorkspaceSpec> workspace;
    // The task this sandbox serves (validated by the API: id, prompt,
    // requested_by, test_commands, sensitive_paths), stored with the
    // sandbox's secret values masked; and workspace-relative artifact globs.
    std::optional<nlohmann::json> task;
    std::vector<std::string> artifacts;
    std::string portAccess = "exposed";  // see SandboxRecord::portAccess
};

}  // namespace airlock
