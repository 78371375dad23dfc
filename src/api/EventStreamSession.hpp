#pragma once
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/EventFeed.hpp"
#include "api/StreamContext.hpp"
#include "store/AuditStore.hpp"

namespace airlock::api {

// GET /v1/events: the audit log of the caller's tenant (every tenant's for an
// admin) as Server-Sent Events, from a cursor (Last-Event-ID: an event's
// seq) on. One batch is read at a time, on a worker, and written before the
// next is read: a slow client holds one batch, never a queue. The feed wakes
// the stream when the log grows; a comment every kKeepalive keeps proxies
// from closing it and re-checks that the caller may still read it (a revoked
// key or session ends the stream).
class EventStreamSession : public std::enable_shared_from_this<EventStreamSession> {
  public:
    static constexpr int kBatch = 200;
    static constexpr std::chrono::seconds kKeepalive{15};
    struct Source {
        // The events after a seq (a worker calls it).
        std::function<std::vector<AuditEvent>(std::int64_t after, int limit)> read;
        // The newest seq: where a stream with no cursor starts.
        std::function<std::int64_t()> head;
        // Whether the caller may still read (its key and session live).
        std::function<bool()> allowed;
    };
    // cursor: the last seq the client has, or nullopt for "from now on".
    EventStreamSession(boost::beast::tcp_stream&& stream, StreamContext context, EventFeed& feed,
                       Source source, std::optional<std::int64_t> cursor);
    void start();
    // One event as the stream writes it.
    static std::string render(const AuditEvent& e);

  private:
    void fetch();
    void onBatch(bool allowed, std::vector<AuditEvent> events);
    void write(std::string text, bool more);
    void wait();
    void wake();
    void watchClient();
    void finish();

    boost::beast::tcp_stream stream_;
    StreamContext ctx_;
    EventFeed& feed_;
    Source source_;
    std::optional<std::int64_t> cursor_;
    std::shared_ptr<void> subscription_;
    boost::asio::steady_timer keepalive_;
    std::string out_;
    std::array<char, 512> clientBytes_{};
    bool fetching_ = false, waiting_ = false, woken_ = false, ended_ = false;
};

}  // namespace airlock::api
