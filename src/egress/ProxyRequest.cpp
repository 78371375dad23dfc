#include "egress/ProxyRequest.hpp"

#include <algorithm>
#include <vector>

#include "egress/EgressAllowlist.hpp"

namespace airlock::egress {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool isMethod(std::string_view s) {
    if (s.empty() || s.size() > 32) return false;
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= 'A' && c <= 'Z') || c == '-'; });
}

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

ProxyRequestParser::Status ProxyRequestParser::fail(int status, std::string why) {
    errorStatus_ = status;
    error_ = std::move(why);
    return Status::error;
}

ProxyRequestParser::Status ProxyRequestParser::parse(std::string_view buffered, ProxyRequest& out,
                                                     std::size_t& headLength) {
    // Clients end header lines with CRLF; a bare LF is accepted as well.
    std::size_t end = std::string_view::npos, endLen = 0;
    if (auto crlf = buffered.find("\r\n\r\n"); crlf != std::string_view::npos)
        end = crlf, endLen = 4;
    if (auto lf = buffered.find("\n\n"); lf != std::string_view::npos && lf < end)
        end = lf, endLen = 2;
    if (end == std::string_view::npos) {
        if (buffered.size() > kMaxHead) return fail(431, "request head larger than 16 KiB");
        return Status::need_more;
    }
    if (end + endLen > kMaxHead) return fail(431, "request head larger than 16 KiB");
    headLength = end + endLen;

    // A bare CR or a NUL is a line break to some servers: never forwarded.
    std::string_view whole = buffered.substr(0, end);
    for (std::size_t i = 0; i < whole.size(); ++i)
        if (whole[i] == '\0' ||
            (whole[i] == '\r' && (i + 1 >= whole.size() || whole[i + 1] != '\n')))
            return fail(400, "stray CR or NUL in the request head");
    std::vector<std::string_view> lines;
    std::string_view head = buffered.substr(0, end);
    for (std::size_t pos = 0; pos <= head.size();) {
        auto nl = head.find('\n', pos);
        std::string_view line =
            head.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back(line);
        if (nl == std::string_view::npos) break;
        pos = nl + 1;
    }
    if (lines.size() - 1 > kMaxHeaders) return fail(431, "more than 100 header lines");

    // Request line: METHOD SP target SP HTTP/1.x
    std::string_view requestLine = lines[0];
    auto sp1 = requestLine.find(' ');
    auto sp2 = requestLine.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) return fail(400, "malformed request line");
    std::string_view method = requestLine.substr(0, sp1);
    std::string_view target = requestLine.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view version = requestLine.substr(sp2 + 1);
    if (!isMethod(method)) return fail(400, "malformed method");
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        return fail(505, "only HTTP/1.0 and HTTP/1.1 are proxied");
    if (target.empty() || target.find_first_of(" \t") != std::string_view::npos)
        return fail(400, "malformed request target");

    out = ProxyRequest{};
    out.method = std::string(method);
    std::string rawHost;
    std::string_view path;
    std::string pathText;
    if (method == "CONNECT") {
        out.connect = true;
        if (!splitAuthority(target, rawHost, out.port) || out.port == 0)
            return fail(400, "CONNECT wants host:port");
    } else {
        // Absolute form only: a proxy has no default host to send "/path" to.
        std::string scheme = lower(target.substr(0, std::min<std::size_t>(target.size(), 8)));
        if (scheme.rfind("http://", 0) != 0) {
            if (scheme.rfind("https://", 0) == 0)
                return fail(400, "https:// URLs go through CONNECT (set https_proxy)");
            return fail(400, "a proxy request needs an absolute http:// URL");
        }
        std::string_view rest = target.substr(7);
        auto slash = rest.find_first_of("/?#");
        std::string_view authority = rest.substr(0, slash);
        path = slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
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
    std::string upstream = out.method + " " + pathText + " " + std::string(version) + "\r\n";
    for (std::size_t i = 1; i < lines.size(); ++i) {
        std::string_view line = lines[i];
        auto colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0)
            return fail(400, "malformed header line");
        if (line.front() == ' ' || line.front() == '\t')
            return fail(400, "folded header lines are not accepted");
        std::string name = lower(line.substr(0, colon));
        if (name.find_first_of(" \t") != std::string::npos)
            return fail(400, "malformed header name");
        if (name == "proxy-connection" || name == "proxy-authorization" || name == "connection" ||
            name == "keep-alive" || name == "te" || name == "upgrade")
            continue;
        // The upstream sees the host that was checked, never another one
        // named in a header (the same address may serve other sites).
        if (name == "host") continue;
        upstream.append(line).append("\r\n");
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

}  // namespace airlock::egress
