#include "workspace/WorkspaceService.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/Clock.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "core/Sha256.hpp"
#include "protocol/FileArchive.hpp"
#include "workspace/CheckoutArchive.hpp"
#include "workspace/GitSocket.hpp"

namespace airlock::workspace {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr auto kAgentWait = std::chrono::minutes(5);

std::string hashOf(const std::string& s) { return sha256Hex(s).substr(0, 32); }

Repository openRepo(const std::string& path) {
    git_repository* raw = nullptr;
    check(git_repository_open_bare(&raw, path.c_str()), ErrorCode::internal, "opening " + path);
    return Repository(raw);
}

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

// A credential over plain http would cross the network in the clear: only
// to addresses the operator opened (a loopback test server, an on-prem host).
void requireOperatorOpened(const RemoteUrl& url, const egress::AddressPolicy& policy) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(url.host.c_str(), nullptr, &hints, &res) != 0)
        throw Error(ErrorCode::unprocessable, "cannot resolve " + url.host);
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(res, ::freeaddrinfo);
    for (addrinfo* a = res; a; a = a->ai_next) {
        if (a->ai_family != AF_INET) continue;
        auto* sin = reinterpret_cast<sockaddr_in*>(a->ai_addr);
        if (!policy.operatorAllowed(boost::asio::ip::address_v4(ntohl(sin->sin_addr.s_addr))))
            throw Error(ErrorCode::bad_request,
                        "a credential goes only over https (plain http only to ranges the operator "
                        "opened)");
    }
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
                {"submodules", subs}};
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
        return r;
    }
};

struct WorkspaceService::Snapshot {
    std::string tree;
    TreeDiff diff;
    Scan scan;
};

WorkspaceService::WorkspaceService(WorkspaceConfig config, SandboxController& controller,
                                   CredentialStore& credentials, WorkspaceStore& workspaces)
    : config_(std::move(config)),
      controller_(controller),
      credentials_(credentials),
      workspaces_(workspaces) {
    initGit();
    installGitSocket(config_.addressPolicy, std::chrono::seconds(30), std::chrono::seconds(120));
    fs::create_directories(config_.dataDir + "/git");
    fs::permissions(config_.dataDir + "/git", fs::perms::owner_all, fs::perm_options::replace);
    // Scratch checkouts of a previous run are garbage.
    std::error_code ec;
    for (auto& t : fs::directory_iterator(config_.dataDir + "/git", ec))
        fs::remove_all(t.path() / "scratch", ec);
    // A push a restart interrupted did not happen as far as anyone knows:
    // failed, and the agent may ask again (the lease is checked anew).
    for (const auto& g : controller_.gates().running("psh-")) {
        controller_.gates().finishPublish(g.id, "failed",
                                          "airlockd restarted during the push; ask again");
        controller_.recordEvent(refOf(g.sandboxId, g.tenant), "push.rejected",
                                {{"push_id", g.id},
                                 {"reason", "airlockd restarted during the push"},
                                 {"failed", true}});
    }
    worker_ = std::thread([this] { pushWorker(); });
    controller_.setWorkspaceHooks(
        [this](const SandboxRecord& r, const std::string& path) { checkWrite(r, path); },
        [this](const GatedExec& g, bool approved) { onPublishDecision(g, approved); });
    controller_.setExtraSecrets([this](const SandboxRecord& r) {
        std::vector<std::string> values;
        if (!config_.cipher) return values;
        for (const auto& c : credentials_.list(r.tenant))
            values.push_back(
                config_.cipher->open(c.secretSealed, "credential/" + c.tenant + "/" + c.name));
        return values;
    });
}

WorkspaceService::~WorkspaceService() {
    controller_.setWorkspaceHooks(nullptr, nullptr);
    controller_.setExtraSecrets(nullptr);
    {
        std::lock_guard lock(queueMutex_);
        stopping_ = true;
    }
    queueCv_.notify_all();
    if (worker_.joinable()) worker_.join();
}

std::shared_ptr<std::mutex> WorkspaceService::lockFor(
    std::map<std::string, std::shared_ptr<std::mutex>>& m, const std::string& key) {
    std::lock_guard lock(locksGuard_);
    auto& p = m[key];
    if (!p) p = std::make_shared<std::mutex>();
    return p;
}

// ------------------------------------------------------------ credentials

CredentialRecord WorkspaceService::addCredential(const std::string& tenant,
                                                 const CredentialSpec& spec) {
    if (!config_.cipher)
        throw Error(ErrorCode::unavailable, "credentials need the secret key (none is configured)");
    CredentialRecord c;
    c.tenant = tenant;
    c.name = spec.name;
    c.kind = spec.kind;
    c.host = spec.host;
    c.username = spec.username;
    c.knownHosts = spec.knownHosts;
    c.createdAt = nowTimestamp();
    if (credentials_.list(tenant).size() >= 64)
        throw Error(ErrorCode::quota_exceeded, "a tenant has at most 64 credentials");
    c.secretSealed = config_.cipher->seal(spec.secret, "credential/" + tenant + "/" + spec.name);
    if (!credentials_.insert(c))
        throw Error(ErrorCode::conflict, "a credential named '" + spec.name + "' exists already");
    controller_.recordEvent(refOf("", tenant), "credential.created",
                            {{"name", c.name}, {"kind", c.kind}, {"host", c.host}});
    c.secretSealed.clear();
    return c;
}

std::vector<CredentialRecord> WorkspaceService::listCredentials(const std::string& tenant) {
    auto list = credentials_.list(tenant);
    for (auto& c : list) c.secretSealed.clear();
    return list;
}

void WorkspaceService::removeCredential(const std::string& tenant, const std::string& name) {
    if (!credentials_.remove(tenant, name))
        throw Error(ErrorCode::not_found, "no credential '" + name + "'");
}

std::optional<BrokeredCredential> WorkspaceService::openCredential(const std::string& tenant,
                                                                   const std::string& name,
                                                                   const RemoteUrl& url) {
    if (name.empty()) return std::nullopt;
    auto c = credentials_.find(tenant, name);
    if (!c) throw Error(ErrorCode::not_found, "no credential '" + name + "'");
    if (c->host != url.credentialHost())
        throw Error(ErrorCode::forbidden, "credential '" + name + "' is for " + c->host + ", not " +
                                              url.credentialHost());
    if ((c->kind == "ssh-key") != (url.scheme == "ssh"))
        throw Error(ErrorCode::bad_request, "credential '" + name + "' is a " + c->kind +
                                                " and the repository is " + url.scheme);
    if (url.scheme == "http") requireOperatorOpened(url, config_.addressPolicy);
    if (!config_.cipher) throw Error(ErrorCode::unavailable, "no secret key is configured");
    return BrokeredCredential{
        c->kind, c->host, c->username,
        config_.cipher->open(c->secretSealed, "credential/" + tenant + "/" + name), c->knownHosts};
}

// ------------------------------------------------------------ mirrors

std::string WorkspaceService::tenantDir(const std::string& tenant) const {
    return config_.dataDir + "/git/" + hashOf("tenant\n" + tenant);
}

std::string WorkspaceService::mirrorPath(const std::string& tenant, const RemoteUrl& url) const {
    return tenantDir(tenant) + "/mirrors/" + hashOf(url.text) + ".git";
}

std::string WorkspaceService::fetchMirror(const std::string& tenant, const RemoteUrl& url,
                                          const std::optional<BrokeredCredential>& credential) {
    requireAllowedAddress(url, config_.addressPolicy);
    std::string path = mirrorPath(tenant, url);
    auto lock = lockFor(mirrorLocks_, path);
    std::lock_guard hold(*lock);
    git_repository* raw = nullptr;
    if (!fs::exists(path + "/HEAD")) {
        fs::create_directories(path);
        check(git_repository_init(&raw, path.c_str(), 1), ErrorCode::internal, "mirror");
    } else {
        check(git_repository_open_bare(&raw, path.c_str()), ErrorCode::internal, "mirror");
    }
    Repository repo(raw);
    // Every use fetches with the caller's credential: what one sandbox
    // fetched is no proof another may read it.
    GitRemoteAccess(url, credential, config_.gitTimeout).fetchInto(repo.get());
    return path;
}

Repository WorkspaceService::openWorkRepo(const std::string& tenant,
                                          const std::vector<std::string>& mirrors) {
    std::string path = tenantDir(tenant) + "/work.git";
    auto lock = lockFor(tenantLocks_, tenant);
    std::lock_guard hold(*lock);
    if (!fs::exists(path + "/HEAD")) {
        git_repository* raw = nullptr;
        check(git_repository_init(&raw, path.c_str(), 1), ErrorCode::internal, "work repository");
        git_repository_free(raw);
    }
    std::string altFile = path + "/objects/info/alternates";
    std::string existing;
    {
        std::ifstream in(altFile);
        existing.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::string wanted = existing;
    for (const auto& m : mirrors) {
        std::string line = m + "/objects";
        if (wanted.find(line + "\n") == std::string::npos) wanted += line + "\n";
    }
    if (wanted != existing) {
        // Replaced in one rename: a reader never sees it half written.
        fs::create_directories(path + "/objects/info");
        std::string tmp = altFile + ".tmp";
        std::ofstream(tmp, std::ios::trunc) << wanted;
        fs::rename(tmp, altFile);
    }
    return openRepo(path);
}

// ------------------------------------------------------------ records

WorkspaceService::Record WorkspaceService::load(const std::string& tenant, const std::string& id) {
    controller_.get(tenant, id);  // ownership: 404 for anyone else's
    auto r = stored(id);
    if (!r) throw Error(ErrorCode::not_found, "sandbox " + id + " has no workspace");
    RemoteUrl::parse(r->repo);  // a stored URL that no longer parses fails here, not deeper
    for (auto& s : r->submodules) s.mirrorPath = mirrorPath(tenant, RemoteUrl::parse(s.url));
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
    auto credential = openCredential(tenant, spec.credential, url);
    std::string mirror = fetchMirror(tenant, url, credential);
    Record rec;
    rec.repo = spec.repo;
    rec.branch = spec.branch;
    rec.path = spec.path;
    rec.credential = spec.credential;
    rec.writeScope = spec.writeScope;
    rec.enforceScope = spec.enforceScope;
    {
        Repository repo = openRepo(mirror);
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
                    // Its credential only when it lives on the same host.
                    auto smCred = smRemote.credentialHost() == url.credentialHost() &&
                                          smRemote.scheme == url.scheme
                                      ? credential
                                      : std::nullopt;
                    std::string smMirror = fetchMirror(tenant, smRemote, smCred);
                    std::string commit = oidHex(*git_tree_entry_id(link.get()));
                    Repository smRepo = openRepo(smMirror);
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
    auto r = controller_.create(tenant, request);
    try {
        populate(tenant, r.id, rec, false, nullptr);
        save(r.id, tenant, rec);
    } catch (const std::exception& e) {
        logWarn("workspace",
                "sandbox " + r.id + ": workspace not written (" + e.what() + "): removing it");
        try {
            controller_.destroy(tenant, r.id);
        } catch (const std::exception& e2) {
            logError("workspace", "cannot remove " + r.id + ": " + e2.what());
        }
        throw;
    }
    json subs = json::array();
    for (const auto& s : rec.submodules) subs.push_back({{"path", s.path}, {"commit", s.commit}});
    controller_.recordEvent(r, "workspace.cloned",
                            {{"repo", rec.repo},
                             {"base_ref", rec.baseRef},
                             {"base_commit", rec.baseCommit},
                             {"branch", rec.branch},
                             {"path", rec.path},
                             {"submodules", subs}});
    // From here on the guest's own reads and writes in it are recorded.
    controller_.files().watchFiles(tenant, r.id, rec.path);
    return r;
}

void WorkspaceService::sendArchive(const std::string& tenant, const std::string& id,
                                   const std::string& path,
                                   const std::function<void(CheckoutArchive&)>& fill) {
    auto agent = controller_.runningAgent(tenant, id);
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
    std::string scratch = tenantDir(tenant) + "/scratch/" + id + "-" + newId("co-");
    fs::create_directories(scratch);
    struct Cleanup {
        std::string dir;
        ~Cleanup() {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    } cleanup{scratch};
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::string mirror = mirrorPath(tenant, url);
    std::string gitDir;
    {
        auto lock = lockFor(mirrorLocks_, mirror);
        std::lock_guard hold(*lock);
        gitDir = prepareGitDir(scratch, mirror, r.repo, r.baseCommit, r.branch, r.submodules);
    }
    Repository repo = openRepo(mirror);
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
            Repository smRepo = openRepo(sm.mirrorPath);
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

json WorkspaceService::info(const std::string& tenant, const std::string& id) {
    auto r = load(tenant, id);
    auto lock = lockFor(sandboxLocks_, id);
    std::lock_guard hold(*lock);
    // A paused or stopped sandbox still has its record; only the count of
    // changed files needs the guest.
    json changed = nullptr;
    if (controller_.get(tenant, id).state == SandboxState::running)
        changed = snapshot(tenant, id, r).diff.files.size();
    json subs = json::array();
    for (const auto& s : r.submodules) subs.push_back({{"path", s.path}, {"commit", s.commit}});
    return {{"repo", r.repo},
            {"base_ref", r.baseRef},
            {"base_commit", r.baseCommit},
            {"branch", r.branch},
            {"path", r.path},
            {"write_scope", r.writeScope},
            {"enforce_scope", r.enforceScope},
            {"credential", r.credential},
            {"head", r.head.empty() ? json(nullptr) : json(r.head)},
            {"submodules", subs},
            {"changed_files", changed}};
}

WorkspaceService::Snapshot WorkspaceService::snapshot(const std::string& tenant,
                                                      const std::string& id, const Record& r) {
    auto agent = controller_.runningAgent(tenant, id);
    std::vector<std::string> skip;
    std::map<std::string, git_oid> gitlinks;
    for (const auto& s : r.submodules) {
        skip.push_back(s.path);
        gitlinks[s.path] = parseOid(s.commit);
    }
    Snapshot snap;
    {
        auto stream = agent->open(protocol::WorkspaceScanRequest{r.path, skip, true, "user"});
        snap.scan = parseScan(drain(stream, 64ull << 20));
    }
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::vector<std::string> mirrors{mirrorPath(tenant, url)};
    for (const auto& s : r.submodules) mirrors.push_back(s.mirrorPath);
    Repository work = openWorkRepo(tenant, mirrors);
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
        }
    }
    git_oid tree = buildWorkingTree(work.get(), snap.scan, gitlinks, readFile);
    snap.tree = oidHex(tree);
    snap.diff = diffTrees(work.get(), *git_commit_tree_id(base.get()), tree, r.writeScope);
    return snap;
}

std::optional<WorkspaceService::EvidenceView> WorkspaceService::evidenceView(
    const std::string& tenant, const std::string& id,
    const std::function<bool(const std::string&)>& wanted) {
    if (!workspaces_.find(id)) return std::nullopt;
    auto r = load(tenant, id);
    auto lock = lockFor(sandboxLocks_, id);
    std::lock_guard hold(*lock);
    auto snap = snapshot(tenant, id, r);
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::vector<std::string> mirrors{mirrorPath(tenant, url)};
    for (const auto& s : r.submodules) mirrors.push_back(s.mirrorPath);
    Repository work = openWorkRepo(tenant, mirrors);
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
    auto lock = lockFor(sandboxLocks_, id);
    std::lock_guard hold(*lock);
    auto snap = snapshot(tenant, id, r);
    controller_.recordEvent(controller_.get(tenant, id), "workspace.diffed",
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

json WorkspaceService::diffJson(const std::string& tenant, const std::string& id) {
    Record r;
    auto snap = diffed(tenant, id, r);
    return {{"base_commit", r.baseCommit},      {"tree", snap.tree},
            {"files", snap.diff.files},         {"additions", snap.diff.additions},
            {"deletions", snap.diff.deletions}, {"out_of_scope", snap.diff.outOfScope}};
}

// ------------------------------------------------------------ commit, push, reset

json WorkspaceService::commit(const std::string& tenant, const std::string& id,
                              const std::string& message, const std::string& authorName,
                              const std::string& authorEmail) {
    auto r = load(tenant, id);
    auto lock = lockFor(sandboxLocks_, id);
    std::lock_guard hold(*lock);
    auto snap = snapshot(tenant, id, r);
    if (r.enforceScope && !snap.diff.outOfScope.empty())
        throw Error(ErrorCode::conflict,
                    "changes outside the write scope: " + json(snap.diff.outOfScope).dump());
    RemoteUrl url = RemoteUrl::parse(r.repo);
    std::vector<std::string> mirrors{mirrorPath(tenant, url)};
    Repository work = openWorkRepo(tenant, mirrors);
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
    controller_.recordEvent(controller_.get(tenant, id), "workspace.committed",
                            {{"commit", commitHex},
                             {"tree", snap.tree},
                             {"parent", parentHex},
                             {"branch", r.branch},
                             {"files", snap.diff.files.size()},
                             {"additions", snap.diff.additions},
                             {"deletions", snap.diff.deletions}});
    return {
        {"commit", commitHex}, {"tree", snap.tree}, {"parent", parentHex}, {"branch", r.branch}};
}

json WorkspaceService::requestPush(const std::string& tenant, const std::string& id,
                                   const std::string& commitHex) {
    auto r = load(tenant, id);
    auto lock = lockFor(sandboxLocks_, id);
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
    std::vector<std::string> mirrors{mirrorPath(tenant, url)};
    Repository work = openWorkRepo(tenant, mirrors);
    Commit c = lookupCommit(work.get(), commitHex);
    Commit base = lookupCommit(work.get(), r.baseCommit);
    auto d = diffTrees(work.get(), *git_commit_tree_id(base.get()), *git_commit_tree_id(c.get()),
                       r.writeScope);
    if (r.enforceScope && !d.outOfScope.empty())
        throw Error(ErrorCode::conflict,
                    "changes outside the write scope: " + json(d.outOfScope).dump());
    auto credential = openCredential(tenant, r.credential, url);
    std::string lease =
        GitRemoteAccess(url, credential, config_.gitTimeout).branchValue(work.get(), r.branch);
    std::string pushId = newId("psh-");
    auto sandbox = controller_.get(tenant, id);
    std::string stats = std::to_string(d.files.size()) + " files, +" + std::to_string(d.additions) +
                        " -" + std::to_string(d.deletions);
    // The approver sees what the latest evidence bundle found.
    json evidence = evidenceSummary_ ? evidenceSummary_(id) : json(nullptr);
    std::string evidenceText = "; no evidence bundle sealed yet";
    if (evidence.is_object() && evidence.contains("summary") && evidence["summary"].is_object()) {
        const json& s = evidence["summary"];
        evidenceText = "; evidence " + evidence.value("id", "") + ": tests " +
                       s.value("tests", std::string("?"));
        if (s.contains("findings") && s["findings"].is_array() && !s["findings"].empty()) {
            evidenceText += ", findings";
            for (const auto& k : s["findings"]) evidenceText += " " + k.get<std::string>();
        }
    }
    auto g = controller_.gates().parkPublish(
        sandbox, pushId, "git push " + r.repo + " " + commitHex + ":refs/heads/" + r.branch,
        "a push publishes the agent's work (" + stats + " against " + r.baseCommit.substr(0, 12) +
            evidenceText + ")",
        {{"push_id", pushId},
         {"evidence", evidence},
         {"sandbox", id},
         {"repo", r.repo},
         {"branch", r.branch},
         {"commit", commitHex},
         {"lease", lease},
         {"base_commit", r.baseCommit},
         {"credential", r.credential},
         {"files", d.files.size()},
         {"additions", d.additions},
         {"deletions", d.deletions}});
    controller_.recordEvent(sandbox, "push.requested",
                            {{"push_id", pushId},
                             {"approval_id", g.approvalId},
                             {"repo", r.repo},
                             {"branch", r.branch},
                             {"commit", commitHex},
                             {"lease", lease},
                             {"stats", stats}});
    return {{"push_id", pushId},   {"approval_id", g.approvalId}, {"state", g.state},
            {"commit", commitHex}, {"branch", r.branch},          {"repo", r.repo}};
}

json WorkspaceService::pushState(const std::string& tenant, const std::string& id,
                                 const std::string& pushId) {
    controller_.get(tenant, id);
    auto g = isValidId(pushId, "psh-") ? controller_.gates().find(pushId) : std::nullopt;
    if (!g || g->tenant != tenant || g->sandboxId != id)
        throw Error(ErrorCode::not_found, "no push " + pushId);
    auto req = json::parse(g->requestJson, nullptr, false);
    std::string state = g->state == "running" ? "pushing" : g->state;
    json out{{"push_id", g->id},
             {"approval_id", g->approvalId},
             {"state", state},
             {"requested_at", g->requestedAt}};
    if (req.is_object())
        for (const char* k : {"repo", "branch", "commit", "lease"}) out[k] = req.value(k, "");
    if (!g->decidedBy.empty()) {
        out["decided_by"] = g->decidedBy;
        out["decided_at"] = g->decidedAt;
        out["decision_reason"] = g->decisionReason;
    }
    if (!g->error.empty()) out["error"] = g->error;
    return out;
}

void WorkspaceService::reset(const std::string& tenant, const std::string& id, bool cleanIgnored) {
    auto r = load(tenant, id);
    auto lock = lockFor(sandboxLocks_, id);
    std::lock_guard hold(*lock);
    auto agent = controller_.runningAgent(tenant, id);
    std::vector<std::string> skip;
    for (const auto& s : r.submodules) skip.push_back(s.path);
    auto stream = agent->open(protocol::WorkspaceScanRequest{r.path, skip, cleanIgnored, "user"});
    Scan current = parseScan(drain(stream, 64ull << 20));
    if (!cleanIgnored) current.ignored.clear();
    populate(tenant, id, r, true, &current);
    controller_.recordEvent(controller_.get(tenant, id), "workspace.reset",
                            {{"base_commit", r.baseCommit}, {"clean_ignored", cleanIgnored}});
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
        controller_.recordEvent(sandbox, "push.denied",
                                {{"push_id", g.id},
                                 {"approval_id", g.approvalId},
                                 {"by", g.decidedBy},
                                 {"reason", g.decisionReason}});
        return;
    }
    controller_.recordEvent(
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
                    controller_.gates().finishPublish(left.id, "failed",
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
    auto req = json::parse(g.requestJson, nullptr, false);
    try {
        if (!req.is_object()) throw Error(ErrorCode::internal, "the parked push is damaged");
        std::string repoText = req.value("repo", ""), branch = req.value("branch", ""),
                    commitHex = req.value("commit", ""), lease = req.value("lease", "");
        RemoteUrl url = RemoteUrl::parse(repoText);
        auto credential = openCredential(g.tenant, req.value("credential", ""), url);
        // The mirror learns the remote's current branches (for the
        // fast-forward check); then the lease is checked on the wire.
        std::string mirror = fetchMirror(g.tenant, url, credential);
        Repository work = openWorkRepo(g.tenant, {mirror});
        GitRemoteAccess remote(url, credential, config_.gitTimeout);
        std::string now = remote.branchValue(work.get(), branch);
        if (now != lease)
            throw PushRejected("the remote branch " + branch +
                               " moved since the push was requested (" +
                               (lease.empty() ? "absent" : lease.substr(0, 12)) + " -> " +
                               (now.empty() ? "absent" : now.substr(0, 12)) + ")");
        git_oid target = parseOid(commitHex);
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
        controller_.gates().finishPublish(g.id, "pushed", "");
        controller_.recordEvent(
            sandbox, "push.pushed",
            {{"push_id", g.id}, {"repo", repoText}, {"branch", branch}, {"commit", commitHex}});
    } catch (const PushRejected& e) {
        controller_.gates().finishPublish(g.id, "rejected", e.what());
        controller_.recordEvent(sandbox, "push.rejected",
                                {{"push_id", g.id}, {"reason", e.what()}});
    } catch (const std::exception& e) {
        controller_.gates().finishPublish(g.id, "failed", e.what());
        controller_.recordEvent(sandbox, "push.rejected",
                                {{"push_id", g.id}, {"reason", e.what()}, {"failed", true}});
    }
}

}  // namespace airlock::workspace
