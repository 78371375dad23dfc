// The egress proxy end to end without a VM: the real agent loop (behind a
// socketpair) listens where a guest's commands would connect, the real
// proxy judges, resolves and relays, and local TCP servers play the
// internet. A fake resolver plays DNS for the rebinding cases.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <condition_variable>
#include <map>
#include <thread>

#include "egress/EgressProxy.hpp"
#include "support/HttpsClient.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"
#include "support/TlsTestServer.hpp"

namespace airlock::egress {
namespace {
using namespace std::chrono_literals;
namespace asio = boost::asio;

// A blocking TCP server on 127.0.0.1 that answers each connection from a thread.
class LocalServer {
  public:
    using Handler = std::function<void(int fd)>;
    explicit LocalServer(Handler handler) : handler_(std::move(handler)) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::listen(fd_, 16);
        socklen_t len = sizeof a;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] {
            while (true) {
                int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
                if (c < 0) return;
                ++accepted_;
                workers_.emplace_back([this, c] {
                    handler_(c);
                    ::close(c);
                });
            }
        });
    }
    ~LocalServer() {
        ::shutdown(fd_, SHUT_RDWR);
        ::close(fd_);
        thread_.join();
        for (auto& w : workers_) w.join();
    }
    unsigned port() const { return port_; }
    int accepted() const { return accepted_; }

  private:
    Handler handler_;
    int fd_ = -1;
    unsigned port_ = 0;
    std::atomic<int> accepted_{0};
    std::thread thread_;
    std::vector<std::thread> workers_;
};

std::string readHead(int fd) {
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && ::read(fd, &c, 1) == 1) head += c;
    return head;
}

void writeAll(int fd, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return;
        off += static_cast<std::size_t>(n);
    }
}

// A client in the "guest": connects to the agent's listener, sends, reads to EOF.
struct Client {
    int fd = -1;
    explicit Client(unsigned port) {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        timeval tv{20, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    ~Client() { ::close(fd); }
    bool connected = false;
    void send(const std::string& s) { writeAll(fd, s); }
    std::string readN(std::size_t n) {
        std::string out;
        char buf[4096];
        while (out.size() < n) {
            ssize_t r = ::read(fd, buf, std::min(sizeof buf, n - out.size()));
            if (r <= 0) break;
            out.append(buf, static_cast<std::size_t>(r));
        }
        return out;
    }
    std::string readAll() { return readN(std::size_t(-1) / 2); }
};

std::string statusLine(const std::string& response) {
    return response.substr(0, response.find("\r\n"));
}

class EgressProxyTest : public ::testing::Test {
  protected:
    EgressProxyTest() {
        ioThread_ = std::thread([this] { ioc_.run(); });
    }
    ~EgressProxyTest() override {
        proxy_.reset();
        // The connection's thread delivers its streams' ends to our strands:
        // done while the io_context still runs, never into a destroyed one.
        agentConnection_->closeAndWait();
        work_.reset();
        ioc_.stop();
        ioThread_.join();
        workers_.join();
    }

    // Starts the proxy and attaches sandbox "sbx-test" with this allowlist.
    void start(std::vector<std::string> allow, EgressSettings settings = {},
               EgressResolver resolver = {}) {
        settings.guestPort = 0;  // the "guest" is this host: any free port
        proxy_ = std::make_unique<EgressProxy>(
            ioc_, workers_, settings,
            [this](const std::string& sandbox, const std::string& tenant, const std::string& type,
                   const nlohmann::json& data) {
                std::lock_guard lock(mutex_);
                events_.push_back({sandbox, tenant, type, data});
                cv_.notify_all();
            },
            std::move(resolver));
        proxy_->attach("sbx-test", "tenant-a", agentConnection_, EgressAllowlist::parse(allow));
        guestPort_ = proxy_->guestPort("sbx-test");
        ASSERT_GT(guestPort_, 0u);
    }

    struct Event {
        std::string sandbox, tenant, type;
        nlohmann::json data;
    };
    // The n-th audit event (they are written when a connection ends).
    Event event(std::size_t n) {
        std::unique_lock lock(mutex_);
        if (!cv_.wait_for(lock, 20s, [&] { return events_.size() > n; })) {
            ADD_FAILURE() << "no audit event #" << n;
            return {};
        }
        return events_[n];
    }
    std::size_t eventCount() {
        std::lock_guard lock(mutex_);
        return events_.size();
    }

    std::string request(const std::string& head) {
        Client c(guestPort_);
        EXPECT_TRUE(c.connected);
        c.send(head);
        return c.readAll();
    }

    asio::io_context ioc_;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
        ioc_.get_executor()};
    asio::thread_pool workers_{4};
    std::thread ioThread_;
    test::InProcessAgent agent_;
    std::shared_ptr<AgentConnection> agentConnection_ = agent_.connect();
    std::unique_ptr<EgressProxy> proxy_;
    unsigned guestPort_ = 0;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<Event> events_;
};

// An HTTP server that answers with the request line it received and its headers.
LocalServer echoHttpServer(std::shared_ptr<std::string> lastHead) {
    return LocalServer([lastHead](int fd) {
        std::string head = readHead(fd);
        *lastHead = head;
        std::string body = "upstream saw: " + head.substr(0, head.find("\r\n"));
        writeAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                         "\r\nConnection: close\r\n\r\n" + body);
    });
}

// A TCP server that sends back every byte it reads.
LocalServer echoTcpServer() {
    return LocalServer([](int fd) {
        char buf[4096];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0)
            writeAll(fd, std::string(buf, static_cast<std::size_t>(n)));
    });
}

TEST_F(EgressProxyTest, AllowlistedHostIsProxiedAndAudited) {
    auto lastHead = std::make_shared<std::string>();
    LocalServer server = echoHttpServer(lastHead);
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    start({"localhost"}, s);
    std::string port = std::to_string(server.port());
    std::string response = request("GET http://localhost:" + port +
                                   "/some/path?x=1 HTTP/1.1\r\nHost: other.example\r\n"
                                   "Proxy-Connection: keep-alive\r\nUser-Agent: t\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 200 OK");
    EXPECT_NE(response.find("upstream saw: GET /some/path?x=1 HTTP/1.1"), std::string::npos)
        << response;
    EXPECT_NE(lastHead->find("Host: localhost:" + port + "\r\n"), std::string::npos)
        << "the checked host, not the client's";
    EXPECT_EQ(lastHead->find("other.example"), std::string::npos);
    EXPECT_EQ(lastHead->find("Proxy-Connection"), std::string::npos);
    EXPECT_NE(lastHead->find("Connection: close"), std::string::npos);

    auto e = event(0);
    EXPECT_EQ(e.type, "egress.allowed");
    EXPECT_EQ(e.sandbox, "sbx-test");
    EXPECT_EQ(e.tenant, "tenant-a");
    EXPECT_EQ(e.data["destination"], "localhost:" + port);
    EXPECT_EQ(e.data["resolved"], "127.0.0.1") << "::1 is loopback outside the operator's range";
    EXPECT_EQ(e.data["decision"], "allowed");
    EXPECT_GT(e.data["bytes_sent"].get<std::uint64_t>(), 0u);
    EXPECT_EQ(e.data["bytes_received"].get<std::uint64_t>(), response.size());
    EXPECT_TRUE(test::waitFor([&] { return proxy_->openConnections("sbx-test") == 0; }, 10s))
        << "the session ended";
}

TEST_F(EgressProxyTest, HostsOffTheAllowlistAreRefusedBeforeAnyLookup) {
    auto lastHead = std::make_shared<std::string>();
    LocalServer server = echoHttpServer(lastHead);
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.0/8")};
    std::atomic<int> lookups{0};
    start({"localhost"}, s, [&](const std::string&, std::string&) {
        ++lookups;
        return std::vector<asio::ip::address>{asio::ip::make_address("127.0.0.1")};
    });
    std::string port = std::to_string(server.port());
    for (const std::string& target :
         {"http://127.0.0.2:" + port + "/", "http://evil.example:" + port + "/"}) {
        std::string response = request("GET " + target + " HTTP/1.1\r\n\r\n");
        EXPECT_EQ(statusLine(response), "HTTP/1.1 403 Forbidden") << target;
        EXPECT_NE(response.find("not on the sandbox's allowlist"), std::string::npos) << response;
    }
    std::string response = request("CONNECT evil.example:443 HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 403 Forbidden");
    EXPECT_EQ(server.accepted(), 0);
    EXPECT_EQ(lookups.load(), 0) << "an unlisted name is not even resolved";
    EXPECT_EQ(event(0).type, "egress.denied");
    EXPECT_EQ(event(0).data["destination"], "127.0.0.2:" + port);
    EXPECT_EQ(event(1).data["destination"], "evil.example:" + port);
    EXPECT_EQ(event(2).data["destination"], "evil.example:443");
}

TEST_F(EgressProxyTest, AllowlistedNamesThatResolveToPrivateAddressesAreRefused) {
    auto lastHead = std::make_shared<std::string>();
    LocalServer server = echoHttpServer(lastHead);
    // DNS rebinding: listed names whose records point inside. No operator range.
    std::map<std::string, std::vector<std::string>> dns{
        {"rebind.example.com", {"127.0.0.1"}},
        {"metadata.example.com", {"169.254.169.254"}},
        {"intranet.example.com", {"10.0.0.7", "::ffff:192.168.0.1"}},
        {"mapped.example.com", {"::ffff:127.0.0.1"}},
    };
    start({"*.example.com", "localhost"}, {}, [&](const std::string& host, std::string& error) {
        std::vector<asio::ip::address> out;
        auto it = dns.find(host);
        if (it == dns.end()) {
            error = "no such name";
            return out;
        }
        for (const auto& a : it->second) out.push_back(asio::ip::make_address(a));
        return out;
    });
    std::string port = std::to_string(server.port());
    const std::pair<std::string, std::string> cases[] = {{"rebind.example.com", "loopback"},
                                                         {"metadata.example.com", "cloud metadata"},
                                                         {"intranet.example.com", "private"},
                                                         {"mapped.example.com", "loopback"}};
    std::size_t n = 0;
    for (const auto& [host, why] : cases) {
        std::string response = request("GET http://" + host + ":" + port + "/ HTTP/1.1\r\n\r\n");
        EXPECT_EQ(statusLine(response), "HTTP/1.1 403 Forbidden") << host;
        EXPECT_NE(response.find(why), std::string::npos) << response;
        auto e = event(n++);
        EXPECT_EQ(e.type, "egress.denied");
        EXPECT_NE(e.data["reason"].get<std::string>().find(why), std::string::npos);
        EXPECT_FALSE(e.data["resolved"].get<std::string>().empty());
    }
    // A literal address is judged the same way, listed or not.
    std::string response = request("CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 403 Forbidden");
    response = request("GET http://nowhere.example.com/ HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 502 Bad Gateway");
    EXPECT_NE(response.find("no such name"), std::string::npos);
    EXPECT_EQ(server.accepted(), 0) << "nothing reached the inside";
}

TEST_F(EgressProxyTest, OtherPortsNeedAnEntryNamingThem) {
    EgressSettings s;
    start({"public.example", "listed.example:8443"}, s, [](const std::string&, std::string&) {
        return std::vector<asio::ip::address>{asio::ip::make_address("203.0.114.9")};
    });
    std::string response = request("CONNECT public.example:22 HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 403 Forbidden");
    EXPECT_NE(response.find("port 22"), std::string::npos) << response;
    response = request("CONNECT listed.example:443 HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 403 Forbidden") << "the entry names 8443 only";
}

TEST_F(EgressProxyTest, ConnectTunnelsBytesBothWays) {
    LocalServer echo = echoTcpServer();
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    std::string port = std::to_string(echo.port());
    start({"localhost:" + port}, s);
    Client c(guestPort_);
    ASSERT_TRUE(c.connected);
    c.send("CONNECT localhost:" + port + " HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n");
    std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
    EXPECT_EQ(c.readN(established.size()), established);
    std::string payload(300 * 1024, 'x');
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
    std::thread writer([&] { c.send(payload); });
    std::string back = c.readN(payload.size());
    writer.join();
    EXPECT_TRUE(back == payload) << "got " << back.size() << " of " << payload.size()
                                 << " bytes back";
    ::shutdown(c.fd, SHUT_WR);
    auto e = event(0);
    EXPECT_EQ(e.type, "egress.allowed");
    EXPECT_EQ(e.data["method"], "CONNECT");
    EXPECT_EQ(e.data["bytes_sent"].get<std::uint64_t>(), payload.size());
    EXPECT_EQ(e.data["bytes_received"].get<std::uint64_t>(), payload.size());
}

TEST_F(EgressProxyTest, AClientThatClosesItsSendingSideStillGetsTheAnswer) {
    // Like `nc -N`: send, shut down writing, then read what comes back.
    LocalServer counter([](int fd) {
        std::size_t total = 0;
        char buf[4096];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0) total += static_cast<std::size_t>(n);
        writeAll(fd, "got " + std::to_string(total));
    });
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    std::string port = std::to_string(counter.port());
    start({"localhost:" + port}, s);
    Client c(guestPort_);
    c.send("CONNECT localhost:" + port + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(c.readN(39)), "HTTP/1.1 200 Connection established");
    c.send("hello");
    ::shutdown(c.fd, SHUT_WR);
    EXPECT_EQ(c.readAll(), "got 5");
    EXPECT_EQ(event(0).type, "egress.allowed");
    EXPECT_TRUE(test::waitFor([&] { return proxy_->openConnections("sbx-test") == 0; }, 10s));
}

TEST_F(EgressProxyTest, ASilentTunnelIsClosedAfterTheIdleTimeoutAndOneInUseIsNot) {
    LocalServer echo = echoTcpServer();
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    s.idleTimeout = 2000ms;
    std::string port = std::to_string(echo.port());
    start({"localhost:" + port}, s);
    Client c(guestPort_);
    c.send("CONNECT localhost:" + port + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(c.readN(39)), "HTTP/1.1 200 Connection established");
    // Bytes both ways every 300 ms for 2.4 s: never idle that long.
    for (int i = 0; i < 8; ++i) {
        c.send("ping");
        ASSERT_EQ(c.readN(4), "ping") << "a tunnel in use was closed after " << i * 300 << " ms";
        std::this_thread::sleep_for(300ms);
    }
    auto quietSince = std::chrono::steady_clock::now();
    ::timeval limit{15, 0};  // the test's own deadline on a tunnel never closed
    ::setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    EXPECT_EQ(c.readAll(), "") << "the tunnel ends without another byte";
    EXPECT_LT(std::chrono::steady_clock::now() - quietSince, 10s);
    auto e = event(0);
    EXPECT_EQ(e.type, "egress.allowed");
    EXPECT_NE(e.data.dump().find("idle"), std::string::npos) << e.data.dump();
    EXPECT_TRUE(test::waitFor([&] { return proxy_->openConnections("sbx-test") == 0; }, 10s));
}

TEST_F(EgressProxyTest, OperatorRangesOpenOtherPortsForExactNamesOnly) {
    LocalServer server([](int fd) {
        readHead(fd);
        writeAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    });
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    start({"registry.corp", "*.corp.example"}, s, [](const std::string&, std::string&) {
        return std::vector<asio::ip::address>{asio::ip::make_address("127.0.0.1")};
    });
    std::string port = std::to_string(server.port());
    EXPECT_EQ(statusLine(request("GET http://registry.corp:" + port + "/ HTTP/1.1\r\n\r\n")),
              "HTTP/1.1 200 OK");
    // Whoever controls DNS under a wildcard could aim it at any internal port.
    std::string response = request("GET http://db.corp.example:" + port + "/ HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 403 Forbidden");
    EXPECT_NE(response.find("port " + port), std::string::npos) << response;
}

TEST_F(EgressProxyTest, ConnectionsBeyondTheCapAreRefused) {
    LocalServer hold([](int fd) {
        char c;
        while (::read(fd, &c, 1) == 1) {
        }
    });
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    s.maxConnections = 1;
    std::string port = std::to_string(hold.port());
    start({"localhost:" + port}, s);
    Client first(guestPort_);
    first.send("CONNECT localhost:" + port + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(first.readN(39)), "HTTP/1.1 200 Connection established");
    std::string response = request("CONNECT localhost:" + port + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 503 Service Unavailable");
    EXPECT_NE(response.find("1 egress connections open"), std::string::npos) << response;
    ::shutdown(first.fd, SHUT_WR);
    EXPECT_TRUE(test::waitFor([&] { return proxy_->openConnections("sbx-test") == 0; }, 10s));
}

TEST_F(EgressProxyTest, BandwidthIsCappedPerSandbox) {
    constexpr std::size_t kBytes = 192 * 1024;
    LocalServer big([&](int fd) {
        readHead(fd);
        writeAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kBytes) + "\r\n\r\n" +
                         std::string(kBytes, 'b'));
    });
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    s.bytesPerSecond = 64 * 1024;  // one second of burst, then 64 KiB/s
    start({"localhost"}, s);
    auto started = std::chrono::steady_clock::now();
    std::string response =
        request("GET http://localhost:" + std::to_string(big.port()) + "/ HTTP/1.1\r\n\r\n");
    auto took = std::chrono::steady_clock::now() - started;
    EXPECT_GE(response.size(), kBytes);
    // 192 KiB = 64 KiB of burst + 128 KiB paced: at least 2 s, however fast the machine.
    EXPECT_GE(took, 1900ms);
}

TEST_F(EgressProxyTest, MalformedRequestsGetAnHttpError) {
    start({"localhost"});
    EXPECT_EQ(statusLine(request("GET /relative HTTP/1.1\r\n\r\n")), "HTTP/1.1 400 Bad Request");
    EXPECT_EQ(statusLine(request("GET http://localhost/ HTTP/1.1\r\nX: " + std::string(20000, 'a') +
                                 "\r\n\r\n")),
              "HTTP/1.1 431 Request Header Fields Too Large");
    EXPECT_EQ(event(0).type, "egress.denied");
}

TEST_F(EgressProxyTest, AFloodOfAttemptsCannotFloodTheAuditLog) {
    EgressSettings s;
    s.maxAuditPerMinute = 3;
    start({}, s);
    for (int i = 0; i < 6; ++i)
        EXPECT_EQ(statusLine(request("GET http://blocked.example/ HTTP/1.1\r\n\r\n")),
                  "HTTP/1.1 403 Forbidden");
    ASSERT_TRUE(test::waitFor([&] { return proxy_->openConnections("sbx-test") == 0; }, 10s));
    EXPECT_EQ(eventCount(), 3u) << "refused all the same, recorded up to the budget";
}

TEST_F(EgressProxyTest, AllowlistChangesApplyToTheNextConnection) {
    auto lastHead = std::make_shared<std::string>();
    LocalServer server = echoHttpServer(lastHead);
    EgressSettings s;
    s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    start({}, s);  // an empty allowlist: everything is refused (and audited)
    std::string target =
        "GET http://localhost:" + std::to_string(server.port()) + "/ HTTP/1.1\r\n\r\n";
    EXPECT_EQ(statusLine(request(target)), "HTTP/1.1 403 Forbidden");
    ASSERT_TRUE(proxy_->update("sbx-test", EgressAllowlist::parse({"localhost"})));
    EXPECT_EQ(statusLine(request(target)), "HTTP/1.1 200 OK");
    EXPECT_FALSE(proxy_->update("sbx-other", EgressAllowlist::parse({"localhost"})))
        << "not attached";
}

TEST_F(EgressProxyTest, DetachClosesTheGuestListener) {
    start({"localhost"});
    ASSERT_TRUE(Client(guestPort_).connected);
    proxy_->detach("sbx-test");
    EXPECT_TRUE(test::waitFor([&] { return !Client(guestPort_).connected; }, 10s))
        << "the guest stopped listening";
    EXPECT_EQ(proxy_->guestPort("sbx-test"), 0u);
}

// ---- Secrets added at the proxy (TLS opened only for their hosts) ----

using SslCtx = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;
using Ssl = std::unique_ptr<SSL, decltype(&SSL_free)>;

// The "internet" host over TLS (certificate from certDir): 200 to a
// request that carries `wanted` in its head, else 401.
// A TLS host that answers each request with the head it got.
std::unique_ptr<test::TlsTestServer> echoHost(const std::string& certDir) {
    return std::make_unique<test::TlsTestServer>(
        certDir + "/server.pem", certDir + "/server.key",
        [](const std::string& head) -> std::pair<std::string, std::string> {
            return {"200 OK", head};
        });
}

std::unique_ptr<test::TlsTestServer> tlsHost(const std::string& certDir, std::string wanted) {
    return std::make_unique<test::TlsTestServer>(
        certDir + "/server.pem", certDir + "/server.key",
        [wanted](const std::string& head) -> std::pair<std::string, std::string> {
            if (head.find(wanted) != std::string::npos) return {"200 OK", "authorized"};
            return {"401 No", "who are you"};
        });
}

// The guest's TLS over its CONNECTed socket, trusting `ca` only.
struct GuestTls {
    GuestTls(int fd, X509* ca, const std::string& host)
        : ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free), ssl(nullptr, SSL_free) {
        X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
        SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
        ssl.reset(SSL_new(ctx.get()));
        SSL_set_fd(ssl.get(), fd);
        SSL_set_tlsext_host_name(ssl.get(), host.c_str());
        SSL_set1_host(ssl.get(), host.c_str());
        // Offers h2 first, as curl does: HTTP/1.1 is what it gets.
        SSL_set_alpn_protos(ssl.get(), reinterpret_cast<const unsigned char*>("\x02h2\x08http/1.1"),
                            12);
        ok = SSL_connect(ssl.get()) == 1;
    }
    void send(const std::string& bytes) {
        std::size_t off = 0;
        while (off < bytes.size()) {
            int n = SSL_write(ssl.get(), bytes.data() + off,
                              static_cast<int>(std::min<std::size_t>(bytes.size() - off, 1 << 20)));
            if (n <= 0) return;
            off += static_cast<std::size_t>(n);
        }
    }
    // One answer with a Content-Length body.
    std::string readAnswer() {
        std::string body;
        std::string head = test::readTlsMessage(ssl.get(), body);
        return head + body;
    }
    std::string readToEnd() {
        std::string out;
        char buf[4096];
        int n;
        while ((n = SSL_read(ssl.get(), buf, sizeof buf)) > 0)
            out.append(buf, static_cast<std::size_t>(n));
        return out;
    }
    std::string alpn() {
        const unsigned char* p = nullptr;
        unsigned int len = 0;
        SSL_get0_alpn_selected(ssl.get(), &p, &len);
        return std::string(reinterpret_cast<const char*>(p), len);
    }
    SslCtx ctx;
    Ssl ssl;
    bool ok = false;
};

class SecretInjectionTest : public EgressProxyTest {
  protected:
    void SetUp() override {
        ASSERT_TRUE(test::makeTestCertificates(certs_.path(), "DNS:localhost"));
        injections_ = std::make_shared<SandboxInjections>();
        injections_->ca = SandboxCa::create("sbx-test", std::chrono::hours(1));
        InjectedSecret token;
        token.name = "TOKEN";
        token.value = "real-token-value";
        token.placeholder = "airlock-secret-TOKEN-5f2a9c";
        token.hosts = {"localhost"};
        token.header = "Authorization";
        token.format = "Bearer {value}";
        InjectedSecret key;
        key.name = "KEY";
        key.value = "real-key-value";
        key.placeholder = "airlock-secret-KEY-77e1b0";
        key.hosts = {"localhost"};
        injections_->secrets = {token, key};
    }
    // The secrets go to this port of localhost only.
    void secretsFor(unsigned port) {
        for (auto& secret : injections_->secrets)
            secret.hosts = {"localhost:" + std::to_string(port)};
    }
    void startWith(std::vector<std::string> allow, const std::string& caFile) {
        EgressSettings s;
        s.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
        s.upstreamCaFile = caFile;
        start(std::move(allow), s);
        ASSERT_TRUE(proxy_->setInjections("sbx-test", injections_));
    }
    // CONNECT through the proxy, then the guest's own TLS.
    std::unique_ptr<GuestTls> connectTls(Client& c, unsigned port) {
        c.send("CONNECT localhost:" + std::to_string(port) +
               " HTTP/1.1\r\nHost: localhost:" + std::to_string(port) + "\r\n\r\n");
        std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
        EXPECT_EQ(c.readN(established.size()), established);
        return std::make_unique<GuestTls>(c.fd, injections_->ca->certificate(), "localhost");
    }
    Event eventOfType(const std::string& type) {
        std::unique_lock lock(mutex_);
        Event found;
        bool seen = cv_.wait_for(lock, 20s, [&] {
            for (const auto& e : events_)
                if (e.type == type) {
                    found = e;
                    return true;
                }
            return false;
        });
        if (!seen) ADD_FAILURE() << "no " << type << " event";
        return found;
    }
    test::TempDir certs_;
    std::shared_ptr<SandboxInjections> injections_;
};

TEST_F(SecretInjectionTest, TheHostGetsTheSecretTheGuestNeverHeld) {
    auto host = tlsHost(certs_.path(), "Authorization: Bearer real-token-value\r\n");
    secretsFor(host->port());
    startWith({"localhost"}, certs_.path() + "/ca.pem");
    Client c(guestPort_);
    ASSERT_TRUE(c.connected);
    auto tls = connectTls(c, host->port());
    ASSERT_TRUE(tls->ok) << "the guest trusts its sandbox's CA for this host";
    EXPECT_EQ(tls->alpn(), "http/1.1");
    const std::string port = std::to_string(host->port());
    // Keep-alive: every request on the connection gets it, a body streams through.
    std::string body(1 << 20, 'b');
    tls->send("POST /v1/upload HTTP/1.1\r\nHost: localhost:" + port +
              "\r\nAuthorization: Bearer guessed\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_EQ(tls->readAnswer(), "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nauthorized");
    tls->send("GET /v1/models?k=airlock-secret-KEY-77e1b0 HTTP/1.1\r\nHost: localhost:" + port +
              "\r\nX-Key: airlock-secret-KEY-77e1b0\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(tls->readAnswer(), "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nauthorized");
    auto heads = host->heads();
    ASSERT_EQ(heads.size(), 2u);
    EXPECT_EQ(heads[0].find("guessed"), std::string::npos) << "the guest's own header went";
    EXPECT_EQ(host->bodies()[0], body);
    EXPECT_NE(heads[1].find("GET /v1/models?k=real-key-value HTTP/1.1"), std::string::npos)
        << heads[1];
    EXPECT_NE(heads[1].find("X-Key: real-key-value\r\n"), std::string::npos);
    EXPECT_EQ(heads[1].find("airlock-secret-"), std::string::npos)
        << "no placeholder reaches the host";
    auto injected = eventOfType("egress.secret_injected");
    EXPECT_EQ(injected.data["secret"], "TOKEN");
    EXPECT_EQ(injected.data["host"], "localhost");
    EXPECT_EQ(injected.data["method"], "POST");
    EXPECT_EQ(injected.data["path"], "/v1/upload");
    std::lock_guard lock(mutex_);
    for (const auto& e : events_)
        EXPECT_EQ(e.data.dump().find("real-"), std::string::npos) << e.data.dump();
}

// A host that echoes what it got shows the guest no value: the answer
// comes uncompressed and the value, split across reads or not, is masked.
TEST_F(SecretInjectionTest, AHostThatEchoesTheSecretShowsTheGuestAsterisks) {
    auto echoed = echoHost(certs_.path());
    auto& echo = *echoed;
    secretsFor(echo.port());
    startWith({"localhost"}, certs_.path() + "/ca.pem");
    Client c(guestPort_);
    ASSERT_TRUE(c.connected);
    auto tls = connectTls(c, echo.port());
    ASSERT_TRUE(tls->ok);
    const std::string port = std::to_string(echo.port());
    tls->send("GET /echo HTTP/1.1\r\nHost: localhost:" + port +
              "\r\nAccept-Encoding: gzip, br\r\nX-Key: airlock-secret-KEY-77e1b0\r\n\r\n");
    auto answer = tls->readAnswer();
    EXPECT_EQ(answer.find("real-"), std::string::npos) << answer;
    EXPECT_NE(answer.find("Authorization: Bearer " + std::string(16, '*') + "\r\n"),
              std::string::npos)
        << answer;
    EXPECT_NE(answer.find("X-Key: " + std::string(14, '*') + "\r\n"), std::string::npos);
    EXPECT_NE(answer.find("Accept-Encoding: identity\r\n"), std::string::npos) << answer;
    EXPECT_EQ(answer.find("gzip"), std::string::npos);
    ASSERT_EQ(echo.heads().size(), 1u);
    EXPECT_NE(echo.heads()[0].find("Bearer real-token-value"), std::string::npos)
        << "the host itself got the value";
}

// A tenant's rotation or removal reaches a connection the guest keeps
// open: each request head takes the sandbox's secrets as they are then,
// and answers mask the new value as well as the old.
TEST_F(SecretInjectionTest, AKeptAliveConnectionTakesARotationAndARemovalAtItsNextRequest) {
    auto echoed = echoHost(certs_.path());
    auto& echo = *echoed;
    secretsFor(echo.port());
    startWith({"localhost"}, certs_.path() + "/ca.pem");
    Client c(guestPort_);
    ASSERT_TRUE(c.connected);
    auto tls = connectTls(c, echo.port());
    ASSERT_TRUE(tls->ok);
    const std::string request = "GET /echo HTTP/1.1\r\nHost: localhost:" +
                                std::to_string(echo.port()) + "\r\n\r\n";
    tls->send(request);
    EXPECT_EQ(tls->readAnswer().find("real-"), std::string::npos);

    auto rotated = std::make_shared<SandboxInjections>(*injections_);
    rotated->secrets[0].value = "rotated-token-value-2";
    ASSERT_TRUE(proxy_->setInjections("sbx-test", rotated));
    tls->send(request);
    auto answer = tls->readAnswer();
    EXPECT_EQ(answer.find("rotated-"), std::string::npos) << "the new value is masked too";
    EXPECT_NE(answer.find("Authorization: Bearer " + std::string(21, '*')), std::string::npos)
        << answer;

    auto removed = std::make_shared<SandboxInjections>(*rotated);
    removed->secrets.erase(removed->secrets.begin());  // TOKEN goes, KEY stays
    ASSERT_TRUE(proxy_->setInjections("sbx-test", removed));
    tls->send(request);
    EXPECT_EQ(tls->readAnswer().find("rotated-"), std::string::npos);

    auto heads = echo.heads();
    ASSERT_EQ(heads.size(), 3u);
    EXPECT_NE(heads[0].find("Bearer real-token-value"), std::string::npos) << heads[0];
    EXPECT_NE(heads[1].find("Bearer rotated-token-value-2"), std::string::npos) << heads[1];
    EXPECT_EQ(heads[2].find("Authorization"), std::string::npos)
        << "removed: the same connection's next request goes without it";
}

TEST_F(SecretInjectionTest, APlaceholderSentElsewhereIsRefusedAndAudited) {
    LocalServer other([](int fd) {
        readHead(fd);
        writeAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    });
    startWith({"localhost", "127.0.0.1"}, certs_.path() + "/ca.pem");
    std::string response = request("GET http://127.0.0.1:" + std::to_string(other.port()) +
                                   "/?leak=airlock-secret-TOKEN-5f2a9c HTTP/1.1\r\n\r\n");
    EXPECT_EQ(statusLine(response), "HTTP/1.1 403 Forbidden") << response;
    EXPECT_NE(response.find("TOKEN"), std::string::npos) << "the guest is told which secret";
    auto blocked = eventOfType("egress.secret_blocked");
    EXPECT_EQ(blocked.data["secret"], "TOKEN");
    EXPECT_EQ(blocked.data["host"], "127.0.0.1");
    EXPECT_EQ(other.accepted(), 0) << "nothing reached the other host";
    // Plain HTTP never carries a secret, not even to its own host.
    EXPECT_EQ(statusLine(request(
                  "GET http://localhost:1/ HTTP/1.1\r\nX: airlock-secret-KEY-77e1b0\r\n\r\n")),
              "HTTP/1.1 403 Forbidden");
    // Nor does the name a tunnel asks for.
    EXPECT_EQ(statusLine(request("CONNECT airlock-secret-key-77e1b0.example:443 HTTP/1.1\r\n\r\n")),
              "HTTP/1.1 403 Forbidden");
}

TEST_F(SecretInjectionTest, OtherHostsStayOpaqueTunnels) {
    LocalServer echo = echoTcpServer();
    injections_->secrets[0].hosts = {"api.example.com"};
    injections_->secrets[1].hosts = {"api.example.com"};
    startWith({"localhost"}, certs_.path() + "/ca.pem");
    Client c(guestPort_);
    std::string port = std::to_string(echo.port());
    c.send("CONNECT localhost:" + port + " HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n");
    std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
    EXPECT_EQ(c.readN(established.size()), established);
    // What the guest sends is what the host gets: a ClientHello would pass as is.
    const std::string hello = "\x16\x03\x01 not opened by the proxy";
    c.send(hello);
    EXPECT_EQ(c.readN(hello.size()), hello);
}

TEST_F(SecretInjectionTest, AHostWhoseCertificateFailsGets502AndAnAuditNamingWhy) {
    auto host = tlsHost(certs_.path(), "Authorization");
    secretsFor(host->port());
    test::TempDir otherCa;
    ASSERT_TRUE(test::makeTestCertificates(otherCa.path(), "DNS:localhost"));
    startWith({"localhost"}, otherCa.path() + "/ca.pem");  // not the host's CA
    Client c(guestPort_);
    auto tls = connectTls(c, host->port());
    ASSERT_TRUE(tls->ok);
    tls->send("GET / HTTP/1.1\r\nHost: localhost:" + std::to_string(host->port()) + "\r\n\r\n");
    std::string answer = tls->readToEnd();
    EXPECT_EQ(statusLine(answer), "HTTP/1.1 502 Bad Gateway") << answer;
    EXPECT_NE(answer.find("failed verification"), std::string::npos) << answer;
    auto failed = eventOfType("egress.failed");
    EXPECT_NE(failed.data["reason"].get<std::string>().find("verification"), std::string::npos);
    EXPECT_TRUE(host->heads().empty()) << "no request reached an unverified host";
}

}  // namespace
}  // namespace airlock::egress
