#include "fleet/ObjectDirectory.hpp"

#include <nlohmann/json.hpp>
#include <vector>

namespace airlock::fleet {

namespace {
// Ids are [a-z0-9-]; anything else names no entry (and no other key).
bool plainId(const std::string& id) {
    return !id.empty() && id.size() <= 64 &&
           id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}
}  // namespace

void ObjectDirectory::record(const std::string& id, const Entry& entry) {
    if (!plainId(id) || !plainId(entry.sandbox)) return;
    store_.txn({},
               {KeyOp::put(prefix_ + id, nlohmann::json{{"tenant", entry.tenant},
                                                        {"node", entry.node},
                                                        {"sandbox", entry.sandbox}}
                                             .dump()),
                KeyOp::put(bySandbox_ + entry.sandbox + "/" + id, "")},
               {});
}

std::optional<ObjectDirectory::Entry> ObjectDirectory::find(const std::string& id) {
    if (!plainId(id)) return std::nullopt;
    auto kv = store_.get(prefix_ + id);
    if (!kv) return std::nullopt;
    auto j = nlohmann::json::parse(kv->value, nullptr, false);
    if (!j.is_object() || !j.contains("node") || !j["node"].is_string() || !j.contains("tenant") ||
        !j["tenant"].is_string())
        return std::nullopt;
    return Entry{j["tenant"].get<std::string>(), j["node"].get<std::string>(),
                 j.value("sandbox", "")};
}

void ObjectDirectory::forget(const std::string& id) {
    if (!plainId(id)) return;
    auto kv = find(id);
    std::vector<KeyOp> ops{KeyOp::remove(prefix_ + id)};
    if (kv && plainId(kv->sandbox))
        ops.push_back(KeyOp::remove(bySandbox_ + kv->sandbox + "/" + id));
    store_.txn({}, ops, {});
}

void ObjectDirectory::forgetSandbox(const std::string& sandboxId) {
    if (!plainId(sandboxId)) return;
    std::string prefix = bySandbox_ + sandboxId + "/";
    for (const auto& kv : store_.list(prefix)) {
        std::string id = kv.key.substr(prefix.size());
        store_.txn({}, {KeyOp::remove(prefix_ + id), KeyOp::remove(kv.key)}, {});
    }
}

std::vector<std::pair<std::string, ObjectDirectory::Entry>> ObjectDirectory::ofSandbox(
    const std::string& sandboxId) {
    std::vector<std::pair<std::string, Entry>> out;
    if (!plainId(sandboxId)) return out;
    std::string prefix = bySandbox_ + sandboxId + "/";
    for (const auto& kv : store_.list(prefix)) {
        std::string id = kv.key.substr(prefix.size());
        if (auto entry = find(id)) out.emplace_back(id, std::move(*entry));
    }
    return out;
}

}  // namespace airlock::fleet
