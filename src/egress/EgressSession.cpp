#include "egress/EgressSession.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "agentclient/AgentConnection.hpp"
#include "core/AsciiLower.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "egress/InterceptedConnection.hpp"
#include "protocol/ControlFrames.hpp"
#include "protocol/Frame.hpp"

namespace airlock::egress {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Kind = AgentStream::Event::Kind;
using namespace std::chrono_literals;

EgressSession::EgressSession(std::shared_ptr<EgressShared> shared,
                             std::shared_ptr<SandboxEgress> sandbox, std::uint64_t connection)
    : shared_(std::move(shared)),
      sandbox_(std::move(sandbox)),
      connection_(connection),
      strand_(asio::make_strand(shared_->ioc)),
      upstream_(strand_),
      timer_(strand_),
      throttle_(strand_),
      pace_(strand_),
      pipe_(strand_, shared_->workers),
      started_(std::chrono::steady_clock::now()) {}

EgressSession::~EgressSession() {
    if (counted_) --sandbox_->open;
}

void EgressSession::grantGuest(std::size_t bytes) { pipe_.consumed(bytes); }

void EgressSession::start() {
    // Counted from the first moment: the cap bounds what a guest can make us hold.
    if (sandbox_->open.fetch_add(1) >= shared_->settings.maxConnections) {
        --sandbox_->open;
        reason_ = "the sandbox has " + std::to_string(shared_->settings.maxConnections) +
                  " egress connections open";
    } else {
        counted_ = true;
    }
    pipe_.onEvent([this](AgentStream::Event&& e) { onGuestEvent(std::move(e)); });
    // Its timers keep it alive; a session its stream alone held would never end.
    pipe_.holdOwnerWeakly();
    auto self = shared_from_this();
    pipe_.open(
        self,
        [this](AgentStream::Handler handler) {
            return sandbox_->openConnection(connection_, std::move(handler));
        },
        [this, self](std::exception_ptr error) {
            if (error) {
                try {
                    std::rethrow_exception(error);
                } catch (const std::exception& e) {
                    logWarn("egress", "cannot attach connection " + std::to_string(connection_) +
                                          " of " + sandbox_->id + ": " + e.what());
                } catch (...) {
                }
                return finish("attach failed");
            }
            phase_ = Phase::head;
            if (!counted_) return refuse(503, "egress.denied", reason_);
            armTimer(shared_->settings.headTimeout, "request head");
            auto early = std::move(early_);
            for (auto& e : early) onGuestEvent(std::move(e));
        });
}

void EgressSession::armTimer(std::chrono::milliseconds after, const char* what) {
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), what, after](boost::system::error_code ec) {
        // The relay's silence is the pipe's to time (idleAfter).
        if (ec || self->phase_ == Phase::done || self->phase_ == Phase::relay) return;
        if (self->phase_ == Phase::refusing) return self->finish(self->reason_);
        if (self->phase_ == Phase::head)
            return self->refuse(400, "egress.denied",
                                std::string("no complete ") + what + " in time");
        self->refuse(504, "egress.failed", std::string(what) + " timed out");
    });
}

void EgressSession::onGuestEvent(AgentStream::Event&& event) {
    if (phase_ == Phase::done) return;
    if (phase_ == Phase::attaching) return early_.push_back(std::move(event));
    if (event.kind == Kind::reset) return finish("the guest connection was reset");
    // The guest's tunnel ended: both directions are over there.
    if (event.kind == Kind::close) return finish("closed by the guest");
    if (event.kind == Kind::control) {
        // Guest-made: read as the typed frame it must be, anything else ignored.
        bool eof = false;
        try {
            eof =
                std::holds_alternative<protocol::TunnelEof>(protocol::parseControl(event.payload));
        } catch (const protocol::MessageError&) {
        }
        if (!eof) return;
        // The client shut down its sending side; it may still wait for the
        // answer. The destination hears it once every byte before it went.
        if (phase_ == Phase::head)
            return refuse(400, "egress.denied", "the client closed before a complete request");
        if (phase_ == Phase::refusing || guestEof_) return;
        guestEof_ = true;
        AgentPipe::Chunk end;
        end.end = true;
        return pipe_.send(shared_from_this(), std::move(end));
    }
    if (phase_ == Phase::head) {
        head_ += event.payload;  // at most 16 KiB before it is parsed or refused
        return onHeadBytes();
    }
    if (phase_ == Phase::refusing) return grantGuest(event.payload.size());  // read and dropped
    // Relaying, or bytes that arrive while resolving/connecting (a request
    // body, a TLS hello): they wait in order, bounded by the guest's window.
    toUpstream(std::move(event.payload));
}

void EgressSession::onHeadBytes() {
    ProxyRequestParser parser;
    std::size_t headLength = 0;
    switch (parser.parse(head_, request_, headLength)) {
        case ProxyRequestParser::Status::need_more:
            return;
        case ProxyRequestParser::Status::error:
            return refuse(parser.errorStatus(), "egress.denied", parser.error());
        case ProxyRequestParser::Status::complete:
            break;
    }
    grantGuest(headLength);
    std::string rest = head_.substr(headLength);
    head_.clear();
    if (!rest.empty()) toUpstream(std::move(rest));
    decide();
}

std::optional<std::string> EgressSession::carriedSecret() const {
    auto injections = sandbox_->injections();
    if (!injections) return std::nullopt;
    // A name can carry it too (a DNS lookup is a message), in any case.
    const std::string host = asciiLower(request_.host);
    for (const auto& secret : injections->secrets)
        if ((!secret.placeholder.empty() &&
             host.find(asciiLower(secret.placeholder)) != std::string::npos) ||
            (!secret.value.empty() && host.find(asciiLower(secret.value)) != std::string::npos))
            return secret.name;
    if (request_.connect) return std::nullopt;
    // In plain HTTP no secret is added (it would cross the network in
    // clear): any placeholder or value here is going where it may not.
    std::vector<InjectedSecret> nowhere = injections->secrets;
    for (auto& secret : nowhere) secret.hosts.clear();
    auto r =
        rewriteRequestHead(request_.upstreamHead, request_.host, request_.port, nowhere, 64 * 1024);
    if (r.outcome == RewrittenHead::Outcome::blocked) return r.secret;
    return std::nullopt;
}

void EgressSession::decide() {
    if (auto secret = carriedSecret()) {
        secretBlocked_ = *secret;
        return refuse(403, "egress.secret_blocked",
                      "the request to " + request_.host + " carries secret '" + *secret +
                          "', which goes only to its own hosts, over HTTPS");
    }
    auto allow = sandbox_->rules();
    std::string host = asciiLower(request_.host);
    while (!host.empty() && host.back() == '.') host.pop_back();
    for (const auto& reserved : shared_->settings.reservedHosts)
        if (host == reserved)
            return refuse(
                403, "egress.denied",
                request_.host +
                    " is a package registry: packages come through the sandbox's package "
                    "proxy (npm_config_registry, PIP_INDEX_URL, apt's sources), not egress");
    if (!allow.hostListed(request_.host))
        return refuse(403, "egress.denied", request_.host + " is not on the sandbox's allowlist");
    phase_ = Phase::resolving;
    armTimer(shared_->settings.connectTimeout, "name resolution");
    boost::system::error_code ec;
    auto literal = asio::ip::make_address(request_.host, ec);
    if (!ec) return onResolved({literal}, "");
    // getaddrinfo blocks: a worker does it.
    asio::post(shared_->workers, [self = shared_from_this()] {
        std::string error;
        std::vector<asio::ip::address> addresses;
        try {
            addresses = self->shared_->resolver(self->request_.host, error);
        } catch (const std::exception& e) {
            error = e.what();
        }
        asio::post(self->strand_, [self, addresses = std::move(addresses), error]() mutable {
            self->onResolved(std::move(addresses), error);
        });
    });
}

void EgressSession::onResolved(std::vector<asio::ip::address> addresses, const std::string& error) {
    if (phase_ != Phase::resolving) return;
    if (addresses.empty())
        return refuse(502, "egress.failed",
                      "cannot resolve " + request_.host + (error.empty() ? "" : ": " + error));
    auto allow = sandbox_->rules();
    bool portListed = allow.allows(request_.host, request_.port);
    // An exact entry may reach any port of an address in the operator's
    // ranges (on-prem registries on their own ports); a wildcard may not:
    // whoever controls DNS under it could aim it at any internal service.
    bool anyPortInRanges = allow.hostListedExactly(request_.host);
    // Every address is judged, and only a judged one is dialled: a name
    // that resolves (or rebinds) to loopback, a private network or the
    // metadata service gets nowhere unless the operator opened that range.
    std::vector<tcp::endpoint> usable;
    std::string refusal, refusalForGuest;
    for (const auto& a : addresses) {
        if (auto why = shared_->addresses.refusal(a)) {
            if (refusal.empty()) {
                refusal =
                    request_.host + " resolves to " + a.to_string() + ", a " + *why + " address";
                refusalForGuest = request_.host + " resolves to a " + *why + " address";
            }
            continue;
        }
        if (!portListed && !(anyPortInRanges && shared_->addresses.operatorAllowed(a))) {
            if (refusal.empty())
                refusal = refusalForGuest =
                    "port " + std::to_string(request_.port) + " of " + request_.host +
                    " is not allowed (80 and 443 are; list host:port for others)";
            continue;
        }
        usable.emplace_back(a, request_.port);
    }
    if (usable.empty()) {
        resolved_ = addresses.front().to_string();
        return refuse(403, "egress.denied", refusal, refusalForGuest);
    }
    phase_ = Phase::connecting;
    resolved_ = usable.front().address().to_string();
    armTimer(shared_->settings.connectTimeout, "connection");
    asio::async_connect(
        upstream_, usable,
        [self = shared_from_this()](boost::system::error_code ec, const tcp::endpoint& endpoint) {
            if (self->phase_ != Phase::connecting) return;
            if (ec)
                return self->refuse(502, "egress.failed",
                                    "cannot connect to " + self->request_.destination() + " (" +
                                        self->resolved_ + "): " + ec.message());
            self->onConnected(endpoint);
        });
}

void EgressSession::onConnected(const tcp::endpoint& endpoint) {
    resolved_ = endpoint.address().to_string();
    phase_ = Phase::relay;
    auditType_ = "egress.allowed";
    reason_ = "allowlisted";
    readBuffer_.resize(
        protocol::kMaxPayload);  // one full frame per write: per-frame costs dominate under TCG
    timer_.cancel();             // the connect deadline is met
    auto idle = shared_->settings.idleTimeout;
    pipe_.idleAfter(shared_from_this(), idle, [this, idle] {
        finish("idle for " + std::to_string(idle.count() / 1000) + " s");
    });
    pipe_.setWriter([this](const AgentPipe::Chunk& chunk, std::function<void(bool)> done) {
        writeUpstream(chunk, std::move(done));
    });
    // Once every byte before the client's EOF went: the destination hears it.
    pipe_.onEnd([this] {
        boost::system::error_code ignored;
        upstream_.shutdown(tcp::socket::shutdown_send, ignored);
    });
    auto self = shared_from_this();
    if (request_.connect) {
        if (auto injections = sandbox_->injections();
            injections && injections->covers(request_.host, request_.port) &&
            !intercept(*injections))
            return;
        sendToGuest("HTTP/1.1 200 Connection established\r\n\r\n",
                    false);  // reading starts once it is out
    } else {
        // Ours, not the guest's: no window to return for it.
        AgentPipe::Chunk head;
        head.bytes = std::move(request_.upstreamHead);
        pipe_.sendFirst(self, std::move(head));
        readUpstream();
    }
    pipe_.flush(self);
}

bool EgressSession::intercept(const SandboxInjections& injections) {
    std::shared_ptr<const LeafCertificate> leaf;
    try {
        leaf = injections.ca->leafFor(request_.host);
    } catch (const std::exception& e) {
        refuse(403, "egress.denied", e.what());
        return false;
    }
    // The session relays the guest's TLS to one end of a socket pair as it
    // would to the host; the interception is the other end.
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        refuse(502, "egress.failed", "no socket pair for TLS interception");
        return false;
    }
    boost::system::error_code ec;
    tcp::socket interceptionSide(strand_);
    interceptionSide.assign(tcp::v4(), fds[1], ec);
    if (ec) {
        ::close(fds[0]);
        ::close(fds[1]);
        refuse(502, "egress.failed", "no socket pair for TLS interception");
        return false;
    }
    tcp::socket host = std::move(upstream_);
    upstream_ = tcp::socket(strand_);
    upstream_.assign(tcp::v4(), fds[0], ec);
    if (ec) {
        ::close(fds[0]);
        refuse(502, "egress.failed", "no socket pair for TLS interception");
        return false;
    }
    InterceptedConnection::Setup setup;
    setup.host = request_.host;
    setup.port = request_.port;
    setup.leaf = std::move(leaf);
    setup.ca = injections.ca->certificate();
    setup.secrets = injections.secrets;
    setup.secretsNow = [sandbox = std::weak_ptr<SandboxEgress>(sandbox_)] {
        auto s = sandbox.lock();
        auto now = s ? s->injections() : nullptr;
        return now ? now->secrets : std::vector<InjectedSecret>{};
    };
    setup.guestTls = shared_->guestTls.get();
    setup.upstreamTls = shared_->upstreamTls.get();
    setup.audit = [shared = shared_, sandbox = sandbox_](const std::string& type,
                                                         const nlohmann::json& data) {
        try {
            if (shared->audit && sandbox->admitAudit(shared->settings.maxAuditPerMinute).first)
                shared->audit(sandbox->id, sandbox->tenant, type, data);
        } catch (const std::exception& e) {
            logError("egress", std::string("cannot audit: ") + e.what());
        }
    };
    std::make_shared<InterceptedConnection>(std::move(interceptionSide), std::move(host),
                                            std::move(setup))
        ->start();
    reason_ = "allowlisted; TLS opened to add secrets";
    return true;
}

void EgressSession::sendToGuest(std::string bytes, bool closeAfter) {
    // One write at a time (ordering); the next upstream read waits for it.
    // No thread waits for the guest's window: a guest that takes nothing
    // lets the idle timer end the session, which fails the write.
    auto* tunnel = pipe_.stream();
    if (!tunnel) return finish("the tunnel is gone");
    tunnel->writeAsync(0, std::move(bytes), closeAfter,
                       [self = shared_from_this(), closeAfter](std::exception_ptr error) {
                           asio::post(self->strand_, [self, ok = !error, closeAfter] {
                               if (self->phase_ == Phase::done) return;
                               if (!ok) return self->finish("the guest stopped reading");
                               if (closeAfter) return;  // the guest's close (or a timer) ends it
                               if (self->phase_ == Phase::relay) self->readUpstream();
                           });
                       });
}

void EgressSession::readUpstream() {
    if (phase_ != Phase::relay || !upstream_.is_open()) return;
    upstream_.async_read_some(
        asio::buffer(readBuffer_),
        [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
            if (self->phase_ != Phase::relay) return;
            // The destination is done: the guest client gets its EOF and
            // closes (its tunnel's close ends the session).
            if (ec) return self->sendToGuest("", true);
            self->pipe_.touch();
            self->bytesReceived_ += n;
            auto pause = self->sandbox_->bucket.take(n);
            std::string bytes(self->readBuffer_.data(), n);
            if (pause <= 0ns) return self->sendToGuest(std::move(bytes), false);
            // Over the sandbox's rate: the bytes wait, and so does the next read.
            self->pace_.expires_after(pause);
            self->pace_.async_wait(
                [self, bytes = std::move(bytes)](boost::system::error_code ec) mutable {
                    if (!ec && self->phase_ == Phase::relay)
                        self->sendToGuest(std::move(bytes), false);
                });
        });
}

void EgressSession::toUpstream(std::string bytes) {
    AgentPipe::Chunk chunk;
    chunk.credit = bytes.size();  // the guest's window, returned once written
    chunk.bytes = std::move(bytes);
    pipe_.send(shared_from_this(), std::move(chunk));
}

void EgressSession::writeUpstream(const AgentPipe::Chunk& chunk, std::function<void(bool)> done) {
    asio::async_write(
        upstream_, asio::buffer(chunk.bytes),
        [self = shared_from_this(), done = std::move(done)](boost::system::error_code ec,
                                                            std::size_t n) mutable {
            if (self->phase_ != Phase::relay) return done(false);
            if (ec) {
                self->finish("the destination stopped reading: " + ec.message());
                return done(false);
            }
            self->pipe_.touch();
            self->bytesSent_ += n;
            auto pause = self->sandbox_->bucket.take(n);
            if (pause <= 0ns) return done(true);
            // Over the sandbox's rate: the next write waits, and so does the
            // guest's window for these bytes.
            self->throttle_.expires_after(pause);
            self->throttle_.async_wait(
                [done = std::move(done)](boost::system::error_code ec) { done(!ec); });
        });
}

void EgressSession::refuse(int status, const std::string& type, const std::string& reason,
                           const std::string& forGuest) {
    if (phase_ == Phase::done || phase_ == Phase::refusing) return;
    phase_ = Phase::refusing;
    auditType_ = type;
    reason_ = reason;
    boost::system::error_code ignored;
    upstream_.close(ignored);
    std::string response = proxyRefusal(status, forGuest.empty() ? reason : forGuest);
    // Buffered bytes will never be sent; the guest gets its window back.
    pipe_.discardQueued();
    if (pipe_.stream()) sendToGuest(std::move(response), true);
    armTimer(5s, "refusal");
}

void EgressSession::finish(const std::string& why) {
    if (phase_ == Phase::done) return;
    bool wasRelay = phase_ == Phase::relay;
    phase_ = Phase::done;
    if (auditType_.empty()) {
        auditType_ = "egress.failed";
        reason_ = why;
    }
    if (wasRelay) reason_ += "; " + why;
    boost::system::error_code ignored;
    timer_.cancel();
    throttle_.cancel();
    pace_.cancel();
    upstream_.close(ignored);
    audit(auditType_);
    // The connection no longer counts against the cap, whatever still
    // holds this object (a worker finishing a write).
    if (counted_) {
        counted_ = false;
        --sandbox_->open;
    }
    early_.clear();
    head_.clear();
    readBuffer_ = {};
    // The reset closes the guest's socket with the reason; the pipe drops
    // the stream and breaks the cycle through its handler.
    if (auto* tunnel = pipe_.stream()) tunnel->reset("closed", why);
    pipe_.finish();
}

void EgressSession::audit(const std::string& type) {
    nlohmann::json data{{"destination", request_.host.empty() ? "" : request_.destination()},
                        {"host", request_.host},
                        {"port", request_.port},
                        {"method", request_.method},
                        {"resolved", resolved_},
                        {"decision", type == "egress.allowed"  ? "allowed"
                                     : type == "egress.failed" ? "failed"
                                                               : "denied"},
                        {"reason", reason_},
                        {"bytes_sent", bytesSent_},
                        {"bytes_received", bytesReceived_},
                        {"duration_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::steady_clock::now() - started_)
                                            .count()}};
    if (!secretBlocked_.empty()) data["secret"] = secretBlocked_;
    if (type == "egress.allowed")
        logInfo("egress", sandbox_->id + " " + request_.method + " " + request_.destination() +
                              " -> " + resolved_ + " (" + std::to_string(bytesSent_) + " B out, " +
                              std::to_string(bytesReceived_) + " B in)");
    else
        logInfo("egress", sandbox_->id + " refused " + request_.destination() + ": " + reason_);
    try {
        // A guest opening connections in a loop must not grow the audit log
        // without bound: past the per-minute budget attempts are counted,
        // and the count is recorded when the next minute starts.
        auto [admit, suppressed] = sandbox_->admitAudit(shared_->settings.maxAuditPerMinute);
        if (shared_->audit && suppressed > 0)
            shared_->audit(
                sandbox_->id, sandbox_->tenant, "egress.suppressed",
                {{"count", suppressed},
                 {"reason", "more than " + std::to_string(shared_->settings.maxAuditPerMinute) +
                                " egress attempts in a minute"}});
        if (shared_->audit && admit) shared_->audit(sandbox_->id, sandbox_->tenant, type, data);
    } catch (const std::exception& e) {
        logError("egress", std::string("cannot audit: ") + e.what());
    }
}

}  // namespace airlock::egress
