#include "fleet/ApprovalDirectory.hpp"

#include <nlohmann/json.hpp>

namespace airlock::fleet {

namespace {
// Ids are [a-z0-9-]; anything else names no entry (and no other key).
bool plainId(const std::string& id) {
    return !id.empty() && id.size() <= 64 &&
           id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}
}  // namespace

void ApprovalDirectory::record(const std::string& approvalId, const Entry& entry) {
    if (!plainId(approvalId) || !plainId(entry.sandbox)) return;
    store_.txn({},
               {KeyOp::put(kPrefix + approvalId, nlohmann::json{{"tenant", entry.tenant},
                                                                {"node", entry.node},
                                                                {"sandbox", entry.sandbox}}
                                                     .dump()),
                KeyOp::put(kBySandbox + entry.sandbox + "/" + approvalId, "")},
               {});
}

std::optional<ApprovalDirectory::Entry> ApprovalDirectory::find(const std::string& approvalId) {
    if (!plainId(approvalId)) return std::nullopt;
    auto kv = store_.get(kPrefix + approvalId);
    if (!kv) return std::nullopt;
    auto j = nlohmann::json::parse(kv->value, nullptr, false);
    if (!j.is_object() || !j.contains("node") || !j["node"].is_string() || !j.contains("tenant") ||
        !j["tenant"].is_string())
        return std::nullopt;
    return Entry{j["tenant"].get<std::string>(), j["node"].get<std::string>(),
                 j.value("sandbox", "")};
}

void ApprovalDirectory::forgetSandbox(const std::string& sandboxId) {
    if (!plainId(sandboxId)) return;
    std::string prefix = kBySandbox + sandboxId + "/";
    for (const auto& kv : store_.list(prefix)) {
        std::string approvalId = kv.key.substr(prefix.size());
        store_.txn({}, {KeyOp::remove(kPrefix + approvalId), KeyOp::remove(kv.key)}, {});
    }
}

}  // namespace airlock::fleet
