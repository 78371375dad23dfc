#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace airlock::fleet {

// What a node has room for, as it last reported (free figures after what
// its sandboxes hold).
struct NodeCapacity {
    unsigned vcpus = 0;
    unsigned freeVcpus = 0;
    std::uint64_t memoryMib = 0;
    std::uint64_t freeMemoryMib = 0;
    std::string accel;                       // kvm | tcg
    std::vector<std::string> templates;      // it can boot
    std::vector<std::string> warmTemplates;  // with a ready snapshot (fast creates)
    std::vector<std::string> snapshots;      // snapshot ids whose files it holds
    unsigned sandboxes = 0;                  // it runs (any state but deleted)
};

// A node of the fleet as etcd holds it under /airlock/nodes/<name> (kept
// alive by the node's lease: the key's presence is the node's health).
struct NodeRecord {
    std::string name;
    std::string url;  // --advertise-url: where other nodes forward to
    std::string version;
    std::string started;  // RFC 3339, display only
    bool draining = false;
    NodeCapacity capacity;

    std::string toJson() const;
    // Throws Error(unavailable) for a record that is not one (the store is
    // shared: a broken record is a fault of the fleet, not of the caller).
    static NodeRecord fromJson(const std::string& text);
};

// A valid --node-name: 1-63 of [a-z0-9-], starting with a letter or digit
// (it is a key segment and appears in records and logs).
bool validNodeName(const std::string& name);

}  // namespace airlock::fleet
