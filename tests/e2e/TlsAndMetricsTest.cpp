// --tls-cert/--tls-key and --metrics-listen on a real airlockd: HTTPS and
// WSS verified against a CA the test made, TLS 1.2 at least, plain HTTP
// refused on the TLS port, and /metrics without a key on its own address
// only.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "support/ApiClient.hpp"
#include "support/DaemonProcess.hpp"
#include "support/HttpsClient.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using nlohmann::json;
using namespace std::chrono_literals;

using test::clientContext;
using test::connectTls;
using test::httpsRequest;
using test::TlsOptions;

class TlsAndMetrics : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(test::templatesBuilt()) << "run scripts/setup first";
        ASSERT_TRUE(test::makeTestCertificates(tmp.path()))
            << "openssl could not make the test certificates";
        dataDir = tmp.path() + "/data";
        metricsPort = test::freePort();
        daemon = std::make_unique<test::Daemon>(
            dataDir, test::freePort(),
            std::vector<std::string>{"--tls-cert", tmp.path() + "/server.pem", "--tls-key",
                                     tmp.path() + "/server.key", "--metrics-listen",
                                     "127.0.0.1:" + std::to_string(metricsPort)});
        std::ifstream keyFile(dataDir + "/admin.key");
        std::getline(keyFile, key);
        trusted.caFile = tmp.path() + "/ca.pem";
    }
    void TearDown() override {
        if (daemon) {
            EXPECT_EQ(daemon->shutDown(HasFailure()), "") << "airlockd died during the test";
        }
        daemon.reset();
    }

    test::TempDir tmp;
    std::string dataDir, key;
    int metricsPort = 0;
    TlsOptions trusted;
    std::unique_ptr<test::Daemon> daemon;
};

TEST_F(TlsAndMetrics, HttpsAndWssWithTheOperatorsCertificateOnly) {
    asio::io_context ioc;
    auto ctx = clientContext(trusted);
    auto tls = connectTls(ioc, ctx, daemon->port());
    EXPECT_EQ(SSL_version(tls->native_handle()), TLS1_3_VERSION) << "TLS 1.3 is preferred";
    auto health = httpsRequest(*tls, http::verb::get, "/healthz", "");
    EXPECT_EQ(health.status, 200) << health.body;
    // Keep-alive through the TLS pipe: a second request on the connection.
    EXPECT_EQ(httpsRequest(*tls, http::verb::get, "/v1/sandboxes", "").status, 401);
    EXPECT_EQ(httpsRequest(*tls, http::verb::get, "/v1/sandboxes", key).status, 200);

    // A client that does not trust the operator's CA refuses the server.
    auto untrusted = clientContext({});
    EXPECT_ANY_THROW(connectTls(ioc, untrusted, daemon->port()));
    // TLS 1.1 and older are refused; 1.2 is served.
    auto old = clientContext({trusted.caFile, TLS1_1_VERSION});
    EXPECT_ANY_THROW(connectTls(ioc, old, daemon->port()));
    auto twelve = clientContext({trusted.caFile, TLS1_2_VERSION});
    auto tls12 = connectTls(ioc, twelve, daemon->port());
    EXPECT_EQ(SSL_version(tls12->native_handle()), TLS1_2_VERSION);
    EXPECT_EQ(httpsRequest(*tls12, http::verb::get, "/healthz", "").status, 200);
    // Plain HTTP on the TLS port gets no HTTP answer.
    EXPECT_EQ(test::rawHttp(daemon->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                  .rfind("HTTP/1.1 200", 0),
              std::string::npos);

    // A sandbox over HTTPS, a command over WSS, and the key checked before
    // the upgrade.
    auto created =
        httpsRequest(*tls, http::verb::post, "/v1/sandboxes", key, R"({"template":"minimal"})");
    ASSERT_EQ(created.status, 201) << created.body;
    std::string id = json::parse(created.body)["id"];
    auto wss = [&](const std::string& withKey) {
        auto ws = std::make_unique<websocket::stream<beast::ssl_stream<beast::tcp_stream>>>(
            std::move(*connectTls(ioc, ctx, daemon->port())));
        ws->set_option(websocket::stream_base::decorator([withKey](websocket::request_type& req) {
            req.set(http::field::authorization, "Bearer " + withKey);
        }));
        beast::get_lowest_layer(*ws).expires_never();
        ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
        ws->handshake("127.0.0.1", "/v1/sandboxes/" + id + "/exec/ws");
        return ws;
    };
    EXPECT_ANY_THROW(wss("not-a-key")) << "no upgrade without a valid key";
    auto ws = wss(key);
    ws->text(true);
    ws->write(asio::buffer(std::string(R"({"cmd":["sh","-c","echo over-wss; exit 3"]})")));
    std::string output;
    std::optional<json> exit;
    while (!exit) {
        beast::flat_buffer b;
        ws->read(b);
        std::string m = beast::buffers_to_string(b.data());
        if (ws->got_binary()) {
            output += m.substr(1);
            continue;
        }
        auto j = json::parse(m);
        if (j["type"] == "exit") exit = j;
    }
    EXPECT_EQ(output, "over-wss\n");
    EXPECT_EQ((*exit)["exit_code"], 3);
    EXPECT_EQ(httpsRequest(*tls, http::verb::delete_, "/v1/sandboxes/" + id, key).status, 204);
}

TEST_F(TlsAndMetrics, MetricsWithoutAKeyOnlyOnTheirOwnAddress) {
    test::ApiClient metrics("http://127.0.0.1:" + std::to_string(metricsPort), "");
    auto scrape = metrics.request("GET", "/metrics");
    ASSERT_EQ(scrape.status, 200) << scrape.body;
    for (const char* series :
         {"airlock_sandboxes", "airlock_approvals_pending", "airlock_egress_decisions_total",
          "airlock_agent_protocol_errors_total", "airlock_qemu_rss_bytes",
          "airlock_create_seconds_bucket", "airlock_exec_seconds_bucket"})
        EXPECT_NE(scrape.body.find(series), std::string::npos) << series;
    // Nothing else is served there, not even with a key.
    EXPECT_EQ(metrics.request("GET", "/v1/sandboxes").status, 404);
    test::ApiClient keyed("http://127.0.0.1:" + std::to_string(metricsPort), key);
    EXPECT_EQ(keyed.request("GET", "/v1/keys").status, 404);
    EXPECT_EQ(metrics.request("POST", "/metrics", "{}").status, 404);
    // On the API's own port /metrics still wants an admin key.
    asio::io_context ioc;
    auto ctx = clientContext(trusted);
    auto tls = connectTls(ioc, ctx, daemon->port());
    EXPECT_EQ(httpsRequest(*tls, http::verb::get, "/metrics", "").status, 401);
    EXPECT_EQ(httpsRequest(*tls, http::verb::get, "/metrics", key).status, 200);
    // Requests are counted by door and route-table row, never by raw path.
    auto counted = metrics.request("GET", "/metrics").body;
    EXPECT_NE(counted.find(R"(airlock_http_requests_total{door="native",route="GET /metrics",)"
                           R"(status="4xx"} )"),
              std::string::npos)
        << counted;
    EXPECT_NE(counted.find(R"(airlock_http_requests_total{door="native",route="GET /metrics",)"
                           R"(status="2xx"} )"),
              std::string::npos);
}

}  // namespace
}  // namespace airlock
