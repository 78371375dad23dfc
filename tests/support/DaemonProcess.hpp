#pragma once
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "support/TestEnv.hpp"

namespace airlock::test {

class ApiClient;

// The real airlockd binary as a child process on a data dir, with its log
// beside the data dir; the constructor returns once /healthz answers.
class Daemon {
public:
    Daemon(const std::string& dataDir, int port, std::vector<std::string> extraArgs = {});
    ~Daemon() { stop(SIGTERM); }
    void start();
    void stop(int sig);
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    std::string logPath() const;
    // How the process ended ("killed by signal 11", "exited with 1"), or ""
    // while it runs: a test that fails tells whether the daemon died under it.
    std::string endedHow();
    // The end every e2e suite gives its daemon: the log's tail on stderr when
    // a test failed or the daemon died; the sandboxes each client lists are
    // deleted; the daemon stops; every QEMU its data dir names is killed
    // (sandboxes outlive their daemon by design; none of a test's may
    // outlive the test: the acceptance scripts count every QEMU). Returns
    // endedHow() from before the stop ("" when it was still running).
    std::string shutDown(bool failed, const std::vector<ApiClient*>& clients = {});

private:
    std::string dataDir_;
    int port_;
    std::vector<std::string> extraArgs_;
    pid_t pid_ = -1;
};

// SIGKILLs every QEMU whose command line names `dataDir` (what a stopped
// daemon's sandboxes left running); returns how many there were.
int killQemusOf(const std::string& dataDir);

// A WebSocket exec opened with the key and its start message sent.
std::unique_ptr<boost::beast::websocket::stream<boost::beast::tcp_stream>> openWsExec(
    boost::asio::io_context& ioc, int port, const std::string& key, const std::string& id,
    const std::string& start);

// Raw HTTP over TCP, for requests the client library would not send. The
// answer is read until one whole response is in (by its length or its last
// chunk), or else to the end or the timeout.
std::string rawHttp(int port, const std::string& request, int seconds = 10);
// The same, read until `enough` says so (an upgraded connection's bytes).
std::string rawHttpUntil(int port, const std::string& request,
                         const std::function<bool(const std::string& answer)>& enough,
                         int seconds = 10);
// The same with a body too big to hold: after the head, `next` fills each
// piece of the body (false: none left).
std::string rawHttpStreamed(int port, const std::string& head,
                            const std::function<bool(std::string& piece)>& next,
                            int seconds = 120,
                            const std::function<bool(const std::string& answer)>& enough = {});
// A process's resident memory (VmRSS) in KiB; 0 when it is gone.
std::size_t rssKiB(pid_t pid);

}  // namespace airlock::test
