#include "controller/TerminalLines.hpp"

#include <boost/asio/post.hpp>

#include "core/Log.hpp"

namespace airlock {

std::shared_ptr<TerminalLines> TerminalLines::open(SandboxCommands& commands,
                                                   boost::asio::thread_pool& workers,
                                                   Terminal terminal, Send send, Held held) {
    return std::shared_ptr<TerminalLines>(new TerminalLines(
        commands, workers, std::move(terminal), std::move(send), std::move(held)));
}

void TerminalLines::onLine(protocol::LineToJudge line) {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    if (judging_ != 0) {
        // The shell asks again only once it gave up on its line (^C): that
        // one is withdrawn (now if it is held, else when its "pending" comes)
        // and its decision will find nobody.
        judging_ = 0;
        if (!gate_.empty()) withdraw(std::exchange(gate_, ""));
        if (delayed_) commands_.timers().cancel(std::exchange(delayed_, 0));
    }
    judging_ = line.id;
    auto now = std::chrono::steady_clock::now();
    tokens_ = std::min(kLineBurst, tokens_ + kLinesPerSecond *
                                                 std::chrono::duration<double>(now - refilled_).count());
    refilled_ = now;
    tokens_ -= 1;
    std::weak_ptr<TerminalLines> weak = weak_from_this();
    auto run = [weak, line = std::move(line)]() mutable {
        if (auto self = weak.lock()) self->judge(std::move(line));
    };
    if (tokens_ >= 0) return boost::asio::post(workers_, std::move(run));
    auto wait = std::chrono::duration<double>(-tokens_ / kLinesPerSecond);
    delayed_ = commands_.timers().schedule(
        now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(wait),
        [this, weak, run = std::move(run)]() mutable {
            if (auto self = weak.lock()) boost::asio::post(workers_, std::move(run));
        });
}

void TerminalLines::judge(protocol::LineToJudge line) {
    LineDecision now;
    try {
        std::weak_ptr<TerminalLines> weak = weak_from_this();
        now = commands_.judgeLine(terminal_.tenant, terminal_.sandboxId, terminal_.options,
                                  terminal_.execId, line.line,
                                  [weak, id = line.id](const LineDecision& later) {
                                      if (auto self = weak.lock()) self->answer(id, later);
                                  });
    } catch (const Error& e) {
        now = {"deny", e.what(), "", ""};
    } catch (const std::exception& e) {
        now = {"deny", std::string("the line could not be judged: ") + e.what(), "", ""};
    }
    answer(line.id, now);
}

void TerminalLines::answer(std::uint32_t id, const LineDecision& decision) {
    std::lock_guard lock(mutex_);
    if (closed_ || id != judging_) {
        // Nobody waits for this line: the terminal went or the shell gave up
        // on it, so a held one is withdrawn; or it was decided before its
        // "pending" got here, and withdrawing a decided gate does nothing.
        if (decision.state == "pending") withdraw(decision.lineId);
        return;
    }
    if (decision.state == "pending") {
        gate_ = decision.lineId;
        if (held_) held_(decision);
    } else {
        judging_ = 0;
        if (!gate_.empty() && held_) held_(decision);
        gate_.clear();
    }
    // Bounded for the frame: a cut inside a character is made whole by the encoder.
    send_(protocol::LineVerdict{id, decision.state,
                                decision.message.substr(0, protocol::kMaxVerdictMessage - 24)});
}

void TerminalLines::close() {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    if (delayed_) commands_.timers().cancel(delayed_);
    // Nobody waits for the held line now: its approval is withdrawn.
    if (!gate_.empty()) withdraw(std::exchange(gate_, ""));
}

void TerminalLines::withdraw(std::string gate) {
    boost::asio::post(workers_, [&commands = commands_, gate = std::move(gate)] {
        try {
            commands.abandonLine(gate);
        } catch (const std::exception& e) {
            logWarn("controller", std::string("withdrawing a terminal's line: ") + e.what());
        }
    });
}

}  // namespace airlock
