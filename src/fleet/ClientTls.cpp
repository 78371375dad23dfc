#include "fleet/ClientTls.hpp"

#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>

#include "core/Error.hpp"

namespace airlock::fleet {

namespace ssl = boost::asio::ssl;

std::shared_ptr<ssl::context> makeClientTls(const std::string& caFile, const std::string& certFile,
                                            const std::string& keyFile,
                                            const std::string& options) {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    // An encrypted key would make OpenSSL prompt on the terminal: refuse it.
    ctx->set_password_callback(
        [](std::size_t, ssl::context::password_purpose) { return std::string(); });
    try {
        if (caFile.empty())
            ctx->set_default_verify_paths();
        else
            ctx->load_verify_file(caFile);
        if (!certFile.empty()) {
            ctx->use_certificate_chain_file(certFile);
            ctx->use_private_key_file(keyFile, ssl::context::pem);
        }
    } catch (const std::exception& e) {
        throw Error(ErrorCode::bad_request, options + ": " + e.what());
    }
    ctx->set_verify_mode(ssl::verify_peer);
    return ctx;
}

}  // namespace airlock::fleet
