#include "controller/SnapshotLibrary.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "controller/DiskLayers.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "core/SafeFs.hpp"

namespace airlock {
namespace fs = std::filesystem;

bool isBuildKind(const std::string& kind) { return kind == "layer" || kind == "template"; }

SnapshotLibrary::SnapshotLibrary(std::string dataDir, SnapshotStore& snapshots,
                                 SandboxStore& sandboxes, WorkspaceStore* workspaces)
    : dataDir_(std::move(dataDir)),
      snapshots_(snapshots),
      sandboxes_(sandboxes),
      workspaces_(workspaces) {}

std::string SnapshotLibrary::dirOf(const SnapshotRecord& s) const {
    return dataDir_ + (s.kind == "warm" ? "/warm/" : "/snapshots/") + s.id;
}

std::string SnapshotLibrary::statePath(const SnapshotRecord& s) const {
    return dirOf(s) + "/" + kMemoryFile;
}

std::string SnapshotLibrary::layerPath(const SnapshotRecord& s) const {
    return dirOf(s) + "/" + kLayerFile;
}

std::int64_t SnapshotLibrary::seal(const SnapshotRecord& s) {
    std::string dir = dirOf(s);
    // Modes first: a chmod changes a file's ctime, which the hash below vouches for.
    ::chmod(statePath(s).c_str(), 0400);
    // The manifest: enough to check the files and to know what they need.
    nlohmann::json files = nlohmann::json::array();
    std::int64_t total = 0;
    for (const char* name : {kMemoryFile, kLayerFile}) {
        std::string path = dir + "/" + name;
        if (!fs::exists(fs::symlink_status(path))) continue;
        auto before = safefs::identity(path);
        auto d = safefs::digest(path);
        total += static_cast<std::int64_t>(d.size);
        files.push_back({{"name", name}, {"size", d.size}, {"sha256", d.sha256}});
        // Hashed just now: the first clone need not hash it again unless it changes.
        if (safefs::identity(path) == before) verified_.remember(path, before);
    }
    nlohmann::json manifest = {
        {"id", s.id},
        {"source_sandbox", s.sourceSandbox},
        {"template", {{"name", s.templateName}, {"digest", s.templateDigest}}},
        {"resources", {{"vcpus", s.vcpus}, {"memory_mib", s.memoryMib}}},
        {"layers", s.layers},
        {"files", files},
        {"size_bytes", total},
        {"created_at", s.createdAt}};
    {
        std::ofstream out(dir + "/" + kManifestFile, std::ios::trunc);
        out << manifest.dump(2) << "\n";
    }
    ::chmod((dir + "/" + kManifestFile).c_str(), 0444);
    snapshots_.markReady(s.id, total, manifest.dump());
    return total;
}

void SnapshotLibrary::abandon(const SnapshotRecord& s, bool layerRead) {
    if (layerRead) {
        snapshots_.updateState(s.id, SnapshotState::deleted);
        std::error_code ec;
        fs::remove(statePath(s), ec);
    } else {
        discard(s);
    }
}

SnapshotRecord SnapshotLibrary::get(const std::string& tenant, const std::string& id) {
    auto s = isValidId(id, "snap-") ? snapshots_.find(id) : std::nullopt;
    if (!s || s->tenant != tenant || s->state == SnapshotState::deleted || isBuildKind(s->kind))
        throw Error(ErrorCode::not_found, "no snapshot " + id);
    return *s;
}

std::vector<SnapshotRecord> SnapshotLibrary::list(const TenantScope& scope) {
    auto all = snapshots_.list(scope);
    std::erase_if(all, [](const SnapshotRecord& s) {
        return s.state == SnapshotState::deleted || isBuildKind(s.kind) ||
               s.tenant.rfind('_', 0) == 0;  // internal: warm snapshots
    });
    return all;
}

void SnapshotLibrary::remove(const std::string& tenant, const std::string& id) {
    hide(get(tenant, id));
}

void SnapshotLibrary::removeBuildSnapshot(const std::string& id) {
    auto s = snapshots_.find(id);
    if (!s || !isBuildKind(s->kind) || s->state == SnapshotState::deleted) return;
    hide(*s);
}

void SnapshotLibrary::hide(const SnapshotRecord& s) {
    const auto& id = s.id;
    if (s.state == SnapshotState::creating)
        throw Error(ErrorCode::conflict, "snapshot " + id + " is still being taken");
    abandon(s, true);  // hidden, its state gone; the layer waits for its last reader
    if (workspaces_) workspaces_->remove(id);
    std::error_code ec;
    fs::remove(dirOf(s) + "/" + kManifestFile, ec);
    collect();
}

void SnapshotLibrary::discard(const SnapshotRecord& s) {
    verified_.forgetUnder(dirOf(s));
    std::error_code ec;
    fs::remove_all(dirOf(s), ec);
    if (ec) {
        // Hidden and counted no more (a half-taken one would stay "creating"
        // for ever); the next collection tries its files again.
        snapshots_.updateState(s.id, SnapshotState::deleted);
        throw Error(ErrorCode::internal, "cannot remove " + dirOf(s) + ": " + ec.message());
    }
    snapshots_.remove(s.id);
}

void SnapshotLibrary::collect() {
    std::lock_guard lock(collectMutex_);
    std::set<std::string> read;
    for (const auto& r : sandboxes_.list(TenantScope::all()))
        for (const auto& l : r.layers) read.insert(l);
    auto all = snapshots_.list(TenantScope::all());
    for (const auto& s : all)
        if (s.state != SnapshotState::deleted)
            for (const auto& l : s.layers) read.insert(l);
    for (const auto& s : all) {
        if (s.state != SnapshotState::deleted || read.count(s.id)) continue;
        try {
            discard(s);
            logInfo("controller", "snapshot " + s.id + ": last reader gone, files removed");
        } catch (const std::exception& e) {
            logError("controller", e.what());
        }
    }
}

void SnapshotLibrary::recover() {
    std::set<std::string> readBySandboxes;
    for (const auto& r : sandboxes_.list(TenantScope::all()))
        for (const auto& l : r.layers) readBySandboxes.insert(l);
    std::set<std::string> known;
    for (const auto& s : snapshots_.list(TenantScope::all())) {
        known.insert(s.id);
        if (s.state != SnapshotState::creating) continue;
        logWarn("recover", "snapshot " + s.id + " was interrupted");
        try {
            abandon(s, readBySandboxes.count(s.id) > 0);
        } catch (const std::exception& e) {
            logError("recover", e.what());
        }
    }
    collect();
    for (const char* sub : {"/snapshots", "/warm"}) {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(dataDir_ + sub, ec)) {
            std::string name = entry.path().filename().string();
            if (known.count(name) && snapshots_.find(name)) continue;
            logWarn("recover", "removing orphan snapshot dir " + entry.path().string());
            std::error_code removeError;
            fs::remove_all(entry.path(), removeError);
        }
    }
}

void SnapshotLibrary::verify(const SnapshotRecord& snap) {
    // The frozen layers of the chain (each snapshot's own), and this
    // snapshot's memory state, against the manifests in the database.
    std::vector<std::pair<std::string, nlohmann::json>> wanted;  // path -> manifest entry
    auto expect = [&](const SnapshotRecord& s, const char* name) {
        auto manifest = nlohmann::json::parse(s.manifestJson, nullptr, false);
        if (!manifest.is_object() || !manifest.contains("files") || !manifest["files"].is_array())
            throw Error(ErrorCode::internal, "snapshot " + s.id + " has no manifest");
        for (const auto& f : manifest["files"])
            if (f.is_object() && f.value("name", "") == name)
                return wanted.emplace_back(dirOf(s) + "/" + name, f);
        throw Error(ErrorCode::internal, "snapshot " + s.id + "'s manifest lists no " + name);
    };
    expect(snap, kMemoryFile);
    for (const auto& layerId : snap.layers) {
        auto layer =
            layerId == snap.id ? std::optional<SnapshotRecord>(snap) : snapshots_.find(layerId);
        if (!layer)
            throw Error(ErrorCode::internal,
                        "snapshot " + snap.id + " reads a layer that is gone: " + layerId);
        expect(*layer, kLayerFile);
    }
    for (const auto& [path, entry] : wanted) {
        auto id = safefs::identity(path);
        if (verified_.unchangedSinceVerified(path, id)) continue;
        auto d = safefs::digest(path);
        if (d.sha256 != entry.value("sha256", "") ||
            d.size != entry.value("size", std::uint64_t(0)))
            throw Error(
                ErrorCode::conflict,
                "snapshot " + snap.id + ": " + fs::path(path).filename().string() +
                    " does not match its manifest (changed or damaged); it cannot be restored");
        verified_.remember(path, id);
    }
}

unsigned SnapshotLibrary::cloneDiskGib(const SnapshotRecord& snap, const TemplateInfo& tmpl) {
    std::uint64_t layerBytes = tmpl.diskSizeBytes;
    try {
        layerBytes = qcow2VirtualSize(layerPath(snap));
    } catch (const std::exception&) {
        // verify() says what is wrong with it before any restore
    }
    return static_cast<unsigned>((layerBytes + kGiB - 1) / kGiB);
}

std::optional<SnapshotRecord> SnapshotLibrary::warmFor(const TemplateInfo& tmpl,
                                                       const std::string& warmTenant) {
    std::optional<SnapshotRecord> found;
    for (auto& s : snapshots_.list(TenantScope::only(warmTenant)))
        if (s.kind == "warm" && s.state == SnapshotState::ready && s.templateName == tmpl.name &&
            s.templateDigest == tmpl.digest)
            found = std::move(s);
    return found;
}

void SnapshotLibrary::retireOldWarm(const TemplateInfo& tmpl, const std::string& warmTenant) {
    for (const auto& s : snapshots_.list(TenantScope::only(warmTenant)))
        if (s.templateName == tmpl.name && s.templateDigest != tmpl.digest &&
            s.state == SnapshotState::ready)
            snapshots_.updateState(s.id, SnapshotState::deleted);
}

}  // namespace airlock
