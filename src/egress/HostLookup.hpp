#pragma once
#include <boost/asio/ip/address.hpp>
#include <string>
#include <vector>

namespace airlock::egress {

// The host's addresses for a name, as the host resolves it (getaddrinfo),
// each once, in the resolver's order. On failure: none, and `error` says why.
std::vector<boost::asio::ip::address> lookUpHost(const std::string& host, std::string& error);

}  // namespace airlock::egress
