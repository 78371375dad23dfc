#pragma once
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agentclient/AgentStream.hpp"

namespace airlock {

// The agent's side of one bridge between an agent stream and a socket (a
// download, an upload, a preview, a WebSocket exec, an egress connection).
// It owns what every bridge needs and none may get wrong on its own:
//   - the start: the stream is opened on a worker (opening may connect to
//     the agent, never on the I/O thread) and attached on the connection's
//     strand; events that beat the attachment wait for nothing;
//   - the guest's events, delivered on the strand until finish();
//   - the outbound queue: chunks of the guest's output written to the
//     socket one at a time, in order, by the session's writer; the window a
//     chunk took goes back to the agent only once it was written, so a slow
//     client slows the guest, not our memory (the queue is bounded by the
//     window the agent may use);
//   - bytes of another stream: a chunk may hold that stream's window
//     (Chunk::hold), given back once written or dropped;
//   - the idle timeout: a bridge where nothing moved for a while (no event
//     from the guest, no byte written to or read from the socket) is ended
//     by its session, so a guest or client that goes silent holds nothing;
//   - one finish(): the stream is dropped (cancelled when live), the idle
//     timer stopped and the reference cycle through its handler broken.
// A member of its session; everything but open()'s work runs on the strand.
// The session passes itself as `owner` to keep itself alive in callbacks.
class AgentPipe {
  public:
    using Opener = std::function<std::shared_ptr<AgentStream>(AgentStream::Handler)>;
    using EventHandler = std::function<void(AgentStream::Event&&)>;
    // A piece of the guest's output on its way, or the end marker.
    struct Chunk {
        std::string bytes;
        std::size_t credit = 0;  // window returned once written
        bool text = false;       // a WebSocket text message
        bool end = false;        // nothing follows: onEnd runs when it is reached
        // Kept until the chunk was written or dropped: the window of another
        // stream whose bytes it carries (an E2B process's output fanned out
        // to its watchers goes back to the guest once every watcher wrote it).
        std::shared_ptr<void> hold;
    };
    // Writes one chunk and calls done(ok) on the strand.
    using Writer = std::function<void(const Chunk& chunk, std::function<void(bool ok)> done)>;

    AgentPipe(boost::asio::any_io_executor strand, boost::asio::thread_pool& workers);

    // Where the guest's events go (on the strand, until finish()).
    void onEvent(EventHandler handler) { onEvent_ = std::move(handler); }
    // The stream's handler keeps its owner alive only while an event is on
    // its way: for a session that its own work keeps alive (egress: its
    // timers), so that one that never finishes is not held by its stream.
    void holdOwnerWeakly() { weakOwner_ = true; }
    // A handler for a stream the session opens itself: each event is posted
    // to the strand.
    AgentStream::Handler handler(std::shared_ptr<void> owner);
    // Opens with `opener` on a worker, then on the strand attaches the
    // stream and calls opened(nullptr), or opened(the error) when it failed
    // (what the opener threw, for the session's one error mapping).
    void open(std::shared_ptr<void> owner, Opener opener,
              std::function<void(std::exception_ptr error)> opened);
    // Takes a stream opened elsewhere; a finished pipe cancels it at once.
    void attach(std::shared_ptr<AgentStream> stream);
    AgentStream* stream() const { return stream_.get(); }

    // The outbound queue. Chunks wait while no writer is set (a socket not
    // connected yet); flush() starts them once one is.
    void setWriter(Writer writer) { writer_ = std::move(writer); }
    void onEnd(std::function<void()> onEnd) { onEnd_ = std::move(onEnd); }
    void send(std::shared_ptr<void> owner, Chunk chunk);
    // Before every chunk not yet being written (bytes the session made
    // itself, like a request head that must go first).
    void sendFirst(std::shared_ptr<void> owner, Chunk chunk);
    void flush(std::shared_ptr<void> owner) { pump(std::move(owner)); }
    // Drops the chunks not yet being written; their window goes back to the
    // agent (bytes that will never be sent).
    void discardQueued();
    bool writing() const { return writing_; }
    bool queued() const { return !queue_.empty(); }
    // Window for bytes the session consumed itself (held until attached).
    void consumed(std::size_t bytes);

    // Calls onIdle (on the strand) once nothing moved for `after`: no event
    // from the guest, no chunk written, no window returned, no touch(). The
    // session then answers or closes, and finishes. For bridges where
    // silence is not a legitimate state (a file download, an egress
    // connection); a command's output or a preview may rest for long.
    void idleAfter(std::shared_ptr<void> owner, std::chrono::milliseconds after,
                   std::function<void()> onIdle);
    // Activity the pipe cannot see: bytes the session read from its socket.
    void touch() { lastActivity_ = std::chrono::steady_clock::now(); }

    // Ends the bridge: queued chunks go, the stream is dropped (a live one
    // is cancelled) and no event is delivered after. Idempotent.
    void finish();
    bool finished() const { return finished_; }

  private:
    void deliver(std::shared_ptr<void> owner, AgentStream::Event&& e);
    void pump(std::shared_ptr<void> owner);
    void armIdle(std::shared_ptr<void> owner, std::chrono::milliseconds wait);

    boost::asio::any_io_executor strand_;
    boost::asio::thread_pool& workers_;
    EventHandler onEvent_;
    std::shared_ptr<AgentStream> stream_;
    std::deque<Chunk> queue_;       // not yet being written
    std::optional<Chunk> current_;  // being written (the writer reads it until done)
    Writer writer_;
    std::function<void()> onEnd_;
    bool writing_ = false;
    bool finished_ = false;
    bool weakOwner_ = false;
    std::size_t ungranted_ = 0;
    boost::asio::steady_timer idleTimer_;
    std::chrono::milliseconds idleAfter_{0};
    std::function<void()> onIdle_;
    std::chrono::steady_clock::time_point lastActivity_ = std::chrono::steady_clock::now();
};

}  // namespace airlock
