#include "api/MultipartForm.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <utility>

#include "core/AsciiLower.hpp"
#include "core/Error.hpp"

namespace airlock {
namespace {

constexpr std::size_t kMaxHeaderBlock = 8 * 1024;
constexpr std::size_t kMaxBoundary = 70;  // RFC 2046 5.1.1

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::bad_request, message); }

bool isWsp(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && isWsp(s.front())) s.remove_prefix(1);
    while (!s.empty() && isWsp(s.back())) s.remove_suffix(1);
    return s;
}

// RFC 9110 token characters: header names and parameter names.
bool isTokenChar(char c) {
    if (std::isalnum(static_cast<unsigned char>(c))) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool isToken(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), isTokenChar);
}

// RFC 2046's bchars: what a boundary may hold (a space, but not last).
bool isValidBoundary(std::string_view b) {
    if (b.empty() || b.size() > kMaxBoundary || b.back() == ' ') return false;
    return std::all_of(b.begin(), b.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
    });
}

struct Param {
    std::string name;  // lower case
    std::string value;
};

// The `; name=value` list after a header's first value. Quoted values take
// backslash escapes only before '"' and '\': browsers send Windows paths
// with bare backslashes, and those must come through unchanged.
std::vector<Param> parseParams(std::string_view s, const std::string& what) {
    std::vector<Param> params;
    std::size_t i = 0;
    auto skipWsp = [&] {
        while (i < s.size() && isWsp(s[i])) ++i;
    };
    while (true) {
        skipWsp();
        if (i == s.size()) break;
        if (s[i] != ';') fail(what + " has a malformed parameter list");
        ++i;
        skipWsp();
        if (i == s.size()) break;  // a trailing ';' is harmless
        std::size_t nameStart = i;
        while (i < s.size() && isTokenChar(s[i])) ++i;
        std::string name = asciiLower(s.substr(nameStart, i - nameStart));
        skipWsp();
        if (name.empty() || i == s.size() || s[i] != '=') fail(what + " has a malformed parameter");
        ++i;
        skipWsp();
        std::string value;
        if (i < s.size() && s[i] == '"') {
            ++i;
            bool closed = false;
            while (i < s.size()) {
                char c = s[i];
                if (c == '"') {
                    closed = true;
                    ++i;
                    break;
                }
                if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '"' || s[i + 1] == '\\')) {
                    value += s[i + 1];
                    i += 2;
                    continue;
                }
                if (c == '\r' || c == '\n' || c == '\0')
                    fail(what + " has a control character in a quoted parameter");
                value += c;
                ++i;
            }
            if (!closed) fail(what + " has an unterminated quoted parameter");
        } else {
            std::size_t valueStart = i;
            while (i < s.size() && s[i] != ';') {
                if (s[i] == '"' || static_cast<unsigned char>(s[i]) < 0x20)
                    fail(what + " has a malformed parameter value");
                ++i;
            }
            value = std::string(trim(s.substr(valueStart, i - valueStart)));
        }
        for (const auto& p : params)
            if (p.name == name) fail(what + " names its parameter '" + name + "' twice");
        params.push_back({std::move(name), std::move(value)});
    }
    return params;
}

const Param* findParam(const std::vector<Param>& params, std::string_view name) {
    for (const auto& p : params)
        if (p.name == name) return &p;
    return nullptr;
}

// RFC 5987 `charset'lang'pct-encoded` (filename*=UTF-8''na%C3%AFve.txt);
// nullopt when it is not one we read, and the plain filename stands.
std::optional<std::string> decodeExtValue(std::string_view v) {
    std::size_t q1 = v.find('\'');
    if (q1 == std::string_view::npos) return std::nullopt;
    std::size_t q2 = v.find('\'', q1 + 1);
    if (q2 == std::string_view::npos) return std::nullopt;
    std::string charset = asciiLower(v.substr(0, q1));
    if (charset != "utf-8" && charset != "us-ascii") return std::nullopt;
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    for (std::size_t i = q2 + 1; i < v.size(); ++i) {
        if (v[i] != '%') {
            out += v[i];
            continue;
        }
        if (i + 2 >= v.size()) return std::nullopt;
        int hi = hex(v[i + 1]), lo = hex(v[i + 2]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

std::string boundaryOf(std::string_view contentType) {
    std::size_t semi = contentType.find(';');
    std::string type = asciiLower(trim(contentType.substr(0, semi)));
    if (type != "multipart/form-data") fail("the Content-Type is not multipart/form-data");
    if (semi == std::string_view::npos) fail("the multipart Content-Type has no boundary");
    auto params = parseParams(contentType.substr(semi), "the multipart Content-Type");
    const Param* boundary = findParam(params, "boundary");
    if (!boundary) fail("the multipart Content-Type has no boundary");
    if (!isValidBoundary(boundary->value))
        fail("the multipart boundary is invalid (1-70 characters of RFC 2046's set)");
    return boundary->value;
}

struct Delimiter {
    std::size_t at;    // where "--boundary" starts
    std::size_t next;  // just past the delimiter line
    bool close;        // "--boundary--": the epilogue follows
};

// The first delimiter line at or after `from`: "--boundary" at the start of
// a line (or at `from`, where the line break before it was already taken),
// then "--", or transport padding and a line break. A "--boundary" that is
// followed by anything else is content, not a delimiter.
std::optional<Delimiter> findDelimiter(std::string_view body, std::string_view dashBoundary,
                                       std::size_t from) {
    std::size_t pos = from;
    while ((pos = body.find(dashBoundary, pos)) != std::string_view::npos) {
        if (pos == from || body[pos - 1] == '\n') {
            std::size_t after = pos + dashBoundary.size();
            if (body.substr(after, 2) == "--") return Delimiter{pos, after + 2, true};
            std::size_t j = after;
            while (j < body.size() && isWsp(body[j])) ++j;
            if (j < body.size() && body[j] == '\n') return Delimiter{pos, j + 1, false};
            if (body.substr(j, 2) == "\r\n") return Delimiter{pos, j + 2, false};
        }
        ++pos;
    }
    return std::nullopt;
}

// The part's header block from `pos` to its blank line, read into `part`;
// returns where its content starts.
std::size_t readHeaders(std::string_view body, std::size_t pos, FormPart& part) {
    const std::size_t start = pos;
    // Only the first 8 KiB are ever searched: a part with no blank line in
    // gigabytes of bytes costs no more than one with a short header.
    const std::string_view window = body.substr(0, std::min(body.size(), start + kMaxHeaderBlock));
    std::vector<std::pair<std::string, std::string>> headers;
    while (true) {
        std::size_t nl = window.find('\n', pos);
        if (nl == std::string_view::npos) {
            if (body.size() > window.size()) fail("a multipart part's header block is over 8 KiB");
            fail("the multipart body ends inside a part's headers, without its final delimiter");
        }
        std::string_view line = window.substr(pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        pos = nl + 1;
        if (line.empty()) break;
        if (isWsp(line.front())) {
            // Obsolete line folding: part of the header before it.
            if (headers.empty()) fail("a multipart part has a malformed header line");
            headers.back().second += ' ';
            headers.back().second += trim(line);
            continue;
        }
        std::size_t colon = line.find(':');
        if (colon == std::string_view::npos || !isToken(line.substr(0, colon)))
            fail("a multipart part has a malformed header line");
        headers.emplace_back(asciiLower(line.substr(0, colon)),
                             std::string(trim(line.substr(colon + 1))));
    }

    bool sawDisposition = false, sawType = false;
    for (const auto& [name, value] : headers) {
        if (name == "content-type") {
            if (sawType) fail("a multipart part has two Content-Type headers");
            sawType = true;
            part.contentType = value;
        } else if (name == "content-disposition") {
            if (sawDisposition) fail("a multipart part has two Content-Disposition headers");
            sawDisposition = true;
            std::string_view v = value;
            std::size_t semi = v.find(';');
            if (asciiLower(trim(v.substr(0, semi))) != "form-data")
                fail("a multipart part's Content-Disposition is not form-data");
            if (semi == std::string_view::npos)
                fail("a multipart part's Content-Disposition has no name");
            auto params = parseParams(v.substr(semi), "a multipart part's Content-Disposition");
            const Param* n = findParam(params, "name");
            if (!n || n->value.empty()) fail("a multipart part's Content-Disposition has no name");
            part.name = n->value;
            if (const Param* f = findParam(params, "filename")) part.filename = f->value;
            if (const Param* f = findParam(params, "filename*"))
                if (auto decoded = decodeExtValue(f->value)) part.filename = std::move(*decoded);
        }
    }
    if (!sawDisposition) fail("a multipart part has no Content-Disposition: form-data; name=...");
    return pos;
}

}  // namespace

std::vector<FormPart> parseMultipartForm(std::string_view contentTypeHeader, std::string_view body,
                                         std::size_t maxParts) {
    const std::string dashBoundary = "--" + boundaryOf(contentTypeHeader);
    auto first = findDelimiter(body, dashBoundary, 0);
    if (!first) fail("the multipart body has no delimiter line for its boundary");
    std::vector<FormPart> parts;
    if (first->close) return parts;  // an empty form
    std::set<std::string> names;
    std::size_t pos = first->next;
    while (true) {
        if (parts.size() >= maxParts)
            fail("the multipart form has more than " + std::to_string(maxParts) + " parts");
        FormPart part;
        std::size_t contentStart = readHeaders(body, pos, part);
        auto end = findDelimiter(body, dashBoundary, contentStart);
        if (!end) fail("the multipart body ends without its final delimiter (--boundary--)");
        if (!names.insert(part.name).second)
            fail("the multipart form has two parts named '" + part.name + "'");
        // The line break before the delimiter belongs to the delimiter.
        std::size_t contentEnd = end->at;
        if (contentEnd > contentStart) {
            --contentEnd;  // the '\n'
            if (contentEnd > contentStart && body[contentEnd - 1] == '\r') --contentEnd;
        }
        part.body = std::string(body.substr(contentStart, contentEnd - contentStart));
        parts.push_back(std::move(part));
        if (end->close) return parts;
        pos = end->next;
    }
}

}  // namespace airlock
