#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "workspace/GitSupport.hpp"

namespace airlock::workspace {

// A FileArchive (protocol/FileArchive.hpp) written to a sink in chunks: the
// files of git trees, whole directories from the host's disk (a prepared
// .git), removals. The sink sends them into the guest.
class CheckoutArchive {
  public:
    using Sink = std::function<void(std::string_view)>;
    explicit CheckoutArchive(Sink sink, std::size_t chunkBytes = 256 * 1024);
    // Every blob and link of `tree` under `prefix` ("" = the top), and an
    // empty directory for each gitlink (its submodule is added on its own).
    void addTree(git_repository* repo, const git_tree* tree, const std::string& prefix);
    // The regular files and links under `dir` on the host, under `prefix`.
    void addHostDirectory(const std::string& dir, const std::string& prefix);
    void addFile(const std::string& path, std::uint32_t mode, std::string_view bytes);
    void addSymlink(const std::string& path, std::string_view target);
    void addDirectory(const std::string& path);
    void addRemove(const std::string& path);
    void flush();
    std::uint64_t entries() const { return entries_; }
    std::uint64_t bytes() const { return bytes_; }

  private:
    void put(std::string_view bytes);
    Sink sink_;
    std::size_t chunk_;
    std::string buffer_;
    std::uint64_t entries_ = 0, bytes_ = 0;
};

struct SubmoduleCheckout {
    std::string name, path;
    std::string url;  // the clean URL the guest's config records
    std::string commit;
    std::string mirrorPath;  // where its objects are (a bare mirror)
};

// Prepares, under `scratch`, the .git the guest gets: a clone of the mirror
// with origin at `cleanUrl` (no credential, no helper), HEAD on the new
// branch `branch` at `commit`, an index matching its tree, and each
// submodule's repository under .git/modules with HEAD at its gitlink.
// Returns the path of that .git.
std::string prepareGitDir(const std::string& scratch, const std::string& mirrorPath,
                          const std::string& cleanUrl, const std::string& commit,
                          const std::string& branch,
                          const std::vector<SubmoduleCheckout>& submodules);

}  // namespace airlock::workspace
