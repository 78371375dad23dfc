#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
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

    AgentStream(std::uint32_t id, std::weak_ptr<AgentConnection> connection, Handler handler);
    ~AgentStream();

    std::uint32_t id() const { return id_; }

    // Blocking consumption; nullopt at the deadline. Consumed data is
    // granted back to the agent automatically.
    std::optional<Event> next(Clock::time_point deadline);
    // Sends data (split into frames), waiting for window until the deadline;
    // throws Error(agent_timeout) or Error(agent_error) when the stream ended.
    void write(std::uint8_t channel, std::string_view bytes, Clock::time_point deadline);
    void control(const std::string& json);
    void closeWrite();
    // Cancels the stream (the agent kills what it started for it).
    void reset(const std::string& code, const std::string& message);
    // Push consumers: returns window for bytes they consumed.
    void grant(std::size_t bytes);
    bool finished() const;

    // Called by the connection's reader thread.
    void deliver(Event&& event);
    void addSendCredit(std::uint32_t credit);

private:
    std::uint32_t id_;
    std::weak_ptr<AgentConnection> connection_;
    Handler handler_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Event> queue_;
    std::uint64_t sendCredit_;
    bool finished_ = false;   // close or reset received
    bool cancelled_ = false;  // we reset it
    std::string resetPayload_;  // why the agent reset it, for writers
};

}  // namespace airlock
