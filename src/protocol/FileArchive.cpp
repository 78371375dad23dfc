#include "protocol/FileArchive.hpp"

#include "protocol/Messages.hpp"

namespace airlock::protocol {

bool isSafeRelativePath(std::string_view path) {
    if (path.empty() || path.size() > archive::kMaxPath || path.front() == '/') return false;
    std::size_t i = 0;
    while (i <= path.size()) {
        std::size_t j = path.find('/', i);
        if (j == std::string_view::npos) j = path.size();
        std::string_view part = path.substr(i, j - i);
        if (part.empty() || part == "." || part == "..") return false;
        if (part.find('\0') != std::string_view::npos) return false;
        i = j + 1;
    }
    return true;
}

std::string archiveHeader(char kind, const std::string& path, std::uint32_t mode,
                          std::uint64_t size) {
    if (!isSafeRelativePath(path)) throw MessageError("unsafe archive path: " + path);
    std::string h;
    h.reserve(archive::kHeaderFixed + path.size());
    h.push_back(kind);
    h.push_back(static_cast<char>((path.size() >> 8) & 0xff));
    h.push_back(static_cast<char>(path.size() & 0xff));
    h += path;
    for (int s = 24; s >= 0; s -= 8) h.push_back(static_cast<char>((mode >> s) & 0xff));
    for (int s = 56; s >= 0; s -= 8) h.push_back(static_cast<char>((size >> s) & 0xff));
    return h;
}

void ArchiveReader::parseHeader() {
    auto* p = reinterpret_cast<const unsigned char*>(header_.data());
    std::size_t pathLen = (std::size_t(p[1]) << 8) | p[2];
    const unsigned char* q = p + 3 + pathLen;
    entry_.kind = static_cast<char>(p[0]);
    entry_.path.assign(header_.data() + 3, pathLen);
    entry_.mode = 0;
    for (int i = 0; i < 4; ++i) entry_.mode = (entry_.mode << 8) | q[i];
    entry_.size = 0;
    for (int i = 0; i < 8; ++i) entry_.size = (entry_.size << 8) | q[4 + i];
    if (!isSafeRelativePath(entry_.path)) throw MessageError("unsafe archive path");
    switch (entry_.kind) {
        case archive::kDirectory:
        case archive::kRemove:
            if (entry_.size != 0) throw MessageError("a directory or removal carries no bytes");
            break;
        case archive::kSymlink:
            if (entry_.size == 0 || entry_.size > archive::kMaxLinkTarget)
                throw MessageError("bad symlink target length");
            break;
        case archive::kFile:
            break;
        default:
            throw MessageError("unknown archive entry kind");
    }
    if (entry_.mode > 07777) throw MessageError("bad archive mode");
}

void ArchiveReader::feed(std::string_view bytes) {
    while (!bytes.empty()) {
        if (!inEntry_) {
            // Header: the kind and path length first, then the rest.
            std::size_t want = archive::kHeaderFixed;
            if (header_.size() >= 3) {
                auto* p = reinterpret_cast<const unsigned char*>(header_.data());
                std::size_t pathLen = (std::size_t(p[1]) << 8) | p[2];
                if (pathLen == 0 || pathLen > archive::kMaxPath)
                    throw MessageError("bad archive path length");
                want += pathLen;
            } else {
                want = 3;
            }
            std::size_t take = std::min(want - header_.size(), bytes.size());
            header_.append(bytes.substr(0, take));
            bytes.remove_prefix(take);
            if (header_.size() < want) continue;
            if (want == 3) {  // now the path length is known
                auto* p = reinterpret_cast<const unsigned char*>(header_.data());
                std::size_t pathLen = (std::size_t(p[1]) << 8) | p[2];
                if (pathLen == 0 || pathLen > archive::kMaxPath)
                    throw MessageError("bad archive path length");
                continue;
            }
            parseHeader();
            header_.clear();
            inEntry_ = true;
            remaining_ = entry_.size;
            if (cb_.begin) cb_.begin(entry_);
            if (remaining_ == 0) {
                inEntry_ = false;
                if (cb_.end) cb_.end(entry_);
            }
            continue;
        }
        std::size_t take =
            static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size()));
        if (cb_.data) cb_.data(entry_, bytes.substr(0, take));
        bytes.remove_prefix(take);
        remaining_ -= take;
        if (remaining_ == 0) {
            inEntry_ = false;
            if (cb_.end) cb_.end(entry_);
        }
    }
}

}  // namespace airlock::protocol
