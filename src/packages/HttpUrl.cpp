#include "packages/HttpUrl.hpp"

#include <cctype>
#include <vector>

namespace airlock::packages {

namespace {
// Removes "." and ".." segments from an absolute path (RFC 3986 5.2.4).
std::string normalizePath(const std::string& path) {
    std::vector<std::string> out;
    std::size_t i = 0;
    bool trailing = false;
    while (i <= path.size()) {
        auto slash = path.find('/', i);
        std::string seg =
            path.substr(i, slash == std::string::npos ? std::string::npos : slash - i);
        trailing = false;
        if (seg == "..") {
            if (!out.empty()) out.pop_back();
            trailing = true;
        } else if (seg == ".") {
            trailing = true;
        } else if (!seg.empty() || slash == std::string::npos) {
            out.push_back(seg);
        }
        if (slash == std::string::npos) break;
        i = slash + 1;
    }
    std::string joined;
    for (const auto& s : out) joined += "/" + s;
    if (joined.empty() || trailing) joined += "/";
    if (joined.size() > 1 && joined.compare(joined.size() - 2, 2, "//") == 0) joined.pop_back();
    return joined;
}
}  // namespace

std::optional<HttpUrl> HttpUrl::parse(const std::string& text) {
    if (text.size() > 4096) return std::nullopt;
    for (char c : text)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return std::nullopt;
    HttpUrl u;
    auto colon = text.find("://");
    if (colon == std::string::npos) return std::nullopt;
    for (std::size_t i = 0; i < colon; ++i)
        u.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    if (u.scheme != "http" && u.scheme != "https") return std::nullopt;
    std::size_t start = colon + 3;
    std::size_t end = text.find_first_of("/?#", start);
    std::string authority =
        text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (authority.empty() || authority.find('@') != std::string::npos) return std::nullopt;
    std::string portText;
    if (authority[0] == '[') {
        auto close = authority.find(']');
        if (close == std::string::npos) return std::nullopt;
        u.host = authority.substr(1, close - 1);
        if (close + 1 < authority.size()) {
            if (authority[close + 1] != ':') return std::nullopt;
            portText = authority.substr(close + 2);
        }
    } else {
        auto c = authority.rfind(':');
        u.host = authority.substr(0, c);
        if (c != std::string::npos) portText = authority.substr(c + 1);
    }
    if (u.host.empty()) return std::nullopt;
    for (auto& ch : u.host) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    u.port = u.scheme == "https" ? 443 : 80;
    if (!portText.empty()) {
        if (portText.size() > 5 || portText.find_first_not_of("0123456789") != std::string::npos)
            return std::nullopt;
        u.port = static_cast<unsigned>(std::stoul(portText));
        if (u.port == 0 || u.port > 65535) return std::nullopt;
    }
    std::string rest = end == std::string::npos ? "/" : text.substr(end);
    if (auto hash = rest.find('#'); hash != std::string::npos) rest = rest.substr(0, hash);
    if (rest.empty() || rest[0] == '?') rest = "/" + rest;
    u.target = rest;
    return u;
}

std::string HttpUrl::origin() const {
    std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    bool standard = (scheme == "https" && port == 443) || (scheme == "http" && port == 80);
    return scheme + "://" + h + (standard ? "" : ":" + std::to_string(port));
}

std::string HttpUrl::path() const { return target.substr(0, target.find('?')); }

std::optional<HttpUrl> HttpUrl::resolve(const std::string& reference) const {
    std::string ref = reference.substr(0, reference.find('#'));
    if (ref.find("://") != std::string::npos) return parse(ref);
    if (ref.rfind("//", 0) == 0) return parse(scheme + ":" + ref);
    HttpUrl u = *this;
    std::string query;
    if (auto q = ref.find('?'); q != std::string::npos) {
        query = ref.substr(q);
        ref = ref.substr(0, q);
    }
    std::string p;
    if (!ref.empty() && ref[0] == '/') {
        p = ref;
    } else {
        std::string base = path();
        p = base.substr(0, base.rfind('/') + 1) + ref;
    }
    for (char c : p)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return std::nullopt;
    u.target = normalizePath(p) + query;
    return u;
}

}  // namespace airlock::packages
