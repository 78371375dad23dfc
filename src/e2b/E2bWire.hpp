#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/Error.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock::e2b {

// What the E2B front door tells SDKs about the in-sandbox daemon: versions
// gate SDK features (>= 0.4.0: the SDK leaves the user to the server;
// 0.5.2: closeStdin; 0.5.7: octet-stream and gzip uploads; 0.6.2: file
// metadata, refused with a clear 400; 0.6.3: entries in watch events; 0.6.4:
// watching network mounts), the port is fixed.
inline constexpr const char* kEnvdVersion = "0.6.4";
inline constexpr unsigned kEnvdPort = 49983;
// What E2B gives a sandbox whose create (or auto-resume) names no timeout.
inline constexpr std::int64_t kDefaultTimeoutS = 300;
// E2B's template "base" (bash, python3, user "user" in /home/user) is this one.
inline constexpr const char* kBaseTemplate = "debian";

// ASCII lower case (hosts, header names, media types).
std::string asciiLower(std::string_view s);

// Whether an Accept-Encoding value takes gzip: gzip or * with a q above 0.
bool acceptsGzip(std::string_view acceptEncoding);

// Percent-decoding; '+' stays '+' (E2B's SDK encodes spaces as %20).
std::string percentDecode(std::string_view s);

// GET /v2/sandboxes?metadata=...: the value after the HTTP layer decoded
// the query once. The SDK encodes every key and value, joins them as a
// query string and encodes that again: decode the whole, split on & and =,
// decode each part. Error(bad_request) on an empty key.
std::map<std::string, std::string> parseMetadataFilter(const std::string& value);

// "<port>-<sandboxId>.<domain>[:<listen port>]" (E2B's getHost()), or
// Airlock's own preview origin "<token>.<port>-<sandboxId>.<domain>" (an
// exposed port's token as one more label); nullopt for any other host. The
// domain must match (case-insensitively).
struct SandboxHost {
    unsigned port = 0;
    std::string sandboxId;
    std::string token;  // empty: E2B's form
};
std::optional<SandboxHost> parseSandboxHost(std::string_view host, std::string_view domain);

// Connect error codes ("not_found"...) for the core's errors, and the HTTP
// status a unary Connect error goes with.
std::string connectCodeFor(ErrorCode code);

// A guest's watch record as envd's FilesystemEvent: {name, type
// (EVENT_TYPE_CREATE...), entry (an EntryInfo, when asked for and known)}.
nlohmann::json watchEvent(const protocol::WatchRecord& record, bool includeEntry);
int connectHttpStatus(std::string_view connectCode);
// {"code":"...","message":"..."}
std::string connectErrorJson(std::string_view connectCode, std::string_view message);

// envd's EntryInfo (proto3 JSON) from the agent's entry of a path.
nlohmann::json entryInfo(const protocol::FileEntry& entry);
// "-rw-r--r--" / "drwxr-xr-x" as Go's FileMode.String() prints them.
std::string permissionsText(char typeLetter, unsigned mode);

// The per-sandbox tokens: envdAccessToken (X-Access-Token) and the traffic
// token for restricted previews, "<key id>.<HMAC-SHA256 of the sandbox id and
// the key id under the daemon's key>": nothing to store, nothing a client can
// derive. Each names the API key that fetched it, so it works only while that
// key does (the caller checks the key on every use: a revoked key's tokens
// die with it).
class SandboxTokens {
  public:
    explicit SandboxTokens(std::string key) : key_(std::move(key)) {}
    std::string envdToken(const std::string& sandboxId, const std::string& keyId) const;
    std::string trafficToken(const std::string& sandboxId, const std::string& keyId) const;
    // The key id a token of this sandbox was minted for; nullopt when the
    // token is not one (wrong sandbox, wrong kind, forged).
    std::optional<std::string> envdTokenKey(const std::string& sandboxId,
                                            std::string_view token) const;
    std::optional<std::string> trafficTokenKey(const std::string& sandboxId,
                                               std::string_view token) const;
    // Constant-time comparison.
    static bool same(std::string_view a, std::string_view b);

  private:
    std::string mac(const std::string& text) const;
    std::string token(const char* kind, const std::string& sandboxId,
                      const std::string& keyId) const;
    std::optional<std::string> keyOf(const char* kind, const std::string& sandboxId,
                                     std::string_view token) const;
    std::string key_;
};

// A signed file URL's signature, as E2B's SDK makes it: "v1_" and the
// unpadded base64 of SHA-256("path:operation:user:token[:expiration]"),
// operation "read" or "write", user "" when the URL names none.
std::string fileSignature(const std::string& path, const std::string& operation,
                          const std::string& user, const std::string& envdToken,
                          std::optional<std::int64_t> expiration);

// The Linux user an envd call names with "Authorization: Basic
// base64(user:)"; "" when the header is absent. Error(unauthorized) when
// malformed or not a plain user name.
std::string basicAuthUser(const std::string& authorization);
// envd resolves a relative path against the user's home.
std::string resolveUserPath(const std::string& path, const std::string& user);

// A snapshot name as E2B writes it: "[namespace/]alias[:tag]", trimmed and
// lowercased; the namespace, when given, must be the tenant's (E2B's team
// slug). No tag (nullopt) is "any tag" to a filter and "default" to a create.
struct SnapshotNameQuery {
    std::string alias;
    std::optional<std::string> tag;
};
inline constexpr const char* kDefaultSnapshotTag = "default";
// Error(bad_request) "Invalid name: ..." as E2B words it.
SnapshotNameQuery parseSnapshotName(std::string_view text, const std::string& tenant);
// The names E2B answers with: "tenant/alias", and "tenant/alias:tag" as the
// snapshotID a create takes.
std::string snapshotFullName(const std::string& tenant, const std::string& alias);

}  // namespace airlock::e2b
