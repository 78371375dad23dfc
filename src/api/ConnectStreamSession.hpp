#pragma once
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace airlock::api {

// One server-streaming Connect call (application/connect+json) on a socket
// that has already been read to the end of its request: a 200 head, then
// every message as its own envelope in its own HTTP chunk, written as soon
// as it is produced; an end-of-stream envelope (with an error or not) ends
// it, or the stream is cut without one when its source broke (a killed
// sandbox, as envd's proxy does). Idle streams get keepalive messages. The
// queue is bounded: a client that stops reading is cut, never buffered for.
// push/end/cut may be called from any thread.
class ConnectStreamSession : public std::enable_shared_from_this<ConnectStreamSession> {
  public:
    static constexpr std::size_t kMaxQueuedBytes = 4 * 1024 * 1024;
    using Error = std::pair<std::string, std::string>;  // Connect code, message

    ConnectStreamSession(boost::beast::tcp_stream&& stream, std::chrono::seconds keepalive,
                         std::string keepaliveJson, std::shared_ptr<void> slots);
    // Called once on the session's strand when it is over for any reason
    // (ended, cut, client gone), at once if it is over already: the source
    // stops feeding it. Any thread.
    void onGone(std::function<void()> f);
    // After `within`, the stream ends with deadline_exceeded (a watch's
    // Connect-Timeout-Ms; a process's is its own timeout). Before start.
    void endAfter(std::chrono::milliseconds within) { deadline_ = within; }
    void start();
    // False when the session is over or the message did not fit the queue
    // (then the session is cut).
    bool push(std::string messageJson);
    void end(std::optional<Error> error);
    void cut();

  private:
    void enqueue(std::string bytes);
    void writeNext();
    void readClient();
    void armKeepalive();
    void finish(bool clean);

    boost::beast::tcp_stream stream_;
    std::chrono::seconds keepalive_;
    std::string keepaliveJson_;
    std::shared_ptr<void> slots_;
    std::optional<std::chrono::milliseconds> deadline_;
    boost::asio::steady_timer keepaliveTimer_, deadlineTimer_;
    std::function<void()> onGone_;
    std::deque<std::string> out_;
    std::size_t queuedBytes_ = 0;               // guarded by the strand
    std::atomic<std::size_t> pendingBytes_{0};  // posted but not yet written, from any thread
    bool writing_ = false;
    bool ending_ = false;  // the end envelope is queued: nothing more goes in
    bool over_ = false;
    std::chrono::steady_clock::time_point lastWrite_;
    char readByte_[512];
};

}  // namespace airlock::api
