#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "api/TlsContext.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <thread>

#include "api/TlsPipe.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock::api {
namespace {

std::string messageOf(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::bad_request);
        return e.what();
    }
    return "(no error)";
}

TEST(TlsContext, LoadsAMatchingPairAndNamesWhatIsWrong) {
    test::TempDir dir;
    std::string d = dir.path();
    std::string cmd = "set -e; cd '" + d +
                      "'; for n in a b; do openssl req -x509 -newkey ec -pkeyopt "
                      "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=$n -keyout $n.key "
                      "-out $n.pem 2>/dev/null; done";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_NE(makeServerTlsContext(d + "/a.pem", d + "/a.key"), nullptr);
    EXPECT_NE(messageOf([&] {
                  makeServerTlsContext(d + "/none.pem", d + "/a.key");
              }).find("--tls-cert " + d + "/none.pem"),
              std::string::npos);
    std::ofstream(d + "/junk.key") << "not a key";
    EXPECT_NE(
        messageOf([&] { makeServerTlsContext(d + "/a.pem", d + "/junk.key"); }).find("--tls-key"),
        std::string::npos);
    EXPECT_NE(
        messageOf([&] { makeServerTlsContext(d + "/a.pem", d + "/b.key"); }).find("does not match"),
        std::string::npos);
}

// The session behind a TLS pipe closes its end while the client neither
// sends nor answers the TLS close: the pipe still lets go of the client's
// connection within its 2 s bound, not never.
TEST(TlsPipe, ASilentClientIsLetGoOnceTheSessionEnds) {
    test::TempDir dir;
    std::string d = dir.path();
    std::string cmd = "set -e; cd '" + d +
                      "'; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                      "-nodes -days 1 -subj /CN=127.0.0.1 -keyout s.key -out s.pem 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    auto serverCtx = makeServerTlsContext(d + "/s.pem", d + "/s.key");
    namespace asio = boost::asio;
    asio::io_context ioc;
    asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    asio::local::stream_protocol::socket sessionEnd(ioc);
    acceptor.async_accept([&](boost::system::error_code ec, asio::ip::tcp::socket client) {
        ASSERT_FALSE(ec);
        asio::local::stream_protocol::socket pipeEnd(ioc);
        asio::local::connect_pair(pipeEnd, sessionEnd);
        std::make_shared<TlsPipe>(std::move(client), std::move(pipeEnd), *serverCtx, nullptr)
            ->start();
    });
    std::thread io([&] { ioc.run(); });

    asio::io_context clientIo;
    asio::ssl::context clientCtx(asio::ssl::context::tls_client);
    clientCtx.set_verify_mode(asio::ssl::verify_none);
    asio::ssl::stream<asio::ip::tcp::socket> client(clientIo, clientCtx);
    client.lowest_layer().connect(acceptor.local_endpoint());
    client.handshake(asio::ssl::stream_base::client);
    // The session ends (as an HttpSession does after its read timeout).
    asio::post(ioc, [&] { sessionEnd.close(); });
    // The client reads raw bytes only (the close_notify, then the end) and
    // never answers: the pipe must close the connection on its own.
    auto started = std::chrono::steady_clock::now();
    int fd = client.lowest_layer().native_handle();
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    }
    auto waited = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(n, 0) << "the connection was closed, not timed out on our side";
    EXPECT_LT(waited, std::chrono::seconds(5));
    ioc.stop();
    io.join();
}

}  // namespace
}  // namespace airlock::api
