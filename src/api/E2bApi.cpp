#include "api/E2bApi.hpp"
#include "api/E2bTemplates.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "api/ErrorMapping.hpp"
#include "core/Clock.hpp"
#include "core/SecretCipher.hpp"
#include "core/JsonFields.hpp"
#include "core/Log.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

using e2b::kDefaultTimeoutS;
constexpr std::int64_t kDefaultForkTimeoutS = 15;  // and a fork
constexpr std::size_t kMaxListLimit = 100;

std::map<std::string, std::string> stringMap(const json& body, const char* key) {
    std::map<std::string, std::string> out;
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return out;
    if (!it->is_object())
        throw Error(ErrorCode::bad_request,
                    std::string("'") + key + "' must be an object of strings");
    for (const auto& [k, v] : it->items()) {
        if (!v.is_string())
            throw Error(ErrorCode::bad_request,
                        std::string("'") + key + "." + k + "' must be a string");
        out[k] = v.get<std::string>();
    }
    return out;
}

std::optional<std::int64_t> secondsField(const json& body, const char* key) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0)
        throw Error(ErrorCode::bad_request,
                    std::string("'") + key + "' must be a whole number of seconds >= 0");
    return it->get<std::int64_t>();
}

bool boolField(const json& body, const char* key, bool fallback) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return fallback;
    if (!it->is_boolean())
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' must be a boolean");
    return it->get<bool>();
}

json bodyObject(const ApiRequest& request) {
    if (request.body.empty()) return json::object();
    json body = parseJsonBody(request.body);
    requireObject(body, "request body");
    return body;
}

std::string templateFor(const std::string& asked) {
    return asked == "base" ? e2b::kBaseTemplate : asked;
}
// The name E2B clients know a template by (the inverse of templateFor).
std::string aliasOf(const std::string& templateName) {
    return templateName == e2b::kBaseTemplate ? "base" : templateName;
}

std::string e2bState(SandboxState s) { return s == SandboxState::paused ? "paused" : "running"; }

bool listed(SandboxState s) { return s == SandboxState::running || s == SandboxState::paused; }

// A list page's cursor, as E2B mints it: the last sandbox sent, by its start
// time and id (a value, not a position: it stays valid while sandboxes come
// and go), base64url, "__asc" for the ascending order.
std::string listToken(const std::string& createdAt, const std::string& id, bool ascending) {
    std::string t = base64Encode(createdAt + "__" + id + (ascending ? "__asc" : ""));
    for (auto& c : t) c = c == '+' ? '-' : c == '/' ? '_' : c;
    while (!t.empty() && t.back() == '=') t.pop_back();
    return t;
}

struct ListCursor {
    std::string createdAt, id;
};

ListCursor parseListToken(std::string token, bool ascending) {
    const Error invalid(ErrorCode::bad_request, "Invalid next token");
    if (token.empty() || token.size() > 256 ||
        token.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") !=
            std::string::npos)
        throw invalid;
    for (auto& c : token) c = c == '-' ? '+' : c == '_' ? '/' : c;
    while (token.size() % 4) token += '=';
    std::string text;
    try {
        text = base64Decode(token);
    } catch (const Error&) {
        throw invalid;
    }
    bool asc = text.size() > 5 && text.compare(text.size() - 5, 5, "__asc") == 0;
    if (asc != ascending) throw invalid;  // minted for the other order
    if (asc) text.resize(text.size() - 5);
    auto sep = text.find("__");
    if (sep == std::string::npos || !parseTimestamp(text.substr(0, sep))) throw invalid;
    return {text.substr(0, sep), text.substr(sep + 2)};
}

// A query parameter that must be a whole number of at most `digits` digits
// (nullopt when absent or empty); Error(bad_request, message) otherwise.
std::optional<std::int64_t> wholeNumberParam(const ApiRequest& request, const char* name,
                                             std::size_t digits, const std::string& message) {
    auto it = request.query.find(name);
    if (it == request.query.end() || it->second.empty()) return std::nullopt;
    const std::string& v = it->second;
    if (v.size() > digits || v.find_first_not_of("0123456789") != std::string::npos)
        throw Error(ErrorCode::bad_request, message);
    return std::stoll(v);
}

// An RFC 3339 time as sandboxes' start times are written (UTC, milliseconds),
// so that it compares with them as text; nullopt when it is not one.
std::optional<std::string> canonicalTime(const std::string& text) {
    auto seconds = parseTimestamp(text);
    if (!seconds) return std::nullopt;
    // Past what the clock's nanoseconds hold: later (or earlier) than any start.
    if (*seconds >= 7258118400) return std::string("9999-12-31T23:59:59.999Z");  // 2200
    if (*seconds < 0) return std::string("1970-01-01T00:00:00.000Z");
    int millis = 0;
    if (text.size() > 20 && text[19] == '.') {
        for (std::size_t i = 20, n = 0; n < 3; ++i, ++n)
            millis = millis * 10 + (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))
                                        ? text[i] - '0'
                                        : 0);
    }
    return formatTimestamp(std::chrono::system_clock::time_point(
        std::chrono::seconds(*seconds) + std::chrono::milliseconds(millis)));
}

}  // namespace

E2bApi::E2bApi(const FrontDoorServices& services, const e2b::SandboxTokens& tokens,
               std::string publicDomain)
    : sandboxes_(services.sandboxes),
      metrics_(services.metrics),
      snapshotting_(services.snapshotting),
      snapshots_(services.snapshots),
      tokens_(tokens),
      publicDomain_(std::move(publicDomain)) {}

bool E2bApi::owns(const std::string& path) {
    auto s = splitPath(path);
    if (s.empty()) return false;
    // E2B's API names its resources at the root or under /v2, /v3...; the
    // native API lives under /v1. Every such path answers in E2B's shape,
    // served or not, so that an SDK never prints an error it cannot read.
    static const std::set<std::string, std::less<>> kResources = {
        "sandboxes", "templates", "snapshots", "teams", "volumes", "api-keys", "access-tokens",
        "nodes", "health"};
    if (kResources.contains(s[0])) return true;
    return s[0].size() >= 2 && s[0][0] == 'v' && s[0] != "v1" &&
           s[0].find_first_not_of("0123456789", 1) == std::string::npos;
}

void E2bApi::addRoutes(RouteTable& table) {
    // Approvers decide; they never drive sandboxes (the agent never approves
    // its own commands, and an approver key never runs them).
    // (kAgentRole | kAdminRole: the default of every row below)
    auto add = [&](const char* method, const char* pattern,
                   std::function<ApiResponse(RouteContext&)> handler, Roles roles = kAgentRole | kAdminRole,
                   std::size_t bodyLimit = 0, decltype(Route::headCheck) headCheck = {}) {
        Route r;
        r.headCheck = std::move(headCheck);
        r.door = Door::e2b_control;
        r.method = method;
        RouteTable::setPattern(r, pattern);
        r.roles = roles;
        r.bodyLimit = bodyLimit;
        r.errors = ErrorShape::e2b;
        r.handler = [handler = std::move(handler)](RouteContext& c, Respond respond) {
            respond(handler(c));
        };
        table.add(std::move(r));
    };
    // The v2 rows are those E2B serves (their bodies differ, the calls do not).
    for (const char* root : {"/sandboxes", "/v2/sandboxes"}) {
        std::string p = root;
        add("POST", p.c_str(), [this](RouteContext& c) { return create(c); });
        add("GET", p.c_str(), [this](RouteContext& c) { return list(c); });
        add("POST", (p + "/{}/connect").c_str(),
            [this](RouteContext& c) { return connect(c, false); });
    }
    // Before /sandboxes/{}, which would take "metrics" for an id.
    add("GET", "/sandboxes/metrics", [this](RouteContext& c) { return latestMetrics(c); });
    add("GET", "/sandboxes/{}", [this](RouteContext& c) { return get(c); });
    add("DELETE", "/sandboxes/{}", [this](RouteContext& c) { return kill(c); });
    add("POST", "/sandboxes/{}/timeout", [this](RouteContext& c) { return setTimeout(c); });
    add("POST", "/sandboxes/{}/pause", [this](RouteContext& c) { return pause(c); });
    add("PUT", "/sandboxes/{}/network", [this](RouteContext& c) { return updateNetwork(c); });
    add("POST", "/sandboxes/{}/resume", [this](RouteContext& c) { return connect(c, true); });
    add("GET", "/sandboxes/{}/metrics", [this](RouteContext& c) { return metrics(c); });
    // Snapshots are Airlock's (memory, devices and disk; the sandbox goes on);
    // a fork is a snapshot's clones, the snapshot hidden after.
    add("POST", "/sandboxes/{}/snapshots", [this](RouteContext& c) { return createSnapshot(c); });
    add("GET", "/snapshots", [this](RouteContext& c) { return listSnapshots(c); });
    add("DELETE", "/templates/{}", [this](RouteContext& c) { return deleteSnapshot(c); });
    add("POST", "/sandboxes/{}/fork", [this](RouteContext& c) { return fork(c); });
    // The SDK's Template builder (E2bTemplates): who may build a native
    // template may build one here.
    constexpr Roles kBuilders = kApproverRole | kAdminRole;
    add("POST", "/v3/templates", [this](RouteContext& c) { return templates().requestBuild(c); }, kBuilders);
    add("GET", "/templates/aliases/{}", [this](RouteContext& c) { return templates().alias(c); }, kBuilders);
    add("GET", "/templates/{}/files/{}", [this](RouteContext& c) { return templates().fileLink(c); }, kBuilders);
    // The SDK sends no key with the archive: the link's token is its authorization.
    // Its token is checked before a byte of the archive is read.
    add("PUT", "/templates/{}/files/{}/upload", [this](RouteContext& c) { return templates().upload(c); },
        kPublicRoute, E2bTemplates::kMaxArchive,
        [this](const ApiRequest& head, const std::vector<std::string>& params) {
            templates().checkUpload(head, params);
        });
    add("POST", "/v2/templates/{}/builds/{}", [this](RouteContext& c) { return templates().startBuild(c); },
        kBuilders);
    add("GET", "/templates/{}/builds/{}/status", [this](RouteContext& c) { return templates().status(c); },
        kBuilders);
}

E2bTemplates& E2bApi::templates() {
    if (!templates_) throw Error(ErrorCode::unavailable, "template builds are not enabled on this server");
    return *templates_;
}

ApiResponse E2bApi::get(RouteContext& c) {
    auto r = sandboxes_.get(c.tenant, c.params[0]);
    json j = listedSandbox(r);
    j["domain"] = publicDomain_.empty() ? json(nullptr) : json(publicDomain_);
    j["envdAccessToken"] = tokens_.envdToken(r.id, c.principal.keyId);
    j["allowInternetAccess"] = !r.network.empty();
    j["network"] = {{"allowPublicTraffic", r.portAccess == "public"}};
    if (r.portAccess == "token")
        j["trafficAccessToken"] = tokens_.trafficToken(r.id, c.principal.keyId);
    j["lifecycle"] = {{"autoResume", r.autoResume},
                      {"onTimeout", r.onTimeout == "kill" ? "kill" : "pause"}};
    return jsonResponse(200, j);
}

ApiResponse E2bApi::kill(RouteContext& c) {
    sandboxes_.destroy(c.tenant, c.params[0], "it was killed");
    return ApiResponse{204, "", ""};
}

ApiResponse E2bApi::setTimeout(RouteContext& c) {
    json body = bodyObject(c.request);
    rejectUnknownFields(body, {"timeout"}, "timeout request");
    auto t = secondsField(body, "timeout");
    if (!t) throw Error(ErrorCode::bad_request, "'timeout' is required");
    // E2B's setTimeout may shorten a sandbox's life too: now + timeout.
    sandboxes_.setTimeout(c.tenant, c.params[0], std::max<std::int64_t>(*t, 1));
    return ApiResponse{204, "", ""};
}

namespace {
// E2B's egress fields (a create's network, an update's body) as Airlock's
// allowlist: allowOut is what may be reached; everything else is denied
// already, so denyOut only restates it.
std::vector<std::string> egressRules(const json& n, const std::string& where) {
    std::vector<std::string> allow;
    auto strings = [&](const char* key) {
        auto a = n.find(key);
        if (a == n.end() || a->is_null()) return;
        if (!a->is_array() || !std::all_of(a->begin(), a->end(),
                                           [](const json& e) { return e.is_string(); }))
            throw Error(ErrorCode::bad_request,
                        "'" + where + key + "' must be an array of strings");
        if (std::string(key) == "allowOut")
            for (const auto& e : *a) allow.push_back(e.get<std::string>());
    };
    strings("allowOut");
    strings("denyOut");
    for (const char* unsupported : {"egressProxy", "rules"})
        if (auto u = n.find(unsupported);
            u != n.end() && !u->is_null() && !(u->is_object() && u->empty()))
            throw Error(ErrorCode::bad_request,
                        "'" + where + unsupported + "' is not supported by Airlock");
    return allow;
}
}  // namespace

ApiResponse E2bApi::updateNetwork(RouteContext& c) {
    if (c.request.body.empty())
        throw Error(ErrorCode::bad_request, "a network update is a JSON object ({} clears the rules)");
    json body = bodyObject(c.request);
    rejectUnknownFields(body, {"allowOut", "denyOut", "allow_internet_access", "egressProxy", "rules"},
                        "network update");
    boolField(body, "allow_internet_access", true);  // opens nothing: allowOut names it
    auto allow = egressRules(body, "");
    const std::string& id = c.params[0];
    // As E2B: only a running sandbox's rules change (409 otherwise).
    if (auto r = sandboxes_.get(c.tenant, id); r.state != SandboxState::running)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is " + sandboxStateName(r.state));
    sandboxes_.setNetwork(c.tenant, id, allow);
    return ApiResponse{204, "", ""};
}

ApiResponse E2bApi::pause(RouteContext& c) {
    const std::string& id = c.params[0];
    json body = bodyObject(c.request);
    rejectUnknownFields(body, {"memory"}, "pause request");
    bool keepMemory = boolField(body, "memory", true);
    auto r = sandboxes_.get(c.tenant, id);
    if (r.state == SandboxState::paused)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is already paused");
    sandboxes_.pause(c.tenant, id, keepMemory ? PauseKind::memory : PauseKind::disk_only);
    // A paused E2B sandbox waits for its connect, however long.
    sandboxes_.setTimeout(c.tenant, id, 0);
    return ApiResponse{204, "", ""};
}

namespace {
json metricJson(const MetricSample& m) {
    return json{{"timestamp", formatUnixSeconds(m.unixMs / 1000)},
                {"timestampUnix", m.unixMs / 1000},
                {"cpuCount", m.cpuCount},
                {"cpuUsedPct", m.cpuUsedPct},
                {"memUsed", m.memUsed},
                {"memTotal", m.memTotal},
                {"memCache", m.memCache},
                {"diskUsed", m.diskUsed},
                {"diskTotal", m.diskTotal}};
}

// E2B's start and end: Unix seconds.
std::optional<std::int64_t> unixSecondsParam(const ApiRequest& request, const char* name) {
    return wholeNumberParam(request, name, 12,
                            std::string("'") + name + "' must be a Unix time in seconds");
}
}  // namespace

ApiResponse E2bApi::metrics(RouteContext& c) {
    auto start = unixSecondsParam(c.request, "start");
    auto end = unixSecondsParam(c.request, "end");
    if (start && end && *start > *end)
        throw Error(ErrorCode::bad_request, "Invalid time range for metrics");
    // As E2B: a sandbox with no samples (one never asked about, one gone
    // long ago) answers an empty list, not 404.
    json out = json::array();
    for (const auto& m : metrics_.samples(c.tenant, c.params[0],
                                          start ? std::optional(*start * 1000) : std::nullopt,
                                          end ? std::optional(*end * 1000 + 999) : std::nullopt))
        out.push_back(metricJson(m));
    return jsonResponse(200, out);
}

ApiResponse E2bApi::latestMetrics(RouteContext& c) {
    auto it = c.request.query.find("sandbox_ids");
    if (it == c.request.query.end() || it->second.empty())
        throw Error(ErrorCode::bad_request, "'sandbox_ids' is required");
    std::vector<std::string> ids;
    std::string list = it->second;
    for (std::size_t i = 0; i <= list.size();) {
        auto comma = list.find(',', i);
        if (comma == std::string::npos) comma = list.size();
        if (comma > i) ids.push_back(list.substr(i, comma - i));
        i = comma + 1;
    }
    if (ids.size() > 100)
        throw Error(ErrorCode::bad_request, "Too many sandboxes requested, maximum is 100");
    json sandboxes = json::object();
    for (const auto& [id, m] : metrics_.latest(c.tenant, ids)) sandboxes[id] = metricJson(m);
    return jsonResponse(200, json{{"sandboxes", sandboxes}});
}

namespace {

// What E2B answers for a snapshot: a named one by its name and tag (what a
// create takes), an unnamed one by its id.
json snapshotInfo(const SnapshotRecord& s) {
    if (s.name.alias.empty()) return {{"snapshotID", s.id}, {"names", json::array()}};
    std::string full = e2b::snapshotFullName(s.tenant, s.name.alias);
    return {{"snapshotID", full + ":" + s.name.tag}, {"names", json::array({full})}};
}

// "t1/mine", "mine:v2": a snapshot's name; anything bare is an id (or a
// template's name).
bool namesSnapshot(const std::string& text) {
    return text.find('/') != std::string::npos || text.find(':') != std::string::npos;
}

bool carries(const SnapshotRecord& s, const e2b::SnapshotNameQuery& q) {
    return !s.name.alias.empty() && s.name.alias == q.alias && (!q.tag || s.name.tag == *q.tag);
}

// The tenant's snapshots E2B lists: its own, ready, newest first.
std::vector<SnapshotRecord> listable(SnapshotLibrary& library, const std::string& tenant) {
    auto all = library.list(tenant);
    std::erase_if(all, [](const SnapshotRecord& s) {
        return s.kind != "user" || s.state != SnapshotState::ready;
    });
    std::sort(all.begin(), all.end(), [](const SnapshotRecord& a, const SnapshotRecord& b) {
        return a.createdAt != b.createdAt ? a.createdAt > b.createdAt : a.id > b.id;
    });
    return all;
}

}  // namespace

std::optional<std::string> E2bApi::namedSnapshot(const std::string& tenant,
                                                 const std::string& templateId) {
    // A bare name is a template's, or a snapshot id: a snapshot is named with
    // its namespace or its tag ("t1/mine", "mine:default", as the SDK's
    // snapshotId is), so no key of the tenant can put a snapshot where its
    // creates ask for a template, and a name may begin as ids do ("snap-a").
    if (!namesSnapshot(templateId))
        return templateId.rfind("snap-", 0) == 0 ? std::optional(templateId) : std::nullopt;
    e2b::SnapshotNameQuery q;
    try {
        q = e2b::parseSnapshotName(templateId, tenant);
    } catch (const Error&) {
        return std::nullopt;  // not a name: a template's, then
    }
    if (!q.tag) q.tag = e2b::kDefaultSnapshotTag;
    for (const auto& s : listable(snapshots_, tenant))
        if (carries(s, q)) return s.id;  // the newest with the name
    return std::nullopt;
}

ApiResponse E2bApi::createSnapshot(RouteContext& c) {
    json body = c.request.body.empty() ? json::object() : bodyObject(c.request);
    rejectUnknownFields(body, {"name"}, "snapshot request");
    SnapshotName name;
    if (auto n = body.find("name"); n != body.end() && !n->is_null()) {
        if (!n->is_string()) throw Error(ErrorCode::bad_request, "'name' must be a string");
        auto q = e2b::parseSnapshotName(n->get<std::string>(), c.tenant);
        name = SnapshotName{q.alias, q.tag.value_or(e2b::kDefaultSnapshotTag)};
    }
    return jsonResponse(201, snapshotInfo(snapshotting_.snapshot(c.tenant, c.params[0], name)));
}

ApiResponse E2bApi::listSnapshots(RouteContext& c) {
    const auto& q = c.request.query;
    auto param = [&](const char* name) {
        auto it = q.find(name);
        return it == q.end() ? std::string() : it->second;
    };
    std::size_t limit = 100;
    if (auto l = wholeNumberParam(c.request, "limit", 4, "'limit' must be from 1 to 100")) {
        if (*l == 0 || *l > 100) throw Error(ErrorCode::bad_request, "'limit' must be from 1 to 100");
        limit = static_cast<std::size_t>(*l);
    }
    std::optional<e2b::SnapshotNameQuery> named;
    if (auto n = param("name"); !n.empty()) named = e2b::parseSnapshotName(n, c.tenant);
    std::optional<ListCursor> cursor;
    if (auto token = param("nextToken"); !token.empty()) cursor = parseListToken(token, false);
    json out = json::array();
    const SnapshotRecord* last = nullptr;
    bool more = false;
    auto all = listable(snapshots_, c.tenant);
    for (const auto& s : all) {
        if (!param("sandboxID").empty() && s.sourceSandbox != param("sandboxID")) continue;
        if (named && !carries(s, *named)) continue;
        // Only what comes after the cursor (a value: it outlives its snapshot).
        if (cursor && (s.createdAt > cursor->createdAt ||
                       (s.createdAt == cursor->createdAt && s.id >= cursor->id)))
            continue;
        if (out.size() == limit) {
            more = true;
            break;
        }
        out.push_back(snapshotInfo(s));
        last = &s;
    }
    ApiResponse r = jsonResponse(200, out);
    if (more && last) r.headers["X-Next-Token"] = listToken(last->createdAt, last->id, false);
    return r;
}

ApiResponse E2bApi::deleteSnapshot(RouteContext& c) {
    // E2B deletes a snapshot as the template it is, by id or by name (every
    // snapshot with the name, or with the name and tag). Airlock's templates
    // are the operator's, never deleted through the API. The SDK sends a name
    // percent-encoded ("t1%2Fmine%3Av2").
    const std::string id = e2b::percentDecode(c.params[0]);
    // A template the tenant built (by its name): a builder's to delete.
    if (!namesSnapshot(id) && id.rfind("snap-", 0) != 0 && templates_ && templates_->isBuilt(c.tenant, id)) {
        if (c.principal.role == Role::agent)
            throw Error(ErrorCode::forbidden, "deleting a built template needs an approver or admin key");
        templates_->removeBuilt(c.tenant, id);
        return ApiResponse{204, "", ""};
    }
    if (!namesSnapshot(id)) {
        snapshotting_.deleteSnapshot(c.tenant, id);
        return ApiResponse{204, "", ""};
    }
    e2b::SnapshotNameQuery q;
    try {
        q = e2b::parseSnapshotName(id, c.tenant);
    } catch (const Error&) {
        throw Error(ErrorCode::not_found, "no snapshot " + id);
    }
    bool any = false;
    for (const auto& s : listable(snapshots_, c.tenant))
        if (carries(s, q)) {
            snapshotting_.deleteSnapshot(c.tenant, s.id);
            any = true;
        }
    if (!any) throw Error(ErrorCode::not_found, "no snapshot " + id);
    return ApiResponse{204, "", ""};
}

ApiResponse E2bApi::fork(RouteContext& c) {
    json body = c.request.body.empty() ? json::object() : bodyObject(c.request);
    rejectUnknownFields(body, {"timeout", "count"}, "fork request");
    std::int64_t count = 1;
    if (auto n = body.find("count"); n != body.end() && !n->is_null()) {
        if (!n->is_number_integer()) throw Error(ErrorCode::bad_request, "'count' must be a number");
        count = n->get<std::int64_t>();
    }
    if (count < 1) throw Error(ErrorCode::bad_request, "Count must be at least 1");
    if (count > 100) throw Error(ErrorCode::bad_request, "Count cannot be greater than 100");
    auto timeout = secondsField(body, "timeout").value_or(kDefaultForkTimeoutS);
    if (timeout <= 0) throw Error(ErrorCode::bad_request, "'timeout' must be above 0");
    auto source = sandboxes_.get(c.tenant, c.params[0]);
    auto snap = snapshotting_.snapshot(c.tenant, source.id);
    json out = json::array();
    for (std::int64_t i = 0; i < count; ++i) {
        try {
            CreateSandboxRequest req;
            req.snapshot = snap.id;
            req.timeoutS = timeout;
            req.settingsFrom = source.id;  // its rules, secrets, network, env and metadata
            auto r = sandboxes_.create(c.tenant, req);
            out.push_back({{"sandbox", sandboxAnswer(r, aliasOf(source.templateName),
                                                     c.principal.keyId)}});
        } catch (const Error& e) {
            auto status = errorStatus(e.code(), e.what());
            out.push_back({{"error", {{"code", status.status}, {"message", status.message}}}});
        }
    }
    // The clones keep their disk layers; the snapshot itself is not E2B's to list.
    try {
        snapshotting_.deleteSnapshot(c.tenant, snap.id);
    } catch (const std::exception& e) {
        logWarn("e2b", "fork of " + source.id + ": its snapshot " + snap.id + " stays: " + e.what());
    }
    return jsonResponse(201, out);
}

ApiResponse E2bApi::create(RouteContext& c) {
    json body = bodyObject(c.request);
    rejectUnknownFields(
        body,
        {"templateID", "timeout", "metadata", "envVars", "secure", "allow_internet_access",
         "autoPause", "autoPauseMemory", "autoResume", "network", "mcp", "volumeMounts", "iam"},
        "create request");
    CreateSandboxRequest req;
    std::string asked = body.contains("templateID") ? stringField(body, "templateID") : "base";
    // A snapshot (by id, or the tenant's name for it) is a template to E2B:
    // creating from it clones it.
    if (auto snap = namedSnapshot(c.tenant, asked))
        req.snapshot = *snap;
    else
        req.templateName = templateFor(asked);
    req.timeoutS = secondsField(body, "timeout").value_or(kDefaultTimeoutS);
    if (*req.timeoutS == 0) req.timeoutS = kDefaultTimeoutS;
    req.metadata = stringMap(body, "metadata");
    req.env = stringMap(body, "envVars");
    boolField(body, "secure", true);  // every sandbox has an envd token
    bool pauseKeepsMemory = boolField(body, "autoPauseMemory", true);
    // Airlock's network is closed by default; allow_internet_access never
    // opens it (network.allowOut names what may be reached).
    boolField(body, "allow_internet_access", true);
    if (boolField(body, "autoPause", false))
        req.onTimeout = pauseKeepsMemory ? TimeoutAction::pause : TimeoutAction::pause_disk_only;
    if (auto it = body.find("autoResume"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) throw Error(ErrorCode::bad_request, "'autoResume' must be an object");
        rejectUnknownFields(*it, {"enabled"}, "autoResume");
        req.autoResume = boolField(*it, "enabled", false);
        if (req.autoResume && req.onTimeout != TimeoutAction::pause)
            throw Error(ErrorCode::bad_request,
                        req.onTimeout == TimeoutAction::kill
                            ? "autoResume needs autoPause"
                            : "autoResume cannot be used with autoPauseMemory false: resume "
                              "with connect");
    }
    auto given = [&](const char* name) {
        auto it = body.find(name);
        return it != body.end() && !it->is_null() && !(it->is_object() && it->empty());
    };
    // E2B's SDK starts the gateway itself right after the create and, when it
    // cannot, kills the sandbox and says so; refused here, before anything
    // boots, every SDK version gets that answer and no sandbox is left.
    if (given("mcp"))
        throw Error(ErrorCode::bad_request,
                    "Failed to start MCP gateway: sandboxes on this server run no MCP gateway "
                    "(create the sandbox without 'mcp')");
    if (given("iam")) throw Error(ErrorCode::bad_request, "'iam' is not supported by Airlock");
    if (auto it = body.find("volumeMounts");
        it != body.end() && !it->is_null() && !(it->is_array() && it->empty()))
        throw Error(ErrorCode::bad_request, "volume mounts are not supported by Airlock");
    if (auto it = body.find("network"); it != body.end() && !it->is_null()) {
        const json& n = *it;
        requireObject(n, "network");
        rejectUnknownFields(n,
                            {"allowOut", "denyOut", "rules", "egressProxy", "allowPublicTraffic",
                             "maskRequestHost", "httpsPorts"},
                            "network");
        req.networkAllow = egressRules(n, "network.");
        // E2B's rule: guest ports are public unless this says otherwise,
        // then they need the sandbox's traffic token.
        if (!boolField(n, "allowPublicTraffic", true)) req.portAccess = PortAccess::token;
        if (auto u = n.find("maskRequestHost"); u != n.end() && !u->is_null())
            throw Error(ErrorCode::bad_request,
                        "'network.maskRequestHost' is not supported by Airlock");
    }
    if (req.portAccess != PortAccess::token) req.portAccess = PortAccess::open;
    if (placer_)
        if (auto answer = placer_(c, req)) return *answer;
    auto r = sandboxes_.create(c.tenant, req);
    return jsonResponse(201, sandboxAnswer(r, asked, c.principal.keyId));
}

json E2bApi::sandboxAnswer(const SandboxRecord& r, const std::string& asked,
                           const std::string& keyId) const {
    return {{"sandboxID", r.id},
            {"templateID", asked},
            {"alias", asked},
            {"clientID", "airlock"},
            {"envdVersion", e2b::kEnvdVersion},
            {"envdAccessToken", tokens_.envdToken(r.id, keyId)},
            {"trafficAccessToken",
             r.portAccess == "token" ? json(tokens_.trafficToken(r.id, keyId)) : json(nullptr)},
            {"domain", publicDomain_.empty() ? json(nullptr) : json(publicDomain_)}};
}

json E2bApi::listedSandbox(const SandboxRecord& r) const {
    json metadata = json::parse(r.metadataJson, nullptr, false);
    std::int64_t started = parseTimestamp(r.createdAt).value_or(nowUnixSeconds());
    // No timeout (paused, or set to none natively): E2B has no "never", a far end stands in.
    std::int64_t end = r.expiresAt > 0 ? r.expiresAt : started + 30LL * 24 * 3600;
    std::string alias = aliasOf(r.templateName);
    return {{"sandboxID", r.id},
            {"templateID", alias},
            {"alias", alias},
            {"clientID", "airlock"},
            {"cpuCount", r.vcpus},
            {"memoryMB", r.memoryMib},
            {"diskSizeMB", r.diskBytes / (1024 * 1024)},
            {"startedAt", formatUnixSeconds(started)},
            {"endAt", formatUnixSeconds(end)},
            {"state", e2bState(r.state)},
            {"envdVersion", e2b::kEnvdVersion},
            {"metadata", metadata.is_object() ? metadata : json::object()},
            {"volumeMounts", json::array()}};
}

ApiResponse E2bApi::list(RouteContext& c) {
    auto q = [&](const char* k) {
        auto it = c.request.query.find(k);
        return it == c.request.query.end() ? std::string() : it->second;
    };
    std::set<std::string> states;
    if (std::string st = q("state"); !st.empty()) {
        std::size_t i = 0;
        while (i <= st.size()) {
            auto j = st.find(',', i);
            std::string one = st.substr(i, j == std::string::npos ? std::string::npos : j - i);
            if (one != "running" && one != "paused")
                throw Error(ErrorCode::bad_request,
                            "state must be running and/or paused, got '" + one + "'");
            states.insert(one);
            if (j == std::string::npos) break;
            i = j + 1;
        }
    }
    auto metadata = e2b::parseMetadataFilter(q("metadata"));
    std::size_t limit = kMaxListLimit;
    if (auto l = wholeNumberParam(c.request, "limit", 6, "limit must be a whole number")) {
        if (*l == 0) throw Error(ErrorCode::bad_request, "limit must be at least 1");
        limit = std::min<std::size_t>(static_cast<std::size_t>(*l), kMaxListLimit);
    }
    std::string order = q("order");
    if (!order.empty() && order != "asc" && order != "desc")
        throw Error(ErrorCode::bad_request, "Invalid order parameter: " + order.substr(0, 64));
    bool ascending = order == "asc";
    std::optional<ListCursor> cursor;
    if (std::string token = q("nextToken"); !token.empty()) cursor = parseListToken(token, ascending);
    std::optional<std::string> startedAfter;
    if (std::string t = q("startedAfter"); !t.empty()) {
        startedAfter = canonicalTime(t);
        if (!startedAfter)
            throw Error(ErrorCode::bad_request, "startedAfter must be an RFC 3339 time");
    }
    std::string tmpl = q("template");
    auto all = sandboxes_.list(c.scope());
    if (otherNodes_)
        for (auto& r : otherNodes_(c)) all.push_back(std::move(r));
    // E2B's order: the newest start first, ties by id; "asc" is its exact reverse.
    auto newerFirst = [](const SandboxRecord& a, const SandboxRecord& b) {
        return a.createdAt != b.createdAt ? a.createdAt > b.createdAt : a.id < b.id;
    };
    std::sort(all.begin(), all.end(), newerFirst);
    if (ascending) std::reverse(all.begin(), all.end());
    json out = json::array();
    const SandboxRecord* last = nullptr;
    bool more = false;
    for (const auto& r : all) {
        if (!listed(r.state)) continue;
        if (!states.empty() && !states.count(e2bState(r.state))) continue;
        if (!tmpl.empty() && templateFor(tmpl) != r.templateName) continue;
        if (startedAfter && r.createdAt < *startedAfter) continue;
        if (cursor) {
            SandboxRecord at;
            at.createdAt = cursor->createdAt;
            at.id = cursor->id;
            // Only what comes after the cursor in this order.
            if (ascending ? !newerFirst(r, at) : !newerFirst(at, r)) continue;
        }
        json m = json::parse(r.metadataJson, nullptr, false);
        bool match = true;
        for (const auto& [k, v] : metadata)
            if (!m.is_object() || !m.contains(k) || !m[k].is_string() ||
                m[k].get<std::string>() != v)
                match = false;
        if (!match) continue;
        if (out.size() == limit) {
            more = true;
            break;
        }
        out.push_back(listedSandbox(r));
        last = &r;
    }
    ApiResponse res = jsonResponse(200, out);
    if (more && last) res.headers["X-Next-Token"] = listToken(last->createdAt, last->id, ascending);
    return res;
}

ApiResponse E2bApi::connect(RouteContext& c, bool resumeRoute) {
    const std::string& tenant = c.tenant;
    const std::string& keyId = c.principal.keyId;
    const std::string& id = c.params[0];
    json body = bodyObject(c.request);
    rejectUnknownFields(body, {"timeout", "memory", "autoPause"}, "connect request");
    std::int64_t timeout = secondsField(body, "timeout").value_or(kDefaultTimeoutS);
    if (timeout == 0) timeout = kDefaultTimeoutS;
    boolField(body, "memory", true);
    bool autoPause = boolField(body, "autoPause", false);
    auto r = sandboxes_.get(tenant, id);
    if (r.state == SandboxState::paused) {
        sandboxes_.resume(tenant, id);
        sandboxes_.setTimeout(tenant, id, timeout);
        (void)autoPause;
        return jsonResponse(
            201, sandboxAnswer(sandboxes_.get(tenant, id), aliasOf(r.templateName), keyId));
    }
    if (r.state != SandboxState::running)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is " + sandboxStateName(r.state));
    if (resumeRoute) throw Error(ErrorCode::conflict, "sandbox " + id + " is already running");
    // Connecting to a running sandbox only ever extends its life.
    std::int64_t left = r.expiresAt > 0 ? r.expiresAt - nowUnixSeconds() : -1;
    if (r.expiresAt > 0 && timeout > left) sandboxes_.setTimeout(tenant, id, timeout);
    return jsonResponse(
        200, sandboxAnswer(sandboxes_.get(tenant, id), aliasOf(r.templateName), keyId));
}

}  // namespace airlock::api
