// Moving a sandbox to another host under the same id: the parts of
// SandboxController that let one leave whole and start again elsewhere.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "controller/DiskLayers.hpp"
#include "controller/SandboxController.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "core/SafeFs.hpp"

namespace airlock {
namespace fs = std::filesystem;

namespace {

// The audit log that travels with a sandbox: its first events (creation,
// policy) and the rest up to this many.
constexpr std::size_t kMovedAuditEvents = 20'000;

// A copy of the overlay QEMU writes: opened without following anything
// planted in its directory, written to a new file of root's.
void copyOut(const std::string& dir, const std::string& name, const std::string& to) {
    auto d = safefs::openDir(dir);
    auto from = safefs::openFileAt(d.get(), name);
    UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!out) throw Error(ErrorCode::internal, "cannot create " + to + ": " + std::strerror(errno));
    std::vector<char> buffer(1 << 20);
    for (;;) {
        ssize_t n = ::read(from.get(), buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            throw Error(ErrorCode::internal, "cannot read " + name + ": " + std::strerror(errno));
        if (n == 0) break;
        for (ssize_t done = 0; done < n;) {
            ssize_t w =
                ::write(out.get(), buffer.data() + done, static_cast<std::size_t>(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0)
                throw Error(ErrorCode::internal,
                            "cannot write " + to + ": " + std::strerror(errno));
            done += w;
        }
    }
    if (::fsync(out.get()) != 0) throw Error(ErrorCode::internal, "cannot sync " + to);
}

}  // namespace

class SandboxController::LeavingSandbox final : public OutgoingMove {
  public:
    LeavingSandbox(SandboxController& c, std::shared_ptr<std::mutex> mutex,
                   std::unique_lock<std::mutex> held, MovedSandbox moved, std::string state,
                   std::string disk, std::string workspace)
        : c_(c),
          mutex_(std::move(mutex)),
          held_(std::move(held)),
          moved_(std::move(moved)),
          state_(std::move(state)),
          disk_(std::move(disk)),
          workspace_(std::move(workspace)) {
        std::lock_guard lock(c_.leavingMutex_);
        c_.leaving_.insert(moved_.record.id);
    }
    ~LeavingSandbox() override {
        {
            std::lock_guard lock(c_.leavingMutex_);
            c_.leaving_.erase(moved_.record.id);
        }
        if (finished_ || moved_.paused) return;
        try {
            c_.hypervisor_.resumeDomain(domainName(moved_.record.id));
            logInfo("controller", "sandbox " + moved_.record.id + " did not move: it goes on here");
        } catch (const std::exception& e) {
            logError("controller", "cannot resume " + moved_.record.id +
                                       " after a move that did "
                                       "not happen: " +
                                       e.what());
        }
    }
    const MovedSandbox& sandbox() const override { return moved_; }
    const std::string& statePath() const override { return state_; }
    const std::string& diskPath() const override { return disk_; }
    const std::string& workspacePath() const override { return workspace_; }
    void finish(const std::string& node) override {
        const auto& id = moved_.record.id;
        finished_ = true;
        // The record goes first: a call from now on finds it on its new
        // node; one open here learns where it went.
        auto gone = c_.store_.find(id);
        c_.store_.remove(id);
        if (gone && gone->qemuUid > 0) c_.uids_.release(static_cast<std::uint32_t>(gone->qemuUid));
        c_.agents_.retire(
            id, "sandbox " + id + " moved to node " + node + "; call it again (any node answers)");
        c_.hypervisor_.destroyDomain(domainName(id));
        c_.agents_.forget(id);
        safefs::removeTree(c_.sandboxDir(id));
        c_.ports_.removeAll(id);
        if (c_.workspaces_) c_.workspaces_->remove(id);
        c_.snapshotLibrary_.collect();
        c_.gates_.cancelOf(id, "the sandbox moved to node " + node);
        c_.spares_->trim();
        logInfo("controller", "sandbox " + id + " moved to node " + node);
    }

  private:
    SandboxController& c_;
    std::shared_ptr<std::mutex> mutex_;
    std::unique_lock<std::mutex> held_;
    MovedSandbox moved_;
    std::string state_, disk_, workspace_;
    bool finished_ = false;
};

std::vector<SandboxRecord> SandboxController::movable() {
    auto all = list(TenantScope::all());
    // Hibernated ones and ones with volumes (this host's disks) stay.
    std::erase_if(all, [](const SandboxRecord& r) {
        return (r.state != SandboxState::running &&
                (r.state != SandboxState::paused || r.pausedWithoutMemory)) ||
               r.hibernated || !r.volumesJson.empty();
    });
    return all;
}

std::string SandboxController::arrivalsDir() const { return stagingDir(); }

bool SandboxController::leaving(const std::string& id) {
    std::lock_guard lock(leavingMutex_);
    return leaving_.count(id) > 0;
}

std::unique_ptr<OutgoingMove> SandboxController::moveOut(const std::string& id,
                                                         const SecretCipher& journey,
                                                         const std::string& workDir) {
    auto lifecycle = lifecycleMutex(id);
    std::unique_lock op(*lifecycle);
    auto r = isValidId(id, "sbx-") ? store_.find(id) : std::nullopt;
    if (!r || r->tenant.rfind('_', 0) == 0) throw Error(ErrorCode::not_found, "no sandbox " + id);
    if (r->state != SandboxState::running &&
        (r->state != SandboxState::paused || r->pausedWithoutMemory))
        throw Error(ErrorCode::conflict, "sandbox " + id + " is " + sandboxStateName(r->state) +
                                             (r->pausedWithoutMemory ? " without its memory" : "") +
                                             ": only a running or paused one moves");
    if (r->hibernated)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is hibernated: resume it to move it");
    if (!r->volumesJson.empty())
        throw Error(ErrorCode::conflict,
                    "sandbox " + id + " mounts volumes, which live on this node: it stays");
    auto tmpl = templates_.find(r->templateName);
    if (!tmpl) throw Error(ErrorCode::conflict, "template '" + r->templateName + "' is gone");
    MovedSandbox moved;
    moved.record = *r;
    moved.record.secretsSealed = secrets_.sealFor(journey, r->secretsSealed, id);
    moved.templateDigest = tmpl->digest;
    moved.paused = r->state == SandboxState::paused;
    AuditQuery page;
    page.limit = 1000;
    while (moved.audit.size() < kMovedAuditEvents) {
        auto events = audit_.query(id, page);
        if (events.empty()) break;
        page.after = events.back().seq;
        for (auto& e : events) moved.audit.push_back(std::move(e));
    }
    moved.ports = ports_.list(id);
    // Its workspace: the record, and the host's commits as a pack.
    std::string workspacePack;
    if (workspaces_) moved.workspace = workspaces_->find(id).value_or("");
    if (!moved.workspace.empty() && hooks_.packWorkspace(*r, workDir + "/workspace.pack"))
        workspacePack = workDir + "/workspace.pack";

    std::string domain = domainName(id);
    std::string state = workDir + "/state", disk;
    auto started = steadyMillis();
    if (!moved.paused) hypervisor_.suspendDomain(domain);
    try {
        hypervisor_.saveState(domain, state, sandboxDir(id));
        if (!r->disk.empty()) {
            // Paused and its state saved: QEMU has flushed the disk.
            disk = workDir + "/disk.qcow2";
            copyOut(sandboxDir(id), r->disk, disk);
            if (!r->layers.empty()) flattenOnto(disk, tmpl->diskPath);
        }
    } catch (...) {
        if (!moved.paused) {
            try {
                hypervisor_.resumeDomain(domain);
            } catch (const std::exception& e) {
                logError("controller", "cannot resume " + id + " after a failed move: " + e.what());
            }
        }
        throw;
    }
    logInfo("controller", "sandbox " + id + " held for its move: state and disk written in " +
                              std::to_string(steadyMillis() - started) + " ms");
    // Held until it has moved, or did not.
    return std::make_unique<LeavingSandbox>(*this, std::move(lifecycle), std::move(op),
                                            std::move(moved), state, disk, workspacePack);
}

SandboxRecord SandboxController::moveIn(const MovedSandbox& moved, const SecretCipher& journey,
                                        const std::string& statePath, const std::string& diskPath,
                                        const std::string& workspacePath,
                                        const std::string& from) {
    const std::string& id = moved.record.id;
    auto tmpl = templates_.find(moved.record.templateName);
    if (!tmpl || tmpl->digest != moved.templateDigest)
        throw Error(ErrorCode::conflict, "this node lacks template '" + moved.record.templateName +
                                             "' " + moved.templateDigest +
                                             ", which the sandbox's memory runs on");
    if (tmpl->diskPath.empty() != moved.record.disk.empty() ||
        moved.record.disk.empty() != diskPath.empty())
        throw Error(ErrorCode::bad_request, "sandbox " + id +
                                                " moved with a disk its template "
                                                "does not have, or without one it has");
    if (moved.record.vcpus < 1 || moved.record.vcpus > config_.maxVcpus ||
        moved.record.memoryMib > config_.maxMemoryMib)
        throw Error(ErrorCode::unprocessable, "sandbox " + id + " is larger than this node allows");
    requireFreeSpace("move", moved.record.diskBytes);
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    if (store_.find(id))
        throw Error(ErrorCode::conflict, "sandbox " + id + " is on this node already");
    SandboxRecord r = moved.record;
    r.secretsSealed = secrets_.sealFrom(journey, moved.record.secretsSealed, id);
    r.state = SandboxState::creating;
    r.layers.clear();  // one image over the template's
    r.error.clear();
    r.pausedWithoutMemory = false;
    r.qemuUid = uids_.enabled() ? uids_.acquire() : 0;
    store_.insert(r);  // written first: a crash from here on is undone by recover()
    std::string domain = domainName(id);
    try {
        auto started = steadyMillis();
        prepareSandboxDir(r);
        // Its workspace first: a remote that lost the base fails the move
        // before the guest runs here.
        if (!moved.workspace.empty())
            hooks_.arriveWorkspace(r, moved.workspace, workspacePath);
        if (!r.disk.empty()) {
            requirePlainQcow2(diskPath, r.diskBytes);
            rebaseInPlace(diskPath, tmpl->diskPath);
            fs::path staged(diskPath);
            installDisk(staged.parent_path().string(), staged.filename().string(), sandboxDir(id),
                        r.disk, qemuOwner(r));
        }
        DomainSpec spec = domainSpec(r, *tmpl);
        spec.incoming = true;
        hypervisor_.restoreDomain(spec, statePath, sandboxDir(id));
        hypervisor_.resumeDomain(domain);
        // The guest's port came back on another host: a new hello, and its
        // clock set (it stood still for the journey).
        std::shared_ptr<AgentConnection> agent = agents_.connect(id, std::chrono::seconds(30));
        reseed(*agent);
        agents_.adopt(r, std::move(agent));
        if (moved.paused) hypervisor_.suspendDomain(domain);
        r.state = moved.paused ? SandboxState::paused : SandboxState::running;
        store_.updateState(id, r.state);
        for (const auto& e : moved.audit) audit_.append(e);
        for (const auto& p : moved.ports) ports_.upsert(p);
        record(id, r.tenant, "sandbox.moved",
               {{"from", from}, {"ms", steadyMillis() - started}, {"disk", !r.disk.empty()}});
        logInfo("controller", "sandbox " + id + " moved in from node " + from + " in " +
                                  std::to_string(steadyMillis() - started) + " ms");
        return r;
    } catch (const std::exception& e) {
        logError("controller", "move of " + id + " from node " + from + " failed here: " +
                                   e.what() + "\nconsole tail:\n" + consoleTail(id));
        try {
            // Its usage and its place in the fleet are the sending node's still.
            teardown(id, "its move here failed", /*releaseUsage=*/false);
            if (workspaces_) workspaces_->remove(id);
        } catch (const std::exception& cleanup) {
            logError("controller", "cleanup of " + id + " failed: " + cleanup.what());
        }
        throw;
    }
}

void SandboxController::dropLocalCopy(const std::string& id, const std::string& why) {
    auto lifecycle = lifecycleMutex(id);
    std::lock_guard op(*lifecycle);
    teardown(id, why, /*releaseUsage=*/false);
    if (workspaces_) workspaces_->remove(id);
    logWarn("controller", "the copy of sandbox " + id + " here is gone: " + why);
}

}  // namespace airlock
