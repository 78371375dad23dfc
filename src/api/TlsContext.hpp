#pragma once
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

namespace airlock::api {

// The server side of --tls-cert/--tls-key: the certificate chain and private
// key in PEM, TLS 1.2 at least (OpenSSL negotiates 1.3 when the client has
// it). Throws Error(bad_request) naming the file that could not be used.
std::shared_ptr<boost::asio::ssl::context> makeServerTlsContext(const std::string& certFile,
                                                                const std::string& keyFile);

}  // namespace airlock::api
