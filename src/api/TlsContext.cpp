#include "api/TlsContext.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "core/Error.hpp"

namespace airlock::api {
namespace ssl = boost::asio::ssl;

std::shared_ptr<ssl::context> makeServerTlsContext(const std::string& certFile,
                                                   const std::string& keyFile) {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                     ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    // Renegotiation is a CPU lever a client could pull; nothing here needs it.
    SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_RENEGOTIATION);
    // TLS 1.2 with forward secrecy and AEAD only (1.3's suites are all so).
    SSL_CTX_set_cipher_list(ctx->native_handle(),
                            "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20");
    SSL_CTX_set_mode(ctx->native_handle(), SSL_MODE_RELEASE_BUFFERS);  // idle connections
    // An encrypted key would make OpenSSL prompt on the terminal: refuse it.
    ctx->set_password_callback(
        [](std::size_t, ssl::context::password_purpose) { return std::string(); });
    boost::system::error_code ec;
    ctx->use_certificate_chain_file(certFile, ec);
    if (ec)
        throw Error(
            ErrorCode::bad_request,
            "--tls-cert " + certFile + ": not a readable PEM certificate (" + ec.message() + ")");
    ctx->use_private_key_file(keyFile, ssl::context::pem, ec);
    if (ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH)
        throw Error(ErrorCode::bad_request,
                    "--tls-key " + keyFile + " does not match the certificate in " + certFile);
    if (ec)
        throw Error(
            ErrorCode::bad_request,
            "--tls-key " + keyFile + ": not a readable PEM private key (" + ec.message() + ")");
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
        throw Error(ErrorCode::bad_request,
                    "--tls-key " + keyFile + " does not match the certificate in " + certFile);
    return ctx;
}

}  // namespace airlock::api
