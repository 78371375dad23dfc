#include "workspace/WorkingTree.hpp"

#include "core/Hex.hpp"
#include "protocol/FileArchive.hpp"
#include "protocol/Messages.hpp"
#include "protocol/PathGlob.hpp"
#include "protocol/WorkspaceManifest.hpp"

namespace airlock::workspace {

Scan parseScan(const std::string& bytes) {
    protocol::WorkspaceManifest manifest;
    try {
        manifest = protocol::parseWorkspaceManifest(bytes);
    } catch (const protocol::MessageError& e) {
        throw Error(ErrorCode::agent_error, e.message);
    }
    Scan scan;
    scan.ignored = std::move(manifest.ignored);
    scan.files.reserve(manifest.files.size());
    for (auto& f : manifest.files) {
        std::uint32_t mode = f.mode == protocol::ManifestFile::Mode::executable
                                 ? GIT_FILEMODE_BLOB_EXECUTABLE
                             : f.mode == protocol::ManifestFile::Mode::link ? GIT_FILEMODE_LINK
                                                                            : GIT_FILEMODE_BLOB;
        scan.files.push_back(
            ScannedFile{std::move(f.path), mode, std::move(f.id), std::move(f.linkTarget)});
    }
    return scan;
}

git_oid buildWorkingTree(git_repository* repo, const Scan& scan,
                         const std::map<std::string, git_oid>& gitlinks, const FileReader& readFile,
                         std::uint64_t maxBytes, const ClaimFilter& mayClaim) {
    git_odb* rawOdb = nullptr;
    check(git_repository_odb(&rawOdb, repo), ErrorCode::internal, "odb");
    Odb odb(rawOdb);
    git_index* rawIndex = nullptr;
    check(git_index_new(&rawIndex), ErrorCode::internal, "index");
    Index index(rawIndex);
    std::uint64_t total = 0;
    auto count = [&](std::uint64_t n) {
        total += n;
        if (total > maxBytes)
            throw Error(ErrorCode::payload_too_large, "the working tree holds more than " +
                                                          std::to_string(maxBytes >> 20) + " MiB");
    };
    auto add = [&](const std::string& path, std::uint32_t mode, const git_oid& id) {
        git_index_entry e{};
        e.mode = mode;
        e.id = id;
        e.path = path.c_str();
        check(git_index_add(index.get(), &e), ErrorCode::unprocessable,
              "the working tree has a path git refuses (" + path + ")");
    };
    for (const auto& f : scan.files) {
        if (gitlinks.count(f.path)) continue;
        git_oid id;
        std::size_t size = 0;
        git_object_t type = GIT_OBJECT_INVALID;
        if (f.mode == GIT_FILEMODE_LINK) {
            count(f.linkTarget.size());
            check(git_blob_create_from_buffer(&id, repo, f.linkTarget.data(), f.linkTarget.size()),
                  ErrorCode::internal, "blob");
        } else if (git_oid_fromstr(&id, f.id.c_str()) == 0 && (!mayClaim || mayClaim(id)) &&
                   git_odb_read_header(&size, &type, odb.get(), &id) == 0 &&
                   type == GIT_OBJECT_BLOB) {
            // A blob we hold already: the content is ours, not the guest's word.
            count(size);
        } else {
            std::string bytes = readFile(f.path);
            count(bytes.size());
            check(git_blob_create_from_buffer(&id, repo, bytes.data(), bytes.size()),
                  ErrorCode::internal, "blob");
        }
        add(f.path, f.mode, id);
    }
    for (const auto& [path, id] : gitlinks) add(path, GIT_FILEMODE_COMMIT, id);
    git_oid tree;
    check(git_index_write_tree_to(&tree, index.get(), repo), ErrorCode::unprocessable,
          "writing the tree");
    return tree;
}

bool inScope(const std::vector<std::string>& scope, const std::string& path) {
    if (scope.empty()) return true;
    for (const auto& glob : scope)
        if (protocol::wildmatch(glob, path)) return true;
    return false;
}

namespace {
const char* statusName(git_delta_t s) {
    switch (s) {
        case GIT_DELTA_ADDED:
            return "added";
        case GIT_DELTA_DELETED:
            return "deleted";
        case GIT_DELTA_MODIFIED:
            return "modified";
        case GIT_DELTA_RENAMED:
            return "renamed";
        case GIT_DELTA_COPIED:
            return "copied";
        case GIT_DELTA_TYPECHANGE:
            return "typechange";
        default:
            return "unmodified";
    }
}

Tree lookupTree(git_repository* repo, const git_oid& id) {
    git_object* raw = nullptr;
    check(git_object_lookup(&raw, repo, &id, GIT_OBJECT_ANY), ErrorCode::internal,
          "tree " + oidHex(id));
    Object obj(raw);
    git_object* peeled = nullptr;
    check(git_object_peel(&peeled, obj.get(), GIT_OBJECT_TREE), ErrorCode::internal,
          "tree " + oidHex(id));
    return Tree(reinterpret_cast<git_tree*>(peeled));
}
}  // namespace

namespace {
struct PatchSink {
    std::string* out;
    std::size_t max;
    bool overflow = false;
};
int printLine(const git_diff_delta*, const git_diff_hunk*, const git_diff_line* line,
              void* payload) {
    auto* sink = static_cast<PatchSink*>(payload);
    if (sink->out->size() + line->content_len + 1 > sink->max) {
        sink->overflow = true;
        return -1;
    }
    // As git_diff_to_buf prints it: context and changed lines get their sign.
    if (line->origin == GIT_DIFF_LINE_CONTEXT || line->origin == GIT_DIFF_LINE_ADDITION ||
        line->origin == GIT_DIFF_LINE_DELETION)
        sink->out->push_back(line->origin);
    sink->out->append(line->content, line->content_len);
    return 0;
}
}  // namespace

TreeDiff diffTrees(git_repository* repo, const git_oid& base, const git_oid& tree,
                   const std::vector<std::string>& scope, std::size_t maxPatchBytes) {
    Tree oldTree = lookupTree(repo, base), newTree = lookupTree(repo, tree);
    git_diff_options opts;
    git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
    opts.flags = GIT_DIFF_SHOW_BINARY | GIT_DIFF_IGNORE_SUBMODULES;
    opts.id_abbrev = GIT_OID_HEXSZ;
    git_diff* raw = nullptr;
    check(git_diff_tree_to_tree(&raw, repo, oldTree.get(), newTree.get(), &opts),
          ErrorCode::internal, "diff");
    Diff diff(raw);
    git_diff_find_options find;
    git_diff_find_options_init(&find, GIT_DIFF_FIND_OPTIONS_VERSION);
    find.flags = GIT_DIFF_FIND_RENAMES;
    check(git_diff_find_similar(diff.get(), &find), ErrorCode::internal, "renames");
    TreeDiff out;
    PatchSink sink{&out.patch, maxPatchBytes};
    if (git_diff_print(diff.get(), GIT_DIFF_FORMAT_PATCH, printLine, &sink) < 0) {
        if (sink.overflow)
            throw Error(ErrorCode::payload_too_large,
                        "the diff is larger than " + std::to_string(maxPatchBytes >> 20) + " MiB");
        check(-1, ErrorCode::internal, "patch");
    }
    std::size_t n = git_diff_num_deltas(diff.get());
    for (std::size_t i = 0; i < n; ++i) {
        const git_diff_delta* d = git_diff_get_delta(diff.get(), i);
        git_patch* rawPatch = nullptr;
        std::size_t adds = 0, dels = 0;
        if (git_patch_from_diff(&rawPatch, diff.get(), i) == 0 && rawPatch) {
            Patch patch(rawPatch);
            git_patch_line_stats(nullptr, &adds, &dels, patch.get());
        }
        std::string path = d->new_file.path ? d->new_file.path : "";
        std::string oldPath = d->old_file.path ? d->old_file.path : path;
        bool scoped = inScope(scope, path) && (oldPath == path || inScope(scope, oldPath));
        bool binary = (d->flags & GIT_DIFF_FLAG_BINARY) != 0;
        out.files.push_back({path, oldPath, statusName(d->status), adds, dels, binary, scoped});
        out.additions += adds;
        out.deletions += dels;
        if (!scoped) {
            if (!inScope(scope, path)) out.outOfScope.push_back(path);
            if (oldPath != path && !inScope(scope, oldPath)) out.outOfScope.push_back(oldPath);
        }
    }
    return out;
}

nlohmann::json changedFileJson(const ChangedFile& f) {
    return {{"path", f.path},       {"old_path", f.oldPath}, {"status", f.status},
            {"additions", f.additions}, {"deletions", f.deletions}, {"binary", f.binary},
            {"in_scope", f.inScope}};
}

nlohmann::json changedFilesJson(const std::vector<ChangedFile>& files) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : files) out.push_back(changedFileJson(f));
    return out;
}

namespace {
struct FlattenState {
    std::map<std::string, TreeFile>* out;
};
int flattenEntry(const char* root, const git_tree_entry* e, void* payload) {
    auto* s = static_cast<FlattenState*>(payload);
    git_filemode_t mode = git_tree_entry_filemode(e);
    if (mode == GIT_FILEMODE_TREE) return 0;
    (*s->out)[std::string(root) + git_tree_entry_name(e)] =
        TreeFile{static_cast<std::uint32_t>(mode), *git_tree_entry_id(e)};
    return 0;
}
}  // namespace

std::map<std::string, TreeFile> flattenTree(git_repository* repo, const git_oid& id) {
    Tree tree = lookupTree(repo, id);
    std::map<std::string, TreeFile> out;
    FlattenState state{&out};
    check(git_tree_walk(tree.get(), GIT_TREEWALK_PRE, flattenEntry, &state), ErrorCode::internal,
          "tree walk");
    return out;
}

}  // namespace airlock::workspace
