#include "evidence/PatchReplay.hpp"

#include <git2.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>

#include "workspace/GitSupport.hpp"

namespace airlock {

std::string treeAfterPatch(const std::string& repositoryPath, const std::string& baseCommit,
                           const std::string& patch) {
    using namespace workspace;
    initGit();
    git_repository* raw = nullptr;
    check(git_repository_open_ext(&raw, repositoryPath.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH,
                                  nullptr),
          ErrorCode::bad_request, "cannot open the repository " + repositoryPath);
    Repository repo(raw);
    // Writes go to an in-memory pack placed above the repository's own
    // object database: reads see both, nothing reaches the disk.
    git_odb* odbRaw = nullptr;
    check(git_repository_odb(&odbRaw, repo.get()), ErrorCode::internal, "object database");
    Odb odb(odbRaw);
    git_odb_backend* mempack = nullptr;
    check(git_mempack_new(&mempack), ErrorCode::internal, "in-memory objects");
    if (git_odb_add_backend(odb.get(), mempack, 1000) < 0) {
        mempack->free(mempack);
        check(-1, ErrorCode::internal, "in-memory objects");
    }
    git_oid base = parseOid(baseCommit);
    git_commit* commitRaw = nullptr;
    check(git_commit_lookup(&commitRaw, repo.get(), &base), ErrorCode::bad_request,
          "the base commit " + baseCommit + " is not in " + repositoryPath);
    Commit commit(commitRaw);
    git_tree* treeRaw = nullptr;
    check(git_commit_tree(&treeRaw, commit.get()), ErrorCode::bad_request,
          "the base commit's tree");
    Tree tree(treeRaw);
    git_diff* diffRaw = nullptr;
    check(git_diff_from_buffer(&diffRaw, patch.data(), patch.size()), ErrorCode::bad_request,
          "the patch does not parse");
    Diff diff(diffRaw);
    git_index* indexRaw = nullptr;
    check(git_apply_to_tree(&indexRaw, repo.get(), tree.get(), diff.get(), nullptr),
          ErrorCode::bad_request, "the patch does not apply to " + baseCommit);
    Index index(indexRaw);
    git_oid result;
    check(git_index_write_tree_to(&result, index.get(), repo.get()), ErrorCode::internal,
          "the patched tree");
    std::string hex = oidHex(result);
    git_mempack_reset(mempack);
    return hex;
}

}  // namespace airlock
