// A download's HTTP side against a scripted guest: what the guest sends
// decides the response, and a guest that breaks the stream's contract gets a
// clean 502, never a hung client or a response that lies about its length.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <thread>

#include "agentclient/AgentConnection.hpp"
#include "api/DownloadSession.hpp"
#include "protocol/Frame.hpp"
#include "support/FakeGuest.hpp"
#include "unit/controller/ControllerFixture.hpp"

namespace airlock::api {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;
using protocol::Frame;
using protocol::FrameType;
using test::FakeGuest;

// The guest's side of one file_read: `answer` sends what it likes on the
// stream the host opened, then the guest keeps the session alive.
FakeGuest::Script fileReadAnswer(std::function<void(FakeGuest&, std::uint32_t)> answer) {
    return [answer = std::move(answer)](FakeGuest& g) {
        Frame open;
        if (!g.readType(FrameType::open, open)) return;
        answer(g, open.stream);
        while (!g.stop_) {
            Frame f;
            if (g.read(f, 100ms) && f.type == FrameType::ping) g.send(FrameType::pong, 0, "");
        }
    };
}

class DownloadSessionTest : public test::ControllerFixture {
  protected:
    ~DownloadSessionTest() override {
        io.stop();
        if (ioThread.joinable()) ioThread.join();
        workers.join();
    }

    // A sized download (a file's) served from `guest`; the response as the client read it.
    http::response<http::string_body> download(FakeGuest& guest,
                                               std::chrono::milliseconds idle = 10s) {
        auto agent = AgentConnection::fromFd(guest.takeHostEnd(), 5s, {});
        asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
        asio::ip::tcp::socket client(io);
        client.connect(acceptor.local_endpoint());
        beast::tcp_stream served(acceptor.accept());
        StreamContext context{StreamServices{controller->files(), controller->ports(), controller->commands(), controller->gates()}, workers, ApiRequest{}, "t1", {}, nullptr, nullptr, {}};
        std::make_shared<DownloadSession>(
            std::move(served), std::move(context),
            [agent](AgentStream::Handler handler) {
                return agent->open(protocol::FileReadRequest{"/w/f", ""}, std::move(handler));
            },
            true, "application/octet-stream", idle)
            ->start();
        ioThread = std::thread([this] { io.run(); });
        beast::flat_buffer buffer;
        http::response<http::string_body> response;
        beast::error_code ec;
        // The session's own deadline is 60 s; the test's is the socket read.
        ::timeval limit{20, 0};
        ::setsockopt(client.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        http::read(client, buffer, response, ec);
        readError = ec;
        // The session ends (its socket closes) before the test does: one
        // still waiting on its guest at teardown holds its agent stream, and
        // the stream's handler holds the session (LeakSanitizer saw that
        // cycle when the body was complete before the guest's close arrived).
        char rest[256];
        beast::error_code end;
        while (!end) client.read_some(asio::buffer(rest), end);
        return response;
    }

    asio::io_context io;
    // The session waits on the agent with nothing of its own queued.
    asio::executor_work_guard<asio::io_context::executor_type> busy = asio::make_work_guard(io);
    asio::thread_pool workers{1};
    std::thread ioThread;
    beast::error_code readError;
};

TEST_F(DownloadSessionTest, TheSizeComesFirstAndTheBodyHasExactlyThatLength) {
    FakeGuest guest(fileReadAnswer([](FakeGuest& g, std::uint32_t s) {
        g.send(FrameType::control, s, R"({"size":5})");
        g.send(FrameType::data, s, "hello, and more than announced");
        g.send(FrameType::close, s, R"({"size":5})");
    }));
    auto response = download(guest);
    EXPECT_FALSE(readError) << readError.message();
    EXPECT_EQ(response.result(), http::status::ok);
    EXPECT_EQ(response[http::field::content_length], "5");
    EXPECT_EQ(response.body(), "hello") << "the announced length is what the client gets";
}

TEST_F(DownloadSessionTest, BytesBeforeTheSizeAreRefusedWithA502) {
    FakeGuest guest(fileReadAnswer([](FakeGuest& g, std::uint32_t s) {
        g.send(FrameType::data, s, "unannounced bytes");
        g.send(FrameType::control, s, R"({"size":17})");
        g.send(FrameType::close, s, R"({"size":17})");
    }));
    auto response = download(guest);
    EXPECT_EQ(response.result(), http::status::bad_gateway);
    EXPECT_NE(response.body().find("before its size"), std::string::npos) << response.body();
    EXPECT_EQ(response.body().find("unannounced"), std::string::npos)
        << "none of the guest's bytes went out: " << response.body();
}

TEST_F(DownloadSessionTest, ASizeOfTheWrongShapeIsRefusedWithA502) {
    FakeGuest guest(fileReadAnswer([](FakeGuest& g, std::uint32_t s) {
        g.send(FrameType::control, s, R"({"size":"s3cr3t"})");
    }));
    auto response = download(guest);
    EXPECT_EQ(response.result(), http::status::bad_gateway);
    EXPECT_EQ(response.body().find("s3cr3t"), std::string::npos) << response.body();
}

TEST_F(DownloadSessionTest, AGuestRefusalBecomesItsErrorBeforeAnyHeader) {
    FakeGuest guest(fileReadAnswer([](FakeGuest& g, std::uint32_t s) {
        g.send(FrameType::reset, s, R"({"code":"not_found","message":"no such file: /w/f"})");
    }));
    auto response = download(guest);
    EXPECT_EQ(response.result(), http::status::not_found);
    EXPECT_NE(response.body().find("no such file"), std::string::npos) << response.body();
}

TEST_F(DownloadSessionTest, AGuestThatGoesSilentEndsTheDownload) {
    // Nothing at all: the client gets a 504, not a connection held forever.
    FakeGuest silent(fileReadAnswer([](FakeGuest&, std::uint32_t) {}));
    auto response = download(silent, 300ms);
    EXPECT_EQ(response.result(), http::status::gateway_timeout);
    EXPECT_NE(response.body().find("sent nothing"), std::string::npos) << response.body();
}

TEST_F(DownloadSessionTest, AGuestThatStopsMidFileLeavesAShortBody) {
    FakeGuest stalls(fileReadAnswer([](FakeGuest& g, std::uint32_t s) {
        g.send(FrameType::control, s, R"({"size":10})");
        g.send(FrameType::data, s, "12345");
    }));
    auto started = std::chrono::steady_clock::now();
    auto response = download(stalls, 300ms);
    EXPECT_EQ(readError, http::error::partial_message) << readError.message();
    EXPECT_LT(std::chrono::steady_clock::now() - started, 15s) << "ended by the idle timeout";
}

// A followed body (a process's log: no idle timeout) from a guest that
// prints "first line", then "second line" once `more` is set, and notes the
// host's reset of its stream.
class FollowedBodyTest : public DownloadSessionTest {
  protected:
    FollowedBodyTest()
        : guest([this](FakeGuest& g) {
              Frame open;
              if (!g.readType(FrameType::open, open)) return;
              g.send(FrameType::data, open.stream, "first line\n", 1);
              bool sentMore = false, sentEnd = false;
              while (!g.stop_) {
                  Frame f;
                  if (g.read(f, 50ms) && f.type == FrameType::reset && f.stream == open.stream)
                      cancelled = true;
                  if (more && !sentMore) {
                      sentMore = true;
                      g.send(FrameType::data, open.stream, "second line\n", 1);
                  }
                  if (end && !sentEnd) {
                      sentEnd = true;
                      g.send(FrameType::close, open.stream, "{}");
                  }
              }
          }) {}
    // The agent's thread may hold the session's last reference (its
    // stream's handler): it ends here, while the io_context its timers
    // belong to is still there.
    ~FollowedBodyTest() override {
        if (agent) agent->closeAndWait();
    }

    // Connects a client, starts the session and reads until `until`.
    void start(const std::string& until) {
        agent = AgentConnection::fromFd(guest.takeHostEnd(), 5s, {});
        acceptor.emplace(io, asio::ip::tcp::endpoint{asio::ip::make_address("127.0.0.1"), 0});
        client = std::make_unique<asio::ip::tcp::socket>(io);
        client->connect(acceptor->local_endpoint());
        StreamContext context{StreamServices{controller->files(), controller->ports(), controller->commands(), controller->gates()}, workers, ApiRequest{}, "t1", {}, nullptr, nullptr, {}};
        auto opened = agent;
        std::make_shared<DownloadSession>(
            beast::tcp_stream(acceptor->accept()), std::move(context),
            [opened](AgentStream::Handler handler) {
                return opened->open(protocol::FileReadRequest{"/w/log", ""}, std::move(handler));
            },
            false, "text/plain", std::chrono::milliseconds(0))
            ->start();
        ioThread = std::thread([this] { io.run(); });
        ::timeval limit{20, 0};  // the test's own deadline
        ::setsockopt(client->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        readUntil(until);
    }
    void readUntil(const std::string& text) {
        char buf[256];
        while (seen.find(text) == std::string::npos) {
            beast::error_code ec;
            std::size_t n = client->read_some(asio::buffer(buf), ec);
            ASSERT_FALSE(ec) << ec.message() << " before '" << text << "' in: " << seen;
            seen.append(buf, n);
        }
    }

    std::atomic<bool> cancelled{false}, more{false}, end{false};
    FakeGuest guest;
    std::shared_ptr<AgentConnection> agent;
    std::optional<asio::ip::tcp::acceptor> acceptor;
    std::unique_ptr<asio::ip::tcp::socket> client;
    std::string seen;
};

TEST_F(FollowedBodyTest, EndsWhenItsClientLeavesEvenWhileTheGuestIsQuiet) {
    start("first line");
    EXPECT_EQ(seen.rfind("HTTP/1.1 200", 0), 0u) << seen;
    // The client goes away (a reset, as a killed process's socket), the guest stays quiet.
    ::linger hard{1, 0};
    ::setsockopt(client->native_handle(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    client.reset();
    EXPECT_TRUE(test::waitFor([&] { return cancelled.load(); }, 5s))
        << "the agent stream outlived its client";
}

TEST_F(FollowedBodyTest, AClientThatOnlyStoppedSendingStillGetsWhatFollows) {
    start("first line");
    client->shutdown(asio::ip::tcp::socket::shutdown_send);
    std::this_thread::sleep_for(300ms);  // its end of sending reached the session
    more = true;
    readUntil("second line");
    EXPECT_FALSE(cancelled.load());
    // The guest ends the body: the session ends, and the client reads its end.
    end = true;
    char buf[256];
    beast::error_code ec;
    while (!ec) client->read_some(asio::buffer(buf), ec);
    EXPECT_EQ(ec, asio::error::eof) << ec.message();
}

TEST_F(FollowedBodyTest, AClientThatKeepsSendingIsCutOff) {
    start("first line");
    std::string junk(64 * 1024, 'x');
    beast::error_code ec;
    asio::write(*client, asio::buffer(junk), ec);  // may fail once the session closed
    EXPECT_TRUE(test::waitFor([&] { return cancelled.load(); }, 5s))
        << "a GET that kept sending was read forever";
}

}  // namespace
}  // namespace airlock::api
