#pragma once
#include <optional>
#include <string>

namespace airlock::packages {

// An http(s) URL as upstreams and registries write them. No user info: a
// registry URL with a password in it is refused (credentials are not ours to log).
struct HttpUrl {
    std::string scheme;  // http | https
    std::string host;    // lower-case; an IPv6 literal without brackets
    unsigned port = 0;
    std::string target = "/";  // path and query, as sent in the request line

    static std::optional<HttpUrl> parse(const std::string& text);
    std::string origin() const;  // scheme://host[:port]
    std::string text() const { return origin() + target; }
    std::string path() const;  // target without its query
    bool sameOrigin(const HttpUrl& o) const {
        return scheme == o.scheme && host == o.host && port == o.port;
    }
    // A reference found in a page (absolute, scheme-relative, absolute path
    // or relative path) resolved against this URL; nullopt if unusable.
    std::optional<HttpUrl> resolve(const std::string& reference) const;
};

}  // namespace airlock::packages
