#pragma once
#include <boost/asio/ip/address.hpp>
#include <optional>
#include <string>
#include <vector>

namespace airlock::egress {

// An address range, "10.0.0.0/8" or "fd00::/8" (a bare address is /32 or /128).
class CidrRange {
  public:
    // Throws Error(bad_request) on a malformed range.
    static CidrRange parse(const std::string& text);
    bool contains(const boost::asio::ip::address& a) const;
    std::string text() const;

  private:
    boost::asio::ip::address base_;
    unsigned prefix_ = 0;
};

// Which resolved addresses egress may connect to. Public unicast is fine;
// loopback, private (RFC 1918, ULA), link-local (and with it the cloud
// metadata service 169.254.169.254), CGNAT, multicast, unspecified and
// reserved ranges are refused, also when they hide in an IPv4-mapped or
// NAT64 IPv6 address. The operator may open ranges (--egress-allow-cidr),
// for tests and on-prem registries.
class AddressPolicy {
  public:
    explicit AddressPolicy(std::vector<CidrRange> operatorAllowed = {})
        : allowed_(std::move(operatorAllowed)) {}
    // Why this address is refused ("loopback", "private", ...), or nullopt if it may be used.
    std::optional<std::string> refusal(const boost::asio::ip::address& a) const;
    // Inside a range the operator opened.
    bool operatorAllowed(const boost::asio::ip::address& a) const;
    // The special-purpose class of an address, ignoring the operator's ranges ("" = public).
    static std::string specialClass(const boost::asio::ip::address& a);

  private:
    std::vector<CidrRange> allowed_;
};

}  // namespace airlock::egress
