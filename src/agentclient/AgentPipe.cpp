#include "agentclient/AgentPipe.hpp"

#include <boost/asio/post.hpp>
#include <utility>

#include "core/Error.hpp"

namespace airlock {
namespace asio = boost::asio;

AgentPipe::AgentPipe(asio::any_io_executor strand, asio::thread_pool& workers)
    : strand_(std::move(strand)), workers_(workers), idleTimer_(strand_) {}

void AgentPipe::deliver(std::shared_ptr<void> owner, AgentStream::Event&& e) {
    // The owner keeps this pipe (one of its members) alive until the event
    // was delivered on the strand.
    asio::post(strand_, [this, owner = std::move(owner), e = std::move(e)]() mutable {
        if (finished_) return;
        touch();
        if (onEvent_) onEvent_(std::move(e));
    });
}

AgentStream::Handler AgentPipe::handler(std::shared_ptr<void> owner) {
    if (weakOwner_) {
        return [this, weak = std::weak_ptr<void>(owner)](AgentStream::Event&& e) {
            // Gone: so is this pipe.
            if (auto held = weak.lock()) deliver(std::move(held), std::move(e));
        };
    }
    return [this, owner](AgentStream::Event&& e) { deliver(owner, std::move(e)); };
}

void AgentPipe::open(std::shared_ptr<void> owner, Opener opener,
                     std::function<void(std::exception_ptr)> opened) {
    asio::post(workers_,
               [this, owner, opener = std::move(opener), opened = std::move(opened)]() mutable {
                   std::shared_ptr<AgentStream> stream;
                   std::exception_ptr error;
                   try {
                       stream = opener(handler(owner));
                       if (!stream) throw Error(ErrorCode::internal, "no agent stream was opened");
                   } catch (...) {
                       error = std::current_exception();
                   }
                   asio::post(strand_, [this, owner, stream, error, opened = std::move(opened)] {
                       // Ended meanwhile: nothing is answered after finish().
                       if (finished_) return attach(stream);
                       if (error) return opened(error);
                       attach(stream);
                       opened(nullptr);
                   });
               });
}

void AgentPipe::attach(std::shared_ptr<AgentStream> stream) {
    if (finished_) {
        if (stream) stream->reset("cancelled", "the connection ended first");
        return;
    }
    stream_ = std::move(stream);
    if (stream_ && ungranted_) stream_->grant(std::exchange(ungranted_, 0));
}

void AgentPipe::consumed(std::size_t bytes) {
    if (bytes) touch();
    ungranted_ += bytes;
    if (stream_ && ungranted_) stream_->grant(std::exchange(ungranted_, 0));
}

void AgentPipe::send(std::shared_ptr<void> owner, Chunk chunk) {
    if (finished_) return;
    queue_.push_back(std::move(chunk));
    pump(std::move(owner));
}

void AgentPipe::sendFirst(std::shared_ptr<void> owner, Chunk chunk) {
    if (finished_) return;
    queue_.push_front(std::move(chunk));  // the one being written is not in the queue
    pump(std::move(owner));
}

void AgentPipe::discardQueued() {
    std::size_t credit = 0;
    for (const auto& chunk : queue_) credit += chunk.credit;
    queue_.clear();
    consumed(credit);
}

void AgentPipe::pump(std::shared_ptr<void> owner) {
    if (writing_ || finished_ || queue_.empty() || !writer_) return;
    if (queue_.front().end) {
        queue_.clear();
        if (onEnd_) onEnd_();
        return;
    }
    // Out of the queue while it is written: the writer reads it until done,
    // whatever is queued, put first or dropped meanwhile.
    current_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    writer_(*current_, [this, owner](bool ok) {
        writing_ = false;
        // Written or failed, the writer is done with it: what it holds goes
        // now, on the strand.
        std::size_t credit = current_ ? current_->credit : 0;
        current_.reset();
        if (finished_) return;
        if (!ok) return finish();
        touch();
        consumed(credit);
        pump(owner);
    });
}

void AgentPipe::idleAfter(std::shared_ptr<void> owner, std::chrono::milliseconds after,
                          std::function<void()> onIdle) {
    if (finished_ || after.count() <= 0) return;
    idleAfter_ = after;
    onIdle_ = std::move(onIdle);
    touch();
    armIdle(std::move(owner), after);
}

void AgentPipe::armIdle(std::shared_ptr<void> owner, std::chrono::milliseconds wait) {
    idleTimer_.expires_after(wait);
    // The timer holds its session until finish() cancels it or it fires:
    // a bridge that asked for an idle timeout lives until it ends, even
    // when nothing else of it is pending (egress between two reads).
    idleTimer_.async_wait([this, owner = std::move(owner)](boost::system::error_code ec) {
        if (ec || finished_) return;
        auto quiet = std::chrono::steady_clock::now() - lastActivity_;
        if (quiet < idleAfter_)  // something moved meanwhile: wait for the rest
            return armIdle(owner, std::chrono::ceil<std::chrono::milliseconds>(idleAfter_ - quiet));
        if (onIdle_) onIdle_();
    });
}

void AgentPipe::finish() {
    if (finished_) return;
    finished_ = true;
    idleTimer_.cancel();  // releases the owner it holds
    // A write in flight still reads its chunk (current_): it stays.
    queue_.clear();
    // The callbacks stay (finish() may run inside one); finished_ mutes them.
    stream_.reset();  // breaks the handler's cycle; a live stream is cancelled
}

}  // namespace airlock
