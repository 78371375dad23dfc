#include "agentclient/AgentStream.hpp"

#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"
#include "protocol/Frame.hpp"

namespace airlock {
using protocol::FrameType;

AgentStream::AgentStream(std::uint32_t id, std::weak_ptr<AgentConnection> connection, Handler handler)
    : id_(id), connection_(std::move(connection)), handler_(std::move(handler)), sendCredit_(protocol::kInitialWindow) {}

AgentStream::~AgentStream() {
    // Dropped before its end: the agent must stop whatever it runs for us.
    bool needReset;
    {
        std::lock_guard lock(mutex_);
        needReset = !finished_ && !cancelled_;
    }
    if (needReset) {
        try {
            reset("cancelled", "the host dropped the stream");
        } catch (...) {
        }
    }
    if (auto c = connection_.lock()) c->forget(id_);
}

bool AgentStream::finished() const {
    std::lock_guard lock(mutex_);
    return finished_ || cancelled_;
}

void AgentStream::deliver(Event&& event) {
    bool terminal = event.kind == Event::Kind::close || event.kind == Event::Kind::reset;
    if (event.kind == Event::Kind::reset) {
        std::lock_guard lock(mutex_);
        if (!finished_) resetPayload_ = event.payload;
    }
    if (handler_) {
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            if (terminal) finished_ = true;
        }
        cv_.notify_all();
        handler_(std::move(event));
        return;
    }
    {
        std::lock_guard lock(mutex_);
        if (finished_) return;
        if (terminal) finished_ = true;
        queue_.push_back(std::move(event));
    }
    cv_.notify_all();
}

void AgentStream::addSendCredit(std::uint32_t credit) {
    {
        std::lock_guard lock(mutex_);
        sendCredit_ += credit;
    }
    cv_.notify_all();
}

std::optional<AgentStream::Event> AgentStream::next(Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_until(lock, deadline, [&] { return !queue_.empty(); })) return std::nullopt;
    Event e = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    if (e.kind == Event::Kind::data) grant(e.payload.size());
    return e;
}

void AgentStream::grant(std::size_t bytes) {
    if (bytes == 0) return;
    {
        std::lock_guard lock(mutex_);
        if (finished_ || cancelled_) return;
    }
    // Called from I/O handlers: a connection that just failed must not throw
    // out of them (its reader fails the stream on its own).
    try {
        if (auto c = connection_.lock())
            c->sendFrame(FrameType::window, id_, protocol::encodeWindowPayload(static_cast<std::uint32_t>(bytes)));
    } catch (const std::exception&) {
    }
}

void AgentStream::write(std::uint8_t channel, std::string_view bytes, Clock::time_point deadline) {
    while (!bytes.empty()) {
        std::size_t n;
        {
            std::unique_lock lock(mutex_);
            bool ready = cv_.wait_until(lock, deadline, [&] { return sendCredit_ > 0 || finished_ || cancelled_; });
            if (!resetPayload_.empty()) {
                auto info = protocol::parseResetInfo(resetPayload_);
                throw agentError(info.code, info.message);
            }
            if (finished_ || cancelled_) throw Error(ErrorCode::agent_error, "the stream ended before all data was sent");
            if (!ready) throw Error(ErrorCode::agent_timeout, "the agent stopped accepting data");
            n = std::min<std::size_t>({bytes.size(), static_cast<std::size_t>(sendCredit_), protocol::kMaxPayload});
            sendCredit_ -= n;
        }
        auto c = connection_.lock();
        if (!c) throw Error(ErrorCode::agent_error, "agent connection closed");
        c->sendFrame(FrameType::data, id_, std::string(bytes.substr(0, n)), channel);
        bytes.remove_prefix(n);
    }
}

void AgentStream::control(const std::string& json) {
    if (auto c = connection_.lock()) c->sendFrame(FrameType::control, id_, json);
}

void AgentStream::closeWrite() {
    if (auto c = connection_.lock()) c->sendFrame(FrameType::close, id_, "{}");
}

void AgentStream::reset(const std::string& code, const std::string& message) {
    {
        std::lock_guard lock(mutex_);
        if (finished_ || cancelled_) return;
        cancelled_ = true;
    }
    cv_.notify_all();
    if (auto c = connection_.lock())
        c->sendFrame(FrameType::reset, id_, protocol::toJson(protocol::ResetInfo{code, message}));
}

}  // namespace airlock
