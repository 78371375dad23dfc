#include "workspace/WorkspaceChanges.hpp"

#include "workspace/GitSupport.hpp"
#include "workspace/RemoteUrl.hpp"

namespace airlock::workspace {
using nlohmann::json;

std::set<std::string> WorkspaceChanges::guestBlobs(const std::string& id) {
    std::lock_guard lock(guestBlobsMutex_);
    auto it = guestBlobs_.find(id);
    return it == guestBlobs_.end() ? std::set<std::string>{} : it->second;
}

void WorkspaceChanges::rememberGuestBlobs(const std::string& id, const std::set<std::string>& ids) {
    if (ids.empty()) return;
    std::lock_guard lock(guestBlobsMutex_);
    auto& mine = guestBlobs_[id];
    // Bounded: past this the guest's files are read back again, never trusted more.
    if (mine.size() + ids.size() > 200000) mine.clear();
    mine.insert(ids.begin(), ids.end());
}

WorkspaceInfo WorkspaceChanges::info(const std::string& tenant, const std::string& id) {
    auto held = records_.holdOwned(tenant, id);
    auto r = records_.load(tenant, id);
    WorkspaceInfo info{r.repo,       r.baseRef,      r.baseCommit, r.branch,
                       r.path,       r.credential,   r.head,       r.writeScope,
                       r.enforceScope, r.submodules, r.skipped,    r.warnings,
                       std::nullopt};
    // A paused or stopped sandbox still has its record; only the count of
    // changed files needs the guest.
    if (sandboxes_.get(tenant, id).state == SandboxState::running)
        info.changedFiles = snapshot(tenant, id, r).diff.files.size();
    return info;
}

WorkspaceChanges::Snapshot WorkspaceChanges::snapshot(const std::string& tenant,
                                                      const std::string& id, const WorkspaceRecord& r) {
    auto agent = sandboxes_.runningAgent(tenant, id);
    std::vector<std::string> skip;
    std::map<std::string, git_oid> gitlinks;
    for (const auto& s : r.submodules) {
        skip.push_back(s.path);
        gitlinks[s.path] = parseOid(s.commit);
    }
    for (const auto& s : r.skipped) {  // not checked out: still the base's gitlink
        skip.push_back(s.path);
        gitlinks[s.path] = parseOid(s.commit);
    }
    Snapshot snap;
    snap.scan = guest_.scan(*agent, r.path, skip, true);
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::vector<std::string> mirrors{mirrors_.mirrorPath(tenant, url)};
    for (const auto& s : r.submodules) mirrors.push_back(s.mirrorPath);
    Repository work = mirrors_.openWorkRepo(tenant, mirrors);
    std::uint64_t transferred = 0;
    auto readFile = [&](const std::string& rel) {
        std::string bytes = guest_.readFile(*agent, r.path + "/" + rel, config_.maxFileBytes);
        transferred += bytes.size();
        if (transferred > config_.maxTransferBytes)
            throw Error(ErrorCode::payload_too_large,
                        "the working tree's changes exceed " +
                            std::to_string(config_.maxTransferBytes >> 20) + " MiB");
        return bytes;
    };
    Commit base = lookupCommit(work.get(), r.baseCommit);
    std::set<std::string> hashedHere;  // paths whose blobs the host made from the guest's bytes
    if (!snap.scan.ignored.empty()) {
        // Git ignores untracked files only: a tracked file the rules match
        // is still part of the tree (read back; gone means deleted).
        std::set<std::string> present;
        for (const auto& f : snap.scan.files) present.insert(f.path);
        for (const auto& [path, file] : flattenTree(work.get(), *git_commit_tree_id(base.get()))) {
            if (file.mode == GIT_FILEMODE_COMMIT || present.count(path)) continue;
            bool ignored = false;
            for (const auto& ig : snap.scan.ignored)
                if (ig.back() == '/' ? path.rfind(ig, 0) == 0 : path == ig) ignored = true;
            if (!ignored) continue;
            if (file.mode == GIT_FILEMODE_LINK) {
                snap.scan.files.push_back({path, file.mode, oidHex(file.id), ""});
                continue;
            }
            std::string bytes;
            try {
                bytes = readFile(path);
            } catch (const Error& e) {
                if (e.code() == ErrorCode::not_found) continue;
                throw;
            }
            git_oid id;
            check(git_blob_create_from_buffer(&id, work.get(), bytes.data(), bytes.size()),
                  ErrorCode::internal, "blob");
            snap.scan.files.push_back({path, file.mode, oidHex(id), ""});
            hashedHere.insert(path);
        }
    }
    // A claimed blob id counts only when it is this workspace's own: in its
    // base tree, in the tree of its last host commit, or read back from its
    // own guest before. The tenant's store also reads every other mirror
    // (alternates) and other sandboxes' uploads; a claim of those is read
    // back from the guest instead, so no diff shows what this sandbox never had.
    std::set<std::string> own = guestBlobs(id);
    auto addTree = [&](const git_oid& treeId) {
        for (const auto& [path, file] : flattenTree(work.get(), treeId))
            if (file.mode != GIT_FILEMODE_COMMIT) own.insert(oidHex(file.id));
    };
    addTree(*git_commit_tree_id(base.get()));
    if (!r.head.empty()) {
        git_oid headId;
        git_commit* raw = nullptr;
        if (git_oid_fromstr(&headId, r.head.c_str()) == 0 &&
            git_commit_lookup(&raw, work.get(), &headId) == 0) {
            Commit head(raw);
            addTree(*git_commit_tree_id(head.get()));
        }
    }
    for (const auto& f : snap.scan.files)  // the tracked ignored files hashed above
        if (f.linkTarget.empty() && hashedHere.count(f.path)) own.insert(f.id);
    git_oid tree =
        buildWorkingTree(work.get(), snap.scan, gitlinks, readFile, 4ull << 30,
                         [&](const git_oid& claimed) { return own.count(oidHex(claimed)) > 0; });
    {
        // What this guest sent is its own from now on.
        std::set<std::string> sent;
        for (const auto& [path, file] : flattenTree(work.get(), tree))
            if (file.mode != GIT_FILEMODE_COMMIT && !own.count(oidHex(file.id)))
                sent.insert(oidHex(file.id));
        rememberGuestBlobs(id, sent);
    }
    snap.tree = oidHex(tree);
    snap.diff = diffTrees(work.get(), *git_commit_tree_id(base.get()), tree, r.writeScope);
    return snap;
}

std::optional<WorkspaceEvidence> WorkspaceChanges::evidenceView(
    const std::string& tenant, const std::string& id,
    const std::function<bool(const std::string&)>& wanted) {
    if (!records_.has(id)) return std::nullopt;
    auto held = records_.holdOwned(tenant, id);
    auto r = records_.load(tenant, id);
    auto snap = snapshot(tenant, id, r);
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::vector<std::string> mirrors{mirrors_.mirrorPath(tenant, url)};
    for (const auto& s : r.submodules) mirrors.push_back(s.mirrorPath);
    Repository work = mirrors_.openWorkRepo(tenant, mirrors);
    Commit base = lookupCommit(work.get(), r.baseCommit);
    git_oid finalTree = parseOid(snap.tree);
    // A blob's bytes at a path of a tree ("" when the path is absent there),
    // at most 16 MiB: lockfiles and manifests, not build outputs.
    auto contentAt = [&](const git_oid& treeId, const std::string& path) -> std::string {
        git_tree* rawTree = nullptr;
        if (git_tree_lookup(&rawTree, work.get(), &treeId) != 0) return {};
        Tree tree(rawTree);
        git_tree_entry* rawEntry = nullptr;
        if (git_tree_entry_bypath(&rawEntry, tree.get(), path.c_str()) != 0) return {};
        TreeEntry entry(rawEntry);
        if (git_tree_entry_type(entry.get()) != GIT_OBJECT_BLOB) return {};
        git_blob* rawBlob = nullptr;
        if (git_blob_lookup(&rawBlob, work.get(), git_tree_entry_id(entry.get())) != 0) return {};
        Blob blob(rawBlob);
        auto size = static_cast<std::size_t>(git_blob_rawsize(blob.get()));
        if (size > (16u << 20)) return {};
        return std::string(static_cast<const char*>(git_blob_rawcontent(blob.get())), size);
    };
    WorkspaceEvidence view;
    view.repo = r.repo;
    view.ref = r.baseRef;
    view.baseCommit = r.baseCommit;
    view.baseTree = oidHex(*git_commit_tree_id(base.get()));
    view.branch = r.branch;
    view.path = r.path;
    view.writeScope = r.writeScope;
    view.enforceScope = r.enforceScope;
    if (!r.head.empty()) {
        // The last commit made on the host, when it holds exactly this tree.
        try {
            Commit head = lookupCommit(work.get(), r.head);
            if (oidHex(*git_commit_tree_id(head.get())) == snap.tree)
                view.finalCommit = r.head;
        } catch (const Error&) {
        }
    }
    view.finalTree = snap.tree;
    view.patch = snap.diff.patch;
    view.files = snap.diff.files;
    view.gitattributes = contentAt(finalTree, ".gitattributes");
    for (const auto& f : snap.diff.files) {
        if (!wanted(f.path)) continue;
        view.contents[f.path] = {contentAt(*git_commit_tree_id(base.get()), f.oldPath),
                                 contentAt(finalTree, f.path)};
    }
    return view;
}

// The workspace's diff now, recorded as looked at (the evidence shows what
// the agent saw of its own change).
WorkspaceChanges::Snapshot WorkspaceChanges::diffed(const std::string& tenant,
                                                    const std::string& id, WorkspaceRecord& r) {
    auto held = records_.holdOwned(tenant, id);
    r = records_.load(tenant, id);
    auto snap = snapshot(tenant, id, r);
    sandboxes_.recordEvent(sandboxes_.get(tenant, id), "workspace.diffed",
                            {{"tree", snap.tree},
                             {"files", snap.diff.files.size()},
                             {"additions", snap.diff.additions},
                             {"deletions", snap.diff.deletions},
                             {"out_of_scope", snap.diff.outOfScope}});
    return snap;
}

std::string WorkspaceChanges::diffPatch(const std::string& tenant, const std::string& id) {
    WorkspaceRecord r;
    return diffed(tenant, id, r).diff.patch;
}

WorkspaceDiff WorkspaceChanges::diff(const std::string& tenant, const std::string& id) {
    WorkspaceRecord r;
    auto snap = diffed(tenant, id, r);
    return WorkspaceDiff{r.baseCommit, snap.tree, std::move(snap.diff)};
}

WorkspaceCommit WorkspaceChanges::commit(const std::string& tenant, const std::string& id,
                              const std::string& message, const std::string& authorName,
                              const std::string& authorEmail) {
    auto held = records_.holdOwned(tenant, id);
    auto r = records_.load(tenant, id);
    auto snap = snapshot(tenant, id, r);
    if (r.enforceScope && !snap.diff.outOfScope.empty())
        throw Error(ErrorCode::conflict,
                    "changes outside the write scope: " + json(snap.diff.outOfScope).dump());
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::vector<std::string> mirrors{mirrors_.mirrorPath(tenant, url)};
    Repository work = mirrors_.openWorkRepo(tenant, mirrors);
    std::string parentHex = r.head.empty() ? r.baseCommit : r.head;
    Commit parent = lookupCommit(work.get(), parentHex);
    if (oidHex(*git_commit_tree_id(parent.get())) == snap.tree)
        throw Error(ErrorCode::conflict,
                    "nothing to commit: the working tree is the same as " + parentHex);
    git_oid treeId = parseOid(snap.tree);
    git_tree* t = nullptr;
    check(git_tree_lookup(&t, work.get(), &treeId), ErrorCode::internal, "tree");
    Tree tree(t);
    git_signature* author = nullptr;
    check(git_signature_now(&author, authorName.c_str(), authorEmail.c_str()),
          ErrorCode::bad_request, "author");
    GitPtr<git_signature, git_signature_free> authorHold(author);
    git_signature* committer = nullptr;
    check(git_signature_now(&committer, "airlockd", "airlockd@localhost"), ErrorCode::internal,
          "committer");
    GitPtr<git_signature, git_signature_free> committerHold(committer);
    const git_commit* parents[] = {parent.get()};
    git_oid commitId;
    check(git_commit_create(&commitId, work.get(), nullptr, author, committer, "UTF-8",
                            message.c_str(), tree.get(), 1, parents),
          ErrorCode::internal, "commit");
    std::string commitHex = oidHex(commitId);
    // A ref keeps the commit (and what it names) in the tenant's store.
    git_reference* ref = nullptr;
    check(git_reference_create(&ref, work.get(), ("refs/airlock/" + id + "/head").c_str(),
                               &commitId, 1, "commit"),
          ErrorCode::internal, "ref");
    git_reference_free(ref);
    r.head = commitHex;
    records_.save(id, tenant, r);
    // A push asked for before names a commit that is no longer the head.
    sandboxes_.gates().supersedePublishes(id, "superseded by commit " + commitHex);
    sandboxes_.recordEvent(sandboxes_.get(tenant, id), "workspace.committed",
                            {{"commit", commitHex},
                             {"tree", snap.tree},
                             {"parent", parentHex},
                             {"branch", r.branch},
                             {"files", snap.diff.files.size()},
                             {"additions", snap.diff.additions},
                             {"deletions", snap.diff.deletions}});
    return WorkspaceCommit{commitHex, snap.tree, parentHex, r.branch};
}

}  // namespace airlock::workspace
