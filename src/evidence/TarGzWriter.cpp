#include "evidence/TarGzWriter.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/Error.hpp"

namespace airlock {
namespace {

void octal(char* field, std::size_t width, std::uint64_t value) {
    // width-1 octal digits and a NUL, as ustar wants.
    std::uint64_t v = value;
    for (std::size_t i = width - 1; i-- > 0;) {
        field[i] = static_cast<char>('0' + (v & 7));
        v >>= 3;
    }
    field[width - 1] = '\0';
    if (v != 0)
        throw Error(ErrorCode::internal, "a tar field overflows (an entry of 8 GiB or more?)");
}

bool validPath(const std::string& path) {
    if (path.empty() || path.front() == '/' || path.back() == '/') return false;
    std::size_t start = 0;
    while (start <= path.size()) {
        auto end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        std::string_view seg(path.data() + start, end - start);
        if (seg.empty() || seg == "." || seg == "..") return false;
        start = end + 1;
    }
    return path.find('\0') == std::string::npos;
}

// A pax record "LEN key=value\n", LEN counting itself.
std::string paxRecord(const std::string& key, const std::string& value) {
    std::string body = " " + key + "=" + value + "\n";
    std::size_t len = body.size() + 1;
    while (std::to_string(len).size() + body.size() != len) ++len;
    return std::to_string(len) + body;
}

void appendHeader(std::string& out, const std::string& name, std::uint64_t size, unsigned mode,
                  char type, std::int64_t mtime) {
    char h[kTarBlock];
    std::memset(h, 0, sizeof h);
    // ustar splits a long name into prefix (155) / name (100) at a slash;
    // a name that cannot be split is cut, and the pax header before it
    // carries the whole path.
    std::string prefix, base = name;
    if (name.size() > 100) {
        base = name.substr(0, 100);
        for (auto cut = name.find('/'); cut != std::string::npos; cut = name.find('/', cut + 1))
            if (cut <= 155 && name.size() - cut - 1 <= 100) {
                prefix = name.substr(0, cut);
                base = name.substr(cut + 1);
                break;
            }
    }
    std::memcpy(h, base.data(), base.size());
    octal(h + 100, 8, mode);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, size);
    octal(h + 136, 12, static_cast<std::uint64_t>(mtime < 0 ? 0 : mtime));
    std::memset(h + 148, ' ', 8);
    h[156] = type;
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memcpy(h + 345, prefix.data(), prefix.size());
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    octal(h + 148, 7, sum);  // six digits, NUL, then the space already there
    h[155] = ' ';
    out.append(h, sizeof h);
}

void appendData(std::string& out, std::string_view data) {
    out.append(data);
    out.append((kTarBlock - data.size() % kTarBlock) % kTarBlock, '\0');
}

bool fitsUstar(const std::string& name) {
    if (name.size() <= 100) return true;
    for (auto cut = name.find('/'); cut != std::string::npos; cut = name.find('/', cut + 1))
        if (cut <= 155 && name.size() - cut - 1 <= 100) return true;
    return false;
}

void appendEntry(std::string& out, const std::string& name, std::string_view data, unsigned mode,
                 char type, std::int64_t mtime) {
    if (!fitsUstar(name)) {
        std::string pax = paxRecord("path", name);
        appendHeader(out, "PaxHeaders/" + name.substr(name.size() > 80 ? name.size() - 80 : 0),
                     pax.size(), 0644, 'x', mtime);
        appendData(out, pax);
    }
    appendHeader(out, name, data.size(), mode, type, mtime);
    appendData(out, data);
}

}  // namespace

void TarGzWriter::add(const std::string& path, std::string_view content, unsigned mode) {
    if (!validPath(path))
        throw Error(ErrorCode::bad_request, "not a relative bundle path: " + path);
    files_[path] = {std::string(content), mode & 0777};
}

std::string TarGzWriter::tar() const {
    std::set<std::string> dirs;
    for (const auto& [path, file] : files_)
        for (auto cut = path.find('/'); cut != std::string::npos; cut = path.find('/', cut + 1))
            dirs.insert(path.substr(0, cut));
    // One sorted walk over directories ("a/") and files ("a/b"): a directory
    // comes before what it holds.
    std::map<std::string, const std::pair<std::string, unsigned>*> entries;
    for (const auto& d : dirs) entries[d + "/"] = nullptr;
    for (const auto& [path, file] : files_) entries[path] = &file;
    std::string out;
    for (const auto& [name, file] : entries) {
        if (file)
            appendEntry(out, name, file->first, file->second, '0', mtime_);
        else
            appendEntry(out, name, {}, 0755, '5', mtime_);
    }
    out.append(2 * kTarBlock, '\0');
    return out;
}

std::string TarGzWriter::finish() const { return gzipBytes(tar()); }

std::string gzipBytes(std::string_view data) {
    z_stream z{};
    // 15 + 16: a gzip wrapper; zlib writes it with no name and time 0.
    if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw Error(ErrorCode::internal, "gzip init failed");
    std::string out;
    char buf[1 << 16];
    std::size_t offset = 0;
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        std::size_t chunk = std::min<std::size_t>(data.size() - offset, 1u << 30);
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + offset));
        z.avail_in = static_cast<uInt>(chunk);
        bool last = offset + chunk == data.size();
        do {
            z.next_out = reinterpret_cast<Bytef*>(buf);
            z.avail_out = sizeof buf;
            rc = deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
            if (rc == Z_STREAM_ERROR) {
                deflateEnd(&z);
                throw Error(ErrorCode::internal, "gzip failed");
            }
            out.append(buf, sizeof buf - z.avail_out);
        } while (z.avail_out == 0 || (last && rc != Z_STREAM_END));
        offset += chunk;
    }
    deflateEnd(&z);
    return out;
}

}  // namespace airlock
