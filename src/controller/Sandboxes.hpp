#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "controller/CreateSandboxRequest.hpp"
#include "controller/SandboxSecrets.hpp"
#include "store/SandboxStore.hpp"
#include "store/TenantScope.hpp"

namespace airlock {

// What a pause keeps: the VM's memory (its processes go on after the
// resume), or only its disk (the VM is shut off; the resume boots it, as
// E2B's filesystem-only pause does), or its memory written to disk and the
// VM gone (hibernate: no QEMU, no RAM; the resume restores it whole).
enum class PauseKind { memory, disk_only, hibernate };

// The sandbox lifecycle as a front door sees it, and no more: made, found,
// listed, paused, resumed, given a deadline and removed, each call scoped
// to the caller's tenant (another tenant's sandbox is Error(not_found)).
// The controller implements it; the front doors depend on this, not on the
// controller.
class Sandboxes {
  public:
    virtual ~Sandboxes() = default;
    virtual SandboxRecord create(const std::string& tenant, const CreateSandboxRequest& request) = 0;
    virtual SandboxRecord get(const std::string& tenant, const std::string& id) = 0;
    // A tenant's, or every tenant's (TenantScope::all(): never the internal
    // spares and warm sandboxes).
    virtual std::vector<SandboxRecord> list(const TenantScope& scope) = 0;
    // The tenant owning a sandbox (sbx-), snapshot (snap-) or approval
    // (apr-) id; nullopt for anything else or an internal object.
    virtual std::optional<std::string> ownerOf(const std::string& id) = 0;
    // `why` ends the message of calls still open on the sandbox.
    virtual void destroy(const std::string& tenant, const std::string& id,
                         const std::string& why) = 0;
    virtual SandboxRecord pause(const std::string& tenant, const std::string& id,
                                PauseKind kind) = 0;
    SandboxRecord pause(const std::string& tenant, const std::string& id) {
        return pause(tenant, id, PauseKind::memory);
    }
    virtual SandboxRecord resume(const std::string& tenant, const std::string& id) = 0;
    // A call that needs the sandbox running found it paused with
    // auto_resume: it resumes, its timeout starts again. The milliseconds
    // the resume took (0: it was running already).
    virtual std::int64_t wake(const std::string& tenant, const std::string& id) = 0;
    // Seconds from now (0: none).
    virtual SandboxRecord setTimeout(const std::string& tenant, const std::string& id,
                                     std::int64_t timeoutS) = 0;
    // Replaces the egress allowlist; connections opened from now on are
    // judged by the new list.
    virtual SandboxRecord setNetwork(const std::string& tenant, const std::string& id,
                                     const std::vector<std::string>& allow) = 0;
    // Adds or replaces one secret of a running sandbox (commands started
    // from now on get it; an injected one goes to the proxy at once).
    // True when it was new.
    virtual bool setSecret(const std::string& tenant, const std::string& id,
                           const std::string& name, const SecretSpec& secret) = 0;
    // The tenant's secret of that name as TenantSecrets holds it now (or
    // its absence) taken into each of the tenant's sandboxes here that has
    // it from the tenant or lacks it (a create's own of that name is kept).
    // How many changed.
    virtual std::size_t applyTenantSecret(const std::string& tenant, const std::string& name) = 0;
};

}  // namespace airlock
