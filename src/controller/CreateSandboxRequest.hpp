#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controller/SandboxSecrets.hpp"
#include "controller/WorkspaceSpec.hpp"
#include "packages/PackageRules.hpp"
#include "policy/CommandPolicy.hpp"
#include "store/TaskSpec.hpp"

namespace airlock {

// How a sandbox starts: a template's ready (warm) snapshot when one fits,
// else a cold boot (automatic); only cold; only warm (409 without one).
enum class BootMode { automatic, cold, warm };
// What its timeout does.
// pause_disk_only: a pause without memory (PauseKind::disk_only).
enum class TimeoutAction { kill, pause, pause_disk_only };
// Who reaches its ports (SandboxRecord::portAccess): exposed (what the
// sandbox's rules expose, with the caller's key), open ("public": anyone
// with the URL) or token (E2B's traffic token).
enum class PortAccess { exposed, open, token };

// Each from its wire name (Error(bad_request) naming the field and the
// values it takes), and back.
BootMode bootModeFrom(std::string_view name);
TimeoutAction timeoutActionFrom(std::string_view name);
PortAccess portAccessFrom(std::string_view name);
std::string_view bootModeName(BootMode mode);
std::string_view timeoutActionName(TimeoutAction action);
std::string_view portAccessName(PortAccess access);

// A volume a create mounts: the tenant's volume by name, where in the
// guest, and whether it may write there.
struct VolumeRequest {
    std::string name;
    std::string path;
    bool readOnly = false;
};

// Sleep when idle: after this long with no exec, stream, process output or
// port traffic, the sandbox is paused (memory kept) or hibernated (memory
// written to disk, its VM gone).
enum class IdleAction { pause, hibernate };
struct IdleRule {
    std::int64_t afterS = 300;
    IdleAction action = IdleAction::pause;
};
IdleAction idleActionFrom(std::string_view name);
std::string_view idleActionName(IdleAction action);
std::string idleRuleJson(const std::optional<IdleRule>& rule);  // "" for none
std::optional<IdleRule> idleRuleFrom(const std::string& json);

// What a create asks for, as the front doors parsed it.
struct CreateSandboxRequest {
    std::string templateName = "minimal";
    std::string snapshot;                  // clone this snapshot instead of booting a template
    // A sandbox of the same tenant whose settings the new one takes (a
    // fork): metadata, env, command rules, secrets, network, packages, port
    // access and timeout action, in place of this request's own.
    std::string settingsFrom;
    BootMode boot = BootMode::automatic;
    std::optional<std::int64_t> timeoutS;  // default: the server's
    TimeoutAction onTimeout = TimeoutAction::kill;
    std::optional<unsigned> vcpus;
    std::optional<unsigned> memoryMib;
    std::optional<unsigned>
        diskGib;  // the disk's size (templates with a disk); default: the template's
    std::map<std::string, std::string> metadata;
    std::map<std::string, std::string> env;
    policy::PolicyRules policy;  // per-sandbox rules (deny > approve > allow > defaults)
    std::map<std::string, SecretSpec> secrets;
    std::vector<std::string> networkAllow;  // egress allowlist; empty: no network
    // Package rules over the tenant's; nullopt: the tenant's as they are.
    std::optional<packages::PackageRulesChange> packages;
    // An agent key asks: the rules may only be as strict as the tenant's or stricter.
    bool packagesTightenOnly = false;
    // A repository workspace (the workspace service prepares it; the
    // controller itself ignores it).
    std::optional<WorkspaceSpec> workspace;
    // The task this sandbox serves (validated by the API), stored with the
    // sandbox's secret values masked; and workspace-relative artifact globs.
    std::optional<TaskSpec> task;
    std::vector<std::string> artifacts;
    PortAccess portAccess = PortAccess::exposed;
    // A call that needs it running resumes it when it is paused (needs
    // on_timeout pause or an idle rule).
    bool autoResume = false;
    // Volumes it mounts (cold boots only; a clone mounts its snapshot's).
    std::optional<std::vector<VolumeRequest>> volumes;
    std::optional<IdleRule> idle;
    // The template builder's own: `snapshot` may be a build's snapshot (a
    // cached layer). No front door sets it.
    bool fromBuildSnapshot = false;
};

}  // namespace airlock
