#pragma once
#include <git2.h>

#include <memory>
#include <string>

#include "core/Error.hpp"

namespace airlock::workspace {

// libgit2 set up once per process for the host's use: the system, global
// and XDG config search paths emptied (the host's own git configuration
// never applies), the CA bundle named explicitly.
void initGit(const std::string& caFile = "/etc/ssl/certs/ca-certificates.crt");

// Owning handles for libgit2 objects.
template <typename T, void (*Free)(T*)>
struct GitFree {
    void operator()(T* p) const {
        if (p) Free(p);
    }
};
template <typename T, void (*Free)(T*)>
using GitPtr = std::unique_ptr<T, GitFree<T, Free>>;
using Repository = GitPtr<git_repository, git_repository_free>;
using Remote = GitPtr<git_remote, git_remote_free>;
using Commit = GitPtr<git_commit, git_commit_free>;
using Tree = GitPtr<git_tree, git_tree_free>;
using TreeEntry = GitPtr<git_tree_entry, git_tree_entry_free>;
using Blob = GitPtr<git_blob, git_blob_free>;
using Index = GitPtr<git_index, git_index_free>;
using Diff = GitPtr<git_diff, git_diff_free>;
using Patch = GitPtr<git_patch, git_patch_free>;
using Reference = GitPtr<git_reference, git_reference_free>;
using Object = GitPtr<git_object, git_object_free>;
using Config = GitPtr<git_config, git_config_free>;
using Odb = GitPtr<git_odb, git_odb_free>;

// A bare repository opened (Error(internal) naming the path when it cannot be).
Repository openBareRepository(const std::string& path);

// A commit of `repo` by its id: Error(bad_request) for a malformed id,
// Error(unprocessable) when the repository does not hold it.
Commit lookupCommit(git_repository* repo, const std::string& hex);

// libgit2's last error message ("" when none).
std::string gitMessage();
// rc < 0: throws Error(code, context + ": " + libgit2's message).
void check(int rc, ErrorCode code, const std::string& context);

std::string oidHex(const git_oid& oid);
git_oid parseOid(const std::string& hex);  // throws Error(bad_request)

// A git_buf freed on scope exit.
struct GitBuf {
    git_buf buf = GIT_BUF_INIT;
    ~GitBuf() { git_buf_dispose(&buf); }
    std::string str() const { return buf.ptr ? std::string(buf.ptr, buf.size) : std::string(); }
};

}  // namespace airlock::workspace
