#include "fleet/FleetApiKeys.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Sha256.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::fleet {

using json = nlohmann::json;

namespace {
const std::string kByHash = "/airlock/keys/hash/";
const std::string kById = "/airlock/keys/id/";
const std::string kBootstrap = "/airlock/keys/bootstrap";

std::string recordJson(const ApiKeyRecord& r) {
    return jsonText(json{{"id", r.id},
                         {"tenant", r.tenant},
                         {"role", roleName(r.role)},
                         {"name", r.name},
                         {"created_at", r.createdAt},
                         {"expires_at", r.expiresAt}});
}

ApiKeyRecord recordOf(const std::string& text) {
    auto j = json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("id") || !j["id"].is_string())
        throw Error(ErrorCode::unavailable, "an API key record in etcd is broken");
    ApiKeyRecord r;
    r.id = j["id"].get<std::string>();
    r.tenant = j.value("tenant", "");
    // An unknown role (a newer release's) grants the least.
    r.role = parseRole(j.value("role", "")).value_or(Role::approver);
    r.name = j.value("name", "");
    r.createdAt = j.value("created_at", "");
    r.expiresAt = j.value("expires_at", std::int64_t(0));
    return r;
}

bool live(const ApiKeyRecord& r, std::int64_t now) { return r.expiresAt == 0 || r.expiresAt > now; }
}  // namespace

ApiKeys::Created FleetApiKeys::mint(const std::string& tenant, Role role, const std::string& name,
                                    std::int64_t expiresAt, bool first) {
    Created c;
    c.key = newApiKey();
    c.record = ApiKeyRecord{newId("key-"), tenant, role, name, nowTimestamp(), expiresAt};
    std::string hash = sha256Hex(c.key);
    std::vector<KeyCompare> compare{KeyCompare::absent(kByHash + hash)};
    std::vector<KeyOp> puts{KeyOp::put(kByHash + hash, recordJson(c.record)),
                            KeyOp::put(kById + c.record.id, hash)};
    if (first) {
        compare.push_back(KeyCompare::absent(kBootstrap));
        puts.push_back(KeyOp::put(kBootstrap, c.record.id));
    }
    if (!store_.txn(compare, puts, {}).succeeded)
        throw Error(ErrorCode::conflict, "the key could not be recorded; try again");
    return c;
}

ApiKeys::Created FleetApiKeys::create(const std::string& tenant, Role role, const std::string& name,
                                      std::int64_t expiresAt) {
    return mint(tenant, role, name, expiresAt, false);
}

std::optional<ApiKeys::Created> FleetApiKeys::createFirstAdmin() {
    if (store_.get(kBootstrap) || !empty()) return std::nullopt;
    try {
        return mint("admin", Role::admin, "admin", 0, true);
    } catch (const Error& e) {
        if (e.code() == ErrorCode::conflict) return std::nullopt;  // another node made it
        throw;
    }
}

namespace {
constexpr auto kRememberFor = std::chrono::minutes(10);
}

void FleetApiKeys::remember(std::map<std::string, Seen>& seen, const std::string& k,
                            const std::optional<ApiKeyRecord>& r) {
    std::lock_guard lock(mutex_);
    if (seen.size() > 100000) seen.clear();  // bounded: a flood of unknown keys
    seen[k] = Seen{r, std::chrono::steady_clock::now()};
}

std::optional<ApiKeyRecord> FleetApiKeys::remembered(std::map<std::string, Seen>& seen,
                                                     const std::string& k) {
    std::lock_guard lock(mutex_);
    auto it = seen.find(k);
    if (it == seen.end() || std::chrono::steady_clock::now() - it->second.at > kRememberFor)
        throw Error(
            ErrorCode::unavailable,
            "the fleet's store (etcd) does not answer, and this node has not seen this key lately");
    return it->second.record;
}

std::optional<ApiKeyRecord> FleetApiKeys::findValid(const std::string& key, std::int64_t now) {
    if (key.empty() || key.size() > 256) return std::nullopt;
    // Looking up by hash: the clear key never leaves this node.
    std::string hash = sha256Hex(key);
    std::optional<ApiKeyRecord> r;
    try {
        auto kv = store_.get(kByHash + hash);
        if (kv) r = recordOf(kv->value);
        remember(byHash_, hash, r);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::unavailable) throw;
        r = remembered(byHash_, hash);
    }
    if (!r || !live(*r, now)) return std::nullopt;
    return r;
}

std::optional<ApiKeyRecord> FleetApiKeys::find(const std::string& id) {
    if (id.empty() || id.size() > 64 || id.find('/') != std::string::npos) return std::nullopt;
    std::optional<ApiKeyRecord> r;
    try {
        if (auto hash = store_.get(kById + id))
            if (auto kv = store_.get(kByHash + hash->value)) r = recordOf(kv->value);
        remember(byId_, id, r);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::unavailable) throw;
        r = remembered(byId_, id);
    }
    return r;
}

std::vector<ApiKeyRecord> FleetApiKeys::list(const std::optional<std::string>& tenant) {
    std::vector<ApiKeyRecord> out;
    for (const auto& kv : store_.list(kByHash)) {
        auto r = recordOf(kv.value);
        if (!tenant || r.tenant == *tenant) out.push_back(std::move(r));
    }
    std::sort(out.begin(), out.end(), [](const ApiKeyRecord& a, const ApiKeyRecord& b) {
        return std::tie(a.createdAt, a.id) < std::tie(b.createdAt, b.id);
    });
    return out;
}

bool FleetApiKeys::remove(const std::string& id) {
    if (id.empty() || id.size() > 64 || id.find('/') != std::string::npos) return false;
    auto hash = store_.get(kById + id);
    if (!hash) return false;
    return store_
        .txn({KeyCompare::modRevision(kById + id, hash->modRevision)},
             {KeyOp::remove(kById + id), KeyOp::remove(kByHash + hash->value)}, {})
        .succeeded;
}

std::vector<ApiKeyRecord> FleetApiKeys::drivers(const std::string& tenant, std::int64_t now) {
    std::vector<ApiKeyRecord> out;
    for (auto& r : list(std::nullopt))
        if ((r.tenant == tenant || r.role == Role::admin) && r.role != Role::approver &&
            live(r, now))
            out.push_back(std::move(r));
    return out;
}

std::size_t FleetApiKeys::liveAdmins(std::int64_t now) {
    std::size_t n = 0;
    for (const auto& r : list(std::nullopt))
        if (r.role == Role::admin && live(r, now)) ++n;
    return n;
}

bool FleetApiKeys::empty() { return store_.list(kByHash).empty(); }

}  // namespace airlock::fleet
