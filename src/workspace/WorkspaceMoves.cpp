#include "workspace/WorkspaceMoves.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/UniqueFd.hpp"
#include "workspace/GitSupport.hpp"
#include "workspace/RemoteUrl.hpp"

namespace airlock::workspace {

namespace {
using PackBuilder = GitPtr<git_packbuilder, git_packbuilder_free>;
using RevWalk = GitPtr<git_revwalk, git_revwalk_free>;

// A writepack frees itself through its own function pointer.
struct WritePackFree {
    void operator()(git_odb_writepack* w) const {
        if (w) w->free(w);
    }
};

void writeAll(int fd, const char* data, std::size_t size, const std::string& path) {
    for (std::size_t done = 0; done < size;) {
        ssize_t n = ::write(fd, data + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            throw Error(ErrorCode::insufficient_storage,
                        "cannot write " + path + ": " + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
}

std::string ref(const std::string& id) { return "refs/airlock/" + id + "/head"; }
}  // namespace

bool WorkspaceMoves::packOut(const std::string& tenant, const std::string& id,
                             const std::string& packPath) {
    auto r = records_.stored(id);
    if (!r || r->head.empty()) return false;
    Repository work =
        mirrors_.openWorkRepo(tenant, {mirrors_.mirrorPath(tenant, RemoteUrl::parse(r->repo))});
    git_oid head = parseOid(r->head), base = parseOid(r->baseCommit);
    git_revwalk* rawWalk = nullptr;
    check(git_revwalk_new(&rawWalk, work.get()), ErrorCode::internal, "revwalk");
    RevWalk walk(rawWalk);
    check(git_revwalk_push(walk.get(), &head), ErrorCode::internal, "the workspace's head");
    check(git_revwalk_hide(walk.get(), &base), ErrorCode::internal, "the workspace's base");
    git_packbuilder* rawPack = nullptr;
    check(git_packbuilder_new(&rawPack, work.get()), ErrorCode::internal, "pack");
    PackBuilder pack(rawPack);
    check(git_packbuilder_insert_walk(pack.get(), walk.get()), ErrorCode::internal,
          "the workspace's commits");
    GitBuf bytes;
    check(git_packbuilder_write_buf(&bytes.buf, pack.get()), ErrorCode::internal, "pack");
    UniqueFd fd(::open(packPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) throw Error(ErrorCode::internal, "cannot create " + packPath);
    writeAll(fd.get(), bytes.buf.ptr, bytes.buf.size, packPath);
    return true;
}

void WorkspaceMoves::arrive(const std::string& tenant, const std::string& id,
                            const std::string& recordJson, const std::string& packPath) {
    auto j = nlohmann::json::parse(recordJson, nullptr, false);
    if (!j.is_object() || !j.contains("repo") || !j["repo"].is_string() ||
        !j.contains("base_commit") || !j["base_commit"].is_string())
        throw Error(ErrorCode::bad_request, "a moved workspace's record is not one");
    WorkspaceRecord r;
    try {
        r = WorkspaceRecord::fromJson(j);
    } catch (const nlohmann::json::exception&) {
        throw Error(ErrorCode::bad_request,
                    "a moved workspace's record has a field of the wrong type");
    }
    if (!r.head.empty() && packPath.empty())
        throw Error(ErrorCode::bad_request, "a moved workspace with a host commit brings its pack");
    // The same fetches a create makes: the credential for the workspace's
    // repository and the submodules inside its scope, anonymous outside it.
    RemoteUrl url = RemoteUrl::parse(r.repo);
    auto credential = credentials_.open(tenant, r.credential, url);
    std::string mirror = mirrors_.fetch(tenant, url, credential);
    for (const auto& s : r.submodules) {
        RemoteUrl smRemote = RemoteUrl::parse(s.url);
        auto smCred = credential && credential->covers(smRemote) ? credential : std::nullopt;
        if (smCred && smRemote.scheme == "http")
            requireClearTextAllowed(smRemote, config_.addressPolicy);
        Repository sm = openBareRepository(mirrors_.fetch(tenant, smRemote, smCred));
        lookupCommit(sm.get(), s.commit);
    }
    Repository work = mirrors_.openWorkRepo(tenant, {mirror});
    try {
        lookupCommit(work.get(), r.baseCommit);
    } catch (const Error& e) {
        throw Error(ErrorCode::unprocessable, "the workspace's base " + r.baseCommit +
                                                  " is no longer in " + url.text + ": " + e.what());
    }
    if (!packPath.empty()) {
        git_odb* rawOdb = nullptr;
        check(git_repository_odb(&rawOdb, work.get()), ErrorCode::internal, "object store");
        Odb odb(rawOdb);
        git_odb_writepack* rawWriter = nullptr;
        check(git_odb_write_pack(&rawWriter, odb.get(), nullptr, nullptr), ErrorCode::internal,
              "pack");
        std::unique_ptr<git_odb_writepack, WritePackFree> writer(rawWriter);
        git_indexer_progress stats{};
        UniqueFd fd(::open(packPath.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
        if (!fd) throw Error(ErrorCode::internal, "cannot open " + packPath);
        std::string chunk(1 << 20, '\0');
        for (;;) {
            ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw Error(ErrorCode::internal, "cannot read " + packPath);
            if (n == 0) break;
            check(writer->append(writer.get(), chunk.data(), static_cast<std::size_t>(n), &stats),
                  ErrorCode::bad_request, "the workspace's pack");
        }
        check(writer->commit(writer.get(), &stats), ErrorCode::bad_request, "the workspace's pack");
    }
    if (!r.head.empty()) {
        Commit head = lookupCommit(work.get(), r.head);
        git_reference* made = nullptr;
        check(git_reference_create(&made, work.get(), ref(id).c_str(), git_commit_id(head.get()), 1,
                                   "moved here"),
              ErrorCode::internal, "ref");
        git_reference_free(made);
    }
    records_.save(id, tenant, r);
}

}  // namespace airlock::workspace
