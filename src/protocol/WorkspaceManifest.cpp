#include "protocol/WorkspaceManifest.hpp"

#include "protocol/FileArchive.hpp"
#include "protocol/Messages.hpp"

namespace airlock::protocol {

namespace {

constexpr std::size_t kModeDigits = 6, kIdDigits = 40;

const char* modeText(ManifestFile::Mode mode) {
    switch (mode) {
        case ManifestFile::Mode::file:
            return "100644";
        case ManifestFile::Mode::executable:
            return "100755";
        case ManifestFile::Mode::link:
            return "120000";
    }
    return "100644";
}

[[noreturn]] void bad(const std::string& why) { throw MessageError{"workspace scan: " + why}; }

bool isBlobId(std::string_view id) {
    if (id.size() != kIdDigits) return false;
    for (char c : id)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

}  // namespace

void appendManifestFile(std::string& manifest, const ManifestFile& file) {
    manifest.append(modeText(file.mode)).append(" ").append(file.id).append(" ").append(file.path);
    manifest.push_back('\0');
    if (file.mode == ManifestFile::Mode::link) {
        manifest += file.linkTarget;
        manifest.push_back('\0');
    }
}

void appendManifestIgnored(std::string& manifest, const std::string& path, bool directory) {
    manifest.append("I ").append(path);
    if (directory) manifest.push_back('/');
    manifest.push_back('\0');
}

WorkspaceManifest parseWorkspaceManifest(std::string_view bytes) {
    WorkspaceManifest out;
    std::size_t i = 0;
    auto field = [&]() -> std::string_view {
        auto end = bytes.find('\0', i);
        if (end == std::string_view::npos) bad("unterminated record");
        auto f = bytes.substr(i, end - i);
        i = end + 1;
        return f;
    };
    while (i < bytes.size()) {
        std::string_view rec = field();
        if (rec.substr(0, 2) == "I ") {
            std::string_view path = rec.substr(2);
            std::string_view bare =
                !path.empty() && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
            if (!isSafeRelativePath(bare)) bad("unsafe path");
            out.ignored.emplace_back(path);
            continue;
        }
        if (rec.size() < kModeDigits + 1 + kIdDigits + 2 || rec[kModeDigits] != ' ' ||
            rec[kModeDigits + 1 + kIdDigits] != ' ')
            bad("malformed record");
        ManifestFile f;
        std::string_view mode = rec.substr(0, kModeDigits);
        bool known = false;
        for (auto m :
             {ManifestFile::Mode::file, ManifestFile::Mode::executable, ManifestFile::Mode::link})
            if (mode == modeText(m)) {
                f.mode = m;
                known = true;
            }
        if (!known) bad("unknown mode " + std::string(mode));
        std::string_view id = rec.substr(kModeDigits + 1, kIdDigits);
        if (!isBlobId(id)) bad("bad id");
        f.id = id;
        f.path = rec.substr(kModeDigits + 1 + kIdDigits + 1);
        if (!isSafeRelativePath(f.path)) bad("unsafe path");
        if (f.mode == ManifestFile::Mode::link) f.linkTarget = field();
        out.files.push_back(std::move(f));
    }
    return out;
}

}  // namespace airlock::protocol
