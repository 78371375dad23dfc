#include "workspace/WorkspaceRecords.hpp"

#include "protocol/GuestPath.hpp"
#include "workspace/RemoteUrl.hpp"
#include "workspace/WorkingTree.hpp"

namespace airlock::workspace {
using nlohmann::json;

namespace {

json submodulesJson(const std::vector<SubmoduleCheckout>& list) {
    json out = json::array();
    for (const auto& s : list)
        out.push_back({{"name", s.name}, {"path", s.path}, {"url", s.url}, {"commit", s.commit}});
    return out;
}

std::vector<SubmoduleCheckout> submodulesOf(const json& list) {
    std::vector<SubmoduleCheckout> out;
    if (!list.is_array()) return out;
    for (const auto& s : list)
        if (s.is_object())
            out.push_back({s.value("name", ""), s.value("path", ""), s.value("url", ""),
                           s.value("commit", ""), ""});
    return out;
}

}  // namespace

json WorkspaceRecord::toJson() const {
    return {{"repo", repo},
            {"base_ref", baseRef},
            {"base_commit", baseCommit},
            {"branch", branch},
            {"path", path},
            {"credential", credential},
            {"head", head},
            {"write_scope", writeScope},
            {"enforce_scope", enforceScope},
            {"submodules", submodulesJson(submodules)},
            {"skipped_submodules", skippedJson()},
            {"warnings", warnings}};
}

json WorkspaceRecord::skippedJson() const { return submodulesJson(skipped); }

WorkspaceRecord WorkspaceRecord::fromJson(const json& j) {
    WorkspaceRecord r;
    r.repo = j.value("repo", "");
    r.baseRef = j.value("base_ref", "");
    r.baseCommit = j.value("base_commit", "");
    r.branch = j.value("branch", "");
    r.path = j.value("path", "/workspace");
    r.credential = j.value("credential", "");
    r.head = j.value("head", "");
    r.writeScope = j.value("write_scope", std::vector<std::string>{});
    r.enforceScope = j.value("enforce_scope", false);
    r.submodules = submodulesOf(j.value("submodules", json::array()));
    r.skipped = submodulesOf(j.value("skipped_submodules", json::array()));
    r.warnings = j.value("warnings", std::vector<std::string>{});
    return r;
}

SandboxRecord sandboxRef(const std::string& id, const std::string& tenant) {
    SandboxRecord r;
    r.id = id;
    r.tenant = tenant;
    return r;
}

WorkspaceRecord WorkspaceRecords::load(const std::string& tenant, const std::string& id) {
    sandboxes_.get(tenant, id);  // ownership: 404 for anyone else's
    auto r = stored(id);
    if (!r) throw Error(ErrorCode::not_found, "sandbox " + id + " has no workspace");
    RemoteUrl::parse(r->repo);  // a stored URL that no longer parses fails here, not deeper
    for (auto& s : r->submodules)
        s.mirrorPath = mirrors_.mirrorPath(tenant, RemoteUrl::parse(s.url));
    return *r;
}

std::optional<WorkspaceRecord> WorkspaceRecords::stored(const std::string& id) {
    auto text = store_.find(id);
    if (!text) return std::nullopt;
    auto j = json::parse(*text, nullptr, false);
    if (!j.is_object())
        throw Error(ErrorCode::internal, "workspace record of " + id + " is damaged");
    try {
        return WorkspaceRecord::fromJson(j);
    } catch (const json::exception&) {
        throw Error(ErrorCode::internal, "workspace record of " + id + " is damaged");
    }
}

void WorkspaceRecords::save(const std::string& id, const std::string& tenant,
                            const WorkspaceRecord& r) {
    store_.put(id, tenant, r.toJson().dump());
}

std::set<std::string> WorkspaceRecords::urlsInUse() {
    std::set<std::string> used;
    for (const auto& text : store_.all()) {
        auto j = json::parse(text, nullptr, false);
        if (!j.is_object()) continue;
        if (j.contains("repo") && j["repo"].is_string()) used.insert(j["repo"].get<std::string>());
        for (const auto& s : submodulesOf(j.value("submodules", json::array())))
            used.insert(s.url);
    }
    return used;
}

WorkspaceRecords::Held WorkspaceRecords::hold(const std::string& id) {
    auto mutex = locks_.of(id);
    std::unique_lock<std::mutex> lock(*mutex);
    return Held{std::move(mutex), std::move(lock)};
}

WorkspaceRecords::Held WorkspaceRecords::holdOwned(const std::string& tenant,
                                                   const std::string& id) {
    sandboxes_.get(tenant, id);
    return hold(id);
}

void WorkspaceRecords::checkWrite(const SandboxRecord& sandbox, const std::string& path) {
    auto r = stored(sandbox.id);
    if (!r || !r->enforceScope) return;
    auto normal = protocol::normalizeGuestPath(path);
    if (!normal) return;  // the guest refuses it by the same rule
    const std::string& norm = *normal;
    const std::string& root = r->path;
    if (norm == root || norm.rfind(root + "/", 0) != 0) return;  // outside the repository
    std::string rel = norm.substr(root.size() + 1);
    if (rel == ".git" || rel.rfind(".git/", 0) == 0) return;
    if (!inScope(r->writeScope, rel))
        throw Error(ErrorCode::forbidden,
                    rel + " is outside the workspace's write scope " + json(r->writeScope).dump());
}

}  // namespace airlock::workspace
