#include "support/TlsTestServer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <stdexcept>

#include "core/AsciiLower.hpp"

namespace airlock::test {

struct TlsTestServer::Context {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    ~Context() { SSL_CTX_free(ctx); }
};

std::string readTlsMessage(SSL* s, std::string& body) {
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos) {
        if (SSL_read(s, &c, 1) != 1) return "";
        head += c;
    }
    body.clear();
    auto at = asciiLower(head).find("\r\ncontent-length:");
    std::size_t length = at == std::string::npos ? 0 : std::stoul(head.substr(at + 17));
    std::vector<char> buf(64 * 1024);
    while (body.size() < length) {
        int n =
            SSL_read(s, buf.data(), static_cast<int>(std::min(buf.size(), length - body.size())));
        if (n <= 0) return "";
        body.append(buf.data(), static_cast<std::size_t>(n));
    }
    return head;
}

TlsTestServer::TlsTestServer(const std::string& certFile, const std::string& keyFile, Answer answer)
    : ctx_(std::make_unique<Context>()), answer_(std::move(answer)) {
    // OpenSSL writes with write(2): a client that left must not kill the test.
    ::signal(SIGPIPE, SIG_IGN);
    if (SSL_CTX_use_certificate_chain_file(ctx_->ctx, certFile.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_->ctx, keyFile.c_str(), SSL_FILETYPE_PEM) != 1)
        throw std::runtime_error("TlsTestServer: cannot load " + certFile);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("TlsTestServer: cannot listen");
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] {
        for (;;) {
            int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) return;
            std::lock_guard lock(mutex_);
            connections_.emplace_back([this, c] {
                serve(c);
                ::close(c);
            });
        }
    });
}

TlsTestServer::~TlsTestServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    std::vector<std::thread> connections;
    {
        std::lock_guard lock(mutex_);
        connections = std::move(connections_);
    }
    for (auto& t : connections) t.join();
}

void TlsTestServer::serve(int fd) {
    timeval tv{60, 0};  // a client that goes quiet ends its connection
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    SSL* s = SSL_new(ctx_->ctx);
    SSL_set_fd(s, fd);
    if (SSL_accept(s) == 1) {
        for (;;) {
            std::string body, head = readTlsMessage(s, body);
            if (head.empty()) break;
            {
                std::lock_guard lock(mutex_);
                heads_.push_back(head);
                bodies_.push_back(body);
            }
            auto [status, text] = answer_(head);
            std::string out = "HTTP/1.1 " + status +
                              "\r\nContent-Length: " + std::to_string(text.size()) + "\r\n\r\n" +
                              text;
            if (SSL_write(s, out.data(), static_cast<int>(out.size())) <= 0) break;
        }
        SSL_shutdown(s);
    }
    SSL_free(s);
}

std::vector<std::string> TlsTestServer::heads() {
    std::lock_guard lock(mutex_);
    return heads_;
}

std::vector<std::string> TlsTestServer::bodies() {
    std::lock_guard lock(mutex_);
    return bodies_;
}

}  // namespace airlock::test
