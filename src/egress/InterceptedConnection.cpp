#include "egress/InterceptedConnection.hpp"

#include <openssl/ssl.h>
#include <sys/ioctl.h>

#include <algorithm>

#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include "core/AsciiLower.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "egress/ProxyRequest.hpp"

namespace airlock::egress {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using namespace std::chrono_literals;

namespace {
constexpr std::size_t kMaxHead = 16 * 1024;
// Guest bytes read ahead of the host taking them (they wait in in_).
constexpr std::size_t kMaxBuffered = 256 * 1024;

// HTTP/1.1 from what the client offers, or no handshake: a client that
// speaks only h2 must fail here, not speak h2 into an HTTP/1.1 parser.
int selectHttp11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                 unsigned int inlen, void*) {
    static const unsigned char kHttp11[] = {'h', 't', 't', 'p', '/', '1', '.', '1'};
    unsigned int at = 0;
    while (at < inlen) {
        unsigned int len = in[at];
        if (len == 0 || at + 1 + len > inlen) return SSL_TLSEXT_ERR_ALERT_FATAL;
        if (len == sizeof kHttp11 && std::equal(kHttp11, kHttp11 + len, in + at + 1)) {
            *out = in + at + 1;
            *outlen = static_cast<unsigned char>(len);
            return SSL_TLSEXT_ERR_OK;
        }
        at += 1 + len;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

// What a host's answer must not show the guest: every injected value.
std::vector<std::string> valuesOf(const std::vector<InjectedSecret>& secrets) {
    std::vector<std::string> out;
    for (const auto& s : secrets) out.push_back(s.value);
    return out;
}

}  // namespace

std::shared_ptr<ssl::context> InterceptedConnection::guestServerTls() {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    SSL_CTX* h = ctx->native_handle();
    SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION);
    // Each handshake picks its leaf: no session to resume around that.
    SSL_CTX_set_options(h, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_session_cache_mode(h, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_alpn_select_cb(h, selectHttp11, nullptr);
    return ctx;
}

std::shared_ptr<ssl::context> InterceptedConnection::upstreamClientTls(const std::string& caFile) {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    boost::system::error_code ec;
    ctx->set_default_verify_paths(ec);
    if (!caFile.empty()) {
        ctx->load_verify_file(caFile, ec);
        if (ec)
            throw Error(
                ErrorCode::bad_request,
                "--egress-ca-file " + caFile + ": not a readable PEM CA (" + ec.message() + ")");
    }
    ctx->set_verify_mode(ssl::verify_peer);
    return ctx;
}

InterceptedConnection::InterceptedConnection(asio::ip::tcp::socket guestSide,
                                             asio::ip::tcp::socket upstream, Setup setup)
    : guest_(std::move(guestSide), *setup.guestTls),
      upstream_(std::move(upstream), *setup.upstreamTls),
      setup_(std::move(setup)),
      handshakeDeadline_(guest_.get_executor()),
      answers_(valuesOf(setup_.secrets)),
      maskedValues_(valuesOf(setup_.secrets)) {}

void InterceptedConnection::start() {
    SSL* s = guest_.native_handle();
    if (SSL_use_certificate(s, setup_.leaf->certificate()) != 1 ||
        SSL_use_PrivateKey(s, setup_.leaf->key()) != 1 || SSL_add1_chain_cert(s, setup_.ca) != 1) {
        logError("egress", "cannot give the guest a certificate for " + setup_.host);
        return close();
    }
    // Both handshakes within the connect timeout's order of magnitude.
    handshakeDeadline_.expires_after(15s);
    handshakeDeadline_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec) self->close();
    });
    guest_.async_handshake(
        ssl::stream_base::server, [self = shared_from_this()](boost::system::error_code ec) {
            if (self->closed_) return;
            if (ec) {
                logInfo("egress",
                        "the guest's TLS for " + self->setup_.host + " failed: " + ec.message());
                return self->close();
            }
            self->onGuestHandshake();
        });
}

void InterceptedConnection::onGuestHandshake() {
    // The name the client asked for is the one that was allowed.
    if (const char* sni = SSL_get_servername(guest_.native_handle(), TLSEXT_NAMETYPE_host_name);
        sni && SandboxCa::canonicalHost(sni) != SandboxCa::canonicalHost(setup_.host)) {
        setup_.audit("egress.denied", {{"host", setup_.host},
                                       {"reason", "TLS named another host than the CONNECT"}});
        return close();
    }
    SSL* s = upstream_.native_handle();
    boost::system::error_code notAddress;
    asio::ip::make_address(setup_.host, notAddress);
    if (notAddress) SSL_set_tlsext_host_name(s, setup_.host.c_str());
    SSL_set_alpn_protos(s, reinterpret_cast<const unsigned char*>("\x08http/1.1"), 9);
    upstream_.set_verify_callback(ssl::host_name_verification(setup_.host));
    upstream_.async_handshake(
        ssl::stream_base::client, [self = shared_from_this()](boost::system::error_code ec) {
            if (self->closed_) return;
            self->handshakeDeadline_.cancel();
            if (ec) {
                std::string why = "TLS with " + self->setup_.host + " failed: " + ec.message();
                if (long v = SSL_get_verify_result(self->upstream_.native_handle()); v != X509_V_OK)
                    why = "the certificate of " + self->setup_.host + " failed verification (" +
                          X509_verify_cert_error_string(v) + ")";
                self->setup_.audit(
                    "egress.failed",
                    {{"host", self->setup_.host},
                     {"port", self->setup_.port},
                     {"destination", self->setup_.host + ":" + std::to_string(self->setup_.port)},
                     {"reason", why}});
                return self->refuse(502, why);
            }
            self->pumpDown();
            self->next();
        });
}

void InterceptedConnection::readGuest() {
    // One read at a time, and no more than kMaxBuffered waiting to go out.
    if (reading_ || closed_ || guestDone_ || in_.size() >= kMaxBuffered) return;
    reading_ = true;
    guest_.async_read_some(
        asio::buffer(guestBuffer_),
        [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
            self->reading_ = false;
            if (self->closed_) return;
            if (ec)
                self->guestDone_ = true;
            else
                self->in_.append(self->guestBuffer_.data(), n);
            self->next();
        });
}

void InterceptedConnection::next() {
    if (closed_) return;
    if (body_ == Body::none)
        readHead();
    else
        forwardBody();
    // The guest is done sending and all it sent went: the host hears it,
    // answers, closes.
    if (guestDone_ && !writing_ && in_.empty() && !upstreamShut_) {
        upstreamShut_ = true;
        boost::system::error_code ignored;
        upstream_.lowest_layer().shutdown(asio::socket_base::shutdown_send, ignored);
    }
}

void InterceptedConnection::readHead() {
    if (writing_ || !refusal_.empty()) return;  // the write's end comes back through next()
    auto end = in_.find("\r\n\r\n");
    if (end != std::string::npos && end + 4 <= kMaxHead) return onHead(end + 4);
    if (std::min(in_.size(), end) >= kMaxHead)
        return refuse(431, "a request head over " + std::to_string(kMaxHead) + " bytes");
    readGuest();
}

void InterceptedConnection::onHead(std::size_t headLength) {
    if (setup_.secretsNow) {
        setup_.secrets = setup_.secretsNow();
        // A rotated value is masked in answers from now on too (the old one
        // still is); swapped between answers only, never mid-hold.
        bool added = false;
        for (auto& v : valuesOf(setup_.secrets))
            if (std::find(maskedValues_.begin(), maskedValues_.end(), v) == maskedValues_.end()) {
                maskedValues_.push_back(std::move(v));
                added = true;
            }
        if (added && !answers_.holding() && maskedValues_.size() <= 256)
            answers_ = AnswerMasker(maskedValues_);
    }
    auto r = rewriteRequestHead(std::string_view(in_).substr(0, headLength), setup_.host,
                                setup_.port, setup_.secrets, kMaxHead);
    nlohmann::json what{{"host", setup_.host},
                        {"port", setup_.port},
                        {"destination", setup_.host + ":" + std::to_string(setup_.port)},
                        {"method", r.method},
                        {"path", r.path}};
    if (r.outcome == RewrittenHead::Outcome::blocked) {
        what["secret"] = r.secret;
        what["decision"] = "denied";
        what["reason"] = r.why;
        setup_.audit("egress.secret_blocked", what);
        return refuse(403, r.why);
    }
    if (r.outcome == RewrittenHead::Outcome::malformed) {
        what["reason"] = r.why;
        setup_.audit("egress.denied", what);
        return refuse(400, r.why);
    }
    // The body's framing, from the fields as they go out.
    body_ = Body::none;
    bodyLeft_ = 0;
    int lengths = 0;
    std::size_t at = r.head.find("\r\n") + 2;
    while (at < r.head.size() - 2) {
        auto eol = r.head.find("\r\n", at);
        std::string line = r.head.substr(at, eol - at);
        at = eol + 2;
        auto colon = line.find(':');
        std::string name = asciiLower(line.substr(0, colon));
        std::string value = line.substr(std::min(line.size(), colon + 2));
        if (name == "content-length") {
            if (++lengths > 1 || value.empty() || value.size() > 15 ||
                value.find_first_not_of("0123456789") != std::string::npos)
                return refuse(400, "a Content-Length that is not one number");
            bodyLeft_ = std::stoull(value);
            body_ = bodyLeft_ > 0 ? Body::length : Body::none;
        } else if (name == "transfer-encoding") {
            body_ = Body::chunked;  // rewriteRequestHead saw that it ends in chunked
        } else if (name == "upgrade") {
            body_ = Body::raw;
        }
    }
    if (body_ == Body::raw && lengths > 0) return refuse(400, "an upgrade with a body");
    for (const auto& name : r.injected) {
        nlohmann::json used = what;
        used["secret"] = name;
        used["reason"] = "secret " + name + " added to " + r.method + " " + r.path;
        setup_.audit("egress.secret_injected", used);
    }
    in_.erase(0, headLength);
    writeUpstream(std::move(r.head), [self = shared_from_this()] { self->next(); });
    readGuest();  // a body's first bytes while the head goes out
}

void InterceptedConnection::forwardBody() {
    if (writing_) return;  // the write's end comes back through next()
    std::string part;
    switch (body_) {
        case Body::none:
            return readHead();
        case Body::length: {
            auto take = static_cast<std::size_t>(std::min<std::uint64_t>(bodyLeft_, in_.size()));
            part = in_.substr(0, take);
            in_.erase(0, take);
            bodyLeft_ -= take;
            if (bodyLeft_ == 0) body_ = Body::none;
            break;
        }
        case Body::chunked: {
            std::size_t used = 0;
            auto result = chunks_.scan(in_, used);
            if (result == ChunkedScanner::Result::error) {
                setup_.audit("egress.denied", {{"host", setup_.host}, {"reason", chunks_.error()}});
                return close();  // part of the body went: no answer fits
            }
            part = in_.substr(0, used);
            in_.erase(0, used);
            if (result == ChunkedScanner::Result::done) body_ = Body::none;
            break;
        }
        case Body::raw:
            part = std::move(in_);
            in_.clear();
            break;
    }
    if (!part.empty())
        writeUpstream(std::move(part), [self = shared_from_this()] { self->next(); });
    else if (body_ == Body::none)
        return readHead();
    // The guest's next bytes come in while these go out.
    readGuest();
}

void InterceptedConnection::writeUpstream(std::string bytes, std::function<void()> then) {
    writing_ = true;
    auto held = std::make_shared<std::string>(std::move(bytes));
    asio::async_write(upstream_, asio::buffer(*held),
                      [self = shared_from_this(), held, then = std::move(then)](
                          boost::system::error_code ec, std::size_t) {
                          self->writing_ = false;
                          if (self->closed_) return;
                          if (ec) return self->close();
                          then();
                      });
}

void InterceptedConnection::pumpDown() {
    upstream_.async_read_some(
        asio::buffer(downBuffer_),
        [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
            if (self->closed_ || !self->refusal_.empty()) return;
            if (ec) {
                // The host is done: what was held back, then a proper TLS
                // end for the guest, in bounded time.
                return self->writeDown(self->answers_.flush(), [self] {
                    self->handshakeDeadline_.expires_after(2s);
                    self->handshakeDeadline_.async_wait([self](boost::system::error_code e) {
                        if (!e) self->close();
                    });
                    self->downWriting_ = true;
                    self->guest_.async_shutdown(
                        [self](boost::system::error_code) { self->close(); });
                });
            }
            std::string out = self->answers_.feed({self->downBuffer_.data(), n});
            // Nothing more from the host for now (whatever the bytes): the
            // held-back tail goes too, so an answer is never kept waiting.
            if (self->answers_.holding() && self->upstreamIdle()) out += self->answers_.flush();
            self->writeDown(std::move(out), [self] { self->pumpDown(); });
        });
}

bool InterceptedConnection::upstreamIdle() {
    // Decrypted and not read, read from the socket and not yet decrypted,
    // or still on the socket.
    SSL* ssl = upstream_.native_handle();
    if (SSL_pending(ssl) > 0 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0) return false;
    int waiting = 0;
    if (::ioctl(upstream_.lowest_layer().native_handle(), FIONREAD, &waiting) != 0) return true;
    return waiting == 0;
}

void InterceptedConnection::writeDown(std::string bytes, std::function<void()> then) {
    if (bytes.empty()) return then();
    downWriting_ = true;
    downOut_ = std::move(bytes);
    asio::async_write(guest_, asio::buffer(downOut_),
                      [self = shared_from_this(), then = std::move(then)](
                          boost::system::error_code e, std::size_t) {
                          self->downWriting_ = false;
                          if (self->closed_) return;
                          if (e) return self->close();
                          if (!self->refusal_.empty()) return self->sendRefusal();
                          then();
                      });
}

void InterceptedConnection::refuse(int status, const std::string& why) {
    if (closed_ || !refusal_.empty()) return;
    refusal_ = proxyRefusal(status, why);
    // Nothing more goes to the host, nor comes from it.
    boost::system::error_code ignored;
    upstream_.lowest_layer().close(ignored);
    if (!downWriting_) sendRefusal();
}

void InterceptedConnection::sendRefusal() {
    downWriting_ = true;
    handshakeDeadline_.expires_after(10s);
    handshakeDeadline_.async_wait([self = shared_from_this()](boost::system::error_code e) {
        if (!e) self->close();
    });
    asio::async_write(
        guest_, asio::buffer(refusal_),
        [self = shared_from_this()](boost::system::error_code, std::size_t) { self->close(); });
}

void InterceptedConnection::close() {
    if (closed_) return;
    closed_ = true;
    handshakeDeadline_.cancel();
    boost::system::error_code ignored;
    guest_.lowest_layer().close(ignored);
    upstream_.lowest_layer().close(ignored);
}

}  // namespace airlock::egress
