#pragma once
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "egress/AnswerMasker.hpp"
#include "egress/ChunkedScanner.hpp"
#include "egress/SandboxCa.hpp"
#include "egress/SecretHeaders.hpp"

namespace airlock::egress {

// A CONNECT to a host that an injected secret is for: the proxy ends the
// guest's TLS with a leaf from the sandbox's CA, opens its own TLS to the
// host (verified against the host's trust store), and relays HTTP/1.1
// between them: each request head is checked and rewritten
// (rewriteRequestHead: the secret added, another host's placeholder
// refused), bodies stream through as they come (their framing read, never
// their bytes kept), answers stream back untouched. After an Upgrade
// request both directions are bytes. The guest side is one end of a
// socket pair whose other end the EgressSession relays like any tunnel, so
// the sandbox's caps and timeouts still apply to it; its close ends this.
class InterceptedConnection : public std::enable_shared_from_this<InterceptedConnection> {
  public:
    using Audit = std::function<void(const std::string& type, const nlohmann::json& data)>;
    struct Setup {
        std::string host;  // the CONNECT target's host, what the leaf names and TLS verifies
        unsigned port = 443;
        std::shared_ptr<const LeafCertificate> leaf;
        X509* ca = nullptr;  // sent after the leaf
        std::vector<InjectedSecret> secrets;
        // The sandbox's secrets now, read at each request head: a change or a
        // removal reaches the next request of a kept-alive connection too
        // (null: `secrets` for the connection's life).
        std::function<std::vector<InjectedSecret>()> secretsNow;
        boost::asio::ssl::context* guestTls = nullptr;     // guestServerTls()
        boost::asio::ssl::context* upstreamTls = nullptr;  // verifies the host
        Audit audit;
    };
    InterceptedConnection(boost::asio::ip::tcp::socket guestSide,
                          boost::asio::ip::tcp::socket upstream, Setup setup);
    void start();

    // The guest-facing context every interception shares: TLS 1.2 at
    // least, HTTP/1.1 by ALPN (a client that offers only h2 fails its
    // handshake), no resumption (each handshake picks its leaf).
    static std::shared_ptr<boost::asio::ssl::context> guestServerTls();
    // Verifies hosts against the system's trust store, and caFile (an
    // operator's CA) when given.
    static std::shared_ptr<boost::asio::ssl::context> upstreamClientTls(const std::string& caFile);

  private:
    void onGuestHandshake();
    // Where the guest's bytes go next: a head to check, or a body to pass.
    void next();
    void readHead();
    void onHead(std::size_t headLength);
    void forwardBody();
    void readGuest();
    void writeUpstream(std::string bytes, std::function<void()> then);
    void pumpDown();
    // One write to the guest at a time: `then` after it (at once for none).
    void writeDown(std::string bytes, std::function<void()> then);
    // No answer bytes wait, decrypted or on the socket.
    bool upstreamIdle();
    // Answers the guest over its TLS (after any answer bytes already on
    // their way) and ends.
    void refuse(int status, const std::string& why);
    void sendRefusal();
    void close();

    using Stream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;
    Stream guest_, upstream_;
    Setup setup_;
    boost::asio::steady_timer handshakeDeadline_;
    std::string in_;  // guest bytes read and not yet forwarded (a head, a body's start)
    std::array<char, 16 * 1024> guestBuffer_{};
    std::array<char, 16 * 1024> downBuffer_{};
    AnswerMasker answers_;
    std::vector<std::string> maskedValues_;  // every value this connection's answers are masked of
    std::string downOut_;  // the write to the guest under way
    enum class Body { none, length, chunked, raw };
    Body body_ = Body::none;
    std::uint64_t bodyLeft_ = 0;
    ChunkedScanner chunks_;
    bool downWriting_ = false;                // one write at a time to the guest
    bool reading_ = false, writing_ = false;  // one guest read, one host write at a time
    bool guestDone_ = false, upstreamShut_ = false;
    std::string refusal_;
    bool closed_ = false;
};

}  // namespace airlock::egress
