#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace airlock {

enum class SandboxState { creating, running, paused, stopped, error, deleting };
std::string sandboxStateName(SandboxState s);
SandboxState parseSandboxState(const std::string& s);

// What the store keeps about a sandbox; the controller's source of truth
// across restarts.
struct SandboxRecord {
    std::string id;
    std::string tenant;
    std::string templateName;
    SandboxState state = SandboxState::creating;
    unsigned vcpus = 1;
    unsigned memoryMib = 256;
    std::string createdAt;
    std::string metadataJson = "{}";  // client-supplied string map
    std::string envJson = "{}";       // default environment for every exec
    std::string error;                // why it is in state error
    std::string snapshotId;           // the snapshot it was cloned from, if any
    std::string disk;  // current disk overlay (file name in its dir), if it has a disk
    std::vector<std::string> layers;  // snapshot ids whose frozen disk layers its disk chain reads
    std::int64_t timeoutS = 0;        // 0: no timeout
    std::string onTimeout = "kill";   // kill | pause
    std::int64_t expiresAt = 0;       // unix seconds; 0: never
    std::string policyJson = "{}";  // per-sandbox command rules {"deny":[],"approve":[],"allow":[]}
    std::string secretsSealed;      // AES-GCM sealed JSON {"NAME":{"value","commands"}}; "" = none
    std::vector<std::string> secretNames;  // the names alone, in the clear
    std::vector<std::string> network;      // egress allowlist entries; empty: no network at all
    std::string packagesJson;  // package rules (packages::PackageRules JSON); "": the defaults
    std::int64_t qemuUid = 0;  // the uid its QEMU runs as (its own); 0: the shared QEMU user
    std::uint64_t diskBytes =
        0;  // its disk's virtual size (disk_gib); 0: no disk, or the template's
    // The task it serves (id, prompt, requested_by, test_commands,
    // sensitive_paths), secret values masked; "" = none. And the artifact
    // globs collected into its evidence bundles (JSON list).
    std::string taskJson;
    std::vector<std::string> artifacts;
    // Who reaches its guest ports by Host (<port>-<id>.<public domain>):
    // "exposed" (the native rule: only ports exposed, each with its token),
    // "public" (E2B's default: every port, no token) or "token" (E2B's
    // restricted traffic: every port, with the sandbox's traffic token).
    std::string portAccess = "exposed";
    // Paused without its memory: no VM while paused; resuming boots one
    // from its disk (its processes are gone, its files are not).
    bool pausedWithoutMemory = false;
    // Traffic to a paused sandbox (its envd, its ports) resumes it (a pause
    // with memory only; on_timeout must be pause).
    bool autoResume = false;
    // Paused with its memory written to disk and its VM gone (no QEMU, no
    // RAM); resuming restores it, processes and all.
    bool hibernated = false;
    // Why it is paused: "requested", "idle" or "timeout" ("" when running).
    std::string pauseReason;
    // Its idle rule ({"after_s": N, "action": "pause"|"hibernate"}; "": none)
    // and the volumes it mounts ([{"volume","name","path","read_only"}]; "": none).
    std::string idleJson;
    std::string volumesJson;
};

}  // namespace airlock
