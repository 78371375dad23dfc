#pragma once
#include <string>
#include <vector>

#include "support/HelperProcess.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {

// Real etcd members (Debian's etcd-server) on loopback ports, each with its
// own data dir under a TempDir and its log beside it; the constructor
// returns once every member answers /health. Members are stopped by pid.
class EtcdCluster {
  public:
    // Throws std::runtime_error when etcd is missing or does not come up.
    explicit EtcdCluster(int members = 1);
    ~EtcdCluster();
    EtcdCluster(const EtcdCluster&) = delete;
    EtcdCluster& operator=(const EtcdCluster&) = delete;

    static bool available();  // an etcd binary is on PATH
    // http://127.0.0.1:PORT of every member (or of one).
    std::vector<std::string> clientUrls() const;
    const std::string& clientUrl(int member) const { return members_[member].clientUrl; }
    // SIGTERM and wait (the member's data stays; start() brings it back).
    void stop(int member);
    void start(int member);
    bool healthy(int member) const;
    pid_t pid(int member) const { return members_.at(static_cast<std::size_t>(member)).process.pid(); }
    std::string log(int member) const;

  private:
    struct Member {
        std::string name, clientUrl, peerUrl, dataDir;
        HelperProcess process;
        bool started = false;
    };
    void launch(Member& m, bool fresh);
    TempDir dir_;
    std::string initialCluster_;
    std::vector<Member> members_;
};

}  // namespace airlock::test
