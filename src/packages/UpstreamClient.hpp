#pragma once
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "packages/HttpUrl.hpp"

namespace boost::asio::ssl {
class context;
}

namespace airlock::packages {

// An upstream registry did not answer as it should (unreachable, timed out,
// too big, a broken response). The guest gets a 502 with this message.
class UpstreamError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct UpstreamResponse {
    int status = 0;
    std::string contentType;
    std::string location;  // of a redirect
    std::uint64_t bytes = 0;
    HttpUrl finalUrl;  // after redirects
};

// Whether a host's resolved address may be used for a URL (the package
// proxy: configured upstreams always; hosts that registries point at only
// when public). Returns the refusal, empty to go on.
using UpstreamAddressCheck =
    std::function<std::string(const HttpUrl& url, const boost::asio::ip::address& address)>;

// Blocking HTTP/1.1 GETs towards registries, on the caller's thread: TLS with
// OpenSSL and certificate and host-name verification for https, bounded
// connect, idle and total time, bounded body, a few redirects. One request
// per connection (registries are few and the cache absorbs repeats).
class UpstreamClient {
  public:
    struct Limits {
        std::chrono::milliseconds connect{15'000};
        std::chrono::milliseconds idle{60'000};    // no byte for this long ends it
        std::chrono::milliseconds total{600'000};  // the whole transfer
        unsigned maxRedirects = 4;
    };
    UpstreamClient(std::shared_ptr<boost::asio::ssl::context> tls, UpstreamAddressCheck check,
                   Limits limits);
    UpstreamClient(std::shared_ptr<boost::asio::ssl::context> tls, UpstreamAddressCheck check)
        : UpstreamClient(std::move(tls), std::move(check), Limits{}) {}

    // GETs url; onBody receives the body of a 2xx answer in pieces (not of
    // other statuses, whose first 4 KiB are in `errorBody`). Throws
    // UpstreamError; a body over maxBytes is an UpstreamError too.
    UpstreamResponse get(const std::string& url, const std::map<std::string, std::string>& headers,
                         std::uint64_t maxBytes,
                         const std::function<void(std::string_view)>& onBody,
                         std::string* errorBody = nullptr) const;

    // The Authorization header value sent to each origin ("https://host:port"
    // as HttpUrl::origin() spells it): an operator's private registry token,
    // added here, on the host, never by the guest. Never sent to another
    // origin, a redirect's included. Set before the first get.
    void setAuthorization(std::map<std::string, std::string> byOrigin) {
        authorization_ = std::move(byOrigin);
    }

    // A TLS client context that verifies peers against the system's CA store.
    static std::shared_ptr<boost::asio::ssl::context> systemTls();

  private:
    std::shared_ptr<boost::asio::ssl::context> tls_;
    UpstreamAddressCheck check_;
    Limits limits_;
    std::map<std::string, std::string> authorization_;
};

}  // namespace airlock::packages
