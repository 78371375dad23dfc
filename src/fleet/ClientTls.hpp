#pragma once
#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace airlock::fleet {

// A TLS client context that verifies the server against caFile (empty: the
// system's trust store), TLS 1.2 at least, with a client certificate when
// certFile/keyFile are given. `options` names the flags in the error a bad
// file throws (Error bad_request).
std::shared_ptr<boost::asio::ssl::context> makeClientTls(const std::string& caFile,
                                                         const std::string& certFile,
                                                         const std::string& keyFile,
                                                         const std::string& options);

}  // namespace airlock::fleet
