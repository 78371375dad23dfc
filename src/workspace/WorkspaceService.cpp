#include "workspace/WorkspaceService.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/Clock.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "protocol/FileArchive.hpp"
#include "workspace/CheckoutArchive.hpp"
#include "workspace/GitSocket.hpp"

namespace airlock::workspace {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr auto kAgentWait = std::chrono::minutes(5);

Commit lookupCommit(git_repository* repo, const std::string& hex) {
    git_oid id = parseOid(hex);
    git_commit* raw = nullptr;
    check(git_commit_lookup(&raw, repo, &id), ErrorCode::unprocessable, "commit " + hex);
    return Commit(raw);
}

// What the audit needs of a sandbox: its id and tenant.
SandboxRecord refOf(const std::string& id, const std::string& tenant) {
    SandboxRecord r;
    r.id = id;
    r.tenant = tenant;
    return r;
}

// Reads every event of a stream the agent answers with data then a close.
std::string drain(const std::shared_ptr<AgentStream>& stream, std::uint64_t limit) {
    return stream->readToClose(limit, AgentStream::Clock::now() + kAgentWait);
}

bool validBranch(const std::string& branch) {
    int valid = 0;
    std::string ref = "refs/heads/" + branch;
    // What git branch refuses beyond the ref rules: a leading "-", "HEAD".
    return git_reference_name_is_valid(&valid, ref.c_str()) == 0 && valid &&
           branch.find("..") == std::string::npos && branch.size() <= 200 && branch[0] != '-' &&
           branch != "HEAD";
}

// name -> (path, url) of a .gitmodules file: [submodule "name"] sections
// with path = and url = keys; anything else is ignored. Values may be
// quoted; no includes, no continuation lines.
std::map<std::string, std::pair<std::string, std::string>> parseGitmodules(std::string_view text) {
    std::map<std::string, std::pair<std::string, std::string>> mods;
    std::string section;
    auto trim = [](std::string v) {
        auto a = v.find_first_not_of(" \t\r");
        if (a == std::string::npos) return std::string();
        auto b = v.find_last_not_of(" \t\r");
        return v.substr(a, b - a + 1);
    };
    std::size_t i = 0;
    while (i < text.size() && mods.size() < 256) {
        std::size_t j = text.find('\n', i);
        if (j == std::string_view::npos) j = text.size();
        std::string line = trim(std::string(text.substr(i, j - i)));
        i = j + 1;
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line[0] == '[') {
            section.clear();
            static const std::string head = "[submodule \"";
            if (line.rfind(head, 0) == 0 && line.size() > head.size() + 2 &&
                line.substr(line.size() - 2) == "\"]")
                section = line.substr(head.size(), line.size() - head.size() - 2);
            continue;
        }
        if (section.empty()) continue;
        auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2);
        for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (key == "path") mods[section].first = value;
        if (key == "url") mods[section].second = value;
    }
    return mods;
}

std::string gitlinkFile(const std::string& smPath, const std::string& name) {
    std::string up;
    for (auto part : fs::path(smPath)) {
        (void)part;
        up += "../";
    }
    return "gitdir: " + up + ".git/modules/" + name + "\n";
}

}  // namespace

struct WorkspaceService::Record {
    std::string repo, baseRef, baseCommit, branch, path, credential, head;
    std::vector<std::string> writeScope;
    bool enforceScope = false;
    std::vector<SubmoduleCheckout> submodules;  // mirrorPath filled when loaded
    // Submodules not checked out (outside the credential's scope and not
    // readable without it): their gitlinks stay as the base has them.
    std::vector<SubmoduleCheckout> skipped;
    std::vector<std::string> warnings;  // what the workspace's owner should know

    json toJson() const {
        json subs = json::array();
        for (const auto& s : submodules)
            subs.push_back(
                {{"name", s.name}, {"path", s.path}, {"url", s.url}, {"commit", s.commit}});
        return {{"repo", repo},
                {"base_ref", baseRef},
                {"base_commit", baseCommit},
                {"branch", branch},
                {"path", path},
                {"credential", credential},
                {"head", head},
                {"write_scope", writeScope},
                {"enforce_scope", enforceScope},
                {"submodules", subs},
                {"skipped_submodules", skippedJson()},
                {"warnings", warnings}};
    }
    json skippedJson() const {
        json out = json::array();
        for (const auto& s : skipped)
            out.push_back(
                {{"name", s.name}, {"path", s.path}, {"url", s.url}, {"commit", s.commit}});
        return out;
    }
    static Record fromJson(const json& j) {
        Record r;
        r.repo = j.value("repo", "");
        r.baseRef = j.value("base_ref", "");
        r.baseCommit = j.value("base_commit", "");
        r.branch = j.value("branch", "");
        r.path = j.value("path", "/workspace");
        r.credential = j.value("credential", "");
        r.head = j.value("head", "");
        r.writeScope = j.value("write_scope", std::vector<std::string>{});
        r.enforceScope = j.value("enforce_scope", false);
        for (const auto& s : j.value("submodules", json::array()))
            r.submodules.push_back({s.value("name", ""), s.value("path", ""), s.value("url", ""),
                                    s.value("commit", ""), ""});
        for (const auto& s : j.value("skipped_submodules", json::array()))
            r.skipped.push_back({s.value("name", ""), s.value("path", ""), s.value("url", ""),
                                 s.value("commit", ""), ""});
        r.warnings = j.value("warnings", std::vector<std::string>{});
        return r;
    }
};

struct WorkspaceService::Snapshot {
    std::string tree;
    TreeDiff diff;
    Scan scan;
};

WorkspaceService::WorkspaceService(WorkspaceConfig config, WorkspaceSandboxes& sandboxes,
                                   CredentialStore& credentials, WorkspaceStore& workspaces)
    : config_(std::move(config)),
      sandboxes_(sandboxes),
      credentials_(credentials, config_.cipher, config_.addressPolicy,
                   [&sandboxes](const std::string& tenant, const std::string& type,
                                const json& data) {
                       sandboxes.recordEvent(refOf("", tenant), type, data);
                   }),
      workspaces_(workspaces),
      mirrors_(config_, [&sandboxes](const std::string& what, std::uint64_t needBytes) {
          sandboxes.requireFreeSpace(what, needBytes);
      }) {
    initGit();
    installGitSocket(config_.addressPolicy, std::chrono::seconds(30), std::chrono::seconds(120));
    // A push a restart interrupted did not happen as far as anyone knows:
    // failed, and the agent may ask again (the lease is checked anew).
    for (const auto& g : sandboxes_.gates().running("psh-")) {
        sandboxes_.gates().finishPublish(g.id, "failed",
                                          "airlockd restarted during the push; ask again");
        sandboxes_.recordEvent(refOf(g.sandboxId, g.tenant), "push.rejected",
                                {{"push_id", g.id},
                                 {"reason", "airlockd restarted during the push"},
                                 {"failed", true}});
    }
    worker_ = std::thread([this] { pushWorker(); });
    sandboxes_.setWorkspaceHooks(
        [this](const SandboxRecord& r, const std::string& path) { checkWrite(r, path); },
        [this](const GatedExec& g, bool approved) { onPublishDecision(g, approved); });
    sandboxes_.setExtraSecrets(
        [this](const SandboxRecord& r) { return credentials_.secretsOf(r.tenant); });
}

WorkspaceService::~WorkspaceService() {
    sandboxes_.setWorkspaceHooks(nullptr, nullptr);
    sandboxes_.setExtraSecrets(nullptr);
    {
        std::lock_guard lock(queueMutex_);
        stopping_ = true;
    }
    queueCv_.notify_all();
    if (worker_.joinable()) worker_.join();
}

// ------------------------------------------------------------ the guest's blobs, mirror retention

std::set<std::string> WorkspaceService::guestBlobs(const std::string& id) {
    std::lock_guard lock(guestBlobsMutex_);
    auto it = guestBlobs_.find(id);
    return it == guestBlobs_.end() ? std::set<std::string>{} : it->second;
}

void WorkspaceService::rememberGuestBlobs(const std::string& id, const std::set<std::string>& ids) {
    if (ids.empty()) return;
    std::lock_guard lock(guestBlobsMutex_);
    auto& mine = guestBlobs_[id];
    // Bounded: past this the guest's files are read back again, never trusted more.
    if (mine.size() + ids.size() > 200000) mine.clear();
    mine.insert(ids.begin(), ids.end());
}

std::size_t WorkspaceService::pruneMirrors() {
    // What any workspace record (a sandbox's or a snapshot's) names is kept.
    std::set<std::string> used;
    for (const auto& text : workspaces_.all()) {
        auto j = json::parse(text, nullptr, false);
        if (!j.is_object()) continue;
        used.insert(j.value("repo", ""));
        for (const auto& s : j.value("submodules", json::array()))
            if (s.is_object()) used.insert(s.value("url", ""));
    }
    return mirrors_.prune(used);
}

// ------------------------------------------------------------ records

WorkspaceService::Record WorkspaceService::load(const std::string& tenant, const std::string& id) {
    sandboxes_.get(tenant, id);  // ownership: 404 for anyone else's
    auto r = stored(id);
    if (!r) throw Error(ErrorCode::not_found, "sandbox " + id + " has no workspace");
    RemoteUrl::parse(r->repo);  // a stored URL that no longer parses fails here, not deeper
    for (auto& s : r->submodules) s.mirrorPath = mirrors_.mirrorPath(tenant, RemoteUrl::parse(s.url));
    return *r;
}

std::optional<WorkspaceService::Record> WorkspaceService::stored(const std::string& id) {
    auto text = workspaces_.find(id);
    if (!text) return std::nullopt;
    auto j = json::parse(*text, nullptr, false);
    if (!j.is_object())
        throw Error(ErrorCode::internal, "workspace record of " + id + " is damaged");
    return Record::fromJson(j);
}

void WorkspaceService::save(const std::string& id, const std::string& tenant, const Record& r) {
    workspaces_.put(id, tenant, r.toJson().dump());
}

// ------------------------------------------------------------ create

SandboxRecord WorkspaceService::createSandbox(const std::string& tenant,
                                              const CreateSandboxRequest& request) {
    const WorkspaceSpec& spec = *request.workspace;
    if (!request.snapshot.empty())
        throw Error(ErrorCode::bad_request,
                    "a clone of a snapshot keeps its snapshot's workspace: no workspace field");
    if (!validBranch(spec.branch))
        throw Error(ErrorCode::bad_request,
                    "branch: '" + spec.branch + "' is not a valid git branch name");
    RemoteUrl url = RemoteUrl::parse(spec.repo);
    auto credential = credentials_.open(tenant, spec.credential, url);
    std::string mirror = mirrors_.fetch(tenant, url, credential);
    Record rec;
    rec.repo = spec.repo;
    rec.branch = spec.branch;
    rec.path = spec.path;
    rec.credential = spec.credential;
    rec.writeScope = spec.writeScope;
    rec.enforceScope = spec.enforceScope;
    {
        Repository repo = openBareRepository(mirror);
        git_object* obj = nullptr;
        if (!spec.commit.empty()) {
            rec.baseRef = spec.commit;
            git_oid id = parseOid(spec.commit);
            if (git_object_lookup(&obj, repo.get(), &id, GIT_OBJECT_COMMIT) < 0)
                throw Error(ErrorCode::unprocessable,
                            "commit " + spec.commit + " is not in " + spec.repo);
        } else {
            rec.baseRef = spec.ref.empty() ? "HEAD" : spec.ref;
            int rc = -1;
            for (const std::string& candidate :
                 {"refs/heads/" + rec.baseRef, "refs/tags/" + rec.baseRef, rec.baseRef}) {
                rc = git_revparse_single(&obj, repo.get(), candidate.c_str());
                if (rc == 0) break;
            }
            if (rc < 0)
                throw Error(ErrorCode::unprocessable, "ref '" + rec.baseRef + "' is not in " +
                                                          spec.repo + ": " + gitMessage());
        }
        Object held(obj);
        git_object* peeled = nullptr;
        check(git_object_peel(&peeled, held.get(), GIT_OBJECT_COMMIT), ErrorCode::unprocessable,
              "'" + rec.baseRef + "' is not a commit");
        Object commitObj(peeled);
        rec.baseCommit = oidHex(*git_object_id(commitObj.get()));
        if (spec.submodules) {
            // .gitmodules of that commit (its own small parser: libgit2's
            // config reader would follow include.path to the host's files).
            Tree tree;
            {
                git_tree* t = nullptr;
                check(git_commit_tree(&t, reinterpret_cast<git_commit*>(commitObj.get())),
                      ErrorCode::internal, "tree");
                tree.reset(t);
            }
            git_tree_entry* e = nullptr;
            if (git_tree_entry_bypath(&e, tree.get(), ".gitmodules") == 0) {
                TreeEntry entry(e);
                git_blob* b = nullptr;
                check(git_blob_lookup(&b, repo.get(), git_tree_entry_id(entry.get())),
                      ErrorCode::internal, ".gitmodules");
                Blob blob(b);
                auto mods = parseGitmodules(
                    std::string_view(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                                     static_cast<std::size_t>(git_blob_rawsize(blob.get()))));
                for (const auto& [name, pu] : mods) {
                    const auto& [smPath, smUrl] = pu;
                    if (smPath.empty() || smUrl.empty()) continue;
                    git_tree_entry* le = nullptr;
                    if (git_tree_entry_bypath(&le, tree.get(), smPath.c_str()) != 0) continue;
                    TreeEntry link(le);
                    if (git_tree_entry_filemode(link.get()) != GIT_FILEMODE_COMMIT) continue;
                    if (!protocol::isSafeRelativePath(smPath) ||
                        name.find("..") != std::string::npos || !protocol::isSafeRelativePath(name))
                        throw Error(ErrorCode::unprocessable,
                                    "submodule '" + name + "' has an unsafe path");
                    RemoteUrl smRemote = url.resolve(smUrl);
                    std::string commit = oidHex(*git_tree_entry_id(link.get()));
                    // The credential goes to the workspace's own repository
                    // and its scope only: a .gitmodules naming a repository
                    // outside them gets an anonymous fetch, and the
                    // submodule is skipped when that fails.
                    bool withheld = credential && !credential->covers(smRemote);
                    auto smCred = withheld ? std::nullopt : credential;
                    if (smCred && smRemote.scheme == "http")
                        requireClearTextAllowed(smRemote, config_.addressPolicy);
                    std::string smMirror;
                    try {
                        smMirror = mirrors_.fetch(tenant, smRemote, smCred);
                    } catch (const Error& e) {
                        if (!withheld || e.code() != ErrorCode::unprocessable) throw;
                        rec.skipped.push_back({name, smPath, smRemote.text, commit, ""});
                        rec.warnings.push_back(
                            "submodule " + smPath + " (" + smRemote.text +
                            ") was skipped: it is outside credential '" + spec.credential +
                            "''s scope and could not be fetched without it (" + e.what() + ")");
                        continue;
                    }
                    if (withheld)
                        rec.warnings.push_back("submodule " + smPath + " (" + smRemote.text +
                                               ") was fetched without credential '" +
                                               spec.credential + "': it is outside its scope");
                    Repository smRepo = openBareRepository(smMirror);
                    git_oid cid = *git_tree_entry_id(link.get());
                    git_commit* probe = nullptr;
                    if (git_commit_lookup(&probe, smRepo.get(), &cid) < 0)
                        throw Error(ErrorCode::unprocessable, "submodule " + smPath + ": commit " +
                                                                  commit + " is not in " +
                                                                  smRemote.text);
                    git_commit_free(probe);
                    rec.submodules.push_back({name, smPath, smRemote.text, commit, smMirror});
                }
            }
        }
    }
    auto r = sandboxes_.create(tenant, request);
    try {
        populate(tenant, r.id, rec, false, nullptr);
        save(r.id, tenant, rec);
    } catch (const std::exception& e) {
        logWarn("workspace",
                "sandbox " + r.id + ": workspace not written (" + e.what() + "): removing it");
        try {
            sandboxes_.destroy(tenant, r.id, "its workspace could not be written");
        } catch (const std::exception& e2) {
            logError("workspace", "cannot remove " + r.id + ": " + e2.what());
        }
        throw;
    }
    json subs = json::array();
    for (const auto& s : rec.submodules) subs.push_back({{"path", s.path}, {"commit", s.commit}});
    sandboxes_.recordEvent(r, "workspace.cloned",
                            {{"repo", rec.repo},
                             {"base_ref", rec.baseRef},
                             {"base_commit", rec.baseCommit},
                             {"branch", rec.branch},
                             {"path", rec.path},
                             {"submodules", subs},
                             {"skipped_submodules", rec.skippedJson()},
                             {"warnings", rec.warnings}});
    // From here on the guest's own reads and writes in it are recorded.
    sandboxes_.watchFiles(tenant, r.id, rec.path);
    return r;
}

void WorkspaceService::sendArchive(const std::string& tenant, const std::string& id,
                                   const std::string& path,
                                   const std::function<void(CheckoutArchive&)>& fill) {
    auto agent = sandboxes_.runningAgent(tenant, id);
    auto stream = agent->open(protocol::ArchiveUnpackRequest{path, "user"});
    auto deadline = AgentStream::Clock::now() + kAgentWait;
    CheckoutArchive archive([&](std::string_view bytes) { stream->write(0, bytes, deadline); });
    try {
        fill(archive);
        archive.flush();
    } catch (...) {
        stream->reset("cancelled", "the host stopped the archive");
        throw;
    }
    stream->closeWrite();
    drain(stream, 0);
}

void WorkspaceService::populate(const std::string& tenant, const std::string& id, const Record& r,
                                bool resetOnly, const Scan* current) {
    std::string scratch = mirrors_.tenantDir(tenant) + "/scratch/" + id + "-" + newId("co-");
    fs::create_directories(scratch);
    struct Cleanup {
        std::string dir;
        ~Cleanup() {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    } cleanup{scratch};
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::string mirror = mirrors_.mirrorPath(tenant, url);
    std::string gitDir;
    {
        auto hold = mirrors_.holdMirror(mirror);
        gitDir = prepareGitDir(scratch, mirror, r.repo, r.baseCommit, r.branch, r.submodules);
    }
    Repository repo = openBareRepository(mirror);
    Commit base = lookupCommit(repo.get(), r.baseCommit);
    git_tree* t = nullptr;
    check(git_commit_tree(&t, base.get()), ErrorCode::internal, "tree");
    Tree tree(t);
    sendArchive(tenant, id, r.path, [&](CheckoutArchive& a) {
        if (resetOnly && current) {
            // Only what differs from the base: stray files go, changed ones
            // get the base's bytes back.
            auto baseFiles = flattenTree(repo.get(), *git_commit_tree_id(base.get()));
            for (const auto& f : current->files) {
                auto it = baseFiles.find(f.path);
                if (it == baseFiles.end()) a.addRemove(f.path);
            }
            for (const auto& p : current->ignored)
                a.addRemove(p.back() == '/' ? p.substr(0, p.size() - 1) : p);
        }
        a.addRemove(".git");
        a.addTree(repo.get(), tree.get(), "");
        for (const auto& sm : r.submodules) {
            Repository smRepo = openBareRepository(sm.mirrorPath);
            Commit smCommit = lookupCommit(smRepo.get(), sm.commit);
            git_tree* st = nullptr;
            check(git_commit_tree(&st, smCommit.get()), ErrorCode::internal, "submodule tree");
            Tree smTree(st);
            a.addRemove(sm.path + "/.git");
            a.addTree(smRepo.get(), smTree.get(), sm.path);
            a.addFile(sm.path + "/.git", 0644, gitlinkFile(sm.path, sm.name));
        }
        a.addHostDirectory(gitDir, ".git");
    });
}

// ------------------------------------------------------------ reading back

WorkspaceInfo WorkspaceService::info(const std::string& tenant, const std::string& id) {
    auto r = load(tenant, id);
    auto lock = sandboxLocks_.of(id);
    std::lock_guard hold(*lock);
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

WorkspaceService::Snapshot WorkspaceService::snapshot(const std::string& tenant,
                                                      const std::string& id, const Record& r) {
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
    {
        auto stream = agent->open(protocol::WorkspaceScanRequest{r.path, skip, true, "user"});
        snap.scan = parseScan(drain(stream, 64ull << 20));
    }
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::vector<std::string> mirrors{mirrors_.mirrorPath(tenant, url)};
    for (const auto& s : r.submodules) mirrors.push_back(s.mirrorPath);
    Repository work = mirrors_.openWorkRepo(tenant, mirrors);
    std::uint64_t transferred = 0;
    auto readFile = [&](const std::string& rel) {
        auto stream = agent->open(protocol::FileReadRequest{r.path + "/" + rel, "user"});
        std::string bytes = drain(stream, config_.maxFileBytes);
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

std::optional<WorkspaceService::EvidenceView> WorkspaceService::evidenceView(
    const std::string& tenant, const std::string& id,
    const std::function<bool(const std::string&)>& wanted) {
    if (!workspaces_.find(id)) return std::nullopt;
    auto r = load(tenant, id);
    auto lock = sandboxLocks_.of(id);
    std::lock_guard hold(*lock);
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
    EvidenceView view;
    view.info = {{"repo", r.repo},
                 {"ref", r.baseRef},
                 {"base_commit", r.baseCommit},
                 {"base_tree", oidHex(*git_commit_tree_id(base.get()))},
                 {"branch", r.branch},
                 {"path", r.path},
                 {"write_scope", r.writeScope},
                 {"enforce_scope", r.enforceScope},
                 {"final_tree", snap.tree}};
    if (!r.head.empty()) {
        // The last commit made on the host, when it holds exactly this tree.
        try {
            Commit head = lookupCommit(work.get(), r.head);
            if (oidHex(*git_commit_tree_id(head.get())) == snap.tree)
                view.info["final_commit"] = r.head;
        } catch (const Error&) {
        }
    }
    view.finalTree = snap.tree;
    view.patch = snap.diff.patch;
    view.files = snap.diff.files;
    view.gitattributes = contentAt(finalTree, ".gitattributes");
    for (const auto& f : snap.diff.files) {
        std::string path = f.value("path", ""), oldPath = f.value("old_path", path);
        if (!wanted(path)) continue;
        view.contents[path] = {contentAt(*git_commit_tree_id(base.get()), oldPath),
                               contentAt(finalTree, path)};
    }
    return view;
}

// The workspace's diff now, recorded as looked at (the evidence shows what
// the agent saw of its own change).
WorkspaceService::Snapshot WorkspaceService::diffed(const std::string& tenant,
                                                    const std::string& id, Record& r) {
    r = load(tenant, id);
    auto lock = sandboxLocks_.of(id);
    std::lock_guard hold(*lock);
    auto snap = snapshot(tenant, id, r);
    sandboxes_.recordEvent(sandboxes_.get(tenant, id), "workspace.diffed",
                            {{"tree", snap.tree},
                             {"files", snap.diff.files.size()},
                             {"additions", snap.diff.additions},
                             {"deletions", snap.diff.deletions},
                             {"out_of_scope", snap.diff.outOfScope}});
    return snap;
}

std::string WorkspaceService::diffPatch(const std::string& tenant, const std::string& id) {
    Record r;
    return diffed(tenant, id, r).diff.patch;
}

WorkspaceDiff WorkspaceService::diff(const std::string& tenant, const std::string& id) {
    Record r;
    auto snap = diffed(tenant, id, r);
    return WorkspaceDiff{r.baseCommit, snap.tree, std::move(snap.diff)};
}

// ------------------------------------------------------------ commit, push, reset

WorkspaceCommit WorkspaceService::commit(const std::string& tenant, const std::string& id,
                              const std::string& message, const std::string& authorName,
                              const std::string& authorEmail) {
    auto r = load(tenant, id);
    auto lock = sandboxLocks_.of(id);
    std::lock_guard hold(*lock);
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
    save(id, tenant, r);
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

PushStatus WorkspaceService::requestPush(const std::string& tenant, const std::string& id,
                                   const std::string& commitHex) {
    auto r = load(tenant, id);
    auto lock = sandboxLocks_.of(id);
    std::lock_guard hold(*lock);
    parseOid(commitHex);
    if (r.head.empty())
        throw Error(ErrorCode::conflict, "nothing to push: commit the workspace first");
    if (commitHex != r.head)
        throw Error(ErrorCode::conflict,
                    "only the task branch's last commit (" + r.head + ") can be pushed");
    if (r.branch.rfind(config_.pushBranchPrefix, 0) != 0)
        throw Error(ErrorCode::forbidden, "pushes go only to branches under '" +
                                              config_.pushBranchPrefix + "'; '" + r.branch +
                                              "' is not");
    RemoteUrl url = RemoteUrl::parse(r.repo);
    requireAllowedAddress(url, config_.addressPolicy);
    std::vector<std::string> mirrors{mirrors_.mirrorPath(tenant, url)};
    Repository work = mirrors_.openWorkRepo(tenant, mirrors);
    Commit c = lookupCommit(work.get(), commitHex);
    Commit base = lookupCommit(work.get(), r.baseCommit);
    std::string treeHex = oidHex(*git_commit_tree_id(c.get()));
    auto d = diffTrees(work.get(), *git_commit_tree_id(base.get()), *git_commit_tree_id(c.get()),
                       r.writeScope);
    if (r.enforceScope && !d.outOfScope.empty())
        throw Error(ErrorCode::conflict,
                    "changes outside the write scope: " + json(d.outOfScope).dump());
    auto credential = credentials_.open(tenant, r.credential, url);
    std::string lease =
        GitRemoteAccess(url, credential, config_.gitTimeout).branchValue(work.get(), r.branch);
    std::string pushId = newId("psh-");
    auto sandbox = sandboxes_.get(tenant, id);
    std::string stats = std::to_string(d.files.size()) + " files, +" + std::to_string(d.additions) +
                        " -" + std::to_string(d.deletions);
    // The approver sees what evidence found of exactly this tree; a bundle
    // sealed for another tree says nothing about it.
    json evidence = evidenceSummary_ ? evidenceSummary_(id, treeHex) : json(nullptr);
    if (!evidence.is_object()) evidence = nullptr;
    std::string evidenceReason =
        evidence.is_null() ? "no evidence bundle of this sandbox was sealed for tree " + treeHex +
                                 " (the commit's tree)"
                           : "";
    std::string evidenceText = "; no evidence bundle for this tree";
    if (evidence.is_object() && evidence.contains("summary") && evidence["summary"].is_object()) {
        const json& s = evidence["summary"];
        evidenceText = "; evidence " + evidence.value("id", "") + ": tests " +
                       s.value("tests", std::string("?"));
        if (s.contains("findings") && s["findings"].is_array() && !s["findings"].empty()) {
            evidenceText += ", findings";
            for (const auto& k : s["findings"])
                if (k.is_string()) evidenceText += " " + k.get<std::string>();
        }
    }
    // Per file: what the approver reads before the patch (GET /v1/approvals/{id}/patch).
    json diffstat = json::array();
    for (const auto& f : d.files)
        diffstat.push_back({{"path", f.value("path", "")},
                            {"old_path", f.value("old_path", "")},
                            {"status", f.value("status", "")},
                            {"additions", f.value("additions", 0)},
                            {"deletions", f.value("deletions", 0)},
                            {"binary", f.value("binary", false)}});
    // The commit stays in the tenant's store while its approval may be read.
    git_reference* keep = nullptr;
    git_oid commitOid = parseOid(commitHex);
    check(git_reference_create(&keep, work.get(), ("refs/airlock/approvals/" + pushId).c_str(),
                               &commitOid, 1, "push approval"),
          ErrorCode::internal, "ref");
    git_reference_free(keep);
    auto g = sandboxes_.gates().parkPublish(
        sandbox, pushId, "git push " + r.repo + " " + commitHex + ":refs/heads/" + r.branch,
        "a push publishes the agent's work (" + stats + " against " + r.baseCommit.substr(0, 12) +
            evidenceText + ")",
        {{"push_id", pushId},
         {"evidence", evidence},
         {"evidence_reason", evidenceReason.empty() ? json(nullptr) : json(evidenceReason)},
         {"sandbox", id},
         {"repo", r.repo},
         {"branch", r.branch},
         {"commit", commitHex},
         {"tree", treeHex},
         {"lease", lease},
         {"base_commit", r.baseCommit},
         {"base", r.baseCommit},
         {"credential", r.credential},
         {"files", d.files.size()},
         {"additions", d.additions},
         {"deletions", d.deletions},
         {"diffstat",
          {{"files", diffstat}, {"additions", d.additions}, {"deletions", d.deletions}}}});
    sandboxes_.recordEvent(sandbox, "push.requested",
                            {{"push_id", pushId},
                             {"approval_id", g.approvalId},
                             {"repo", r.repo},
                             {"branch", r.branch},
                             {"commit", commitHex},
                             {"tree", treeHex},
                             {"lease", lease},
                             {"stats", stats},
                             {"request_digest", g.requestDigest}});
    PushStatus status;
    status.pushId = pushId;
    status.approvalId = g.approvalId;
    status.state = g.state;
    status.commit = commitHex;
    status.branch = r.branch;
    status.repo = r.repo;
    status.lease = lease;
    return status;
}

PushStatus WorkspaceService::pushState(const std::string& tenant, const std::string& id,
                                       const std::string& pushId) {
    sandboxes_.get(tenant, id);
    auto g = isValidId(pushId, "psh-") ? sandboxes_.gates().find(pushId) : std::nullopt;
    if (!g || g->tenant != tenant || g->sandboxId != id)
        throw Error(ErrorCode::not_found, "no push " + pushId);
    auto req = json::parse(g->requestJson, nullptr, false);
    PushStatus status;
    status.pushId = g->id;
    status.approvalId = g->approvalId;
    status.state = g->state == "running" ? "pushing" : g->state;
    status.requestedAt = g->requestedAt;
    if (req.is_object()) {
        status.repo = req.value("repo", "");
        status.branch = req.value("branch", "");
        status.commit = req.value("commit", "");
        status.lease = req.value("lease", "");
    }
    status.decidedBy = g->decidedBy;
    status.decidedAt = g->decidedAt;
    status.decisionReason = g->decisionReason;
    status.error = g->error;
    return status;
}

void WorkspaceService::reset(const std::string& tenant, const std::string& id, bool cleanIgnored) {
    auto r = load(tenant, id);
    auto lock = sandboxLocks_.of(id);
    std::lock_guard hold(*lock);
    auto agent = sandboxes_.runningAgent(tenant, id);
    std::vector<std::string> skip;
    for (const auto& s : r.submodules) skip.push_back(s.path);
    auto stream = agent->open(protocol::WorkspaceScanRequest{r.path, skip, cleanIgnored, "user"});
    Scan current = parseScan(drain(stream, 64ull << 20));
    if (!cleanIgnored) current.ignored.clear();
    populate(tenant, id, r, true, &current);
    // Back at the base: the host's head goes too (nothing is left to push),
    // and a push asked for before no longer names the workspace's work.
    std::string previousHead = r.head;
    r.head.clear();
    save(id, tenant, r);
    sandboxes_.gates().supersedePublishes(id, "superseded by a workspace reset");
    sandboxes_.recordEvent(sandboxes_.get(tenant, id), "workspace.reset",
                            {{"base_commit", r.baseCommit},
                             {"clean_ignored", cleanIgnored},
                             {"previous_head", previousHead.empty() ? json(nullptr)
                                                                    : json(previousHead)}});
}

std::string WorkspaceService::pushPatch(const GatedExec& approval) {
    auto req = sandboxes_.gates().verifiedRequest(approval);
    std::string commitHex = req.value("commit", ""), baseHex = req.value("base_commit", "");
    RemoteUrl url = RemoteUrl::parse(req.value("repo", ""));
    Repository work = mirrors_.openWorkRepo(approval.tenant, {mirrors_.mirrorPath(approval.tenant, url)});
    Commit c = lookupCommit(work.get(), commitHex);
    Commit base = lookupCommit(work.get(), baseHex);
    return diffTrees(work.get(), *git_commit_tree_id(base.get()), *git_commit_tree_id(c.get()), {})
        .patch;
}

void WorkspaceService::checkWrite(const SandboxRecord& sandbox, const std::string& path) {
    // A damaged record refuses the write (Error(internal)): the scope is
    // never skipped because it could not be read.
    auto stored = this->stored(sandbox.id);
    if (!stored || !stored->enforceScope) return;
    const Record& r = *stored;
    // Lexically, as the guest resolves it.
    std::vector<std::string> parts;
    std::size_t i = 0;
    while (i <= path.size()) {
        std::size_t k = path.find('/', i);
        if (k == std::string::npos) k = path.size();
        std::string part = path.substr(i, k - i);
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
        } else if (!part.empty() && part != ".") {
            parts.push_back(part);
        }
        i = k + 1;
    }
    std::string norm;
    for (const auto& p : parts) norm += "/" + p;
    std::string root = r.path;
    if (norm == root || norm.rfind(root + "/", 0) != 0) return;  // outside the repository
    std::string rel = norm.substr(root.size() + 1);
    if (rel == ".git" || rel.rfind(".git/", 0) == 0) return;
    if (!inScope(r.writeScope, rel))
        throw Error(ErrorCode::forbidden,
                    rel + " is outside the workspace's write scope " + json(r.writeScope).dump());
}

void WorkspaceService::onPublishDecision(const GatedExec& g, bool approved) {
    auto sandbox = refOf(g.sandboxId, g.tenant);
    if (!approved) {
        sandboxes_.recordEvent(sandbox, "push.denied",
                                {{"push_id", g.id},
                                 {"approval_id", g.approvalId},
                                 {"by", g.decidedBy},
                                 {"reason", g.decisionReason}});
        return;
    }
    sandboxes_.recordEvent(
        sandbox, "push.approved",
        {{"push_id", g.id}, {"approval_id", g.approvalId}, {"by", g.decidedBy}});
    {
        std::lock_guard lock(queueMutex_);
        pushQueue_.push_back(g);
    }
    queueCv_.notify_one();
}

void WorkspaceService::pushWorker() {
    while (true) {
        GatedExec g;
        {
            std::unique_lock lock(queueMutex_);
            queueCv_.wait(lock, [&] { return stopping_ || !pushQueue_.empty(); });
            if (stopping_) {
                for (const auto& left : pushQueue_)
                    sandboxes_.gates().finishPublish(left.id, "failed",
                                                      "airlockd stopped before the push");
                return;
            }
            g = pushQueue_.front();
            pushQueue_.pop_front();
        }
        runPush(g);
    }
}

void WorkspaceService::runPush(GatedExec g) {
    auto sandbox = refOf(g.sandboxId, g.tenant);
    try {
        // Exactly what was approved: the parked request its digest binds.
        auto req = sandboxes_.gates().verifiedRequest(g);
        if (!req.is_object()) throw Error(ErrorCode::internal, "the parked push is damaged");
        std::string repoText = req.value("repo", ""), branch = req.value("branch", ""),
                    commitHex = req.value("commit", ""), lease = req.value("lease", "");
        RemoteUrl url = RemoteUrl::parse(repoText);
        auto credential = credentials_.open(g.tenant, req.value("credential", ""), url);
        // The mirror learns the remote's current branches (for the
        // fast-forward check); then the lease is checked on the wire.
        std::string mirror = mirrors_.fetch(g.tenant, url, credential);
        Repository work = mirrors_.openWorkRepo(g.tenant, {mirror});
        GitRemoteAccess remote(url, credential, config_.gitTimeout);
        std::string now = remote.branchValue(work.get(), branch);
        if (now != lease)
            throw PushRejected("the remote branch " + branch +
                               " moved since the push was requested (" +
                               (lease.empty() ? "absent" : lease.substr(0, 12)) + " -> " +
                               (now.empty() ? "absent" : now.substr(0, 12)) + ")");
        git_oid target = parseOid(commitHex);
        if (req.contains("tree")) {
            Commit approved = lookupCommit(work.get(), commitHex);
            if (oidHex(*git_commit_tree_id(approved.get())) != req.value("tree", ""))
                throw Error(ErrorCode::conflict, "commit " + commitHex +
                                                     " does not hold the approved tree");
        }
        if (!now.empty()) {
            git_oid current = parseOid(now);
            if (!git_oid_equal(&current, &target) &&
                git_graph_descendant_of(work.get(), &target, &current) != 1)
                throw PushRejected("non-fast-forward: " + branch + " is at " + now.substr(0, 12) +
                                   ", which the commit does not contain");
        }
        std::string localRef = "refs/airlock/push/" + g.id;
        git_reference* ref = nullptr;
        check(git_reference_create(&ref, work.get(), localRef.c_str(), &target, 1, "push"),
              ErrorCode::internal, "ref");
        git_reference_free(ref);
        remote.push(work.get(), localRef, branch);
        sandboxes_.gates().finishPublish(g.id, "pushed", "");
        sandboxes_.recordEvent(
            sandbox, "push.pushed",
            {{"push_id", g.id}, {"repo", repoText}, {"branch", branch}, {"commit", commitHex}});
    } catch (const PushRejected& e) {
        sandboxes_.gates().finishPublish(g.id, "rejected", e.what());
        sandboxes_.recordEvent(sandbox, "push.rejected",
                                {{"push_id", g.id}, {"reason", e.what()}});
    } catch (const std::exception& e) {
        sandboxes_.gates().finishPublish(g.id, "failed", e.what());
        sandboxes_.recordEvent(sandbox, "push.rejected",
                                {{"push_id", g.id}, {"reason", e.what()}, {"failed", true}});
    }
}

}  // namespace airlock::workspace
