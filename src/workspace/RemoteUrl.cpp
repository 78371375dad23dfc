#include "workspace/RemoteUrl.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <boost/asio/ip/address.hpp>
#include <memory>
#include <vector>

#include "core/Error.hpp"

namespace airlock::workspace {
namespace {

bool validHostChars(const std::string& h) {
    if (h.empty() || h.size() > 253) return false;
    for (char c : h)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == ':' ||
              c == '_'))
            return false;
    return true;
}

}  // namespace

unsigned RemoteUrl::defaultPort(const std::string& scheme) {
    if (scheme == "https") return 443;
    if (scheme == "ssh") return 22;
    return 80;
}

RemoteUrl RemoteUrl::parse(const std::string& url) {
    auto bad = [&](const std::string& why) {
        return Error(ErrorCode::bad_request, "repo: " + why);
    };
    if (url.empty() || url.size() > 2048) throw bad("must be a URL of at most 2048 characters");
    for (char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
            throw bad("must not contain spaces or control characters");
    RemoteUrl u;
    auto sep = url.find("://");
    std::string rest;
    if (sep == std::string::npos) {
        // scp-like ssh: user@host:path
        auto colon = url.find(':');
        auto at = url.find('@');
        if (colon == std::string::npos || at == std::string::npos || at > colon)
            throw bad("use an http://, https:// or ssh:// URL (or user@host:path)");
        u.scheme = "ssh";
        u.user = url.substr(0, at);
        u.host = url.substr(at + 1, colon - at - 1);
        u.path = url.substr(colon + 1);
        u.port = 22;
    } else {
        u.scheme = url.substr(0, sep);
        if (u.scheme != "http" && u.scheme != "https" && u.scheme != "ssh")
            throw bad("scheme '" + u.scheme + "' is not supported (http, https, ssh)");
        rest = url.substr(sep + 3);
        auto slash = rest.find('/');
        std::string authority = rest.substr(0, slash);
        u.path = slash == std::string::npos ? "/" : rest.substr(slash);
        if (auto at = authority.rfind('@'); at != std::string::npos) {
            if (u.scheme != "ssh")
                throw bad("credentials do not go in the URL: store them with POST /v1/credentials");
            u.user = authority.substr(0, at);
            authority = authority.substr(at + 1);
        }
        std::string portText;
        if (!authority.empty() && authority[0] == '[') {
            auto close = authority.find(']');
            if (close == std::string::npos) throw bad("unterminated IPv6 address");
            u.host = authority.substr(1, close - 1);
            if (close + 1 < authority.size()) {
                if (authority[close + 1] != ':') throw bad("bad host");
                portText = authority.substr(close + 2);
            }
        } else {
            auto colon = authority.find(':');
            u.host = authority.substr(0, colon);
            if (colon != std::string::npos) portText = authority.substr(colon + 1);
        }
        u.port = defaultPort(u.scheme);
        if (!portText.empty()) {
            if (portText.size() > 5 ||
                portText.find_first_not_of("0123456789") != std::string::npos)
                throw bad("bad port");
            u.port = static_cast<unsigned>(std::stoul(portText));
            if (u.port == 0 || u.port > 65535) throw bad("bad port");
            u.explicitPort = true;
        }
    }
    if (!validHostChars(u.host)) throw bad("bad host '" + u.host + "'");
    if (u.path.empty()) throw bad("no repository path");
    if (u.user.find_first_of(":/") != std::string::npos) throw bad("bad user");
    u.text = url;
    return u;
}

std::string RemoteUrl::credentialHost() const {
    std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    if (port != defaultPort(scheme)) h += ":" + std::to_string(port);
    return h;
}

bool RemoteUrl::sameOrigin(const RemoteUrl& o) const {
    return scheme == o.scheme && host == o.host && port == o.port;
}

RemoteUrl RemoteUrl::resolve(const std::string& relative) const {
    if (relative.rfind("./", 0) != 0 && relative.rfind("../", 0) != 0) return parse(relative);
    std::string base = text;
    while (!base.empty() && base.back() == '/') base.pop_back();
    std::string rel = relative;
    // The origin ("scheme://host:port" or "user@host:") is never climbed out of.
    std::size_t floor = 0;
    if (auto sep = base.find("://"); sep != std::string::npos) {
        auto slash = base.find('/', sep + 3);
        floor = slash == std::string::npos ? base.size() : slash;
    } else {
        floor = base.find(':') + 1;
    }
    while (true) {
        if (rel.rfind("./", 0) == 0) {
            rel.erase(0, 2);
        } else if (rel.rfind("../", 0) == 0) {
            auto slash = base.rfind('/');
            if (slash == std::string::npos || slash < floor)
                throw Error(ErrorCode::unprocessable,
                            "submodule URL " + relative + " climbs above its host");
            base.erase(slash);
            rel.erase(0, 3);
        } else {
            break;
        }
    }
    return parse(base + (base.size() > floor || base.back() != ':' ? "/" : "") + rel);
}

namespace {
// Every address of the host, both families.
std::vector<boost::asio::ip::address> resolveAll(const std::string& host) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0)
        throw Error(ErrorCode::unprocessable, "cannot resolve " + host + ": " + gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(res, ::freeaddrinfo);
    std::vector<boost::asio::ip::address> out;
    for (addrinfo* a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            auto* sin = reinterpret_cast<sockaddr_in*>(a->ai_addr);
            out.push_back(boost::asio::ip::address_v4(ntohl(sin->sin_addr.s_addr)));
        } else if (a->ai_family == AF_INET6) {
            auto* sin6 = reinterpret_cast<sockaddr_in6*>(a->ai_addr);
            boost::asio::ip::address_v6::bytes_type bytes;
            std::copy(std::begin(sin6->sin6_addr.s6_addr), std::end(sin6->sin6_addr.s6_addr),
                      bytes.begin());
            out.push_back(boost::asio::ip::address_v6(bytes));
        }
    }
    return out;
}
}  // namespace

namespace {
bool plainPath(const std::string& p) {
    if (p.empty() || p[0] != '/' || p.size() > 2048) return false;
    for (char c : p)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '%' || c == '\\' ||
            c == '?' || c == '#')
            return false;
    // No "." or ".." segment, no "//" (a trailing "/" is fine: "/org/").
    std::size_t i = 1;
    while (i <= p.size()) {
        std::size_t j = p.find('/', i);
        if (j == std::string::npos) j = p.size();
        std::string seg = p.substr(i, j - i);
        if (seg == "." || seg == ".." || (seg.empty() && j != p.size())) return false;
        i = j + 1;
    }
    return true;
}
}  // namespace

std::string RemoteUrl::scopePath() const {
    std::string p = !path.empty() && path[0] == '/' ? path : "/" + path;
    return plainPath(p) ? p : std::string();
}

std::string RemoteUrl::scopeDirectory() const {
    std::string p = scopePath();
    return p.empty() ? p : p.substr(0, p.rfind('/') + 1);
}

bool RemoteUrl::validScopePrefix(const std::string& prefix) { return plainPath(prefix); }

void requireAllowedAddress(const RemoteUrl& url, const egress::AddressPolicy& policy) {
    for (const auto& addr : resolveAll(url.host))
        if (auto why = policy.refusal(addr))
            throw Error(ErrorCode::forbidden, "the repository host " + url.host + " resolves to " +
                                                  addr.to_string() + ", a " + *why +
                                                  " address the operator has not opened");
}

void requireClearTextAllowed(const RemoteUrl& url, const egress::AddressPolicy& policy) {
    auto addrs = resolveAll(url.host);
    if (addrs.empty())
        throw Error(ErrorCode::unprocessable, "cannot resolve " + url.host + ": no address");
    for (const auto& addr : addrs)
        if (!policy.operatorAllowed(addr))
            throw Error(ErrorCode::forbidden,
                        "a credential goes only over https, or over plain http to ranges the "
                        "operator opened (--egress-allow-cidr); " +
                            url.host + " resolves to " + addr.to_string() +
                            ", which is not in one");
}

}  // namespace airlock::workspace
