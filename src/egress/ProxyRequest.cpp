#include "egress/ProxyRequest.hpp"

#include "core/AsciiLower.hpp"

#include <algorithm>
#include <vector>

#include "core/HttpRequestHead.hpp"
#include "egress/EgressAllowlist.hpp"

namespace airlock::egress {
namespace {

// "host", "host:port", "[v6]", "[v6]:port" -> host as written, port (0: none
// given). False when malformed.
bool splitAuthority(std::string_view authority, std::string& host, std::uint16_t& port) {
    std::string_view portText;
    bool hasPort = false;
    if (!authority.empty() && authority.front() == '[') {
        auto close = authority.find(']');
        if (close == std::string_view::npos) return false;
        host = std::string(authority.substr(0, close + 1));
        auto rest = authority.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return false;
            portText = rest.substr(1);
            hasPort = true;
        }
    } else {
        auto colon = authority.find(':');
        host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) {
            portText = authority.substr(colon + 1);
            hasPort = true;
        }
    }
    port = 0;
    if (hasPort) {
        auto parsed = parsePort(portText);
        if (!parsed) return false;
        port = *parsed;
    }
    return !host.empty();
}

}  // namespace

std::string ProxyRequest::destination() const {
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(port);
}

ProxyRequestParser::Status ProxyRequestParser::parse(std::string_view buffered, ProxyRequest& out,
                                                     std::size_t& headLength) {
    // The head itself is the one parser's (shared with the package proxy).
    HttpRequestHead head;
    if (auto status = HttpRequestHeadParser::parse(buffered, head, headLength);
        status != Status::complete)
        return status;
    std::string_view target = head.target;

    out = ProxyRequest{};
    out.method = head.method;
    std::string rawHost;
    std::string pathText;
    if (head.method == "CONNECT") {
        out.connect = true;
        if (!splitAuthority(target, rawHost, out.port) || out.port == 0)
            return fail(400, "CONNECT wants host:port");
    } else {
        // Absolute form only: a proxy has no default host to send "/path" to.
        std::string scheme = asciiLower(target.substr(0, std::min<std::size_t>(target.size(), 8)));
        if (scheme.rfind("http://", 0) != 0) {
            if (scheme.rfind("https://", 0) == 0)
                return fail(400, "https:// URLs go through CONNECT (set https_proxy)");
            return fail(400, "a proxy request needs an absolute http:// URL");
        }
        std::string_view rest = target.substr(7);
        auto slash = rest.find_first_of("/?#");
        std::string_view authority = rest.substr(0, slash);
        std::string_view path =
            slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
        if (auto at = authority.rfind('@'); at != std::string_view::npos)
            authority = authority.substr(at + 1);
        if (!splitAuthority(authority, rawHost, out.port))
            return fail(400, "malformed host in the URL");
        if (out.port == 0) out.port = 80;
        if (auto hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
        if (path.empty()) path = "/";
        pathText = std::string(path);
        if (pathText.front() == '?') pathText = "/" + pathText;
    }
    auto host = normalizeHost(rawHost);
    if (!host)
        return fail(400, "'" + rawHost.substr(0, 100) + "' is not a valid host name or address");
    out.host = *host;
    if (out.connect) return Status::complete;

    // Plain HTTP: origin-form target, hop-by-hop and proxy headers dropped.
    std::string upstream = out.method + " " + pathText + " " + head.version + "\r\n";
    for (const auto& h : head.headers) {
        const std::string& name = h.name;
        if (name == "proxy-connection" || name == "proxy-authorization" || name == "connection" ||
            name == "keep-alive" || name == "te" || name == "upgrade")
            continue;
        // The upstream sees the host that was checked, never another one
        // named in a header (the same address may serve other sites).
        if (name == "host") continue;
        upstream.append(h.line).append("\r\n");
    }
    upstream += "Host: " +
                (out.port == 80
                     ? (out.host.find(':') != std::string::npos ? "[" + out.host + "]" : out.host)
                     : out.destination()) +
                "\r\n";
    upstream += "Connection: close\r\n\r\n";
    out.upstreamHead = std::move(upstream);
    return Status::complete;
}

namespace {
std::string statusText(int status) {
    switch (status) {
        case 400:
            return "Bad Request";
        case 403:
            return "Forbidden";
        case 431:
            return "Request Header Fields Too Large";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Error";
    }
}
}  // namespace

std::string proxyRefusal(int status, const std::string& message) {
    std::string body = "airlock egress: " + message + "\n";
    return "HTTP/1.1 " + std::to_string(status) + " " + statusText(status) +
           "\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace airlock::egress
