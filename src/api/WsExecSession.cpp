#include "api/WsExecSession.hpp"

#include <boost/asio/post.hpp>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace asio = boost::asio;
using nlohmann::json;
using Kind = AgentStream::Event::Kind;

WsExecSession::WsExecSession(beast::tcp_stream&& stream, http::request<http::empty_body>&& upgrade, StreamContext context)
    : ws_(std::move(stream)), upgrade_(std::move(upgrade)), ctx_(std::move(context)) {}

void WsExecSession::start() {
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.read_message_max(protocol::kInitialWindow);
    ws_.async_accept(upgrade_, [self = shared_from_this()](beast::error_code ec) { self->onAccepted(ec); });
}

void WsExecSession::onAccepted(beast::error_code ec) {
    if (ec) return;
    ws_.async_read(in_, [self = shared_from_this()](beast::error_code e, std::size_t) { self->onStartMessage(e); });
}

void WsExecSession::onStartMessage(beast::error_code ec) {
    if (ec) return;
    std::string body = beast::buffers_to_string(in_.data());
    in_.consume(in_.size());
    asio::post(ctx_.workers, [self = shared_from_this(), body] {
        std::shared_ptr<AgentStream> agent;
        std::string code, message;
        try {
            TerminalOptions terminal;
            ExecOptions options = parseExecStart(body, terminal);
            agent = self->ctx_.controller.openExec(self->ctx_.tenant, self->ctx_.params[0], options, terminal,
                                                   [self](AgentStream::Event&& e) {
                                                       asio::post(self->ws_.get_executor(), [self, e = std::move(e)]() mutable {
                                                           self->onAgentEvent(std::move(e));
                                                       });
                                                   });
        } catch (const Error& e) {
            code = std::string(errorCodeName(e.code()));
            message = e.what();
        }
        asio::post(self->ws_.get_executor(), [self, agent, code, message] {
            if (!agent) return self->sendErrorAndClose(code, message);
            self->agent_ = agent;
            if (self->ended_) return void(self->agent_.reset());
            if (self->ungranted_) agent->grant(std::exchange(self->ungranted_, 0));
            self->readClient();
        });
    });
}

void WsExecSession::readClient() {
    if (ended_ || closing_) return;
    ws_.async_read(in_, [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onClientMessage(ec); });
}

void WsExecSession::onClientMessage(beast::error_code ec) {
    if (ec) return finish();  // the client left: dropping the stream kills the command
    if (ended_ || closing_) return;
    bool binary = ws_.got_binary();
    std::string data = beast::buffers_to_string(in_.data());
    in_.consume(in_.size());
    auto agent = agent_;
    if (!agent) return finish();
    if (!binary) {
        json m = json::parse(data, nullptr, false);
        std::string type = m.is_object() ? m.value("type", "") : "";
        if (type == "stdin" && m.contains("data") && m["data"].is_string()) {
            data = m["data"].get<std::string>();
        } else if (type == "eof") {
            agent->closeWrite();
            return readClient();
        } else if (type == "resize") {
            agent->control(json{{"resize", {{"rows", m.value("rows", 24)}, {"cols", m.value("cols", 80)}}}}.dump());
            return readClient();
        } else if (type == "signal" && m.contains("signal") && m["signal"].is_string()) {
            agent->control(json{{"signal", m["signal"]}}.dump());
            return readClient();
        } else {
            queue(true, json{{"type", "error"}, {"code", "bad_request"}, {"message", "unknown message; see api/websocket.md"}}.dump());
            return readClient();
        }
    }
    // stdin: written on a worker (it waits for the agent's window); the next
    // client message is read only after that: backpressure to the client.
    asio::post(ctx_.workers, [self = shared_from_this(), agent, data = std::move(data)] {
        bool ok = true;
        try {
            agent->write(0, data, AgentStream::Clock::now() + std::chrono::seconds(60));
        } catch (const Error&) {
            ok = false;  // the command ended; its exit message is on its way
        }
        asio::post(self->ws_.get_executor(), [self, ok] {
            if (ok) self->readClient();
        });
    });
}

void WsExecSession::onAgentEvent(AgentStream::Event&& e) {
    if (ended_ || closing_) return;
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
            json c = json::parse(e.payload, nullptr, false);
            if (c.is_object() && c.contains("pid")) queue(true, json{{"type", "started"}, {"pid", c["pid"]}}.dump());
            return;
        }
        case Kind::close: {
            json r = json::parse(e.payload, nullptr, false);
            json m{{"type", "exit"}};
            if (r.is_object())
                for (const auto& key : {"exit_code", "signal", "timed_out", "error"})
                    if (r.contains(key)) m[key] = r[key];
            queue(true, m.dump());
            closing_ = true;
            return pump();
        }
        case Kind::reset: {
            auto info = protocol::parseResetInfo(e.payload);
            Error err = agentError(info.code, info.message);
            return sendErrorAndClose(std::string(errorCodeName(err.code())), err.what());
        }
    }
}

void WsExecSession::sendErrorAndClose(const std::string& code, const std::string& message) {
    queue(true, json{{"type", "error"}, {"code", code}, {"message", message}}.dump(-1, ' ', false, json::error_handler_t::replace));
    closing_ = true;
    pump();
}

void WsExecSession::queue(bool text, std::string data, std::size_t credit) {
    out_.push_back({text, std::move(data), credit});
    pump();
}

void WsExecSession::pump() {
    if (writing_ || ended_) return;
    if (out_.empty()) {
        if (!closing_) return;
        ended_ = true;
        agent_.reset();
        ws_.async_close(websocket::close_code::normal, [self = shared_from_this()](beast::error_code) {});
        return;
    }
    writing_ = true;
    ws_.text(out_.front().text);
    ws_.async_write(asio::buffer(out_.front().data), [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->writing_ = false;
        if (ec) return self->finish();
        self->ungranted_ += self->out_.front().credit;
        self->out_.pop_front();
        if (self->agent_ && self->ungranted_) self->agent_->grant(std::exchange(self->ungranted_, 0));
        self->pump();
    });
}

void WsExecSession::finish() {
    if (ended_) return;
    ended_ = true;
    out_.clear();
    agent_.reset();  // cancels the command if it still runs
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(ws_).close();
}

}  // namespace airlock::api
