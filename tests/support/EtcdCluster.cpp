#include "support/EtcdCluster.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace airlock::test {

bool EtcdCluster::available() { return !commandLine("command -v etcd").empty(); }

EtcdCluster::EtcdCluster(int members) {
    if (!available()) throw std::runtime_error("etcd is not installed (scripts/setup installs it)");
    members_.resize(static_cast<std::size_t>(members));
    for (int i = 0; i < members; ++i) {
        auto& m = members_[static_cast<std::size_t>(i)];
        m.name = "etcd" + std::to_string(i);
        m.clientUrl = "http://127.0.0.1:" + std::to_string(freePort());
        m.peerUrl = "http://127.0.0.1:" + std::to_string(freePort());
        m.dataDir = dir_.path() + "/" + m.name;
        initialCluster_ += (i ? "," : "") + m.name + "=" + m.peerUrl;
    }
    for (auto& m : members_) launch(m, true);
    for (int i = 0; i < members; ++i)
        if (!waitFor([&] { return healthy(i); }, std::chrono::seconds(30)))
            throw std::runtime_error("etcd member " + std::to_string(i) +
                                     " is not healthy after 30 s: " + log(i));
}

EtcdCluster::~EtcdCluster() {
    for (auto& m : members_) m.process.stop();
}

void EtcdCluster::launch(Member& m, bool fresh) {
    // A short election: a stopped leader is replaced in a second or two.
    std::string command =
        "exec etcd --name " + m.name + " --data-dir " + m.dataDir + " --listen-client-urls " +
        m.clientUrl + " --advertise-client-urls " + m.clientUrl + " --listen-peer-urls " +
        m.peerUrl + " --initial-advertise-peer-urls " + m.peerUrl + " --initial-cluster " +
        initialCluster_ + " --initial-cluster-token airlock-test" + " --initial-cluster-state " +
        (fresh ? "new" : "existing") + " --heartbeat-interval 100 --election-timeout 1000" +
        " --logger zap --log-outputs stderr >>" + m.dataDir + ".log 2>&1";
    m.process = HelperProcess({"sh", "-c", command});
    m.started = true;
}

std::vector<std::string> EtcdCluster::clientUrls() const {
    std::vector<std::string> out;
    for (const auto& m : members_) out.push_back(m.clientUrl);
    return out;
}

void EtcdCluster::stop(int member) {
    auto& m = members_.at(static_cast<std::size_t>(member));
    m.process.stop();
    m.started = false;
}

void EtcdCluster::start(int member) {
    auto& m = members_.at(static_cast<std::size_t>(member));
    if (m.started) return;
    launch(m, false);
    if (!waitFor([&] { return healthy(member); }, std::chrono::seconds(30)))
        throw std::runtime_error("etcd member " + std::to_string(member) +
                                 " is not healthy after its restart: " + log(member));
}

bool EtcdCluster::healthy(int member) const {
    const auto& m = members_.at(static_cast<std::size_t>(member));
    return commandLine("curl -s --max-time 2 " + m.clientUrl + "/health").find("\"true\"") !=
           std::string::npos;
}

std::string EtcdCluster::log(int member) const {
    std::ifstream in(members_.at(static_cast<std::size_t>(member)).dataDir + ".log");
    std::stringstream s;
    s << in.rdbuf();
    std::string text = s.str();
    return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

}  // namespace airlock::test
