#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::egress {

// One allowlist entry: "host.example.com", "*.example.org" (any name below
// it, not the name itself), an IP literal ("203.0.113.7", "[2001:db8::1]"),
// each optionally with ":PORT". Without a port only 80 and 443 are allowed.
struct AllowEntry {
    std::string host;  // lower case; "*.suffix" for wildcards; IPv6 without brackets
    std::optional<std::uint16_t> port;
    std::string text() const;
};

// A sandbox's egress allowlist. Entries are validated once (bad ones are a
// 400 at create or PUT); matching is by host name, never by address: what
// the name resolves to is judged separately (AddressPolicy).
class EgressAllowlist {
  public:
    static constexpr std::size_t kMaxEntries = 256;

    EgressAllowlist() = default;
    // Throws Error(bad_request) naming the bad entry.
    static EgressAllowlist parse(const std::vector<std::string>& entries);

    // Some entry names this host (normalized), whatever its port.
    bool hostListed(const std::string& host) const;
    // An entry names exactly this host (not through a wildcard).
    bool hostListedExactly(const std::string& host) const;
    // Some entry names this host and allows this port: its own port, or
    // 80/443 when it names none.
    bool allows(const std::string& host, std::uint16_t port) const;

    bool empty() const { return entries_.empty(); }
    const std::vector<AllowEntry>& entries() const { return entries_; }
    std::vector<std::string> texts() const;

  private:
    std::vector<AllowEntry> entries_;
};

// A decimal port 1-65535; nullopt otherwise.
std::optional<std::uint16_t> parsePort(std::string_view text);

// Lower-cases and checks a host name or IP literal (brackets stripped); nullopt if invalid.
std::optional<std::string> normalizeHost(std::string host);

}  // namespace airlock::egress
