#include "workspace/CheckoutArchive.hpp"

#include <strings.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "protocol/FileArchive.hpp"

namespace airlock::workspace {
namespace fs = std::filesystem;
namespace archive = protocol::archive;

CheckoutArchive::CheckoutArchive(Sink sink, std::size_t chunkBytes)
    : sink_(std::move(sink)), chunk_(chunkBytes) {}

void CheckoutArchive::put(std::string_view bytes) {
    while (!bytes.empty()) {
        std::size_t take = std::min(bytes.size(), chunk_ - buffer_.size());
        buffer_.append(bytes.substr(0, take));
        bytes.remove_prefix(take);
        if (buffer_.size() >= chunk_) flush();
    }
}

void CheckoutArchive::flush() {
    if (buffer_.empty()) return;
    sink_(buffer_);
    buffer_.clear();
}

void CheckoutArchive::addFile(const std::string& path, std::uint32_t mode, std::string_view bytes) {
    put(protocol::archiveHeader(archive::kFile, path, mode, bytes.size()));
    put(bytes);
    ++entries_;
    bytes_ += bytes.size();
}

void CheckoutArchive::addSymlink(const std::string& path, std::string_view target) {
    put(protocol::archiveHeader(archive::kSymlink, path, 0777, target.size()));
    put(target);
    ++entries_;
}

void CheckoutArchive::addDirectory(const std::string& path) {
    put(protocol::archiveHeader(archive::kDirectory, path, 0755, 0));
    ++entries_;
}

void CheckoutArchive::addRemove(const std::string& path) {
    put(protocol::archiveHeader(archive::kRemove, path, 0, 0));
    ++entries_;
}

namespace {
struct WalkState {
    CheckoutArchive* out;
    git_repository* repo;
    std::string prefix;
    std::string error;
    std::exception_ptr thrown;  // from the sink: kept out of libgit2's C frames
};

// A tree entry named .git (any case) would write into the guest's own
// repository (hooks that run at its next git command): git refuses such
// trees, and so do we.
bool namesGitDir(const std::string& path) {
    std::size_t i = 0;
    while (i <= path.size()) {
        std::size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        if (j - i == 4 && ::strncasecmp(path.data() + i, ".git", 4) == 0) return true;
        i = j + 1;
    }
    return false;
}

int walkEntry(const char* root, const git_tree_entry* entry, void* payload) {
    auto* s = static_cast<WalkState*>(payload);
    std::string path = s->prefix + root + git_tree_entry_name(entry);
    git_filemode_t mode = git_tree_entry_filemode(entry);
    if (namesGitDir(path)) {
        s->error = "the tree has an entry named .git (" + path + "): refused";
        return -1;
    }
    if (mode == GIT_FILEMODE_TREE) return 0;
    try {
        if (mode == GIT_FILEMODE_COMMIT) {  // a submodule: its directory, filled on its own
            s->out->addDirectory(path);
            return 0;
        }
        git_blob* raw = nullptr;
        if (git_blob_lookup(&raw, s->repo, git_tree_entry_id(entry)) < 0) {
            s->error = "missing blob for " + path + ": " + gitMessage();
            return -1;
        }
        Blob blob(raw);
        std::string_view bytes(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                               static_cast<std::size_t>(git_blob_rawsize(blob.get())));
        if (mode == GIT_FILEMODE_LINK) {
            if (bytes.empty() || bytes.size() > protocol::archive::kMaxLinkTarget) {
                s->error = "the symlink " + path + " has a target git itself would not check out";
                return -1;
            }
            s->out->addSymlink(path, bytes);
        } else {
            s->out->addFile(path, mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0755 : 0644, bytes);
        }
        return 0;
    } catch (...) {
        s->thrown = std::current_exception();
        return -1;
    }
}
}  // namespace

void CheckoutArchive::addTree(git_repository* repo, const git_tree* tree,
                              const std::string& prefix) {
    WalkState state{this, repo, prefix.empty() ? "" : prefix + "/", {}, nullptr};
    int rc = git_tree_walk(tree, GIT_TREEWALK_PRE, walkEntry, &state);
    if (state.thrown) std::rethrow_exception(state.thrown);
    if (rc < 0 && !state.error.empty()) throw Error(ErrorCode::unprocessable, state.error);
    if (rc < 0)
        throw Error(ErrorCode::internal,
                    state.error.empty() ? "walking the tree: " + gitMessage() : state.error);
}

void CheckoutArchive::addHostDirectory(const std::string& dir, const std::string& prefix) {
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
         ++it) {
        const auto& e = *it;
        std::string rel = prefix + "/" + fs::relative(e.path(), dir).string();
        if (e.is_symlink()) {
            addSymlink(rel, fs::read_symlink(e.path()).string());
        } else if (e.is_directory()) {
            addDirectory(rel);
        } else if (e.is_regular_file()) {
            // In pieces: a pack can be as large as the repository.
            std::ifstream in(e.path(), std::ios::binary);
            auto size = static_cast<std::uint64_t>(fs::file_size(e.path()));
            auto perms = fs::status(e.path()).permissions();
            bool exec = (perms & fs::perms::owner_exec) != fs::perms::none;
            put(protocol::archiveHeader(archive::kFile, rel, exec ? 0755 : 0644, size));
            std::string chunk(std::min<std::uint64_t>(size, 1 << 20), '\0');
            std::uint64_t left = size;
            while (left > 0) {
                auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, chunk.size()));
                if (!in.read(chunk.data(), static_cast<std::streamsize>(n)))
                    throw Error(ErrorCode::internal, "reading " + e.path().string());
                put(std::string_view(chunk.data(), n));
                left -= n;
            }
            ++entries_;
            bytes_ += size;
        }
    }
}

namespace {

void setConfig(git_repository* repo, const std::string& key, const std::string& value) {
    git_config* raw = nullptr;
    check(git_repository_config(&raw, repo), ErrorCode::internal, "config");
    Config cfg(raw);
    check(git_config_set_string(cfg.get(), key.c_str(), value.c_str()), ErrorCode::internal,
          "config " + key);
}

void writeIndexOf(git_repository* repo, const git_oid& commitId, const std::string& indexPath) {
    git_commit* c = nullptr;
    check(git_commit_lookup(&c, repo, &commitId), ErrorCode::unprocessable, "commit");
    Commit commit(c);
    git_tree* t = nullptr;
    check(git_commit_tree(&t, commit.get()), ErrorCode::internal, "tree");
    Tree tree(t);
    git_index* raw = nullptr;
    check(git_index_open(&raw, indexPath.c_str()), ErrorCode::internal, "index");
    Index index(raw);
    check(git_index_read_tree(index.get(), tree.get()), ErrorCode::internal, "index");
    check(git_index_write(index.get()), ErrorCode::internal, "index");
}

// The clone's "origin" as the mirror's path, no url.*.insteadOf applied
// (libgit2 1.5 leaks a regex match per config entry while looking).
int createOrigin(git_remote** out, git_repository* repo, const char* name, const char* url,
                 void*) {
    git_remote_create_options opts = GIT_REMOTE_CREATE_OPTIONS_INIT;
    opts.repository = repo;
    opts.name = name;
    opts.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF;
    return git_remote_create_with_opts(out, url, &opts);
}

Repository cloneFrom(const std::string& mirror, const std::string& into, bool bare) {
    git_clone_options opts;
    git_clone_options_init(&opts, GIT_CLONE_OPTIONS_VERSION);
    opts.remote_cb = createOrigin;
    opts.bare = bare ? 1 : 0;
    opts.checkout_opts.checkout_strategy = GIT_CHECKOUT_NONE;
    opts.local = GIT_CLONE_LOCAL_NO_LINKS;
    git_repository* raw = nullptr;
    check(git_clone(&raw, mirror.c_str(), into.c_str(), &opts), ErrorCode::internal,
          "cloning the mirror");
    return Repository(raw);
}

}  // namespace

std::string prepareGitDir(const std::string& scratch, const std::string& mirrorPath,
                          const std::string& cleanUrl, const std::string& commit,
                          const std::string& branch,
                          const std::vector<SubmoduleCheckout>& submodules) {
    std::string work = scratch + "/work";
    Repository repo = cloneFrom(mirrorPath, work, false);
    git_oid id = parseOid(commit);
    git_commit* c = nullptr;
    check(git_commit_lookup(&c, repo.get(), &id), ErrorCode::unprocessable, "commit " + commit);
    Commit target(c);
    git_reference* ref = nullptr;
    check(git_branch_create(&ref, repo.get(), branch.c_str(), target.get(), 1),
          ErrorCode::bad_request, "branch " + branch);
    Reference branchRef(ref);
    check(git_repository_set_head(repo.get(), ("refs/heads/" + branch).c_str()),
          ErrorCode::internal, "HEAD");
    setConfig(repo.get(), "remote.origin.url", cleanUrl);
    std::string gitDir = work + "/.git";
    writeIndexOf(repo.get(), id, gitDir + "/index");
    for (const auto& sm : submodules) {
        std::string modDir = gitDir + "/modules/" + sm.name;
        fs::create_directories(fs::path(modDir).parent_path());
        Repository sub = cloneFrom(sm.mirrorPath, modDir, true);
        git_oid subId = parseOid(sm.commit);
        check(git_repository_set_head_detached(sub.get(), &subId), ErrorCode::unprocessable,
              "submodule " + sm.path + " at " + sm.commit);
        // From .git/modules/<name> back to the work tree's <path>.
        std::string up;
        for (auto part : fs::path(".git/modules/" + sm.name)) {
            (void)part;
            up += "../";
        }
        setConfig(sub.get(), "core.bare", "false");
        setConfig(sub.get(), "core.worktree", up + sm.path);
        setConfig(sub.get(), "remote.origin.url", sm.url);
        setConfig(sub.get(), "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*");
        writeIndexOf(sub.get(), subId, modDir + "/index");
        setConfig(repo.get(), "submodule." + sm.name + ".url", sm.url);
        setConfig(repo.get(), "submodule." + sm.name + ".active", "true");
    }
    // The clone's reflogs name the mirror's path on the host: the guest has
    // no business knowing it (git starts new ones as it goes).
    std::error_code ec;
    fs::remove_all(gitDir + "/logs", ec);
    for (const auto& sm : submodules) fs::remove_all(gitDir + "/modules/" + sm.name + "/logs", ec);
    return gitDir;
}

}  // namespace airlock::workspace
