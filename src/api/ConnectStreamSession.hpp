#pragma once
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agentclient/AgentPipe.hpp"

namespace airlock::api {

// One server-streaming Connect call (application/connect+json) on a socket
// that has already been read to the end of its request: a 200 head, then
// every message as its own envelope in its own HTTP chunk, written as soon
// as it is produced; an end-of-stream envelope (with an error or not) ends
// it, or the stream is cut without one when its source broke (a killed
// sandbox, as envd's proxy does). Idle streams get keepalive messages. The
// messages go out through an AgentPipe (ordered writes, one at a time); a
// message may hold the window of the guest stream it came from, given back
// once it was written, so a client that reads slowly slows the guest. The
// queue is bounded as well: a client that stops reading is cut, never
// buffered for. push/end/cut may be called from any thread.
//
// The same session frames Server-Sent Events (MCP's Streamable HTTP): each
// message a `data:` event, keepalives `: keepalive` comments, and the end
// the end of the body (an error there is the caller's to send first).
class ConnectStreamSession : public std::enable_shared_from_this<ConnectStreamSession> {
  public:
    static constexpr std::size_t kMaxQueuedBytes = 4 * 1024 * 1024;
    using Error = std::pair<std::string, std::string>;  // Connect code, message
    // text: each message as it is, in its own chunk (a followed build log).
    enum class Framing { connect, sse, text };

    ConnectStreamSession(boost::beast::tcp_stream&& stream, std::chrono::seconds keepalive,
                         std::string keepaliveJson, std::shared_ptr<void> slots,
                         boost::asio::thread_pool& workers, Framing framing = Framing::connect,
                         std::string extraHeaders = {});
    // Called once on the session's strand when it is over for any reason
    // (ended, cut, client gone), at once if it is over already: the source
    // stops feeding it. Any thread.
    void onGone(std::function<void()> f);
    // After `within`, the stream ends with deadline_exceeded (a watch's
    // Connect-Timeout-Ms; a process's is its own timeout). Before start.
    void endAfter(std::chrono::milliseconds within) { deadline_ = within; }
    void start();
    // False when the session is over or the message did not fit the queue
    // (then the session is cut). `hold` is released once the message was
    // written or dropped.
    bool push(std::string messageJson, std::shared_ptr<void> hold = nullptr);
    void end(std::optional<Error> error);
    void cut();

  private:
    void enqueue(std::string bytes, std::shared_ptr<void> hold = nullptr);
    void readClient();
    void armKeepalive();
    void finish(bool clean);

    boost::beast::tcp_stream stream_;
    std::chrono::seconds keepalive_;
    std::string keepaliveJson_;
    Framing framing_;
    std::string extraHeaders_;  // "Name: value\r\n" lines of the head
    std::string frame(const std::string& messageJson) const;
    std::shared_ptr<void> slots_;
    std::optional<std::chrono::milliseconds> deadline_;
    boost::asio::steady_timer keepaliveTimer_, deadlineTimer_;
    std::function<void()> onGone_;
    AgentPipe pipe_;
    std::size_t queuedBytes_ = 0;               // guarded by the strand
    std::atomic<std::size_t> pendingBytes_{0};  // posted but not yet queued, from any thread
    bool ending_ = false;  // the end envelope is queued: nothing more goes in
    bool over_ = false;
    std::chrono::steady_clock::time_point lastWrite_;
    char readByte_[512];
};

}  // namespace airlock::api
