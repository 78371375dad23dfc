#include "agentclient/AgentStream.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"
#include "protocol/Frame.hpp"

namespace airlock {
using protocol::FrameType;

AgentStream::AgentStream(std::uint32_t id, std::weak_ptr<AgentConnection> connection,
                         Handler handler, bool autoGrant)
    : id_(id),
      connection_(std::move(connection)),
      handler_(std::move(handler)),
      autoGrant_(autoGrant && handler_),
      sendCredit_(protocol::kInitialWindow),
      recvCredit_(protocol::kInitialWindow) {}

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

void AgentStream::endWith(Event&& event) {
    if (handler_) {
        cv_.notify_all();
        try {
            handler_(std::move(event));
        } catch (...) {
            // A consumer's failure ends its own stream, never the connection.
        }
        return;
    }
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(event));
    }
    cv_.notify_all();
}

void AgentStream::failFlowControl(const std::string& why) {
    std::string payload = protocol::toJson(protocol::ResetInfo{"flow_control", why});
    std::deque<PendingWrite> pending;
    {
        std::lock_guard lock(mutex_);
        if (finished_) return;
        finished_ = true;
        resetPayload_ = payload;
        pending = takePending();
    }
    failPending(std::move(pending), why);
    if (auto c = connection_.lock()) {
        try {
            c->sendFrame(FrameType::reset, id_, payload);
        } catch (const std::exception&) {
        }
    }
    endWith({Event::Kind::reset, 0, payload});
}

bool AgentStream::deliver(Event&& event) {
    bool terminal = event.kind == Event::Kind::close || event.kind == Event::Kind::reset;
    std::string violation;
    std::deque<PendingWrite> pending;
    {
        std::lock_guard lock(mutex_);
        if (finished_) return true;  // stragglers after our end
        if (event.kind == Event::Kind::data) {
            // The host enforces its own window: a guest that sends more than
            // it was granted cannot make us buffer it.
            if (event.payload.size() > recvCredit_)
                violation = "the agent sent " + std::to_string(event.payload.size()) +
                            " bytes with a window of " + std::to_string(recvCredit_);
            else
                recvCredit_ -= event.payload.size();
        } else if (event.kind == Event::Kind::control &&
                   event.payload.size() > kMaxControlPayload) {
            violation = "the agent sent a " + std::to_string(event.payload.size()) +
                        "-byte control payload";
        } else if (!handler_ && !terminal && queuedEvents_ >= kMaxQueuedEvents) {
            violation = "the agent sent more control frames than the host reads";
        } else if (event.kind == Event::Kind::control) {
            auto now = Clock::now();
            controlTokens_ = std::min(
                kControlBurst,
                controlTokens_ + kControlPerSecond *
                                     std::chrono::duration<double>(now - controlRefilled_).count());
            controlRefilled_ = now;
            if (controlTokens_ < 1)
                violation = "the agent sent control frames faster than the host allows";
            else
                controlTokens_ -= 1;
        }
        if (violation.empty()) {
            if (event.kind == Event::Kind::reset) resetPayload_ = event.payload;
            if (terminal) {
                finished_ = true;
                pending = takePending();
            }
            if (!handler_) {
                if (event.kind != Event::Kind::data) ++queuedEvents_;
                queue_.push_back(std::move(event));
            }
        }
    }
    if (!violation.empty()) {
        failFlowControl(violation);
        return false;
    }
    failPending(std::move(pending), "the stream ended before all data was sent");
    cv_.notify_all();
    if (handler_) {
        std::size_t consumed = event.kind == Event::Kind::data ? event.payload.size() : 0;
        try {
            handler_(std::move(event));
            if (autoGrant_) grant(consumed);
        } catch (...) {
            // The handler's own failure must not end the connection: reset
            // this stream only.
            try {
                reset("internal", "the host failed to handle the stream");
            } catch (...) {
            }
        }
    }
    return true;
}

void AgentStream::addSendCredit(std::uint32_t credit) {
    {
        std::lock_guard lock(mutex_);
        sendCredit_ += credit;
    }
    cv_.notify_all();
    pump();
}

std::optional<AgentStream::Event> AgentStream::next(Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_until(lock, deadline, [&] { return !queue_.empty(); })) return std::nullopt;
    Event e = std::move(queue_.front());
    queue_.pop_front();
    if (e.kind != Event::Kind::data && queuedEvents_ > 0) --queuedEvents_;
    lock.unlock();
    if (e.kind == Event::Kind::data) grant(e.payload.size());
    return e;
}

void AgentStream::grant(std::size_t bytes) {
    if (bytes == 0) return;
    {
        std::lock_guard lock(mutex_);
        if (finished_ || cancelled_) return;
        recvCredit_ += bytes;
    }
    // Called from I/O handlers: a connection that just failed must not throw
    // out of them (its thread fails the stream on its own).
    try {
        if (auto c = connection_.lock())
            c->sendFrame(FrameType::window, id_,
                         protocol::encodeWindowPayload(static_cast<std::uint32_t>(bytes)));
    } catch (const std::exception&) {
    }
}

void AgentStream::write(std::uint8_t channel, std::string_view bytes, Clock::time_point deadline) {
    while (!bytes.empty()) {
        std::size_t n;
        {
            std::unique_lock lock(mutex_);
            bool ready = cv_.wait_until(lock, deadline,
                                        [&] { return sendCredit_ > 0 || finished_ || cancelled_; });
            if (!resetPayload_.empty()) {
                auto info = protocol::parseResetInfo(resetPayload_);
                throw agentError(info.code, info.message);
            }
            if (finished_ || cancelled_)
                throw Error(ErrorCode::agent_error, "the stream ended before all data was sent");
            if (!ready) throw Error(ErrorCode::agent_timeout, "the agent stopped accepting data");
            n = std::min<std::size_t>(
                {bytes.size(), static_cast<std::size_t>(sendCredit_), protocol::kMaxPayload});
            sendCredit_ -= n;
        }
        auto c = connection_.lock();
        if (!c) throw Error(ErrorCode::agent_error, "agent connection closed");
        c->sendData(id_, bytes.substr(0, n), channel, deadline);
        bytes.remove_prefix(n);
    }
}

void AgentStream::writeAsync(std::uint8_t channel, std::string bytes, bool closeAfter, Sent sent) {
    {
        std::lock_guard lock(mutex_);
        if (!finished_ && !cancelled_) {
            pendingOut_.push_back(
                PendingWrite{channel, std::move(bytes), closeAfter, std::move(sent)});
            sent = nullptr;
        }
    }
    if (sent) {
        sent(std::make_exception_ptr(Error(ErrorCode::agent_error, "the stream already ended")));
        return;
    }
    pump();
}

bool AgentStream::wantsPump() const {
    std::lock_guard lock(mutex_);
    return !pendingOut_.empty();
}

std::deque<AgentStream::PendingWrite> AgentStream::takePending() {
    std::deque<PendingWrite> out;
    out.swap(pendingOut_);
    return out;
}

void AgentStream::failPending(std::deque<PendingWrite> pending, const std::string& why) {
    for (auto& w : pending) {
        if (!w.sent) continue;
        try {
            w.sent(std::make_exception_ptr(Error(ErrorCode::agent_error, why)));
        } catch (...) {
        }
    }
}

void AgentStream::pump() {
    auto c = connection_.lock();
    if (!c) return;
    std::vector<Sent> done;
    std::deque<PendingWrite> failed;
    std::string failure;
    {
        // Under the stream's lock, so chunks leave in order whoever pumps (the
        // connection never calls into a stream while holding its queue lock).
        std::lock_guard lock(mutex_);
        if (finished_ || cancelled_) {
            failed = takePending();
            failure = "the stream ended before all data was sent";
        } else {
            try {
                while (!pendingOut_.empty()) {
                    auto& w = pendingOut_.front();
                    while (!w.data.empty() && sendCredit_ > 0) {
                        std::size_t n = std::min<std::size_t>(
                            {w.data.size(), static_cast<std::size_t>(sendCredit_),
                             protocol::kMaxPayload});
                        if (!c->trySendData(id_, std::string_view(w.data).substr(0, n), w.channel))
                            break;
                        sendCredit_ -= n;
                        w.data.erase(0, n);
                    }
                    if (!w.data.empty()) break;  // waiting for window or queue room
                    if (w.closeAfter) c->sendFrame(FrameType::close, id_, "{}");
                    if (w.sent) done.push_back(std::move(w.sent));
                    pendingOut_.pop_front();
                }
            } catch (const std::exception& e) {
                failed = takePending();  // the session is down; its streams fail on their own
                failure = e.what();
            }
        }
    }
    for (auto& sent : done) {
        try {
            sent(nullptr);
        } catch (...) {
        }
    }
    failPending(std::move(failed), failure);
}

// Called from I/O handlers: a session that is down (or a guest that stopped
// reading) must not throw out of them; the stream's reset tells its consumer.
bool AgentStream::control(const std::string& json) noexcept {
    try {
        if (auto c = connection_.lock()) {
            c->sendFrame(FrameType::control, id_, json);
            return true;
        }
    } catch (...) {
    }
    return false;
}

bool AgentStream::closeWrite() noexcept {
    try {
        if (auto c = connection_.lock()) {
            c->sendFrame(FrameType::close, id_, "{}");
            return true;
        }
    } catch (...) {
    }
    return false;
}

void AgentStream::reset(const std::string& code, const std::string& message) noexcept {
    std::deque<PendingWrite> pending;
    {
        std::lock_guard lock(mutex_);
        if (finished_ || cancelled_) return;
        cancelled_ = true;
        pending = takePending();
    }
    failPending(std::move(pending), "the stream was cancelled: " + message);
    cv_.notify_all();
    try {
        if (auto c = connection_.lock())
            c->sendFrame(FrameType::reset, id_,
                         protocol::toJson(protocol::ResetInfo{code, message}));
    } catch (...) {
        // The session is down: the agent drops the stream with it.
    }
}

std::string AgentStream::readToClose(std::uint64_t limit, Clock::time_point deadline,
                                     std::string* closeInfo) {
    std::string out;
    while (true) {
        auto ev = next(deadline);
        if (!ev) {
            reset("timeout", "no answer in time");
            throw Error(ErrorCode::agent_timeout, "the guest did not answer in time");
        }
        if (ev->kind == Event::Kind::data) {
            if (out.size() + ev->payload.size() > limit) {
                reset("too_large", "more than the host takes");
                throw Error(ErrorCode::payload_too_large,
                            "the guest sent more than " + std::to_string(limit) + " bytes");
            }
            out += ev->payload;
        } else if (ev->kind == Event::Kind::close) {
            if (closeInfo) *closeInfo = ev->payload;
            return out;
        } else if (ev->kind == Event::Kind::reset) {
            auto info = protocol::parseResetInfo(ev->payload);
            throw agentError(info.code, info.message);
        }
    }
}

}  // namespace airlock
