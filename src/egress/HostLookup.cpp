#include "egress/HostLookup.hpp"

#include <netdb.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <cstring>

namespace airlock::egress {

std::vector<boost::asio::ip::address> lookUpHost(const std::string& host, std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    std::vector<boost::asio::ip::address> out;
    if (rc != 0) {
        error = ::gai_strerror(rc);
        return out;
    }
    for (addrinfo* p = res; p; p = p->ai_next) {
        boost::asio::ip::tcp::endpoint ep;
        if (p->ai_addrlen > ep.capacity()) continue;
        std::memcpy(ep.data(), p->ai_addr, p->ai_addrlen);
        ep.resize(p->ai_addrlen);
        if (std::find(out.begin(), out.end(), ep.address()) == out.end())
            out.push_back(ep.address());
    }
    ::freeaddrinfo(res);
    return out;
}

}  // namespace airlock::egress
