#include "workspace/GitSupport.hpp"

#include <mutex>

#include "core/Hex.hpp"

namespace airlock::workspace {

void initGit(const std::string& caFile) {
    static std::once_flag once;
    std::call_once(once, [&] {
        git_libgit2_init();
        for (int level : {GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG, GIT_CONFIG_LEVEL_GLOBAL,
                          GIT_CONFIG_LEVEL_PROGRAMDATA})
            git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, level, "");
        git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, caFile.c_str(), nullptr);
        // Mirrors and scratch repositories are ours (airlockd's uid).
        git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
        git_libgit2_opts(GIT_OPT_SET_USER_AGENT, "airlockd");
    });
}

std::string gitMessage() {
    const git_error* e = git_error_last();
    return e && e->message ? std::string(e->message) : std::string();
}

void check(int rc, ErrorCode code, const std::string& context) {
    if (rc >= 0) return;
    std::string msg = gitMessage();
    throw Error(code, context + (msg.empty() ? "" : ": " + msg));
}

std::string oidHex(const git_oid& oid) {
    char hex[GIT_OID_HEXSZ + 1];
    git_oid_tostr(hex, sizeof hex, &oid);
    return hex;
}

git_oid parseOid(const std::string& hex) {
    git_oid oid;
    if (!isLowerHex(hex, GIT_OID_HEXSZ) || git_oid_fromstr(&oid, hex.c_str()) != 0)
        throw Error(ErrorCode::bad_request, "not a 40-hex commit id: " + hex.substr(0, 64));
    return oid;
}

Commit lookupCommit(git_repository* repo, const std::string& hex) {
    git_oid id = parseOid(hex);
    git_commit* raw = nullptr;
    check(git_commit_lookup(&raw, repo, &id), ErrorCode::unprocessable, "commit " + hex);
    return Commit(raw);
}

Repository openBareRepository(const std::string& path) {
    git_repository* raw = nullptr;
    check(git_repository_open_bare(&raw, path.c_str()), ErrorCode::internal, "opening " + path);
    return Repository(raw);
}

}  // namespace airlock::workspace
