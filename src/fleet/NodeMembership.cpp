#include "fleet/NodeMembership.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::fleet {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

NodeMembership::NodeMembership(KeyValueStore& store, NodeRecord self, std::string leaseFile,
                               CapacityProbe capacity, Timing timing)
    : store_(store),
      self_(std::move(self)),
      leaseFile_(std::move(leaseFile)),
      capacity_(std::move(capacity)),
      timing_(timing) {
    if (!validNodeName(self_.name))
        throw Error(ErrorCode::bad_request,
                    "--node-name: '" + self_.name + "' is not 1-63 of a-z, 0-9 and '-'");
}

NodeMembership::~NodeMembership() { leave(); }

void NodeMembership::saveLease() const {
    if (leaseFile_.empty()) return;
    std::ofstream out(leaseFile_, std::ios::trunc);
    out << lease_ << "\n";
}

bool NodeMembership::adoptSavedLease() {
    std::int64_t saved = 0;
    {
        std::ifstream in(leaseFile_);
        if (!(in >> saved) || saved == 0) return false;
    }
    auto current = store_.get(keys::kNodes + self_.name);
    if (!current || current->lease != saved) return false;
    auto sent = Clock::now();
    if (store_.keepAlive(saved) <= 0) return false;
    lease_ = saved;
    lastRenewal_ = sent.time_since_epoch().count();
    epoch_ = current->createRevision;
    return true;
}

void NodeMembership::acquire() {
    std::lock_guard lock(mutex_);
    lastRecord_.clear();
    if (adoptSavedLease()) {
        logInfo("fleet", "node " + self_.name + " resumed its lease (epoch " +
                             std::to_string(epoch_.load()) + ")");
        return;
    }
    auto deadline = Clock::now() + timing_.nameWait;
    for (;;) {
        auto sent = Clock::now();
        std::int64_t lease = store_.grantLease(timing_.ttl);
        NodeRecord record = self_;
        if (capacity_) record.capacity = capacity_();
        std::string text = record.toJson();
        std::string key = keys::kNodes + self_.name;
        auto r = store_.txn({KeyCompare::absent(key)},
                            {KeyOp::put(key, text, lease), KeyOp::get(key)}, {KeyOp::get(key)});
        if (r.succeeded && !r.reads.empty() && r.reads[0]) {
            lease_ = lease;
            lastRenewal_ = sent.time_since_epoch().count();
            lastRecord_ = text;
            epoch_ = r.reads[0]->createRevision;
            saveLease();
            logInfo("fleet", "node " + self_.name + " joined (epoch " +
                                 std::to_string(epoch_.load()) + ", lease " +
                                 std::to_string(timing_.ttl.count()) + " s)");
            return;
        }
        store_.revokeLease(lease);
        // Another lease holds the name: a crashed process of ours whose
        // lease has not run out yet, or a live node with the same name.
        if (Clock::now() >= deadline)
            throw Error(ErrorCode::conflict,
                        "--node-name " + self_.name + " is held by a live node of the fleet");
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
}

void NodeMembership::join() {
    json member{{"name", self_.name}, {"url", self_.url}};
    store_.put(keys::kMembers + self_.name, jsonText(member));
    acquire();
    std::lock_guard lock(stopMutex_);
    stopping_ = false;
    renewer_ = std::thread([this] { renewLoop(); });
}

void NodeMembership::leave() {
    {
        std::lock_guard lock(stopMutex_);
        if (!renewer_.joinable()) return;
        stopping_ = true;
    }
    stopCv_.notify_all();
    renewer_.join();
    std::lock_guard lock(mutex_);
    try {
        store_.revokeLease(lease_);
        if (!leaseFile_.empty()) std::remove(leaseFile_.c_str());
        logInfo("fleet", "node " + self_.name + " left the fleet");
    } catch (const std::exception& e) {
        logWarn("fleet",
                std::string("leaving the fleet: ") + e.what() + " (the lease runs out by itself)");
    }
    lease_ = 0;
}

bool NodeMembership::fenced() const {
    Clock::time_point last{Clock::duration(lastRenewal_.load())};
    return Clock::now() > last + timing_.ttl - std::chrono::seconds(1);
}

void NodeMembership::refresh() {
    {
        std::lock_guard lock(stopMutex_);
        refreshWanted_ = true;
    }
    stopCv_.notify_all();
}

void NodeMembership::writeRecord(bool force) {
    NodeRecord record = self_;
    if (capacity_) record.capacity = capacity_();
    std::string text = record.toJson();
    std::lock_guard lock(mutex_);
    if (!force && text == lastRecord_) return;
    // Only while the key is still ours: a put with a lease that ran out
    // fails, and the next renewal joins again.
    std::string key = keys::kNodes + self_.name;
    auto r = store_.txn({KeyCompare::createRevision(key, epoch_.load())},
                        {KeyOp::put(key, text, lease_)}, {});
    if (r.succeeded) lastRecord_ = text;
}

void NodeMembership::renewLoop() {
    for (;;) {
        bool refreshNow = false;
        {
            std::unique_lock lock(stopMutex_);
            stopCv_.wait_for(lock, timing_.renewEvery,
                             [this] { return stopping_ || refreshWanted_; });
            if (stopping_) return;
            refreshNow = refreshWanted_;
            refreshWanted_ = false;
        }
        try {
            if (!refreshNow) {
                std::int64_t lease;
                {
                    std::lock_guard lock(mutex_);
                    lease = lease_;
                }
                auto sent = Clock::now();
                if (store_.keepAlive(lease) <= 0) {
                    logWarn("fleet",
                            "node " + self_.name +
                                "'s lease ran out (etcd unreachable too long): joining again");
                    acquire();
                    continue;
                }
                lastRenewal_ = sent.time_since_epoch().count();
            }
            writeRecord(false);
        } catch (const std::exception& e) {
            logWarn("fleet", std::string("renewing the node's lease: ") + e.what());
        }
    }
}

void NodeMembership::setDraining(const std::string& node, bool draining) {
    if (draining)
        store_.put(keys::kDraining + node, "{}");
    else
        store_.remove(keys::kDraining + node);
}

std::vector<NodeStatus> NodeMembership::nodes() {
    std::map<std::string, NodeStatus> byName;
    for (const auto& kv : store_.list(keys::kMembers)) {
        NodeStatus s;
        auto j = json::parse(kv.value, nullptr, false);
        s.record.name = kv.key.substr(keys::kMembers.size());
        if (j.is_object()) s.record.url = j.value("url", "");
        byName[s.record.name] = std::move(s);
    }
    for (const auto& kv : store_.list(keys::kNodes)) {
        NodeStatus& s = byName[kv.key.substr(keys::kNodes.size())];
        s.record = NodeRecord::fromJson(kv.value);
        s.up = true;
        s.epoch = kv.createRevision;
    }
    for (const auto& kv : store_.list(keys::kDraining)) {
        auto it = byName.find(kv.key.substr(keys::kDraining.size()));
        if (it != byName.end()) it->second.draining = true;
    }
    std::vector<NodeStatus> out;
    for (auto& [name, s] : byName) {
        s.record.draining = s.draining;
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace airlock::fleet
