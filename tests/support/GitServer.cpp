#include "support/GitServer.hpp"
#include "support/BuildPaths.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

namespace airlock::test {
using namespace std::chrono_literals;

namespace {

bool portOpen(const std::string& host, int port) {
    bool v6 = host.find(':') != std::string::npos;
    int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int rc = -1;
    if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(static_cast<std::uint16_t>(port));
        if (::inet_pton(AF_INET6, host.c_str(), &a.sin6_addr) == 1)
            rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) == 1)
            rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    ::close(fd);
    return rc == 0;
}

// The fixture repositories, made once per test process and copied for each
// server (a server's repositories are its tests' to change).
const std::string& pristineRepos() {
    static TempDir dir;
    static const std::string repos = [] {
        std::string path = dir.path() + "/repos";
        commandLine("bash " + test::sourceDir() +
                    "/tests/fixtures/make-fixture-repos.sh " + path + " >/dev/null");
        return path;
    }();
    return repos;
}

std::string hostOf(const std::string& bind) {
    return bind.find(':') != std::string::npos ? "[" + bind + "]" : bind;
}

}  // namespace

int freeDualStackPort() {
    int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    socklen_t len = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        port = ntohs(a.sin6_port);
    ::close(fd);
    return port;
}

GitServer::GitServer(std::string bindTo) : GitServer(Options{std::move(bindTo), "", "", {}}) {}

GitServer::GitServer(Options options)
    : repos(options.repos.empty() ? tmp.path() + "/repos" : options.repos),
      password(options.password.empty()
                   ? "unit-Pass-" + std::to_string(::getpid()) + "-canary"
                   : options.password),
      bind(std::move(options.bind)),
      port(freeDualStackPort()) {
    if (options.repos.empty()) commandLine("cp -a " + pristineRepos() + " " + repos);
    std::string script = test::sourceDir() + "/tests/fixtures/git-http-server.py";
    std::vector<std::string> argv{"python3",  script,   "--root",     repos,    "--port",
                                  std::to_string(port), "--bind",     bind,     "--password",
                                  password, "--auth-log", authLog};
    argv.insert(argv.end(), options.extra.begin(), options.extra.end());
    process = HelperProcess(argv);
    up = waitFor([&] { return portOpen(bind, port); }, 20s, 20ms);
}

std::string GitServer::base() const { return "http://" + hostPort(); }

std::string GitServer::hostPort() const { return hostOf(bind) + ":" + std::to_string(port); }

std::vector<std::string> GitServer::requests(const std::string& prefix) const {
    std::ifstream in(authLog);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) {
        auto sp = line.find(' ');
        if (sp != std::string::npos && line.compare(sp + 1, prefix.size(), prefix) == 0)
            out.push_back(line.substr(0, sp));
    }
    return out;
}

std::string GitServer::revParse(const std::string& repo, const std::string& rev) const {
    std::string out = commandOutput("git --git-dir=" + repos + "/" + repo +
                                    " rev-parse --verify --quiet " + rev + " 2>/dev/null");
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

}  // namespace airlock::test
