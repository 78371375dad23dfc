#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "agentclient/AgentPipe.hpp"
#include "core/UniqueFd.hpp"
#include "packages/PackageProxy.hpp"

namespace airlock::packages {

// What every connection of the package proxy shares; outlives the proxy
// while sessions run.
struct PackageProxyShared {
    PackageProxyShared(boost::asio::io_context& ioc, std::shared_ptr<PackageService> service,
                       PackageProxySettings settings)
        : ioc(ioc), workers(settings.threads), service(std::move(service)), settings(settings) {}
    boost::asio::io_context& ioc;
    // The service's answers (they may fetch upstream for minutes) and the
    // tunnels' opening: never an I/O thread. Stopped and joined by the
    // proxy (a session on a worker may hold the last reference to this).
    boost::asio::thread_pool workers;
    std::shared_ptr<PackageService> service;
    PackageProxySettings settings;
    std::mutex tenantMutex;
    std::map<std::string, unsigned> tenantOpen;  // connections open, per tenant
    // Counts a new connection of `sandbox`: false when it is past the
    // sandbox's or the tenant's share (it is counted all the same, and
    // told 503 by its session).
    bool admit(SandboxPackageAttachment& sandbox);
    void release(SandboxPackageAttachment& sandbox);
};

// One guest connection to a package port, on its own strand: requests are
// read from the tunnel (one head parser for both proxies), answered by the
// service on a worker and written back with writeAsync, one piece at a
// time as the guest's window opens. A cached file goes in pieces read as
// the previous one left; a guest that reads slowly holds no thread, and
// one that stops is ended by the response's deadline (a floor plus its
// size at a minimum rate).
class PackageSession : public std::enable_shared_from_this<PackageSession> {
  public:
    PackageSession(std::shared_ptr<PackageProxyShared> shared,
                   std::shared_ptr<SandboxPackageAttachment> sandbox, Ecosystem ecosystem,
                   std::uint64_t connection, bool admitted);
    ~PackageSession();
    void start();

  private:
    enum class Phase { attaching, head, answering, writing, closing, done };
    using Clock = std::chrono::steady_clock;
    void onGuestEvent(AgentStream::Event&& event);
    // Parses the next request from what the guest sent, or waits for more.
    void nextRequest();
    void answer(GuestRequest request, bool headOnly, bool close);
    void respond(GuestResponse response, std::shared_ptr<UniqueFd> file, bool headOnly,
                 bool close);
    void sendFilePiece();
    void responseSent();
    // Hands bytes to the tunnel; `then` runs on the strand once they left.
    void send(std::string bytes, std::function<void()> then);
    // Our side is done: the guest's close follows (bounded wait).
    void closeGracefully();
    void armTimer(std::chrono::milliseconds after);
    void finish(const std::string& why);

    std::shared_ptr<PackageProxyShared> shared_;
    std::shared_ptr<SandboxPackageAttachment> sandbox_;
    const Ecosystem ecosystem_;
    const std::uint64_t connection_;
    const bool admitted_;
    boost::asio::strand<boost::asio::io_context::executor_type> strand_;
    boost::asio::steady_timer timer_;  // idle, head, response and close deadlines
    AgentPipe pipe_;
    std::deque<AgentStream::Event> early_;  // events that beat the tunnel to the strand
    Phase phase_ = Phase::attaching;
    std::string buffer_;  // what the guest sent and was not read yet (its window bounds it)
    bool idle_ = false;   // waiting between requests, on the idle timeout
    bool guestEof_ = false;
    bool closeAfter_ = false;  // the response in flight is the connection's last
    std::shared_ptr<UniqueFd> file_;
    std::uint64_t fileOffset_ = 0, fileLeft_ = 0;
};

}  // namespace airlock::packages
