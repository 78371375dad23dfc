#include "api/WsExecSession.hpp"

#include <boost/asio/post.hpp>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "controller/GuestAnswers.hpp"
#include "core/Log.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/ControlFrames.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace asio = boost::asio;
using nlohmann::json;
using Kind = AgentStream::Event::Kind;

WsExecSession::WsExecSession(beast::tcp_stream&& stream, http::request<http::empty_body>&& upgrade,
                             StreamContext context)
    : ws_(std::move(stream)),
      upgrade_(std::move(upgrade)),
      ctx_(std::move(context)),
      pipe_(ws_.get_executor(), ctx_.workers) {
    pipe_.onEvent([this](AgentStream::Event&& e) { onAgentEvent(std::move(e)); });
    pipe_.setWriter([this](const AgentPipe::Chunk& c, std::function<void(bool)> done) {
        ws_.text(c.text);
        ws_.async_write(asio::buffer(c.bytes),
                        [this, done = std::move(done)](beast::error_code ec, std::size_t) {
                            if (ec) finish();
                            done(!ec);
                        });
    });
    pipe_.onEnd([this] {
        phase_ = Phase::ended;
        releaseExec();
        pipe_.finish();
        ws_.async_close(websocket::close_code::normal,
                        [self = shared_from_this()](beast::error_code) {});
    });
}

void WsExecSession::start() {
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.read_message_max(protocol::kInitialWindow);
    ws_.async_accept(upgrade_,
                     [self = shared_from_this()](beast::error_code ec) { self->onAccepted(ec); });
}

void WsExecSession::onAccepted(beast::error_code ec) {
    if (ec) return;
    ws_.async_read(in_, [self = shared_from_this()](beast::error_code e, std::size_t) {
        self->onStartMessage(e);
    });
}

AgentStream::Handler WsExecSession::agentHandler() { return pipe_.handler(shared_from_this()); }

void WsExecSession::onStartMessage(beast::error_code ec) {
    if (ec) return;
    std::string body = beast::buffers_to_string(in_.data());
    in_.consume(in_.size());
    phase_ = Phase::opening;
    asio::post(ctx_.workers, [self = shared_from_this(), body] {
        SandboxCommands::StreamedExec started;
        std::string code, message;
        try {
            self->options_ = parseExecStart(body, self->terminal_);
            self->options_.caller = callerName(self->ctx_.principal);
            self->terminal_.judgeLines = true;  // this door answers the shell's lines
            std::weak_ptr<WsExecSession> weak = self;
            started = self->ctx_.sandboxes.commands.openStreamed(
                self->ctx_.tenant, self->ctx_.params[0], self->options_, self->terminal_,
                self->agentHandler(), [weak](const GatedExec& g) {
                    if (auto s = weak.lock())
                        asio::post(s->ws_.get_executor(), [s, g] { s->onDecision(g); });
                });
        } catch (const Error& e) {
            code = std::string(errorCodeName(e.code()));
            message = e.what();
        }
        asio::post(self->ws_.get_executor(), [self, started, code, message] {
            if (started.pending) {
                self->execId_ = started.pending->id;
                if (self->phase_ == Phase::ended) return self->releaseExec();
                self->phase_ = Phase::awaitingDecision;
                self->queue(true, json{{"type", "pending_approval"},
                                       {"exec_id", started.pending->id},
                                       {"approval_id", started.pending->approvalId},
                                       {"class", started.pending->commandClass},
                                       {"reason", started.pending->reason}}
                                      .dump());
                // A decision may have beaten this handler to the strand.
                if (self->earlyDecision_) {
                    auto early = *std::exchange(self->earlyDecision_, std::nullopt);
                    self->readClient();
                    return self->onDecision(early);
                }
                return self->readClient();
            }
            if (!started.stream) return self->sendErrorAndClose(code, message);
            self->commandExecId_ = started.execId;
            self->attachStream(started.stream);
            self->readClient();
        });
    });
}

void WsExecSession::attachStream(std::shared_ptr<AgentStream> agent) {
    streamAttached_ = true;
    judgeLines();
    if (!over()) phase_ = Phase::running;
    pipe_.attach(std::move(agent));  // after finish(): cancelled at once
}

void WsExecSession::onDecision(const GatedExec& g) {
    if (over()) return;
    // Decided before openStreamed's answer reached the strand: kept for it.
    if (phase_ == Phase::opening) return void(earlyDecision_ = g);
    if (phase_ != Phase::awaitingDecision) return;
    if (g.state != "running") {
        execRecorded_ = true;  // decided: nothing to withdraw
        std::string by = g.decidedBy.empty() ? "" : " by " + g.decidedBy;
        return sendErrorAndClose("policy_denied",
                                 "approval " + g.approvalId + " " + g.state + by +
                                     (g.decisionReason.empty() ? "" : ": " + g.decisionReason));
    }
    queue(true, json{{"type", "approved"},
                     {"exec_id", g.id},
                     {"by", g.decidedBy},
                     {"reason", g.decisionReason}}
                    .dump());
    phase_ = Phase::startingApproved;
    asio::post(ctx_.workers, [self = shared_from_this()] {
        std::shared_ptr<AgentStream> agent;
        std::string code, message;
        try {
            agent = self->ctx_.sandboxes.commands.openApproved(
                self->ctx_.tenant, self->ctx_.params[0], self->execId_, self->options_,
                self->terminal_, self->agentHandler());
        } catch (const Error& e) {
            code = std::string(errorCodeName(e.code()));
            message = e.what();
            self->ctx_.sandboxes.gates.finishStreamed(self->execId_, -1, message);
        }
        asio::post(self->ws_.get_executor(), [self, agent, code, message] {
            if (!agent) return self->sendErrorAndClose(code, message);
            self->commandExecId_ = self->execId_;
            self->attachStream(agent);
            // What the client typed while it waited goes first, in order;
            // what it types meanwhile queues behind it.
            self->flushingHeld_ = true;
            self->flushHeld();
        });
    });
}

void WsExecSession::flushHeld() {
    auto* agent = pipe_.stream();
    if (phase_ == Phase::ended || !agent) return;
    std::string data = std::move(heldStdin_);
    heldStdin_.clear();
    bool eof = data.empty() && heldEof_;
    if (data.empty() && !eof) {
        flushingHeld_ = false;
        return;
    }
    if (eof) heldEof_ = false;
    // No thread waits for the guest's window; an ended command's exit
    // message is on its way when this fails.
    agent->writeAsync(0, std::move(data), eof,
                      [self = shared_from_this()](std::exception_ptr error) {
                          asio::post(self->ws_.get_executor(), [self, ok = !error] {
                              if (!ok) return void(self->flushingHeld_ = false);
                              self->flushHeld();
                          });
                      });
}

void WsExecSession::readClient() {
    if (over()) return;
    ws_.async_read(in_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->onClientMessage(ec);
    });
}

void WsExecSession::onClientMessage(beast::error_code ec) {
    if (ec) return finish();  // the client left: dropping the stream kills the command
    if (over()) return;
    bool binary = ws_.got_binary();
    std::string data = beast::buffers_to_string(in_.data());
    in_.consume(in_.size());
    auto* agent = pipe_.stream();
    // No stream yet is fine while a decision is awaited or an approved
    // command is being started; otherwise the session is over.
    bool waiting = phase_ == Phase::awaitingDecision || phase_ == Phase::startingApproved;
    if (!agent && !waiting) return finish();
    bool holding = !agent || flushingHeld_;  // stdin waits for the command, or behind what waited
    if (!binary) {
        json m = json::parse(data, nullptr, false);
        // Client JSON: types are checked, never assumed (a wrong one must not throw here).
        auto text = [&](const char* k) {
            return m.is_object() && m.contains(k) && m[k].is_string() ? m[k].get<std::string>()
                                                                      : std::string();
        };
        auto number = [&](const char* k, int dflt) {
            return m.is_object() && m.contains(k) && m[k].is_number_integer() ? m[k].get<int>()
                                                                              : dflt;
        };
        std::string type = text("type");
        if (type == "stdin" && m.contains("data") && m["data"].is_string()) {
            data = m["data"].get<std::string>();
        } else if (type == "eof") {
            if (holding)
                heldEof_ = true;
            else
                agent->closeWrite();
            return readClient();
        } else if (!agent) {
            return readClient();  // resize/signal before the command runs: nothing to act on
        } else if (type == "resize") {
            agent->control(protocol::controlPayload(protocol::ResizeRequest{
                static_cast<unsigned>(
                    std::clamp(number("rows", 24), 1, static_cast<int>(protocol::kMaxPtySide))),
                static_cast<unsigned>(
                    std::clamp(number("cols", 80), 1, static_cast<int>(protocol::kMaxPtySide)))}));
            return readClient();
        } else if (type == "signal" && m.contains("signal") && m["signal"].is_string() &&
                   m["signal"].get<std::string>().size() <= protocol::kMaxSignalName) {
            agent->control(protocol::controlPayload(protocol::SignalRequest{m["signal"]}));
            return readClient();
        } else {
            queue(true, json{{"type", "error"},
                             {"code", "bad_request"},
                             {"message", "unknown message; see api/websocket.md"}}
                            .dump());
            return readClient();
        }
    }
    if (holding) {
        // Waiting for approval: stdin is kept for the command, bounded.
        if (heldStdin_.size() + data.size() > 1024 * 1024)
            return sendErrorAndClose("payload_too_large",
                                     "more than 1 MiB of stdin while waiting for approval");
        heldStdin_ += data;
        return readClient();
    }
    // stdin goes as the agent's window allows (no thread waits for it); the
    // next client message is read only after that: backpressure to the client.
    agent->writeAsync(
        0, std::move(data), false, [self = shared_from_this()](std::exception_ptr error) {
            asio::post(self->ws_.get_executor(), [self, ok = !error] {
                if (ok)
                    self->readClient();  // else the command ended; its exit message is on its way
            });
        });
}

void WsExecSession::onAgentEvent(AgentStream::Event&& e) {
    if (over()) return;
    switch (e.kind) {
        case Kind::data: {
            std::size_t n = e.payload.size();
            std::string frame;
            frame.reserve(n + 1);
            frame.push_back(static_cast<char>(e.channel));
            frame += e.payload;
            return queue(false, std::move(frame), n);
        }
        case Kind::control: {
            protocol::ControlFrame frame;
            try {
                frame = protocol::parseControl(e.payload);
            } catch (const protocol::MessageError&) {
                return;
            }
            if (auto* line = std::get_if<protocol::LineToJudge>(&frame)) {
                if (lines_) lines_->onLine(std::move(*line));
                return;
            }
            // Once, and only a well-formed start: a guest repeating it cannot
            // grow the client's queue, nor put its own shape in the message.
            auto* started = std::get_if<protocol::ExecStarted>(&frame);
            if (startedSent_ || !started) return;
            startedSent_ = true;
            queue(true, json{{"type", "started"},
                             {"pid", started->pid},
                             {"lines_judged", linesJudged(options_, terminal_)}}
                            .dump());
            return;
        }
        case Kind::close: {
            // The agent's word, read as exec's typed result: a malformed one
            // ends the command as an agent error, with no exit code.
            protocol::ExecResult r;
            try {
                r = protocol::parseExecResult(e.payload);
            } catch (const protocol::MessageError& bad) {
                r.exit_code = -1;
                r.error = guestAnswerError(bad).what();
            }
            if (!execId_.empty() && !execRecorded_) {
                execRecorded_ = true;
                asio::post(
                    ctx_.workers, [self = shared_from_this(), code = r.exit_code, error = r.error] {
                        self->ctx_.sandboxes.gates.finishStreamed(self->execId_, code, error);
                    });
            }
            json m{{"type", "exit"}, {"exit_code", r.exit_code}, {"timed_out", r.timed_out}};
            if (r.signal) m["signal"] = *r.signal;
            if (!r.error.empty()) m["error"] = r.error;
            queue(true, m.dump());
            return closeAfterQueued();
        }
        case Kind::reset: {
            protocol::ResetInfo info{"agent_error", "the command's stream was reset"};
            try {
                info = protocol::parseResetInfo(e.payload);
            } catch (...) {
            }
            Error err = agentError(info.code, info.message);
            if (!execId_.empty() && !execRecorded_ && streamAttached_) {
                execRecorded_ = true;
                asio::post(ctx_.workers,
                           [self = shared_from_this(), why = std::string(err.what())] {
                               self->ctx_.sandboxes.gates.finishStreamed(self->execId_, -1, why);
                           });
            }
            return sendErrorAndClose(std::string(errorCodeName(err.code())), err.what());
        }
    }
}

void WsExecSession::judgeLines() {
    if (lines_ || over() || !linesJudged(options_, terminal_)) return;
    std::weak_ptr<WsExecSession> weak = shared_from_this();
    auto onStrand = [weak](auto&& fn) {
        if (auto s = weak.lock()) asio::post(s->ws_.get_executor(), [s, fn] { fn(*s); });
    };
    lines_ = TerminalLines::open(
        ctx_.sandboxes.commands, ctx_.workers,
        {ctx_.tenant, ctx_.params[0], commandExecId_, options_},
        [onStrand](const protocol::LineVerdict& v) {
            onStrand([payload = protocol::controlPayload(v)](WsExecSession& s) {
                if (auto* agent = s.pipe_.stream(); agent && !s.over()) agent->control(payload);
            });
        },
        [onStrand](const LineDecision& d) {
            json m{{"exec_id", d.lineId}, {"approval_id", d.approvalId}, {"message", d.message}};
            if (d.state == "pending") {
                m["type"] = "line_pending_approval";
            } else {
                m["type"] = "line_decided";
                m["decision"] = d.state;
            }
            onStrand([text = jsonText(m)](WsExecSession& s) {
                if (!s.over()) s.queue(true, text);
            });
        });
}

void WsExecSession::sendErrorAndClose(const std::string& code, const std::string& message) {
    queue(true, jsonText(json{{"type", "error"}, {"code", code}, {"message", message}}));
    closeAfterQueued();
}

void WsExecSession::queue(bool text, std::string data, std::size_t credit) {
    AgentPipe::Chunk chunk;
    chunk.bytes = std::move(data);
    chunk.credit = credit;
    chunk.text = text;
    pipe_.send(shared_from_this(), std::move(chunk));
}

void WsExecSession::closeAfterQueued() {
    if (over()) return;
    phase_ = Phase::closing;
    AgentPipe::Chunk end;
    end.end = true;
    pipe_.send(shared_from_this(), std::move(end));
}

void WsExecSession::releaseExec() {
    if (lines_) lines_->close();  // a line held for approval: nobody waits for it now
    if (execId_.empty() || execRecorded_) return;
    // Gated and undecided: the approval is withdrawn. Approved and running:
    // the command dies with the stream, and is recorded so.
    execRecorded_ = true;
    bool wasStarted = streamAttached_;
    asio::post(ctx_.workers, [self = shared_from_this(), wasStarted] {
        if (wasStarted)
            self->ctx_.sandboxes.gates.finishStreamed(self->execId_, -1,
                                                         "the client disconnected");
        else
            self->ctx_.sandboxes.gates.abandonStreamed(self->execId_);
    });
}

void WsExecSession::finish() {
    if (phase_ == Phase::ended) return;
    phase_ = Phase::ended;
    releaseExec();
    pipe_.finish();  // cancels the command if it still runs
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(ws_).close();
}

}  // namespace airlock::api
