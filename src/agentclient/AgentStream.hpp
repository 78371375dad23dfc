#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace airlock {

class AgentConnection;

// The host end of one multiplexed stream. Incoming events either queue for a
// blocking consumer (next()) or go to a push handler (set at open) that must
// not block and that calls grant() once it has consumed data. Either way the
// agent can never send more than the window we granted, so the queue stays
// bounded. Outgoing data (write) waits for the agent's window.
class AgentStream {
  public:
    struct Event {
        enum class Kind { data, control, close, reset } kind = Kind::data;
        std::uint8_t channel = 0;
        std::string payload;  // raw bytes for data, JSON otherwise
    };
    using Handler = std::function<void(Event&&)>;
    using Clock = std::chrono::steady_clock;

    AgentStream(std::uint32_t id, std::weak_ptr<AgentConnection> connection, Handler handler,
                bool autoGrant = false);
    ~AgentStream();

    std::uint32_t id() const { return id_; }

    // Blocking consumption; nullopt at the deadline. Consumed data is
    // granted back to the agent automatically.
    std::optional<Event> next(Clock::time_point deadline);
    // Every data byte until the agent's close (its JSON into closeInfo when
    // given): Error(agent_timeout) at the deadline, Error(payload_too_large)
    // past limit (the stream is reset then), the agent's error on a reset.
    std::string readToClose(std::uint64_t limit, Clock::time_point deadline,
                            std::string* closeInfo = nullptr);
    // Sends data (split into frames), waiting for window until the deadline;
    // throws Error(agent_timeout) or Error(agent_error) when the stream ended.
    void write(std::uint8_t channel, std::string_view bytes, Clock::time_point deadline);
    // Sends data as window arrives without holding the caller; with
    // closeAfter, the close follows the last byte. `sent` (optional) is
    // called once, without locks held: with nullptr once every byte was
    // handed to the connection, or with the error that ended the stream first.
    using Sent = std::function<void(std::exception_ptr)>;
    void writeAsync(std::uint8_t channel, std::string bytes, bool closeAfter, Sent sent = nullptr);
    // Never throw (they run in I/O handlers): false when nothing could be
    // sent because the session is down; the stream's reset says why.
    bool control(const std::string& json) noexcept;
    bool closeWrite() noexcept;
    // Cancels the stream (the agent kills what it started for it).
    void reset(const std::string& code, const std::string& message) noexcept;
    // Push consumers: returns window for bytes they consumed.
    void grant(std::size_t bytes);
    bool finished() const;

    // Called by the connection's thread. False when the agent broke the
    // stream's flow control (more data than its window, or too many
    // undelivered events): the stream is then reset on both sides.
    bool deliver(Event&& event);
    void addSendCredit(std::uint32_t credit);
    // The connection's send queue drained: pending writeAsync bytes go on.
    void pump();
    bool wantsPump() const;

    // Non-data events a blocking consumer may leave unread before the stream
    // is reset (data is bounded by the window instead).
    static constexpr std::size_t kMaxQueuedEvents = 64;
    // Control payloads are small JSON; a bigger one is a breach (a close
    // carries results, such as listings, up to a frame). Control frames arrive at most at a bounded
    // rate (a burst, then a steady refill), so a push consumer's queue stays bounded too.
    static constexpr std::size_t kMaxControlPayload = 16 * 1024;
    static constexpr double kControlBurst = 1000;
    static constexpr double kControlPerSecond = 500;

  private:
    void failFlowControl(const std::string& why);
    // Ends the stream for us and tells the consumer; the caller holds no lock.
    void endWith(Event&& event);

    std::uint32_t id_;
    std::weak_ptr<AgentConnection> connection_;
    Handler handler_;
    bool autoGrant_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Event> queue_;
    std::size_t queuedEvents_ = 0;  // non-data events in queue_
    double controlTokens_ = kControlBurst;
    Clock::time_point controlRefilled_ = Clock::now();
    std::uint64_t sendCredit_;
    std::uint64_t recvCredit_;  // what the agent may still send us
    bool finished_ = false;     // close or reset received (or a flow-control violation)
    bool cancelled_ = false;    // we reset it
    std::string resetPayload_;  // why the agent reset it, for writers
    // writeAsync: writes waiting for window, in order.
    struct PendingWrite {
        std::uint8_t channel = 0;
        std::string data;
        bool closeAfter = false;
        Sent sent;
    };
    std::deque<PendingWrite> pendingOut_;
    // Ends every pending write with `error` (called without the lock).
    void failPending(std::deque<PendingWrite> pending, const std::string& why);
    std::deque<PendingWrite> takePending();  // under mutex_
};

}  // namespace airlock
