#include "support/DaemonProcess.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "cli/HttpClient.hpp"
#include "support/ApiClient.hpp"
#include "support/BuildPaths.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

Daemon::Daemon(const std::string& dataDir, int port, std::vector<std::string> extraArgs)
    : dataDir_(dataDir), port_(port), extraArgs_(std::move(extraArgs)) {
    start();
}

std::string Daemon::logPath() const {
    // Beside the data dir, which does not exist before the first start.
    return (fs::path(dataDir_).parent_path() / "airlockd.log").string();
}

void Daemon::start() {
    std::string log = logPath();
    std::string listen = "127.0.0.1:" + std::to_string(port_);
    std::vector<std::string> args{"airlockd", "--listen", listen, "--data-dir", dataDir_};
    args.insert(args.end(), extraArgs_.begin(), extraArgs_.end());
    // KSM is host-wide and costs a share of a core while it scans: off
    // unless a test asks for it (tests run one daemon at a time).
    if (std::find(extraArgs_.begin(), extraArgs_.end(), "--ksm") == extraArgs_.end())
        args.insert(args.end(), {"--ksm", "off"});
    // A spare VM boots beside each new shape's first sandbox and takes a
    // core of the TCG host from the test: none unless a test asks for them.
    if (std::find(extraArgs_.begin(), extraArgs_.end(), "--spare-vms") == extraArgs_.end())
        args.insert(args.end(), {"--spare-vms", "0"});
    seedHypervisorCache(dataDir_);
    const std::string airlockd = test::binDir() + "/airlockd";  // before the fork: no allocation after it
    pid_ = ::fork();
    if (pid_ == 0) {
        int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(airlockd.c_str(), argv.data());
        ::_exit(127);
    }
    bool tls = std::find(extraArgs_.begin(), extraArgs_.end(), "--tls-cert") != extraArgs_.end();
    cli::HttpClient probe(url(), "");
    bool up = waitFor(
        [&] {
            if (tls) {  // the plain client cannot ask; the log says when it listens
                std::ifstream in(log);
                std::string text((std::istreambuf_iterator<char>(in)), {});
                return text.find("listening on https://") != std::string::npos;
            }
            try {
                return probe.request("GET", "/healthz", {}, {}, 5s).status == 200;
            } catch (...) {
                return false;
            }
        },
        90s, 100ms);
    if (!up) throw std::runtime_error("airlockd did not come up");
    keepHypervisorCache(dataDir_);
}

std::string Daemon::endedHow() {
    if (pid_ <= 0) return "";
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return "";
    pid_ = -1;
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "exited with " + std::to_string(WEXITSTATUS(status));
}

std::string Daemon::shutDown(bool failed, const std::vector<ApiClient*>& clients) {
    std::string ended = endedHow();
    if (failed || !ended.empty()) {
        std::ifstream log(logPath());
        std::string text((std::istreambuf_iterator<char>(log)), {});
        std::cerr << "---- airlockd log (tail) ----\n"
                  << text.substr(text.size() > 20000 ? text.size() - 20000 : 0) << "\n";
    }
    if (ended.empty())
        for (auto* client : clients) {
            if (!client) continue;
            try {
                auto list = nlohmann::json::parse(client->request("GET", "/v1/sandboxes").body);
                for (const auto& sandbox : list.at("sandboxes"))
                    client->request("DELETE", "/v1/sandboxes/" + sandbox.at("id").get<std::string>());
            } catch (...) {
            }
        }
    stop(SIGTERM);
    if (int n = killQemusOf(dataDir_))
        std::cerr << "warning: " << n << " QEMU process(es) outlived airlockd; killed\n";
    return ended;
}

void Daemon::stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

std::unique_ptr<boost::beast::websocket::stream<boost::beast::tcp_stream>> openWsExec(
    boost::asio::io_context& ioc, int port, const std::string& key, const std::string& id,
    const std::string& start) {
    namespace beast = boost::beast;
    namespace websocket = beast::websocket;
    auto ws = std::make_unique<websocket::stream<beast::tcp_stream>>(ioc);
    boost::asio::ip::tcp::resolver resolver(ioc);
    beast::get_lowest_layer(*ws).connect(resolver.resolve("127.0.0.1", std::to_string(port)));
    ws->set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
        req.set(beast::http::field::authorization, "Bearer " + key);
    }));
    ws->handshake("127.0.0.1", "/v1/sandboxes/" + id + "/exec/ws");
    ws->text(true);
    ws->write(boost::asio::buffer(start));
    return ws;
}

int killQemusOf(const std::string& dataDir) {
    int killed = 0;
    std::error_code ec;
    for (const auto& p : fs::directory_iterator("/proc", ec)) {
        std::ifstream cmd(p.path() / "cmdline");
        std::string line((std::istreambuf_iterator<char>(cmd)), {});
        if (line.find("qemu-system") == std::string::npos || line.find(dataDir) == std::string::npos) continue;
        ::kill(std::stoi(p.path().filename().string()), SIGKILL);
        ++killed;
    }
    return killed;
}

namespace {

// Whether a chunked body from `at` has reached its last (empty) chunk.
bool lastChunkIsIn(const std::string& bytes, std::size_t at) {
    for (;;) {
        std::size_t lineEnd = bytes.find("\r\n", at);
        if (lineEnd == std::string::npos) return false;
        std::size_t size = std::strtoull(bytes.c_str() + at, nullptr, 16);
        if (size == 0) return bytes.find("\r\n\r\n", lineEnd) != std::string::npos;
        at = lineEnd + 2 + size + 2;
        if (at > bytes.size()) return false;
    }
}

// Whether `bytes` hold one whole response, so that a connection the server
// keeps alive (a refused upgrade, a keep-alive answer) is not waited out.
// A 101 and a body without a length are read to the end as before.
bool oneResponseIsIn(const std::string& bytes) {
    std::size_t headEnd = bytes.find("\r\n\r\n");
    if (headEnd == std::string::npos || bytes.size() < 12) return false;
    std::string head = bytes.substr(0, headEnd + 2);
    for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    int status = std::atoi(head.c_str() + 9);
    if (status == 101) return false;
    std::size_t bodyStart = headEnd + 4;
    if (status == 204 || status == 304 || (status >= 100 && status < 200)) return true;
    if (head.find("\r\ntransfer-encoding: chunked\r\n") != std::string::npos)
        return lastChunkIsIn(bytes, bodyStart);
    std::size_t at = head.find("\r\ncontent-length:");
    if (at == std::string::npos) return false;
    std::size_t length = std::strtoull(head.c_str() + at + 17, nullptr, 10);
    return bytes.size() >= bodyStart + length;
}

}  // namespace

std::string rawHttp(int port, const std::string& request, int seconds) {
    return rawHttpStreamed(port, request, [](std::string&) { return false; }, seconds);
}

std::string rawHttpUntil(int port, const std::string& request,
                         const std::function<bool(const std::string& answer)>& enough,
                         int seconds) {
    return rawHttpStreamed(port, request, [](std::string&) { return false; }, seconds, enough);
}

std::string rawHttpStreamed(int port, const std::string& head,
                            const std::function<bool(std::string& piece)>& next, int seconds,
                            const std::function<bool(const std::string& answer)>& enough) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(s);
        return "";
    }
    timeval tv{seconds, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    auto sendAll = [&](const std::string& bytes) {
        std::size_t off = 0;
        while (off < bytes.size()) {
            ssize_t n = ::send(s, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return false;  // the server answered early and closed, or stalled
            off += static_cast<std::size_t>(n);
        }
        return true;
    };
    std::string piece;
    bool sent = sendAll(head);
    while (sent && next(piece)) sent = sendAll(piece);
    std::string out;
    char buf[4096];
    ssize_t n;
    while (!(enough ? enough(out) : oneResponseIsIn(out)) && (n = ::read(s, buf, sizeof buf)) > 0)
        out.append(buf, static_cast<std::size_t>(n));
    ::close(s);
    return out;
}

std::size_t rssKiB(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
    return 0;
}

}  // namespace airlock::test
