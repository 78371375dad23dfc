#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace airlock::protocol {

// workspace_scan's bytes (channel 1): the files of a working tree that git
// would see, and the top-most paths its .gitignore files exclude. The guest
// writes the records, the host reads them; on the host each is the word of
// root in the guest and is checked (MessageError on anything else):
//   "<mode> <blob id> <path>\0"      mode 100644, 100755 or 120000;
//   "<target>\0"                     after a link's record (the host cannot
//                                    read a link through the agent);
//   "I <path>\0"                     ignored (a directory ends in "/").
// Paths are relative, without "." or ".." components.
struct ManifestFile {
    enum class Mode { file, executable, link };
    Mode mode = Mode::file;
    std::string id;  // the blob id the guest claims: 40 lowercase hex digits
    std::string path;
    std::string linkTarget;  // links only
};

struct WorkspaceManifest {
    std::vector<ManifestFile> files;
    std::vector<std::string> ignored;  // directories end in "/"
};

// Appends one record (the guest's writer).
void appendManifestFile(std::string& manifest, const ManifestFile& file);
void appendManifestIgnored(std::string& manifest, const std::string& path, bool directory);

WorkspaceManifest parseWorkspaceManifest(std::string_view bytes);

}  // namespace airlock::protocol
