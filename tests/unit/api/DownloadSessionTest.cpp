// A download's HTTP side against a scripted guest: what the guest sends
// decides the response, and a guest that breaks the stream's contract gets a
// clean 502, never a hung client or a response that lies about its length.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
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
        StreamContext context{*controller, workers, ApiRequest{}, "t1", {}, nullptr, nullptr};
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

TEST_F(DownloadSessionTest, AFollowedBodyEndsWhenItsClientLeavesEvenWhileTheGuestIsQuiet) {
    std::atomic<bool> cancelled{false};
    FakeGuest quiet([&](FakeGuest& g) {
        Frame open;
        if (!g.readType(FrameType::open, open)) return;
        g.send(FrameType::data, open.stream, "first line\n", 1);
        // Then nothing, as a process that prints no more; the host's reset is awaited.
        while (!g.stop_) {
            Frame f;
            if (g.read(f, 100ms) && f.type == FrameType::reset && f.stream == open.stream)
                cancelled = true;
        }
    });
    auto agent = AgentConnection::fromFd(quiet.takeHostEnd(), 5s, {});
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    auto client = std::make_unique<asio::ip::tcp::socket>(io);
    client->connect(acceptor.local_endpoint());
    StreamContext context{*controller, workers, ApiRequest{}, "t1", {}, nullptr, nullptr};
    std::make_shared<DownloadSession>(
        beast::tcp_stream(acceptor.accept()), std::move(context),
        [agent](AgentStream::Handler handler) {
            return agent->open(protocol::FileReadRequest{"/w/log", ""}, std::move(handler));
        },
        false, "text/plain", std::chrono::milliseconds(0))
        ->start();
    ioThread = std::thread([this] { io.run(); });
    std::string seen;
    char buf[256];
    while (seen.find("first line") == std::string::npos) {
        beast::error_code ec;
        std::size_t n = client->read_some(asio::buffer(buf), ec);
        ASSERT_FALSE(ec) << ec.message();
        seen.append(buf, n);
    }
    EXPECT_EQ(seen.rfind("HTTP/1.1 200", 0), 0u) << seen;
    client.reset();  // the client goes away; the guest stays quiet
    EXPECT_TRUE(test::waitFor([&] { return cancelled.load(); }, 5s))
        << "the agent stream outlived its client";
}

}  // namespace
}  // namespace airlock::api
