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
    if (judging_ != 0 && gate_.empty()) {
        send_(protocol::LineVerdict{line.id, "deny", "one line at a time"});
        return;
    }
    if (judging_ != 0) {
        // The shell gave up on its held line (^C) and asks about the next:
        // the held one is withdrawn, and its decision will find nobody.
        answered_ = std::exchange(judging_, 0);
        boost::asio::post(workers_, [&commands = commands_, gate = std::exchange(gate_, "")] {
            try {
                commands.abandonLine(gate);
            } catch (const std::exception& e) {
                logWarn("controller", std::string("withdrawing a terminal's line: ") + e.what());
            }
        });
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
    // Decided before its "pending" got here, or the terminal is gone.
    if (closed_ || id != judging_ || id == answered_) return;
    if (decision.state == "pending") {
        gate_ = decision.lineId;
        if (held_) held_(decision);
    } else {
        answered_ = id;
        judging_ = 0;
        if (!gate_.empty() && held_) held_(decision);
        gate_.clear();
    }
    // Bounded for the frame: a cut inside a character is made whole by the encoder.
    send_(protocol::LineVerdict{id, decision.state,
                                decision.message.substr(0, protocol::kMaxVerdictMessage - 24)});
}

void TerminalLines::close() {
    std::string gate;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        if (delayed_) commands_.timers().cancel(delayed_);
        gate = std::move(gate_);
    }
    // Nobody waits for the held line now: its approval is withdrawn.
    if (!gate.empty())
        boost::asio::post(workers_, [&commands = commands_, gate] {
            try {
                commands.abandonLine(gate);
            } catch (const std::exception& e) {
                logWarn("controller", std::string("withdrawing a terminal's line: ") + e.what());
            }
        });
}

}  // namespace airlock
