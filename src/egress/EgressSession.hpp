#pragma once
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agentclient/AgentPipe.hpp"
#include "agentclient/GuestAttachments.hpp"
#include "egress/AddressPolicy.hpp"
#include "egress/EgressAllowlist.hpp"
#include "egress/EgressProxy.hpp"
#include "egress/ProxyRequest.hpp"
#include "egress/SandboxCa.hpp"
#include "egress/SecretHeaders.hpp"
#include "egress/TokenBucket.hpp"

namespace airlock::egress {

// What every session of the proxy shares; outlives the proxy while sessions run.
struct EgressShared {
    boost::asio::io_context& ioc;
    boost::asio::thread_pool& workers;
    EgressSettings settings;
    AddressPolicy addresses;
    EgressAuditSink audit;
    EgressResolver resolver;
    // Interception (InterceptedConnection): the guest-facing TLS, and what
    // verifies the hosts it opens its own TLS to.
    std::shared_ptr<boost::asio::ssl::context> guestTls, upstreamTls;
};

// One attached sandbox: its allowlist (the rules), listener and caps.
struct SandboxEgress : GuestAttachment<EgressAllowlist> {
    SandboxEgress(std::string id, std::string tenant, std::weak_ptr<AgentConnection> agent,
                  EgressAllowlist allow, std::uint64_t bytesPerSecond)
        : GuestAttachment(std::move(id), std::move(tenant), std::move(agent), std::move(allow)),
          bucket(bytesPerSecond) {}
    TokenBucket bucket;
    std::shared_ptr<const SandboxInjections> injections() const {
        std::lock_guard lock(injectionsMutex);
        return injectionsNow;
    }
    void setInjections(std::shared_ptr<const SandboxInjections> i) {
        std::lock_guard lock(injectionsMutex);
        injectionsNow = std::move(i);
    }
    mutable std::mutex injectionsMutex;
    std::shared_ptr<const SandboxInjections> injectionsNow;
    // Whether one more audit record fits this minute's budget, and how many
    // were suppressed in the minute that just ended (to be recorded once).
    std::pair<bool, std::uint64_t> admitAudit(unsigned perMinute) {
        std::lock_guard lock(auditMutex);
        auto now = std::chrono::steady_clock::now();
        std::uint64_t flushed = 0;
        if (now - auditWindow >= std::chrono::minutes(1)) {
            flushed = std::exchange(auditSuppressed, 0);
            auditWindow = now;
            auditInWindow = 0;
        }
        if (auditInWindow < perMinute) {
            ++auditInWindow;
            return {true, flushed};
        }
        ++auditSuppressed;
        return {false, flushed};
    }
    std::mutex auditMutex;
    std::chrono::steady_clock::time_point auditWindow = std::chrono::steady_clock::now();
    unsigned auditInWindow = 0;
    std::uint64_t auditSuppressed = 0;
};

// One guest connection to the proxy. Runs on its own strand; blocking agent
// writes (they wait for the guest's window) go to the worker pool, one at a
// time so that bytes stay in order.
class EgressSession : public std::enable_shared_from_this<EgressSession> {
  public:
    EgressSession(std::shared_ptr<EgressShared> shared, std::shared_ptr<SandboxEgress> sandbox,
                  std::uint64_t connection);
    ~EgressSession();
    void start();

  private:
    enum class Phase { attaching, head, resolving, connecting, relay, refusing, done };
    void onGuestEvent(AgentStream::Event&& event);
    void onHeadBytes();
    void decide();
    void onResolved(std::vector<boost::asio::ip::address> addresses, const std::string& error);
    void onConnected(const boost::asio::ip::tcp::endpoint& endpoint);
    // A secret's placeholder (or value) where no secret may go: in a plain
    // request, or in the name a CONNECT asks for. The secret's name.
    std::optional<std::string> carriedSecret() const;
    // Hands the connection to an InterceptedConnection; false when it was refused.
    bool intercept(const SandboxInjections& injections);
    // Answers the guest with an HTTP error and ends; `forGuest` (if given)
    // is what the guest reads, without internal addresses.
    void refuse(int status, const std::string& type, const std::string& reason,
                const std::string& forGuest = "");
    void sendToGuest(std::string bytes, bool closeAfter);
    // Window back to the guest for bytes read and dropped or written upstream.
    void grantGuest(std::size_t bytes);
    void readUpstream();
    // Guest bytes for the destination, queued on the pipe in order (its
    // window bounds them) until written.
    void toUpstream(std::string bytes);
    // The pipe's writer: one chunk to the destination, at the sandbox's rate.
    void writeUpstream(const AgentPipe::Chunk& chunk, std::function<void(bool)> done);
    void armTimer(std::chrono::milliseconds after, const char* what);
    void finish(const std::string& why);
    void audit(const std::string& type);

    std::shared_ptr<EgressShared> shared_;
    std::shared_ptr<SandboxEgress> sandbox_;
    const std::uint64_t connection_;
    boost::asio::strand<boost::asio::io_context::executor_type> strand_;
    boost::asio::ip::tcp::socket upstream_;
    boost::asio::steady_timer
        timer_;  // head, connect and refusal deadlines (the relay idles on the pipe)
    boost::asio::steady_timer throttle_;  // bandwidth pauses, guest -> upstream
    boost::asio::steady_timer pace_;      // bandwidth pauses, upstream -> guest
    // The guest connection's tunnel, and its bytes' queue to the destination.
    AgentPipe pipe_;
    std::deque<AgentStream::Event> early_;  // events that beat the tunnel handle to the strand
    Phase phase_ = Phase::attaching;
    bool counted_ = false;
    std::string head_;
    ProxyRequest request_;
    std::string resolved_;
    std::string reason_;
    std::string auditType_;
    std::string secretBlocked_;        // the secret a refused request carried
    bool guestEof_ = false;            // the client shut down its sending side
    std::uint64_t bytesSent_ = 0;      // guest -> destination
    std::uint64_t bytesReceived_ = 0;  // destination -> guest
    std::chrono::steady_clock::time_point started_;
    std::vector<char> readBuffer_;  // allocated once relaying starts
};

}  // namespace airlock::egress
