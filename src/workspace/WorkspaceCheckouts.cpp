#include "workspace/WorkspaceCheckouts.hpp"

#include <filesystem>

#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "protocol/FileArchive.hpp"
#include "workspace/GitSupport.hpp"
#include "workspace/RemoteUrl.hpp"

namespace airlock::workspace {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The .git file of a submodule's checkout: its repository under the
// superproject's .git/modules.
std::string gitlinkFile(const std::string& smPath, const std::string& name) {
    std::string up;
    for (auto part : fs::path(smPath)) {
        (void)part;
        up += "../";
    }
    return "gitdir: " + up + ".git/modules/" + name + "\n";
}

}  // namespace

bool WorkspaceCheckouts::validBranch(const std::string& branch) {
    int valid = 0;
    std::string ref = "refs/heads/" + branch;
    // What git branch refuses beyond the ref rules: a leading "-", "HEAD".
    return git_reference_name_is_valid(&valid, ref.c_str()) == 0 && valid &&
           branch.find("..") == std::string::npos && branch.size() <= 200 && branch[0] != '-' &&
           branch != "HEAD";
}

std::map<std::string, std::pair<std::string, std::string>> WorkspaceCheckouts::parseGitmodules(
    std::string_view text) {
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

WorkspaceRecord WorkspaceCheckouts::resolve(const std::string& tenant, const WorkspaceSpec& spec) {
    if (!validBranch(spec.branch))
        throw Error(ErrorCode::bad_request,
                    "branch: '" + spec.branch + "' is not a valid git branch name");
    RemoteUrl url = RemoteUrl::parse(spec.repo);
    auto credential = credentials_.open(tenant, spec.credential, url);
    std::string mirror = mirrors_.fetch(tenant, url, credential);
    WorkspaceRecord rec;
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
    return rec;
}

SandboxRecord WorkspaceCheckouts::createSandbox(const std::string& tenant,
                                               const CreateSandboxRequest& request) {
    if (!request.workspace) throw Error(ErrorCode::bad_request, "no workspace to check out");
    if (!request.snapshot.empty())
        throw Error(ErrorCode::bad_request,
                    "a clone of a snapshot keeps its snapshot's workspace: no workspace field");
    WorkspaceRecord rec = resolve(tenant, *request.workspace);
    auto r = sandboxes_.create(tenant, request);
    try {
        populate(tenant, r.id, rec, nullptr);
        records_.save(r.id, tenant, rec);
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

void WorkspaceCheckouts::populate(const std::string& tenant, const std::string& id,
                                  const WorkspaceRecord& r, const Scan* current) {
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
    auto agent = sandboxes_.runningAgent(tenant, id);
    guest_.unpack(*agent, r.path, [&](CheckoutArchive& a) {
        if (current) {
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

void WorkspaceCheckouts::reset(const std::string& tenant, const std::string& id, bool cleanIgnored) {
    auto held = records_.holdOwned(tenant, id);
    auto r = records_.load(tenant, id);
    auto agent = sandboxes_.runningAgent(tenant, id);
    std::vector<std::string> skip;
    for (const auto& s : r.submodules) skip.push_back(s.path);
    Scan current = guest_.scan(*agent, r.path, skip, cleanIgnored);
    if (!cleanIgnored) current.ignored.clear();
    populate(tenant, id, r, &current);
    // Back at the base: the host's head goes too (nothing is left to push),
    // and a push asked for before no longer names the workspace's work.
    std::string previousHead = r.head;
    r.head.clear();
    records_.save(id, tenant, r);
    sandboxes_.gates().supersedePublishes(id, "superseded by a workspace reset");
    sandboxes_.recordEvent(sandboxes_.get(tenant, id), "workspace.reset",
                            {{"base_commit", r.baseCommit},
                             {"clean_ignored", cleanIgnored},
                             {"previous_head", previousHead.empty() ? json(nullptr)
                                                                    : json(previousHead)}});
}

}  // namespace airlock::workspace
