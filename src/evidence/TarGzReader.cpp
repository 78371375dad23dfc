#include "evidence/TarGzReader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/Error.hpp"
#include "evidence/TarGzWriter.hpp"

namespace airlock {
namespace {

[[noreturn]] void refuseArchive(const std::string& why) {
    throw Error(ErrorCode::bad_request, "not a valid bundle archive: " + why);
}

std::string field(const char* p, std::size_t width) {
    std::size_t n = 0;
    while (n < width && p[n] != '\0') ++n;
    return std::string(p, n);
}

std::uint64_t octalField(const char* p, std::size_t width) {
    std::uint64_t v = 0;
    std::size_t i = 0;
    while (i < width && (p[i] == ' ' || p[i] == '\0')) ++i;
    bool any = false;
    for (; i < width && p[i] >= '0' && p[i] <= '7'; ++i) {
        if (v > (UINT64_MAX >> 3)) refuseArchive("a number field overflows");
        v = (v << 3) | static_cast<std::uint64_t>(p[i] - '0');
        any = true;
    }
    for (; i < width; ++i)
        if (p[i] != ' ' && p[i] != '\0') refuseArchive("a number field is not octal");
    if (!any) refuseArchive("an empty number field");
    return v;
}

bool checksumHolds(const char* h) {
    std::uint64_t stored = octalField(h + 148, 8);
    unsigned sum = 0;
    for (std::size_t i = 0; i < kTarBlock; ++i)
        sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    return stored == sum;
}

std::string cleanPath(std::string path, bool dir) {
    while (path.rfind("./", 0) == 0) path.erase(0, 2);
    if (dir)
        while (!path.empty() && path.back() == '/') path.pop_back();
    if (path.empty() && dir) return path;
    if (path.empty() || path.front() == '/' || path.find('\0') != std::string::npos)
        refuseArchive("a path is empty or absolute");
    std::size_t start = 0;
    while (start <= path.size()) {
        auto end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        std::string_view seg(path.data() + start, end - start);
        if (seg.empty() || seg == "." || seg == "..")
            refuseArchive("a path has an empty, '.' or '..' part: " + path);
        start = end + 1;
    }
    return path;
}

// pax records: "LEN key=value\n" ...
std::map<std::string, std::string> paxRecords(std::string_view data) {
    std::map<std::string, std::string> records;
    std::size_t pos = 0;
    while (pos < data.size()) {
        auto space = data.find(' ', pos);
        if (space == std::string_view::npos || space == pos || space - pos > 20)
            refuseArchive("a pax record has no length");
        std::size_t len = 0;
        for (std::size_t i = pos; i < space; ++i) {
            if (data[i] < '0' || data[i] > '9')
                refuseArchive("a pax record length is not a number");
            len = len * 10 + static_cast<std::size_t>(data[i] - '0');
        }
        if (len <= space - pos + 1 || pos + len > data.size() || data[pos + len - 1] != '\n')
            refuseArchive("a pax record has a wrong length");
        std::string_view rec = data.substr(space + 1, pos + len - 1 - (space + 1));
        auto eq = rec.find('=');
        if (eq == std::string_view::npos) refuseArchive("a pax record has no '='");
        records[std::string(rec.substr(0, eq))] = std::string(rec.substr(eq + 1));
        pos += len;
    }
    return records;
}

}  // namespace

std::string gunzipBytes(std::string_view gz, std::uint64_t maxBytes) {
    z_stream z{};
    if (inflateInit2(&z, 15 + 16) != Z_OK) throw Error(ErrorCode::internal, "gunzip init failed");
    std::string out;
    char buf[1 << 16];
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
    z.avail_in = static_cast<uInt>(std::min<std::size_t>(gz.size(), UINT32_MAX));
    if (gz.size() > UINT32_MAX) {
        inflateEnd(&z);
        refuseArchive("the archive is larger than 4 GiB");
    }
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            inflateEnd(&z);
            refuseArchive("it is not gzip, or the gzip stream is damaged");
        }
        out.append(buf, sizeof buf - z.avail_out);
        if (out.size() > maxBytes) {
            inflateEnd(&z);
            refuseArchive("it unpacks to more than " + std::to_string(maxBytes) + " bytes");
        }
        if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
            inflateEnd(&z);
            refuseArchive("the gzip stream is cut short");
        }
    }
    bool trailing = z.avail_in != 0;
    inflateEnd(&z);
    if (trailing) refuseArchive("bytes follow the gzip stream");
    return out;
}

std::map<std::string, std::string> TarGzReader::read(std::string_view gz, Limits limits) {
    std::string tar = gunzipBytes(gz, limits.maxBytes);
    std::map<std::string, std::string> files;
    std::map<std::string, bool> seen;  // every path, file or directory
    std::size_t pos = 0, entries = 0;
    std::map<std::string, std::string> pax;
    bool ended = false;
    while (pos + kTarBlock <= tar.size()) {
        const char* h = tar.data() + pos;
        if (std::all_of(h, h + kTarBlock, [](char c) { return c == '\0'; })) {
            ended = true;
            break;
        }
        if (++entries > limits.maxEntries)
            refuseArchive("more than " + std::to_string(limits.maxEntries) + " entries");
        if (!checksumHolds(h)) refuseArchive("a header checksum is wrong");
        if (std::memcmp(h + 257, "ustar", 5) != 0)
            refuseArchive("a header is not ustar");  // GNU's "ustar  " too
        std::uint64_t size = octalField(h + 124, 12);
        char type = h[156];
        std::string name = field(h, 100);
        std::string prefix = field(h + 345, 155);
        if (!prefix.empty()) name = prefix + "/" + name;
        if (pax.count("path")) name = pax["path"];
        if (pax.count("size")) {
            const std::string& s = pax["size"];
            if (s.empty() || s.size() > 19 || !std::all_of(s.begin(), s.end(), ::isdigit))
                refuseArchive("a pax size is not a number");
            size = std::stoull(s);
        }
        pos += kTarBlock;
        if (size > tar.size() - pos) refuseArchive("an entry runs past the end");
        std::string_view data(tar.data() + pos, static_cast<std::size_t>(size));
        pos += static_cast<std::size_t>((size + kTarBlock - 1) / kTarBlock * kTarBlock);
        if (type == 'x') {
            pax = paxRecords(data);
            continue;
        }
        if (type == 'L') {  // GNU long name: the next entry's path
            if (data.size() > 4096) refuseArchive("a long name is longer than 4096 bytes");
            pax["path"] = field(data.data(), data.size());
            continue;
        }
        if (type == 'g') continue;  // global defaults: nothing a bundle needs
        bool dir = type == '5';
        if (type != '0' && type != '\0' && !dir)
            refuseArchive(std::string("an entry of type '") + type +
                          "' (only files and directories belong in a bundle)");
        std::string path = cleanPath(name, dir);
        pax.clear();
        if (path.empty()) continue;  // "./"
        auto [it, fresh] = seen.emplace(path, dir);
        if (!fresh && !(dir && it->second)) refuseArchive("the path " + path + " appears twice");
        if (!dir) files.emplace(path, std::string(data));
    }
    if (!ended) refuseArchive("it has no end-of-archive marker");
    // A file and a directory of the same name, or a file under a file.
    for (const auto& [path, content] : files)
        for (auto cut = path.find('/'); cut != std::string::npos; cut = path.find('/', cut + 1))
            if (files.count(path.substr(0, cut)))
                refuseArchive("the path " + path.substr(0, cut) +
                              " is both a file and a directory");
    return files;
}

}  // namespace airlock
