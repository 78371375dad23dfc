#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

typedef struct ssl_st SSL;

namespace airlock::test {

// One HTTP message read over TLS: its head, and into `body` its
// Content-Length body; "" once the connection ends.
std::string readTlsMessage(SSL* ssl, std::string& body);

// An HTTPS host for tests on 127.0.0.1 (a certificate and key in PEM, e.g.
// makeTestCertificates'): each connection on its own thread, keep-alive,
// requests with Content-Length bodies; `answer(head)` gives the status line
// and the body of each answer. Every head it read is kept.
class TlsTestServer {
  public:
    using Answer = std::function<std::pair<std::string, std::string>(const std::string& head)>;
    TlsTestServer(const std::string& certFile, const std::string& keyFile, Answer answer);
    ~TlsTestServer();
    TlsTestServer(const TlsTestServer&) = delete;
    TlsTestServer& operator=(const TlsTestServer&) = delete;
    unsigned port() const { return port_; }
    std::vector<std::string> heads();
    std::vector<std::string> bodies();

  private:
    void serve(int fd);
    struct Context;
    std::unique_ptr<Context> ctx_;
    Answer answer_;
    int fd_ = -1;
    unsigned port_ = 0;
    std::thread acceptor_;
    std::mutex mutex_;
    std::vector<std::thread> connections_;
    std::vector<std::string> heads_, bodies_;
};

}  // namespace airlock::test
