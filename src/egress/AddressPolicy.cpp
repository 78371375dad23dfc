#include "egress/AddressPolicy.hpp"

#include <array>

#include "core/Error.hpp"

namespace airlock::egress {
namespace ip = boost::asio::ip;

namespace {

template <std::size_t N>
bool prefixMatch(const std::array<unsigned char, N>& a, const std::array<unsigned char, N>& b,
                 unsigned prefix) {
    for (unsigned i = 0; i < prefix / 8; ++i)
        if (a[i] != b[i]) return false;
    if (unsigned rest = prefix % 8) {
        auto mask = static_cast<unsigned char>(0xff << (8 - rest));
        if ((a[prefix / 8] & mask) != (b[prefix / 8] & mask)) return false;
    }
    return true;
}

struct V4Range {
    std::uint32_t base;
    unsigned prefix;
    const char* what;
};

constexpr std::uint32_t v4(unsigned a, unsigned b, unsigned c, unsigned d) {
    return (a << 24) | (b << 16) | (c << 8) | d;
}

// IANA special-purpose IPv4 registry, the parts that are not the public internet.
constexpr V4Range kV4Special[] = {
    {v4(0, 0, 0, 0), 8, "unspecified/this-network"},
    {v4(10, 0, 0, 0), 8, "private"},
    {v4(100, 64, 0, 0), 10, "CGNAT"},
    {v4(127, 0, 0, 0), 8, "loopback"},
    {v4(169, 254, 169, 254), 32, "cloud metadata"},
    {v4(169, 254, 0, 0), 16, "link-local"},
    {v4(172, 16, 0, 0), 12, "private"},
    {v4(192, 0, 0, 0), 24, "IETF protocol assignments"},
    {v4(192, 0, 2, 0), 24, "documentation"},
    {v4(192, 88, 99, 0), 24, "6to4 relay"},
    {v4(192, 168, 0, 0), 16, "private"},
    {v4(198, 18, 0, 0), 15, "benchmarking"},
    {v4(198, 51, 100, 0), 24, "documentation"},
    {v4(203, 0, 113, 0), 24, "documentation"},
    {v4(224, 0, 0, 0), 4, "multicast"},
    {v4(240, 0, 0, 0), 4, "reserved"},
};

std::string v4Class(const ip::address_v4& a) {
    std::uint32_t x = a.to_uint();
    for (const auto& r : kV4Special) {
        std::uint32_t mask = r.prefix == 0 ? 0 : ~std::uint32_t(0) << (32 - r.prefix);
        if ((x & mask) == (r.base & mask)) return r.what;
    }
    return "";
}

// The IPv4 address an IPv6 one carries to an IPv4 host (mapped, NAT64, 6to4).
std::optional<ip::address_v4> embeddedV4(const ip::address_v6& a) {
    auto b = a.to_bytes();
    auto tail = [&](std::size_t at) {
        return ip::address_v4(ip::address_v4::bytes_type{b[at], b[at + 1], b[at + 2], b[at + 3]});
    };
    if (a.is_v4_mapped()) return tail(12);
    static const std::array<unsigned char, 16> nat64{0, 0x64, 0xff, 0x9b};
    if (prefixMatch(b, nat64, 96)) return tail(12);
    if (b[0] == 0x20 && b[1] == 0x02) return tail(2);  // 2002::/16 6to4
    return std::nullopt;
}

std::string v6Class(const ip::address_v6& a) {
    if (auto inner = embeddedV4(a)) {
        auto c = v4Class(*inner);
        return c.empty() ? "" : c + " (inside IPv6)";
    }
    if (a.is_unspecified()) return "unspecified";
    if (a.is_loopback()) return "loopback";
    auto b = a.to_bytes();
    if (b[0] == 0xff) return "multicast";
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "site-local";
    if ((b[0] & 0xfe) == 0xfc) return "private (unique local)";
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return "documentation";
    // Translators whose IPv4 side cannot be judged here: Teredo (2001::/32)
    // and local-use NAT64 (64:ff9b:1::/48).
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) return "Teredo";
    if (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1)
        return "local NAT64";
    if (b[0] == 0x01 && b[1] == 0x00 && b[2] == 0 && b[3] == 0 && b[4] == 0 && b[5] == 0 &&
        b[6] == 0 && b[7] == 0)
        return "discard";
    if (b[0] == 0 && b[1] == 0)
        return "reserved";  // ::/16 minus the above: IPv4-compatible and friends
    return "";
}

}  // namespace

CidrRange CidrRange::parse(const std::string& text) {
    auto bad = [&](const std::string& why) {
        return Error(ErrorCode::bad_request, "CIDR '" + text.substr(0, 100) + "': " + why);
    };
    std::string addr = text;
    std::optional<unsigned> prefix;
    if (auto slash = text.find('/'); slash != std::string::npos) {
        addr = text.substr(0, slash);
        std::string p = text.substr(slash + 1);
        if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos)
            throw bad("bad prefix length");
        prefix = static_cast<unsigned>(std::stoul(p));
    }
    boost::system::error_code ec;
    CidrRange r;
    r.base_ = ip::make_address(addr, ec);
    if (ec) throw bad("not an IP address");
    unsigned max = r.base_.is_v4() ? 32 : 128;
    r.prefix_ = prefix.value_or(max);
    if (r.prefix_ > max) throw bad("prefix longer than " + std::to_string(max));
    return r;
}

bool CidrRange::contains(const ip::address& a) const {
    if (base_.is_v4() && a.is_v4())
        return prefixMatch(base_.to_v4().to_bytes(), a.to_v4().to_bytes(), prefix_);
    if (base_.is_v6() && a.is_v6())
        return prefixMatch(base_.to_v6().to_bytes(), a.to_v6().to_bytes(), prefix_);
    if (base_.is_v4() && a.is_v6() && a.to_v6().is_v4_mapped())
        return contains(ip::make_address_v4(ip::v4_mapped, a.to_v6()));
    return false;
}

std::string CidrRange::text() const { return base_.to_string() + "/" + std::to_string(prefix_); }

std::string AddressPolicy::specialClass(const ip::address& a) {
    return a.is_v4() ? v4Class(a.to_v4()) : v6Class(a.to_v6());
}

bool AddressPolicy::operatorAllowed(const ip::address& a) const {
    for (const auto& r : allowed_)
        if (r.contains(a)) return true;
    return false;
}

std::optional<std::string> AddressPolicy::refusal(const ip::address& a) const {
    std::string c = specialClass(a);
    if (c.empty() || operatorAllowed(a)) return std::nullopt;
    return c;
}

}  // namespace airlock::egress
