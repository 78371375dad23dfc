#include "fleet/EtcdClient.hpp"

#include <boost/asio/ssl.hpp>
#include <nlohmann/json.hpp>

#include "core/Error.hpp"
#include "core/SecretCipher.hpp"
#include "fleet/ClientTls.hpp"
#include "fleet/HttpExchange.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::fleet {

namespace asio = boost::asio;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string prefixEnd(const std::string& prefix) {
    std::string end = prefix;
    while (!end.empty()) {
        auto& last = reinterpret_cast<unsigned char&>(end.back());
        if (last < 0xff) {
            ++last;
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');  // every key
}

namespace {

std::int64_t number(const json& j, const char* name) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return 0;  // proto3 leaves defaults out
    if (it->is_number_integer()) return it->get<std::int64_t>();
    if (it->is_string()) {
        try {
            return std::stoll(it->get<std::string>());
        } catch (...) {
        }
    }
    throw Error(ErrorCode::unavailable, std::string("etcd answered a bad '") + name + "'");
}

std::string b64(const std::string& s) { return base64Encode(s); }
std::string unb64(const json& j, const char* name) {
    auto it = j.find(name);
    if (it == j.end() || !it->is_string()) return {};
    try {
        return base64Decode(it->get<std::string>());
    } catch (const Error&) {
        throw Error(ErrorCode::unavailable, std::string("etcd answered a bad '") + name + "'");
    }
}

StoredKey storedKey(const json& kv) {
    StoredKey k;
    k.key = unb64(kv, "key");
    k.value = unb64(kv, "value");
    k.createRevision = number(kv, "create_revision");
    k.modRevision = number(kv, "mod_revision");
    k.version = number(kv, "version");
    k.lease = number(kv, "lease");
    return k;
}

const char* targetName(KeyCompare::Target t) {
    switch (t) {
        case KeyCompare::Target::version:
            return "VERSION";
        case KeyCompare::Target::create:
            return "CREATE";
        case KeyCompare::Target::mod:
            return "MOD";
        case KeyCompare::Target::value:
            return "VALUE";
        case KeyCompare::Target::lease:
            return "LEASE";
    }
    return "CREATE";
}

json compareJson(const KeyCompare& c) {
    static const char* results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
    json j{{"key", b64(c.key)},
           {"target", targetName(c.target)},
           {"result", results[static_cast<int>(c.result)]}};
    switch (c.target) {
        case KeyCompare::Target::version:
            j["version"] = std::to_string(c.number);
            break;
        case KeyCompare::Target::create:
            j["create_revision"] = std::to_string(c.number);
            break;
        case KeyCompare::Target::mod:
            j["mod_revision"] = std::to_string(c.number);
            break;
        case KeyCompare::Target::value:
            j["value"] = b64(c.value);
            break;
        case KeyCompare::Target::lease:
            j["lease"] = std::to_string(c.number);
            break;
    }
    return j;
}

json opJson(const KeyOp& op) {
    switch (op.kind) {
        case KeyOp::Kind::put: {
            json put{{"key", b64(op.key)}, {"value", b64(op.value)}};
            if (op.lease) put["lease"] = std::to_string(op.lease);
            return json{{"request_put", put}};
        }
        case KeyOp::Kind::remove:
            return json{{"request_delete_range", {{"key", b64(op.key)}}}};
        case KeyOp::Kind::get:
            return json{{"request_range", {{"key", b64(op.key)}}}};
    }
    return json::object();
}

}  // namespace

EtcdClient::EtcdClient(const std::vector<std::string>& urls, const EtcdTls& tls,
                       std::chrono::milliseconds timeout)
    : urlTexts_(urls), timeout_(timeout) {
    if (urls.empty()) throw Error(ErrorCode::bad_request, "--cluster-etcd names no member");
    bool anyTls = false;
    for (const auto& url : urls) {
        Member m;
        if (!parseOrigin(url, m.tls, m.host, m.port))
            throw Error(ErrorCode::bad_request,
                        "--cluster-etcd: '" + url + "' is not an http(s)://HOST:PORT URL");
        anyTls = anyTls || m.tls;
        members_.push_back(std::move(m));
    }
    if (anyTls || !tls.caFile.empty() || !tls.certFile.empty())
        tls_ = makeClientTls(tls.caFile, tls.certFile, tls.keyFile, "--cluster-etcd-ca/-cert/-key");
}

EtcdClient::~EtcdClient() = default;

json EtcdClient::call(const std::string& path, const json& body, bool idempotent) {
    // Half open: within a second of a call that found no member, one caller
    // at a time probes and the rest fail at once; the probe's success closes
    // the breaker for everyone.
    bool cooling = Clock::now() - Clock::time_point(Clock::duration(failedAt_.load())) <
                   std::chrono::seconds(1);
    bool probe = false;
    if (cooling) {
        bool expected = false;
        if (!probing_.compare_exchange_strong(expected, true))
            throw Error(ErrorCode::unavailable, "etcd: no member answered a moment ago");
        probe = true;
    }
    struct ProbeDone {
        std::atomic<bool>& flag;
        bool held;
        ~ProbeDone() {
            if (held) flag.store(false);
        }
    } done{probing_, probe};
    auto began = Clock::now().time_since_epoch().count();
    try {
        auto answer = attempt(path, body, idempotent);
        answeredAt_.store(Clock::now().time_since_epoch().count());
        failedAt_.store(0);
        return answer;
    } catch (const Error& e) {
        if (e.code() != ErrorCode::unavailable) {
            // etcd answered (a refusal): it is there.
            answeredAt_.store(Clock::now().time_since_epoch().count());
            failedAt_.store(0);
        } else if (began >= answeredAt_.load()) {
            // Only a call begun after the last answer says etcd is gone.
            failedAt_ = Clock::now().time_since_epoch().count();
        }
        throw;
    }
}

json EtcdClient::attempt(const std::string& path, const json& body, bool idempotent) {
    auto deadline = Clock::now() + timeout_;
    std::string text = jsonText(body);
    std::string why;
    std::size_t start = current_.load();
    for (std::size_t i = 0; i < members_.size(); ++i) {
        if (Clock::now() >= deadline) break;
        std::size_t index = (start + i) % members_.size();
        const Member& m = members_[index];
        // A member that takes the connection and then hangs must leave
        // time for the others.
        auto share = (deadline - Clock::now()) / std::int64_t(members_.size() - i);
        auto attemptDeadline =
            Clock::now() + std::max<Clock::duration>(share, std::chrono::milliseconds(500));
        attemptDeadline = std::min(attemptDeadline, deadline);
        HttpAnswer a = httpExchange({m.host, m.port, m.tls ? tls_.get() : nullptr}, "POST", path,
                                    {}, text, attemptDeadline);
        if (a.outcome == HttpOutcome::no_answer && !idempotent)
            throw Error(ErrorCode::unavailable,
                        "etcd: " + a.why + " (whether " + path + " took effect is unknown)");
        if (a.outcome != HttpOutcome::answered) {
            why = a.why;
            continue;
        }
        auto j = json::parse(a.body, nullptr, false);
        if (a.status == 200 && j.is_object()) {
            current_.store(index);
            return j;
        }
        std::string message = j.is_object() && j.contains("message") && j["message"].is_string()
                                  ? j["message"].get<std::string>()
                                  : a.body.substr(0, 200);
        // No leader or no quorum on this member's side: another may have one.
        if (a.status == 503 || a.status == 500 || a.status == 504) {
            why = "etcd member " + m.host + ":" + m.port + " answered " + std::to_string(a.status) +
                  ": " + message;
            if (!idempotent && a.status != 503)
                throw Error(ErrorCode::unavailable,
                            "etcd: " + why + " (whether " + path + " took effect is unknown)");
            continue;
        }
        if (a.status == 404) throw Error(ErrorCode::not_found, "etcd: " + message);
        throw Error(ErrorCode::conflict, "etcd refused " + path + ": " + message);
    }
    throw Error(ErrorCode::unavailable,
                "etcd: no member answered" + (why.empty() ? std::string() : " (" + why + ")"));
}

std::optional<StoredKey> EtcdClient::get(const std::string& key) {
    auto j = call("/v3/kv/range", json{{"key", b64(key)}}, true);
    if (!j.contains("kvs") || !j["kvs"].is_array() || j["kvs"].empty()) return std::nullopt;
    return storedKey(j["kvs"][0]);
}

std::vector<StoredKey> EtcdClient::list(const std::string& prefix) {
    // Pages of a thousand at one revision: one consistent view, no answer
    // near etcd's request limits.
    std::vector<StoredKey> out;
    std::string from = prefix;
    std::int64_t revision = 0;
    for (;;) {
        json req{{"key", b64(from)}, {"range_end", b64(prefixEnd(prefix))}, {"limit", 1000}};
        if (revision) req["revision"] = std::to_string(revision);
        auto j = call("/v3/kv/range", req, true);
        if (!revision && j.contains("header")) revision = number(j["header"], "revision");
        if (j.contains("kvs") && j["kvs"].is_array())
            for (const auto& kv : j["kvs"]) out.push_back(storedKey(kv));
        bool more = j.value("more", false);
        if (!more || out.empty()) return out;
        from = out.back().key + std::string(1, '\0');
    }
}

std::int64_t EtcdClient::put(const std::string& key, const std::string& value, std::int64_t lease) {
    json req{{"key", b64(key)}, {"value", b64(value)}};
    if (lease) req["lease"] = std::to_string(lease);
    auto j = call("/v3/kv/put", req, false);
    return j.contains("header") ? number(j["header"], "revision") : 0;
}

bool EtcdClient::remove(const std::string& key) {
    auto j = call("/v3/kv/deleterange", json{{"key", b64(key)}}, false);
    return number(j, "deleted") > 0;
}

TxnResult EtcdClient::txn(const std::vector<KeyCompare>& compare, const std::vector<KeyOp>& success,
                          const std::vector<KeyOp>& failure) {
    json req{{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
    for (const auto& c : compare) req["compare"].push_back(compareJson(c));
    for (const auto& op : success) req["success"].push_back(opJson(op));
    for (const auto& op : failure) req["failure"].push_back(opJson(op));
    auto j = call("/v3/kv/txn", req, false);
    TxnResult r;
    r.succeeded = j.value("succeeded", false);
    if (j.contains("header")) r.revision = number(j["header"], "revision");
    const auto& ran = r.succeeded ? success : failure;
    std::size_t i = 0;
    auto responses =
        j.contains("responses") && j["responses"].is_array() ? j["responses"] : json::array();
    for (const auto& op : ran) {
        if (op.kind == KeyOp::Kind::get) {
            std::optional<StoredKey> read;
            if (i < responses.size() && responses[i].contains("response_range")) {
                const auto& rr = responses[i]["response_range"];
                if (rr.contains("kvs") && rr["kvs"].is_array() && !rr["kvs"].empty())
                    read = storedKey(rr["kvs"][0]);
            }
            r.reads.push_back(std::move(read));
        }
        ++i;
    }
    return r;
}

std::int64_t EtcdClient::grantLease(std::chrono::seconds ttl) {
    // "TTL" and "ID", not snake case: {"ttl": n} is ignored by the gateway.
    auto j = call("/v3/lease/grant", json{{"TTL", ttl.count()}}, false);
    std::int64_t id = number(j, "ID");
    if (!id) throw Error(ErrorCode::unavailable, "etcd granted no lease");
    return id;
}

std::int64_t EtcdClient::keepAlive(std::int64_t lease) {
    // One POST per renewal: the gateway ignores keepalives streamed in one body.
    auto j = call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}, true);
    const json& result = j.contains("result") ? j["result"] : j;
    if (result.contains("error"))
        throw Error(ErrorCode::unavailable,
                    "etcd: lease keepalive failed: " + jsonText(result["error"]).substr(0, 200));
    return std::max<std::int64_t>(0, number(result, "TTL"));
}

void EtcdClient::revokeLease(std::int64_t lease) {
    try {
        call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}, true);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::not_found) throw;  // gone already
    }
}

bool EtcdClient::healthy() {
    auto deadline = Clock::now() + timeout_;
    for (const auto& m : members_) {
        if (Clock::now() >= deadline) break;
        HttpAnswer a = httpExchange({m.host, m.port, m.tls ? tls_.get() : nullptr}, "GET",
                                    "/health", {}, {}, deadline);
        if (a.outcome != HttpOutcome::answered || a.status != 200) continue;
        auto j = json::parse(a.body, nullptr, false);
        if (j.is_object() && j.value("health", "") == "true") return true;
    }
    return false;
}

}  // namespace airlock::fleet
