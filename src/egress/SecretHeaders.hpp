#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::egress {

// A secret the egress proxy adds to requests: its value never enters the
// guest. Header mode sets `header` to `format` with {value} replaced;
// placeholder mode replaces `placeholder` (what the guest's environment
// holds) wherever it appears in the request line or a header value,
// Basic credentials included. Either way only for `hosts`, in the
// allowlist's syntax: an exact name or address, or "*.suffix" for any name
// under it, each with ":port" for one port (without: 443 and 80).
struct InjectedSecret {
    std::string name, value, placeholder;
    std::vector<std::string> hosts;
    std::string header, format = "{value}";

    bool coversHost(const std::string& host, unsigned port = 443) const;
};

// A hosts entry read: its name pattern (lowercase, no brackets) and port
// (0: none given); an empty pattern when it is not one.
struct HostPattern {
    std::string host;
    unsigned port = 0;
    static HostPattern parse(const std::string& entry);
};

// What became of one request head on its way to `host`.
struct RewrittenHead {
    enum class Outcome { forward, blocked, malformed };
    Outcome outcome = Outcome::malformed;
    std::string head;                   // forward: what goes upstream
    std::vector<std::string> injected;  // forward: the secrets used, by name
    std::string secret;        // blocked: the secret whose placeholder (or value) it carried
    std::string why;           // blocked, malformed: for the guest's 4xx and the audit
    std::string method, path;  // as far as they were read (path: no query)
};

// Checks and rewrites one HTTP/1.1 request head (request line through the
// blank line) bound for `host` (the CONNECT target, or a plain request's
// authority) and `port`. Malformed: over maxHead, a bare CR or LF, obs-fold, space
// before a colon, not HTTP/1.x, no Host or two, a Host that is not `host`,
// Content-Length with Transfer-Encoding, a Transfer-Encoding that does not
// end in chunked. Blocked: a placeholder of a secret whose hosts do not
// cover `host`, or a secret's value itself (which the guest cannot have).
// The proxy's own Proxy-Authorization and Proxy-Connection never pass.
RewrittenHead rewriteRequestHead(std::string_view raw, const std::string& host, unsigned port,
                                 const std::vector<InjectedSecret>& secrets,
                                 std::size_t maxHead = 16 * 1024);

}  // namespace airlock::egress
