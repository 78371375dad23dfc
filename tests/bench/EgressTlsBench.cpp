// Injected secrets' cost: HTTPS through a host the egress proxy opens (its
// own TLS both ways, the header added) against the same host through a
// plain CONNECT tunnel, in one run, with the real proxy and agent loop (an
// in-process agent) and a local TLS host: request latency on a new
// connection each time, and the throughput of one large upload.
//   airlock-egress-bench [RUNS] [UPLOAD_MIB]
// Every figure is also printed as an "@figure {json}" line for scripts/bench.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "egress/EgressProxy.hpp"
#include "support/HttpsClient.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"
#include "support/TlsTestServer.hpp"

using namespace airlock;
using namespace airlock::egress;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

void figure(const std::string& name, const std::string& unit, const std::vector<double>& samples,
            const std::string& baseline, double baselineValue, const std::string& goal) {
    std::string line = "@figure {\"name\":\"egress_tls." + name + "\",\"unit\":\"" + unit +
                       "\",\"value\":" + std::to_string(median(samples)) + ",\"samples\":[";
    for (std::size_t i = 0; i < samples.size(); ++i)
        line += (i ? "," : "") + std::to_string(samples[i]);
    line += "]";
    if (!baseline.empty())
        line += ",\"baseline\":\"egress_tls." + baseline +
                "\",\"baseline_value\":" + std::to_string(baselineValue) + ",\"goal\":\"" + goal +
                "\"";
    std::printf("%s}\n", line.c_str());
}

// One HTTPS exchange as a guest client makes it: a connection to the
// proxy's guest port, CONNECT, TLS trusting `ca` only, the request, the
// whole answer. The seconds it took; -1 when it failed.
double exchange(unsigned guestPort, unsigned hostPort, X509* caCert, const std::string& caFile,
                const std::string& request) {
    auto t0 = Clock::now();
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(guestPort));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return ::close(fd), -1;
    std::string port = std::to_string(hostPort);
    std::string connect =
        "CONNECT localhost:" + port + " HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n";
    (void)!::write(fd, connect.data(), connect.size());
    std::string reply;
    char c;
    while (reply.find("\r\n\r\n") == std::string::npos && ::read(fd, &c, 1) == 1) reply += c;
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (caCert) X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), caCert);
    if (!caFile.empty()) SSL_CTX_load_verify_locations(ctx, caFile.c_str(), nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL* s = SSL_new(ctx);
    SSL_set_fd(s, fd);
    SSL_set_tlsext_host_name(s, "localhost");
    SSL_set1_host(s, "localhost");
    double took = -1;
    if (SSL_connect(s) == 1) {
        std::size_t off = 0;
        while (off < request.size()) {
            int n =
                SSL_write(s, request.data() + off,
                          static_cast<int>(std::min<std::size_t>(request.size() - off, 1 << 20)));
            if (n <= 0) break;
            off += static_cast<std::size_t>(n);
        }
        std::string answer;
        char buf[16384];
        int n;
        while (answer.find("\r\n\r\n") == std::string::npos ||
               answer.size() < answer.find("\r\n\r\n") + 4 + 7) {
            n = SSL_read(s, buf, sizeof buf);
            if (n <= 0) break;
            answer.append(buf, static_cast<std::size_t>(n));
        }
        if (answer.rfind("HTTP/1.1 200", 0) == 0)
            took = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    SSL_free(s);
    SSL_CTX_free(ctx);
    ::close(fd);
    return took;
}

}  // namespace

int main(int argc, char** argv) {
    int runs = argc > 1 ? std::max(3, std::atoi(argv[1])) : 31;
    std::size_t mib = argc > 2 ? static_cast<std::size_t>(std::max(1, std::atoi(argv[2]))) : 64;
    test::TempDir certs;
    if (!test::makeTestCertificates(certs.path(), "DNS:localhost")) {
        std::fprintf(stderr, "egress bench: openssl could not make the certificates\n");
        return 1;
    }
    auto answer = [](const std::string& head) -> std::pair<std::string, std::string> {
        return {head.find("Authorization: Bearer bench-secret-value\r\n") != std::string::npos ||
                        head.find("X-Tunnel: 1") != std::string::npos
                    ? "200 OK"
                    : "401 No",
                "granted"};
    };
    test::TlsTestServer intercepted(certs.path() + "/server.pem", certs.path() + "/server.key",
                                    answer);
    test::TlsTestServer tunnelled(certs.path() + "/server.pem", certs.path() + "/server.key",
                                  answer);

    boost::asio::io_context ioc;
    auto work = boost::asio::make_work_guard(ioc);
    boost::asio::thread_pool workers(4);
    std::thread io([&] { ioc.run(); });
    test::InProcessAgent agent;
    auto connection = agent.connect();
    EgressSettings settings;
    settings.guestPort = 0;
    settings.allowCidrs = {CidrRange::parse("127.0.0.1/32")};
    settings.bytesPerSecond = 1ull << 40;
    settings.upstreamCaFile = certs.path() + "/ca.pem";
    auto proxy = std::make_unique<EgressProxy>(ioc, workers, settings, [](auto&&...) {});
    proxy->attach("sbx-bench", "bench", connection, EgressAllowlist::parse({"localhost"}));
    auto injections = std::make_shared<SandboxInjections>();
    injections->ca = SandboxCa::create("sbx-bench", std::chrono::hours(1));
    InjectedSecret secret;
    secret.name = "TOKEN";
    secret.value = "bench-secret-value";
    secret.placeholder = "airlock-secret-TOKEN-bench";
    secret.hosts = {"localhost:" + std::to_string(intercepted.port())};
    secret.header = "Authorization";
    secret.format = "Bearer {value}";
    injections->secrets = {secret};
    proxy->setInjections("sbx-bench", injections);
    unsigned guestPort = proxy->guestPort("sbx-bench");
    X509* sandboxCa = injections->ca->certificate();
    const std::string fixtureCa = certs.path() + "/ca.pem";

    std::string small = "GET /check HTTP/1.1\r\nHost: localhost\r\nX-Tunnel: 1\r\n\r\n";
    std::vector<double> viaProxy, viaTunnel;
    for (int i = 0; i < runs; ++i) {  // interleaved: the machine's noise falls on both
        auto smallFor = [&](unsigned port) {
            return "GET /check HTTP/1.1\r\nHost: localhost:" + std::to_string(port) +
                   "\r\nX-Tunnel: 1\r\n\r\n";
        };
        double a =
            exchange(guestPort, intercepted.port(), sandboxCa, "", smallFor(intercepted.port()));
        double b =
            exchange(guestPort, tunnelled.port(), nullptr, fixtureCa, smallFor(tunnelled.port()));
        if (a > 0) viaProxy.push_back(a * 1000);
        if (b > 0) viaTunnel.push_back(b * 1000);
    }
    (void)small;
    std::string body(mib << 20, 'u');
    std::vector<double> upProxy, upTunnel;
    for (int i = 0; i < 3; ++i) {
        auto uploadFor = [&](unsigned port) {
            return "POST /upload HTTP/1.1\r\nHost: localhost:" + std::to_string(port) +
                   "\r\nX-Tunnel: 1\r\nContent-Length: " + std::to_string(body.size()) +
                   "\r\n\r\n" + body;
        };
        double a =
            exchange(guestPort, intercepted.port(), sandboxCa, "", uploadFor(intercepted.port()));
        double b =
            exchange(guestPort, tunnelled.port(), nullptr, fixtureCa, uploadFor(tunnelled.port()));
        if (a > 0) upProxy.push_back(static_cast<double>(mib) / a);
        if (b > 0) upTunnel.push_back(static_cast<double>(mib) / b);
    }
    std::printf(
        "HTTPS request on a new connection: intercepted %.2f ms, plain tunnel %.2f ms (%.2fx)\n",
        median(viaProxy), median(viaTunnel),
        median(viaTunnel) > 0 ? median(viaProxy) / median(viaTunnel) : 0);
    std::printf("%zu MiB upload: intercepted %.1f MiB/s, plain tunnel %.1f MiB/s (%.2fx)\n", mib,
                median(upProxy), median(upTunnel),
                median(upTunnel) > 0 ? median(upProxy) / median(upTunnel) : 0);
    figure("tunnel_request_ms", "ms", viaTunnel, "", 0, "");
    figure("intercepted_request_ms", "ms", viaProxy, "tunnel_request_ms", median(viaTunnel),
           "<= 1.3");
    figure("tunnel_upload_mib_s", "MiB/s", upTunnel, "", 0, "");
    figure("intercepted_upload_mib_s", "MiB/s", upProxy, "tunnel_upload_mib_s", median(upTunnel),
           ">= 0.7");
    proxy.reset();
    work.reset();
    ioc.stop();
    io.join();
    workers.join();
    bool ok = viaProxy.size() == static_cast<std::size_t>(runs) && upProxy.size() == 3;
    if (!ok) std::fprintf(stderr, "egress bench: some exchanges failed\n");
    return ok ? 0 : 1;
}
