#include "fleet/NodeRecord.hpp"

#include <nlohmann/json.hpp>

#include "core/Error.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::fleet {

using json = nlohmann::json;

std::string NodeRecord::toJson() const {
    json j{{"name", name},
           {"url", url},
           {"version", version},
           {"started", started},
           {"draining", draining},
           {"capacity",
            {{"vcpus", capacity.vcpus},
             {"free_vcpus", capacity.freeVcpus},
             {"memory_mib", capacity.memoryMib},
             {"free_memory_mib", capacity.freeMemoryMib},
             {"accel", capacity.accel},
             {"templates", capacity.templates},
             {"warm_templates", capacity.warmTemplates},
             {"snapshots", capacity.snapshots},
             {"sandboxes", capacity.sandboxes}}}};
    return jsonText(j);
}

NodeRecord NodeRecord::fromJson(const std::string& text) {
    auto j = json::parse(text, nullptr, false);
    if (!j.is_object()) throw Error(ErrorCode::unavailable, "a node record in etcd is not JSON");
    try {
        NodeRecord r;
        r.name = j.at("name").get<std::string>();
        r.url = j.at("url").get<std::string>();
        r.version = j.value("version", "");
        r.started = j.value("started", "");
        r.draining = j.value("draining", false);
        if (auto c = j.find("capacity"); c != j.end() && c->is_object()) {
            r.capacity.vcpus = c->value("vcpus", 0u);
            r.capacity.freeVcpus = c->value("free_vcpus", 0u);
            r.capacity.memoryMib = c->value("memory_mib", std::uint64_t(0));
            r.capacity.freeMemoryMib = c->value("free_memory_mib", std::uint64_t(0));
            r.capacity.accel = c->value("accel", "");
            r.capacity.templates = c->value("templates", std::vector<std::string>{});
            r.capacity.warmTemplates = c->value("warm_templates", std::vector<std::string>{});
            r.capacity.snapshots = c->value("snapshots", std::vector<std::string>{});
            r.capacity.sandboxes = c->value("sandboxes", 0u);
        }
        return r;
    } catch (const json::exception& e) {
        throw Error(ErrorCode::unavailable,
                    std::string("a node record in etcd is broken: ") + e.what());
    }
}

bool validNodeName(const std::string& name) {
    if (name.empty() || name.size() > 63 || name.front() == '-') return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    return true;
}

}  // namespace airlock::fleet
