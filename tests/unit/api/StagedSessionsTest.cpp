// A volume file's two streams over a real socket: a body staged to a host
// file chunk by chunk and bounded before and while it arrives, and a staged
// file sent back with its exact length. No staged file outlives its session.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <fcntl.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "api/ErrorMapping.hpp"
#include "api/StagedDownloadSession.hpp"
#include "api/StagedUploadSession.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"
#include "unit/controller/ControllerFixture.hpp"

namespace airlock::api {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string patterned(std::size_t size) {
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 131 % 251);
    return bytes;
}

std::string chunked(const std::string& body, std::size_t piece) {
    std::string out;
    for (std::size_t at = 0; at < body.size(); at += piece) {
        auto part = body.substr(at, piece);
        char size[32];
        std::snprintf(size, sizeof size, "%zx\r\n", part.size());
        out += size + part + "\r\n";
    }
    return out + "0\r\n\r\n";
}

class StagedSessionsTest : public test::ControllerFixture {
  protected:
    ~StagedSessionsTest() override {
        io.stop();
        if (ioThread.joinable()) ioThread.join();
        workers.join();
    }

    StreamContext context() {
        return StreamContext{StreamServices{controller->files(), controller->ports(),
                                            controller->commands(), controller->gates()},
                             workers, ApiRequest{}, "t1", {}, nullptr, nullptr, {}};
    }

    // One connection: the client's socket and the server's stream.
    void connect() {
        acceptor.emplace(io, asio::ip::tcp::endpoint{asio::ip::make_address("127.0.0.1"), 0});
        client.emplace(io);
        client->connect(acceptor->local_endpoint());
        served.emplace(acceptor->accept());
        ::timeval limit{20, 0};
        ::setsockopt(client->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    }

    // The head is sent and parsed as HttpSession would, then the session
    // takes the connection; `body` follows (after a 100 Continue if asked).
    std::string upload(const std::string& head, const std::string& body, StagedUploadPlan plan,
                       bool awaitContinue = false) {
        connect();
        asio::write(*client, asio::buffer(head));
        if (!awaitContinue) asio::write(*client, asio::buffer(body));
        beast::flat_buffer buffer;
        http::request_parser<http::empty_body> parser;
        http::read_header(*served, buffer, parser);
        std::make_shared<StagedUploadSession>(std::move(*served), std::move(buffer),
                                              std::move(parser), context(), std::move(plan))
            ->start();
        ioThread = std::thread([this] { io.run(); });
        std::string got;
        if (awaitContinue) {
            got = readUntilBlankLine();
            asio::write(*client, asio::buffer(body));
        }
        return got + readAll();
    }

    std::string readUntilBlankLine() {
        std::string text;
        beast::error_code ec;
        asio::read_until(*client, asio::dynamic_buffer(text), "\r\n\r\n", ec);
        return text;
    }
    std::string readAll() {
        std::string text;
        char chunk[64 * 1024];
        beast::error_code ec;
        while (!ec) {
            std::size_t n = client->read_some(asio::buffer(chunk), ec);
            text.append(chunk, n);
        }
        return text;
    }

    StagedUploadPlan plan(std::uint64_t maxBytes) {
        StagedUploadPlan p;
        p.stagedPath = dir.path() + "/staged";
        p.maxBytes = maxBytes;
        p.finish = [this](const std::string& path, std::uint64_t bytes) {
            std::ifstream in(path, std::ios::binary);
            finished = std::string(std::istreambuf_iterator<char>(in), {});
            finishedBytes = bytes;
            return jsonResponse(201, nlohmann::json{{"size", bytes}});
        };
        return p;
    }
    bool stagedGone() {
        return test::waitFor([&] { return !fs::exists(dir.path() + "/staged"); }, 10s);
    }

    test::TempDir dir;
    asio::io_context io;
    asio::executor_work_guard<asio::io_context::executor_type> busy = asio::make_work_guard(io);
    asio::thread_pool workers{1};
    std::thread ioThread;
    std::optional<asio::ip::tcp::acceptor> acceptor;
    std::optional<asio::ip::tcp::socket> client;
    std::optional<beast::tcp_stream> served;
    std::optional<std::string> finished;
    std::uint64_t finishedBytes = 0;
};

TEST_F(StagedSessionsTest, AChunkedBodyIsStagedWholeAndHandedToTheTool) {
    std::string body = patterned(3 * StagedUploadSession::kChunk + 1234);
    auto response = upload(
        "PUT /v1/volumes/v/files?path=/f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        chunked(body, 100 * 1024), plan(10 << 20));
    EXPECT_EQ(response.rfind("HTTP/1.1 201", 0), 0u) << response.substr(0, 200);
    ASSERT_TRUE(finished.has_value());
    EXPECT_TRUE(*finished == body) << "the same bytes staged";
    EXPECT_EQ(finishedBytes, body.size());
    EXPECT_TRUE(stagedGone());
}

TEST_F(StagedSessionsTest, ADeclaredLengthPastTheBoundIsRefusedBeforeTheBody) {
    auto response = upload(
        "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n", std::string(2000, 'a'),
        plan(1000));
    EXPECT_EQ(response.rfind("HTTP/1.1 413", 0), 0u) << response.substr(0, 200);
    EXPECT_FALSE(finished.has_value());
    EXPECT_TRUE(stagedGone());
}

TEST_F(StagedSessionsTest, AChunkedBodyThatGrowsPastTheBoundIsCut) {
    auto response = upload(
        "PUT /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        chunked(patterned(600 * 1024), 64 * 1024), plan(500 * 1024));
    EXPECT_EQ(response.rfind("HTTP/1.1 413", 0), 0u) << response.substr(0, 200);
    EXPECT_FALSE(finished.has_value());
    EXPECT_TRUE(stagedGone()) << "the partial file goes";
}

TEST_F(StagedSessionsTest, NoRoomForTheBodyAnswers507) {
    auto p = plan(10 << 20);
    p.reserve = [](std::uint64_t) {
        throw Error(ErrorCode::insufficient_storage, "the data dir is full");
    };
    auto response = upload("PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", "hello",
                           std::move(p));
    EXPECT_EQ(response.rfind("HTTP/1.1 507", 0), 0u) << response.substr(0, 200);
    EXPECT_NE(response.find("the data dir is full"), std::string::npos);
    EXPECT_FALSE(finished.has_value());
}

TEST_F(StagedSessionsTest, AClientThatAsksToContinueGetsA100First) {
    auto response = upload(
        "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
        "hello", plan(1000), true);
    EXPECT_EQ(response.rfind("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201", 0), 0u)
        << response.substr(0, 200);
    EXPECT_EQ(finished.value_or(""), "hello");
}

TEST_F(StagedSessionsTest, AClientThatLeavesMidBodyLeavesNothingStaged) {
    connect();
    asio::write(*client, asio::buffer(std::string(
                              "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n") +
                          std::string(40000, 'a')));
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> parser;
    http::read_header(*served, buffer, parser);
    std::make_shared<StagedUploadSession>(std::move(*served), std::move(buffer), std::move(parser),
                                          context(), plan(1 << 20))
        ->start();
    ioThread = std::thread([this] { io.run(); });
    ASSERT_TRUE(test::waitFor([&] { return fs::exists(dir.path() + "/staged"); }, 10s));
    client->close();
    EXPECT_TRUE(stagedGone());
    EXPECT_FALSE(finished.has_value());
}

TEST_F(StagedSessionsTest, AStagedFileGoesOutWithItsExactLength) {
    std::string bytes = patterned(2 * StagedDownloadSession::kChunk + 777);
    std::string path = dir.path() + "/out";
    std::ofstream(path, std::ios::binary) << bytes;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    ::unlink(path.c_str());
    connect();
    std::make_shared<StagedDownloadSession>(std::move(*served), context(), std::move(fd),
                                            bytes.size(), "application/octet-stream")
        ->start();
    ioThread = std::thread([this] { io.run(); });
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    beast::error_code ec;
    http::read(*client, buffer, parser, ec);
    EXPECT_FALSE(ec) << ec.message();
    auto& response = parser.get();
    EXPECT_EQ(response.result(), http::status::ok);
    EXPECT_EQ(response[http::field::content_length], std::to_string(bytes.size()));
    EXPECT_TRUE(response.body() == bytes) << "the same bytes back";
}

}  // namespace
}  // namespace airlock::api
