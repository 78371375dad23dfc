#include "fleet/SandboxDirectory.hpp"

#include <nlohmann/json.hpp>

#include "core/Error.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::fleet {

using json = nlohmann::json;

std::string SandboxPlacement::toJson() const {
    return jsonText(json{{"tenant", tenant}, {"node", node}, {"epoch", epoch}, {"why", placedWhy}});
}

SandboxPlacement SandboxPlacement::fromJson(const std::string& id, const std::string& text) {
    auto j = json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("tenant") || !j["tenant"].is_string() ||
        !j.contains("node") || !j["node"].is_string())
        throw Error(ErrorCode::unavailable, "the fleet's record of " + id + " is broken");
    SandboxPlacement p;
    p.id = id;
    p.tenant = j["tenant"].get<std::string>();
    p.node = j["node"].get<std::string>();
    p.epoch = j.value("epoch", std::int64_t(0));
    p.placedWhy = j.value("why", "");
    return p;
}

void SandboxDirectory::record(const SandboxPlacement& placement) {
    store_.put(kPrefix + placement.id, placement.toJson());
}

void SandboxDirectory::forget(const std::string& id) { store_.remove(kPrefix + id); }

std::optional<SandboxPlacement> SandboxDirectory::find(const std::string& id) {
    // Ids are [a-z0-9-]; anything else names no record (and no other key).
    if (id.empty() || id.size() > 64 ||
        id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
        return std::nullopt;
    auto kv = store_.get(kPrefix + id);
    if (!kv) return std::nullopt;
    return SandboxPlacement::fromJson(id, kv->value);
}

std::vector<SandboxPlacement> SandboxDirectory::list() {
    std::vector<SandboxPlacement> out;
    for (const auto& kv : store_.list(kPrefix))
        out.push_back(SandboxPlacement::fromJson(kv.key.substr(kPrefix.size()), kv.value));
    return out;
}

}  // namespace airlock::fleet
