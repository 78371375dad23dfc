#include "e2b/E2bWire.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/Hex.hpp"
#include "core/SecretCipher.hpp"
#include "protocol/JsonText.hpp"
#include "store/SnapshotStore.hpp"

namespace airlock::e2b {
namespace {
bool isHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
}  // namespace

std::string asciiLower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string percentDecode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && isHex(s[i + 1]) && isHex(s[i + 2])) {
            out.push_back(static_cast<char>(
                std::strtol(std::string(s.substr(i + 1, 2)).c_str(), nullptr, 16)));
            i += 2;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

std::map<std::string, std::string> parseMetadataFilter(const std::string& value) {
    std::map<std::string, std::string> out;
    std::string whole = percentDecode(value);
    std::string_view rest(whole);
    while (!rest.empty()) {
        auto amp = rest.find('&');
        auto part = rest.substr(0, amp);
        if (!part.empty()) {
            auto eq = part.find('=');
            std::string key = percentDecode(part.substr(0, eq));
            if (key.empty())
                throw Error(ErrorCode::bad_request, "a metadata filter has an empty key");
            out[key] = eq == std::string_view::npos ? "" : percentDecode(part.substr(eq + 1));
        }
        if (amp == std::string_view::npos) break;
        rest.remove_prefix(amp + 1);
    }
    return out;
}

std::optional<SandboxHost> parseSandboxHost(std::string_view host, std::string_view domain) {
    if (domain.empty() || host.size() > 255) return std::nullopt;
    // A port suffix (only after the last label, never inside an IPv6 literal).
    if (auto colon = host.rfind(':');
        colon != std::string_view::npos && host.find(']') == std::string_view::npos)
        host = host.substr(0, colon);
    std::string h = asciiLower(host), d = asciiLower(domain);
    if (h.size() <= d.size() + 1 || h.compare(h.size() - d.size(), d.size(), d) != 0 ||
        h[h.size() - d.size() - 1] != '.')
        return std::nullopt;
    std::string label = h.substr(0, h.size() - d.size() - 1), token;
    if (auto dot = label.find('.'); dot != std::string::npos) {
        token = label.substr(0, dot);
        label = label.substr(dot + 1);
        if (token.empty() || label.find('.') != std::string::npos) return std::nullopt;
    }
    auto dash = label.find('-');
    if (dash == std::string::npos || dash == 0 || dash > 5) return std::nullopt;
    unsigned port = 0;
    for (std::size_t i = 0; i < dash; ++i) {
        if (!std::isdigit(static_cast<unsigned char>(label[i]))) return std::nullopt;
        port = port * 10 + static_cast<unsigned>(label[i] - '0');
    }
    if (port == 0 || port > 65535) return std::nullopt;
    std::string id = label.substr(dash + 1);
    if (id.empty()) return std::nullopt;
    return SandboxHost{port, id, token};
}

std::string connectCodeFor(ErrorCode code) {
    switch (code) {
        case ErrorCode::bad_request:
            return "invalid_argument";
        case ErrorCode::unauthorized:
            return "unauthenticated";
        case ErrorCode::forbidden:
        case ErrorCode::policy_denied:
            return "permission_denied";
        case ErrorCode::not_found:
            return "not_found";
        case ErrorCode::conflict:
            return "failed_precondition";
        case ErrorCode::unprocessable:
            return "invalid_argument";
        case ErrorCode::payload_too_large:
        case ErrorCode::too_many_requests:
        case ErrorCode::quota_exceeded:
        case ErrorCode::insufficient_storage:
            return "resource_exhausted";
        case ErrorCode::agent_timeout:
            return "deadline_exceeded";
        case ErrorCode::method_not_allowed:
            return "unimplemented";
        case ErrorCode::already_exists:
            return "already_exists";
        case ErrorCode::sandbox_unreachable:
            return "unavailable";
        case ErrorCode::node_unavailable:
        case ErrorCode::unavailable:
            return "unavailable";
        case ErrorCode::agent_error:
        case ErrorCode::hypervisor_error:
        case ErrorCode::internal:
            return "internal";
    }
    return "internal";
}

int connectHttpStatus(std::string_view c) {
    if (c == "canceled") return 408;
    if (c == "invalid_argument" || c == "failed_precondition" || c == "out_of_range") return 400;
    if (c == "deadline_exceeded") return 504;
    if (c == "not_found") return 404;
    if (c == "already_exists" || c == "aborted") return 409;
    if (c == "permission_denied") return 403;
    if (c == "resource_exhausted") return 429;
    if (c == "unimplemented") return 501;
    if (c == "unavailable") return 503;
    if (c == "unauthenticated") return 401;
    return 500;
}

bool acceptsGzip(std::string_view value) {
    std::string text = asciiLower(value);
    std::optional<bool> gzip, star;
    std::size_t i = 0;
    while (i <= text.size()) {
        auto comma = text.find(',', i);
        if (comma == std::string::npos) comma = text.size();
        std::string item = text.substr(i, comma - i);
        i = comma + 1;
        auto semi = item.find(';');
        auto trim = [](std::string s) {
            auto b = s.find_first_not_of(" \t");
            auto e = s.find_last_not_of(" \t");
            return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
        };
        std::string coding = trim(item.substr(0, semi));
        if (coding != "gzip" && coding != "*") continue;
        double q = 1;
        for (std::size_t p = semi; p != std::string::npos;) {
            auto next = item.find(';', p + 1);
            std::string param = trim(item.substr(p + 1, next == std::string::npos ? next : next - p - 1));
            if (param.rfind("q=", 0) == 0) q = std::strtod(param.c_str() + 2, nullptr);
            p = next;
        }
        (coding == "gzip" ? gzip : star) = q > 0;
    }
    // gzip named (even refused) wins over *.
    return gzip.value_or(star.value_or(false));
}

std::string connectErrorJson(std::string_view code, std::string_view message) {
    return jsonText(nlohmann::json{{"code", code}, {"message", message}});
}

std::string permissionsText(char typeLetter, unsigned mode) {
    std::string out(1, typeLetter);
    const char* rwx = "rwxrwxrwx";
    for (int i = 0; i < 9; ++i) out.push_back((mode & (0400u >> i)) ? rwx[i] : '-');
    return out;
}

nlohmann::json entryInfo(const protocol::FileEntry& a) {
    using Type = protocol::FileEntry::Type;
    auto modeOf = [](const std::string& text) {
        return static_cast<unsigned>(std::strtoul(text.c_str(), nullptr, 8)) & 0777;
    };
    unsigned mode = modeOf(a.mode);
    char letter = a.type == Type::directory ? 'd' : a.type == Type::symlink ? 'L' : '-';
    unsigned permissionBits = mode;
    // As envd: a symlink has its target's type and mode (none for one that
    // leads nowhere), its own size, owner, time and permissions, and
    // symlinkTarget, resolved (the link itself when it leads nowhere).
    Type shown = a.type;
    if (a.type == Type::symlink) {
        shown = a.target ? a.targetType : Type::other;
        mode = a.target ? modeOf(a.targetMode) : 0;
    }
    const char* fileType = shown == Type::file        ? "FILE_TYPE_FILE"
                           : shown == Type::directory ? "FILE_TYPE_DIRECTORY"
                                                      : "FILE_TYPE_UNSPECIFIED";
    auto owner = [](std::uint32_t id) {
        // The templates' two accounts; others by number, as Go prints a missing name.
        return id == 0      ? std::string("root")
               : id == 1000 ? std::string("user")
                            : std::to_string(id);
    };
    nlohmann::json e{{"name", a.name},         {"type", fileType},
                     {"path", a.path},         {"size", std::to_string(a.size)},
                     {"mode", mode},           {"permissions", permissionsText(letter, permissionBits)},
                     {"owner", owner(a.uid)},  {"group", owner(a.gid)},
                     {"modifiedTime", a.mtime}};
    if (a.type == Type::symlink) e["symlinkTarget"] = a.target ? *a.target : a.path;
    if (!a.metadata.empty()) e["metadata"] = a.metadata;  // an empty map is left out, as protobuf's JSON
    // An unspecified type is left out, as protobuf's JSON leaves a zero enum.
    if (shown != Type::file && shown != Type::directory) e.erase("type");
    return e;
}

nlohmann::json watchEvent(const protocol::WatchRecord& r, bool includeEntry) {
    using Kind = protocol::WatchRecord::Kind;
    const char* type = r.kind == Kind::create   ? "EVENT_TYPE_CREATE"
                       : r.kind == Kind::write  ? "EVENT_TYPE_WRITE"
                       : r.kind == Kind::remove ? "EVENT_TYPE_REMOVE"
                       : r.kind == Kind::rename ? "EVENT_TYPE_RENAME"
                                                : "EVENT_TYPE_CHMOD";
    nlohmann::json e{{"name", r.name}, {"type", type}};
    if (includeEntry && r.entry) e["entry"] = entryInfo(*r.entry);
    return e;
}

std::string SandboxTokens::mac(const std::string& text) const {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
         reinterpret_cast<const unsigned char*>(text.data()), text.size(), out, &len);
    return hexEncode(out, len);
}

std::string SandboxTokens::token(const char* kind, const std::string& sandboxId,
                                 const std::string& keyId) const {
    // The id and the key id both in the MAC, separated by a byte neither holds.
    return keyId + "." + mac(std::string(kind) + ":" + sandboxId + "\n" + keyId);
}

std::optional<std::string> SandboxTokens::keyOf(const char* kind, const std::string& sandboxId,
                                                std::string_view token) const {
    auto dot = token.rfind('.');
    if (dot == std::string_view::npos || dot == 0 || token.size() > 256) return std::nullopt;
    std::string keyId(token.substr(0, dot));
    if (keyId.find_first_of("\n.") != std::string::npos) return std::nullopt;
    if (!same(token, this->token(kind, sandboxId, keyId))) return std::nullopt;
    return keyId;
}

std::string SandboxTokens::envdToken(const std::string& id, const std::string& keyId) const {
    return token("envd-access", id, keyId);
}
std::string SandboxTokens::trafficToken(const std::string& id, const std::string& keyId) const {
    return token("traffic-access", id, keyId);
}
std::optional<std::string> SandboxTokens::envdTokenKey(const std::string& id,
                                                       std::string_view token) const {
    return keyOf("envd-access", id, token);
}
std::optional<std::string> SandboxTokens::trafficTokenKey(const std::string& id,
                                                          std::string_view token) const {
    return keyOf("traffic-access", id, token);
}

std::string fileSignature(const std::string& path, const std::string& operation,
                          const std::string& user, const std::string& envdToken,
                          std::optional<std::int64_t> expiration) {
    std::string raw = path + ":" + operation + ":" + user + ":" + envdToken;
    if (expiration) raw += ":" + std::to_string(*expiration);
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(raw.data()), raw.size(), digest);
    std::string b64 = base64Encode(std::string(reinterpret_cast<char*>(digest), sizeof digest));
    while (!b64.empty() && b64.back() == '=') b64.pop_back();
    return "v1_" + b64;
}

bool SandboxTokens::same(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

std::string basicAuthUser(const std::string& authorization) {
    if (authorization.empty()) return "";
    constexpr std::string_view prefix = "Basic ";
    if (authorization.size() > 512 || authorization.compare(0, prefix.size(), prefix) != 0)
        throw Error(ErrorCode::unauthorized, "envd takes 'Authorization: Basic base64(user:)'");
    std::string decoded;
    try {
        decoded = base64Decode(authorization.substr(prefix.size()));
    } catch (const Error&) {
        throw Error(ErrorCode::unauthorized, "the Basic credentials are not base64");
    }
    std::string user = decoded.substr(0, decoded.find(':'));
    if (user.empty() || user.size() > 32)
        throw Error(ErrorCode::unauthorized, "no user in the Basic credentials");
    for (char c : user)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
            throw Error(ErrorCode::unauthorized, "invalid user name '" + user + "'");
    return user;
}

std::string resolveUserPath(const std::string& path, const std::string& user) {
    std::string home =
        user == "root" ? "/root" : "/home/" + (user.empty() ? std::string("user") : user);
    if (path.empty() || path == "~") return home;
    if (path.rfind("~/", 0) == 0) return home + path.substr(1);
    if (path[0] == '/') return path;
    return home + "/" + path;
}

SnapshotNameQuery parseSnapshotName(std::string_view text, const std::string& tenant) {
    auto trimmed = text;
    while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.front())))
        trimmed.remove_prefix(1);
    while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back())))
        trimmed.remove_suffix(1);
    std::string name = asciiLower(trimmed);
    auto invalid = [&](const std::string& what, const std::string& value) {
        return Error(ErrorCode::bad_request, "Invalid name: invalid " + what + ": " + value);
    };
    SnapshotNameQuery q;
    std::string identifier = name;
    if (auto colon = name.find(':'); colon != std::string::npos) {
        identifier = name.substr(0, colon);
        std::string tag = name.substr(colon + 1);
        if (!isValidSnapshotTag(tag)) throw invalid("tag", tag);
        q.tag = tag;
    }
    if (auto slash = identifier.find('/'); slash != std::string::npos) {
        std::string ns = identifier.substr(0, slash);
        if (ns != asciiLower(tenant))
            throw Error(ErrorCode::bad_request,
                        "namespace '" + ns + "' must match your team '" + tenant + "'");
        identifier = identifier.substr(slash + 1);
    }
    if (!isValidSnapshotAlias(identifier)) throw invalid("template ID", identifier);
    q.alias = identifier;
    return q;
}

std::string snapshotFullName(const std::string& tenant, const std::string& alias) {
    return tenant + "/" + alias;
}

}  // namespace airlock::e2b
