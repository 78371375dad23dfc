#include "cli/ExecStreamClient.hpp"

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "cli/HttpClient.hpp"

namespace airlock::cli {
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace asio = boost::asio;
using nlohmann::json;

namespace {

// Puts the local terminal in raw mode for the session; restores it always.
class RawTerminal {
public:
    RawTerminal() {
        if (!::isatty(0) || ::tcgetattr(0, &saved_) != 0) return;
        termios raw = saved_;
        ::cfmakeraw(&raw);
        active_ = ::tcsetattr(0, TCSANOW, &raw) == 0;
    }
    ~RawTerminal() {
        if (active_) ::tcsetattr(0, TCSANOW, &saved_);
    }

private:
    termios saved_{};
    bool active_ = false;
};

void writeAll(int fd, const char* data, std::size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, data, n);
        if (w <= 0) return;
        data += w;
        n -= static_cast<std::size_t>(w);
    }
}

class Session {
public:
    Session(asio::io_context& ioc, const StreamExecOptions& options) : ioc_(ioc), ws_(ioc), stdin_(ioc), signals_(ioc), options_(options) {}

    int run(const std::string& host, const std::string& port, const std::string& key, const std::string& sandboxId) {
        asio::ip::tcp::resolver resolver(ioc_);
        beast::get_lowest_layer(ws_).connect(resolver.resolve(host, port));
        ws_.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
            req.set(http::field::authorization, "Bearer " + key);
            req.set(http::field::user_agent, "airlock-cli");
        }));
        websocket::response_type res;
        beast::error_code ec;
        ws_.handshake(res, host + ":" + port, "/v1/sandboxes/" + sandboxId + "/exec/ws", ec);
        if (ec) {
            std::string msg = "HTTP " + std::to_string(res.result_int());
            auto j = json::parse(res.body(), nullptr, false);
            if (j.is_object() && j.contains("error")) msg += ": " + j["error"].value("message", "");
            throw std::runtime_error(res.result_int() ? msg : "WebSocket handshake failed: " + ec.message());
        }
        json start{{"cmd", options_.argv}, {"tty", options_.tty}};
        if (options_.tty) {
            winsize ws{};
            if (::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
                start["rows"] = ws.ws_row;
                start["cols"] = ws.ws_col;
            }
        }
        ws_.text(true);
        ws_.write(asio::buffer(start.dump()));
        read();
        if (options_.interactive || options_.tty) forwardStdin();
        else send(true, json{{"type", "eof"}}.dump());
        if (options_.tty) watchResize();
        ioc_.run();
        if (!error_.empty()) throw std::runtime_error(error_);
        return exitCode_;
    }

private:
    void read() {
        ws_.async_read(in_, [this](beast::error_code ec, std::size_t) {
            if (ec) {
                if (!finished_) error_ = "connection lost: " + ec.message();
                return stop();
            }
            std::string msg = beast::buffers_to_string(in_.data());
            in_.consume(in_.size());
            if (ws_.got_binary()) {
                if (!msg.empty()) emit(msg[0] == 2 ? 2 : 1, msg.data() + 1, msg.size() - 1);
            } else {
                auto j = json::parse(msg, nullptr, false);
                std::string type = j.is_object() ? j.value("type", "") : "";
                if (type == "exit") {
                    finished_ = true;
                    exitCode_ = j.value("exit_code", 1);
                    if (j.contains("error") && j["error"].is_string()) {
                        std::string line = "airlock: " + j["error"].get<std::string>() + "\n";
                        emit(2, line.data(), line.size());
                    }
                } else if (type == "error") {
                    finished_ = true;
                    error_ = j.value("message", std::string("error"));
                }
            }
            read();
        });
    }

    void emit(int channel, const char* data, std::size_t n) {
        if (options_.output) options_.output(channel, data, n);
        else writeAll(channel, data, n);
    }

    void forwardStdin() {
        struct stat st{};
        if (::fstat(0, &st) == 0 && (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)) && !::isatty(0)) {
            // A file or /dev/null: epoll cannot watch it, so read it here.
            char buf[65536];
            ssize_t n;
            while ((n = ::read(0, buf, sizeof buf)) > 0) send(false, std::string(buf, static_cast<std::size_t>(n)));
            send(true, json{{"type", "eof"}}.dump());
            return;
        }
        stdin_.assign(::dup(0));
        readStdin();
    }

    void readStdin() {
        stdin_.async_read_some(asio::buffer(stdinBuf_), [this](beast::error_code ec, std::size_t n) {
            if (ec) {
                send(true, json{{"type", "eof"}}.dump());
                return;
            }
            send(false, std::string(stdinBuf_, n));
            // Backpressure: the next local read waits for this write.
            pendingStdinRead_ = true;
        });
    }

    void watchResize() {
        signals_.add(SIGWINCH);
        signals_.async_wait([this](beast::error_code ec, int) {
            if (ec) return;
            winsize ws{};
            if (::ioctl(1, TIOCGWINSZ, &ws) == 0)
                send(true, json{{"type", "resize"}, {"rows", ws.ws_row}, {"cols", ws.ws_col}}.dump());
            watchResize();
        });
    }

    void send(bool text, std::string data) {
        out_.push_back({text, std::move(data)});
        pump();
    }

    void pump() {
        if (writing_ || out_.empty() || finished_) return;
        writing_ = true;
        ws_.text(out_.front().first);
        ws_.async_write(asio::buffer(out_.front().second), [this](beast::error_code ec, std::size_t) {
            writing_ = false;
            if (ec) return;
            out_.pop_front();
            if (pendingStdinRead_ && out_.empty()) {
                pendingStdinRead_ = false;
                readStdin();
            }
            pump();
        });
    }

    void stop() {
        beast::error_code ec;
        signals_.cancel(ec);
        stdin_.close(ec);
        ioc_.stop();
    }

    asio::io_context& ioc_;
    websocket::stream<beast::tcp_stream> ws_;
    asio::posix::stream_descriptor stdin_;
    asio::signal_set signals_;
    StreamExecOptions options_;
    beast::flat_buffer in_;
    std::deque<std::pair<bool, std::string>> out_;
    bool writing_ = false;
    bool pendingStdinRead_ = false;
    bool finished_ = false;
    int exitCode_ = 1;
    std::string error_;
    char stdinBuf_[16384];
};

}  // namespace

int runStreamExec(const std::string& baseUrl, const std::string& apiKey, const std::string& sandboxId,
                  const StreamExecOptions& options) {
    HttpClient parsed(baseUrl, apiKey);  // validates and splits the URL
    std::optional<RawTerminal> raw;
    if (options.tty) raw.emplace();
    asio::io_context ioc;
    Session session(ioc, options);
    return session.run(parsed.host(), parsed.port(), apiKey, sandboxId);
}

}  // namespace airlock::cli
