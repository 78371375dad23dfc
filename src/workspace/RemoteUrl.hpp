#pragma once
#include <string>

#include "egress/AddressPolicy.hpp"

namespace airlock::workspace {

// A repository's remote address: http, https or ssh (also "user@host:path").
// It never carries a secret: http(s) URLs with a user or password are
// refused (credentials live in /v1/credentials, on the host).
struct RemoteUrl {
    std::string scheme;  // http | https | ssh
    std::string user;    // ssh login only ("git")
    std::string host;    // without brackets for IPv6
    unsigned port = 0;   // the effective port
    bool explicitPort = false;
    std::string path;  // "/owner/repo.git" (ssh scp-like form: as given)
    std::string text;  // what the client gave, normalized

    // Throws Error(bad_request) with the reason.
    static RemoteUrl parse(const std::string& url);
    static unsigned defaultPort(const std::string& scheme);
    // "host" or "host:port" when the port is not the scheme's default: what
    // a credential's "host" names.
    std::string credentialHost() const;
    // Same scheme, host and port (what a credential and a redirect are held to).
    bool sameOrigin(const RemoteUrl& other) const;
    // A submodule's URL: absolute as is, "./x" and "../x" against this one.
    RemoteUrl resolve(const std::string& relative) const;
    // The path as a credential's scope compares it ("/org/repo.git"), or ""
    // when a server might read it as another path than the text says (dot
    // or empty segments, '%', '\\', '?', '#', control characters): such a
    // path is in no scope.
    std::string scopePath() const;
    // The directory scopePath() is in, as a scope prefix ("/org/" for
    // "/org/repo.git", "/" for "/repo.git"), or "" when scopePath() is.
    std::string scopeDirectory() const;
    // Whether `prefix` is a scope entry scopePath() can be compared with:
    // starts with "/", and is itself a plain path.
    static bool validScopePrefix(const std::string& prefix);
};

// Resolves the remote's host and refuses it (Error(forbidden)) when any of
// its addresses is loopback, private, link-local or another special range
// the operator has not opened (--egress-allow-cidr), as egress does.
void requireAllowedAddress(const RemoteUrl& url, const egress::AddressPolicy& policy);

// A credential over plain http crosses the network in the clear: every
// address the host resolves to, IPv4 or IPv6, must lie in a range the
// operator opened (--egress-allow-cidr); Error(forbidden) otherwise. A
// public address is not "opened": it is merely allowed for egress.
void requireClearTextAllowed(const RemoteUrl& url, const egress::AddressPolicy& policy);

}  // namespace airlock::workspace
