#include "api/E2bEnvd.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>

#include "api/ClientStreamSession.hpp"
#include "api/DownloadSession.hpp"
#include "api/ErrorMapping.hpp"
#include "api/PreviewProxySession.hpp"
#include "api/UploadSession.hpp"
#include "core/JsonFields.hpp"
#include "core/Log.hpp"
#include "core/SecretCipher.hpp"
#include "core/Sha256.hpp"
#include "e2b/ConnectEnvelope.hpp"
#include "e2b/Multipart.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Messages.hpp"

namespace airlock::api {
using Fs = protocol::FsRequest::Action;
namespace {
using nlohmann::json;
namespace asio = boost::asio;

constexpr std::size_t kMaxRpcBody = 1024 * 1024;
constexpr std::size_t kMaxListEntries = 10000;
constexpr unsigned kMaxListDepth = 16;
constexpr auto kFileOpTimeout = std::chrono::seconds(60);

const char* kProcess = "/process.Process/";
const char* kFilesystem = "/filesystem.Filesystem/";

bool startsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

json objectBody(const std::string& body) {
    if (body.empty()) return json::object();
    if (body.size() > kMaxRpcBody)
        throw Error(ErrorCode::payload_too_large, "the request message is too large");
    json j = parseJsonBody(body);
    requireObject(j, "request message");
    return j;
}

std::string str(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return "";
    if (!it->is_string())
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' must be a string");
    return it->get<std::string>();
}

unsigned uintField(const json& j, const char* key, unsigned fallback, unsigned max) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    // proto3 JSON: a number, or a decimal string.
    std::int64_t v = -1;
    if (it->is_number_integer())
        v = it->get<std::int64_t>();
    else if (it->is_string() && !it->get<std::string>().empty() &&
             it->get<std::string>().size() < 10 &&
             it->get<std::string>().find_first_not_of("0123456789") == std::string::npos)
        v = std::stoll(it->get<std::string>());
    if (v < 0 || v > static_cast<std::int64_t>(max))
        throw Error(ErrorCode::bad_request,
                    std::string("'") + key + "' must be a number from 0 to " + std::to_string(max));
    return static_cast<unsigned>(v);
}

bool boolOf(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return false;
    if (!it->is_boolean())
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' must be a boolean");
    return it->get<bool>();
}

std::string parentOf(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

// A poll of a directory tree: path -> "type size mtime".

}  // namespace

E2bEnvd::E2bEnvd(EnvdSandboxes sandboxes, const e2b::SandboxTokens& tokens,
                 Authenticator& auth, TenantLimiter& limiter, asio::thread_pool& workers,
                 std::string publicDomain)
    : sandboxes_(sandboxes),
      tokens_(tokens),
      auth_(auth),
      limiter_(limiter),
      workers_(workers),
      publicDomain_(std::move(publicDomain)),
      processes_(sandboxes.commands, workers),
      watchers_(sandboxes.files) {}

std::optional<E2bEnvd::Target> E2bEnvd::target(const ApiRequest& head) const {
    std::string id = head.header("e2b-sandbox-id"), port = head.header("e2b-sandbox-port");
    if (!id.empty() || !port.empty()) {
        if (id.empty() || port.empty() || port.size() > 5 ||
            port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) == 0 ||
            std::stoul(port) > 65535)
            throw Error(ErrorCode::bad_request,
                        "E2b-Sandbox-Id and E2b-Sandbox-Port (1-65535) go together");
        return Target{id, static_cast<unsigned>(std::stoul(port)), ""};
    }
    if (auto h = e2b::parseSandboxHost(head.host, publicDomain_))
        return Target{h->sandboxId, h->port, h->token};
    // One sandbox URL for all (E2B_SANDBOX_URL): the SDK's signed file URLs
    // carry no header, so their signature names the sandbox.
    if (isFilesRequest(head) && head.header("x-access-token").empty()) {
        if (!head.query.count("signature"))
            throw Error(ErrorCode::bad_request,
                        "a /files URL names its sandbox: by Host (<port>-<sandbox id>." +
                            (publicDomain_.empty() ? std::string("<public domain>") : publicDomain_) +
                            "), by E2b-Sandbox-Id and E2b-Sandbox-Port headers, or by its "
                            "signature (downloadUrl/uploadUrl)");
        return Target{sandboxSigning(head), e2b::kEnvdPort, ""};
    }
    return std::nullopt;
}

E2bEnvd::Caller E2bEnvd::callerOf(const ApiRequest& request, const std::string& tenant,
                                  const std::string& sandboxId) {
    Caller out;
    out.tenant = tenant;
    out.sandboxId = sandboxId;
    // /files names its user in the query; RPCs in Basic credentials. A
    // signed URL (no token) runs as exactly the user it signed ("" being the
    // default): no header may change whom it acts as.
    bool signedUrl = isFilesRequest(request) && request.header("x-access-token").empty();
    auto u = request.query.find("username");
    bool named = request.path == "/files" && u != request.query.end() && !u->second.empty();
    if (named)
        out.user = e2b::basicAuthUser("Basic " + base64Encode(u->second + ":"));
    else if (!signedUrl)
        out.user = e2b::basicAuthUser(request.authorization);
    if (out.user.empty()) out.user = "user";
    return out;
}

void E2bEnvd::addRoutes(RouteTable& table) {
    // A token's key drives the sandbox: an approver's never does.
    constexpr Roles kDrivers = kAgentRole | kAdminRole;
    auto row = [&](const char* method, const std::string& path, RouteKind kind,
                   ErrorShape errors) {
        Route r;
        r.door = Door::e2b_envd;
        r.method = method;
        RouteTable::setPattern(r, path);
        r.roles = kDrivers;
        r.kind = kind;
        r.errors = errors;
        r.bodyLimit = kMaxRpcBody;
        return r;
    };
    // Reachability only, no token: 502 when the sandbox is gone or paused.
    Route health = row("GET", "/health", RouteKind::unary, ErrorShape::e2b);
    health.roles = kPublicRoute;
    health.handler = [this](RouteContext& c, Respond respond) { respond(this->health(c)); };
    table.add(std::move(health));

    Route download = row("GET", "/files", RouteKind::stream, ErrorShape::e2b);
    download.stream = [this](StreamHandover& h) { return this->download(h); };
    table.add(std::move(download));

    // Streamed to the guest as it arrives, file after file: no size limit
    // but the guest's disk, nothing whole in memory.
    Route upload = row("POST", "/files", RouteKind::stream, ErrorShape::e2b);
    upload.stream = [this](StreamHandover& h) { return this->upload(h); };
    table.add(std::move(upload));

    auto unary = [this](RouteContext& c, Respond respond) {
        if (c.request.contentType.rfind("application/json", 0) != 0)
            throw Error(ErrorCode::bad_request,
                        "unary calls take application/json (the Connect JSON codec)");
        respond(ApiResponse{
            200, "application/json",
            jsonText(unaryRpc(c.request.path, objectBody(c.request.body), callerOf(c.request, c.tenant, c.params.at(0))))});
    };
    for (const char* m : {"List", "SendInput", "SendSignal", "CloseStdin", "Update"}) {
        Route r = row("POST", std::string(kProcess) + m, RouteKind::unary, ErrorShape::connect);
        r.handler = unary;
        table.add(std::move(r));
    }
    Route streamInput =
        row("POST", std::string(kProcess) + "StreamInput", RouteKind::stream, ErrorShape::connect);
    streamInput.stream = [this](StreamHandover& h) { return this->streamInput(h); };
    table.add(std::move(streamInput));
    for (const char* m : {"Stat", "ListDir", "MakeDir", "Move", "Remove", "CreateWatcher",
                          "GetWatcherEvents", "RemoveWatcher"}) {
        Route r = row("POST", std::string(kFilesystem) + m, RouteKind::unary, ErrorShape::connect);
        r.handler = unary;
        table.add(std::move(r));
    }
    for (const std::string& path :
         {std::string(kProcess) + "Start", std::string(kProcess) + "Connect",
          std::string(kFilesystem) + "WatchDir"}) {
        Route r = row("POST", path, RouteKind::connect_stream, ErrorShape::connect);
        r.planner = [this](RouteContext& c) { return planStream(c); };
        table.add(std::move(r));
    }

    // Every other port of the sandbox: any method, any path, its own rule.
    Route port;
    port.door = Door::e2b_port;
    port.method = "*";
    RouteTable::setPattern(port, "/**");
    port.roles = kPublicRoute;
    port.kind = RouteKind::stream;
    port.errors = ErrorShape::e2b;
    port.stream = [this](StreamHandover& h) { return proxyPort(h); };
    table.add(std::move(port));
}

SandboxRecord E2bEnvd::reachableSandbox(const std::string& sandboxId) {
    auto owner = sandboxes_.lifecycle.ownerOf(sandboxId);
    if (!owner) throw Error(ErrorCode::sandbox_unreachable, "The sandbox was not found");
    // One being deleted is gone already (its streams are being cut): 502, as
    // the SDK's health probe then tells a killed sandbox from a dropped link.
    SandboxRecord r;
    try {
        r = sandboxes_.lifecycle.get(*owner, sandboxId);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::not_found) throw;
        throw Error(ErrorCode::sandbox_unreachable, "The sandbox was not found");
    }
    if (r.state != SandboxState::running && !wakes(r))
        throw Error(ErrorCode::sandbox_unreachable,
                    "The sandbox is " + sandboxStateName(r.state) +
                        (r.state == SandboxState::paused ? ": connect resumes it" : ""));
    return r;
}

bool E2bEnvd::wakes(const SandboxRecord& r) {
    return r.state == SandboxState::paused && r.autoResume && !r.pausedWithoutMemory;
}

SandboxRecord E2bEnvd::awake(SandboxRecord r) {
    if (!wakes(r)) return r;
    // Read again: paused without memory or gone since the request was
    // admitted, it is not this door's to wake (502); resumed, it is awake.
    r = reachableSandbox(r.id);
    if (r.state == SandboxState::running) return r;
    // E2B's auto-resume, for traffic its access rule let through: the
    // sandbox resumes and its life starts again, as after a connect.
    try {
        sandboxes_.lifecycle.resume(r.tenant, r.id);
        r = sandboxes_.lifecycle.setTimeout(r.tenant, r.id,
                                            r.timeoutS > 0 ? r.timeoutS : e2b::kDefaultTimeoutS);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::not_found) throw;
        throw Error(ErrorCode::sandbox_unreachable, "The sandbox was not found");
    }
    logInfo("e2b", "sandbox " + r.id + " resumed by traffic (auto-resume)");
    return r;
}

SandboxRecord E2bEnvd::runningSandbox(const std::string& sandboxId) {
    auto r = reachableSandbox(sandboxId);
    if (r.state != SandboxState::running)
        throw Error(ErrorCode::sandbox_unreachable, "The sandbox is paused: connect resumes it");
    return r;
}

bool E2bEnvd::isFilesRequest(const ApiRequest& head) {
    return head.path == "/files" && (head.method == "GET" || head.method == "POST");
}

E2bEnvd::SignedUrl E2bEnvd::signedUrlOf(const ApiRequest& head) {
    auto param = [&](const char* name) -> std::optional<std::string> {
        auto it = head.query.find(name);
        if (it == head.query.end()) return std::nullopt;
        return it->second;
    };
    SignedUrl out;
    auto signature = param("signature");
    if (!signature || signature->empty())
        throw Error(ErrorCode::unauthorized, "missing signature query parameter");
    out.signature = *signature;
    if (auto e = param("signature_expiration"); e && !e->empty()) {
        if (e->size() > 12 || e->find_first_not_of("0123456789") != std::string::npos)
            throw Error(ErrorCode::unauthorized, "invalid signature expiration");
        out.expiration = std::stoll(*e);
    }
    out.operation = head.method == "GET" ? "read" : "write";
    out.path = param("path").value_or("");
    out.user = param("username").value_or("");
    return out;
}

std::optional<std::string> E2bEnvd::signingKey(const SignedUrl& url, const std::string& sandboxId,
                                               const std::vector<Principal>& drivers) const {
    std::optional<std::string> keyId;
    for (const auto& key : drivers) {
        auto expected = e2b::fileSignature(url.path, url.operation, url.user,
                                           tokens_.envdToken(sandboxId, key.keyId), url.expiration);
        if (e2b::SandboxTokens::same(expected, url.signature)) keyId = key.keyId;
    }
    return keyId;
}

std::string E2bEnvd::signedUrlKey(const ApiRequest& head, const std::string& sandboxId,
                                  const std::string& owner) {
    SignedUrl url = signedUrlOf(head);
    auto keyId = signingKey(url, sandboxId, auth_.driversOf(owner));
    if (!keyId) throw Error(ErrorCode::unauthorized, "invalid signature");
    if (url.expiration && *url.expiration < nowUnixSeconds())
        throw Error(ErrorCode::unauthorized, "signature is already expired");
    return *keyId;
}

std::string E2bEnvd::sandboxSigning(const ApiRequest& head) const {
    SignedUrl url = signedUrlOf(head);
    // Every running sandbox is tried, each with its tenant's driving keys:
    // only a holder of that sandbox's token can make a signature that matches.
    std::map<std::string, std::vector<Principal>> drivers;
    for (const auto& r : sandboxes_.lifecycle.list(TenantScope::all())) {
        if (r.state != SandboxState::running && !wakes(r)) continue;
        auto [it, fresh] = drivers.try_emplace(r.tenant);
        if (fresh) it->second = auth_.driversOf(r.tenant);
        if (signingKey(url, r.id, it->second)) return r.id;
    }
    throw Error(ErrorCode::unauthorized, "invalid signature");
}

ApiResponse E2bEnvd::health(RouteContext& c) {
    // Public, as envd's: only a caller with the sandbox's token wakes it.
    auto r = reachableSandbox(c.params.at(0));
    if (wakes(r)) {
        auto keyId = tokens_.envdTokenKey(r.id, c.request.header("x-access-token"));
        if (!mintingKeyActs(keyId, r.tenant))
            throw Error(ErrorCode::sandbox_unreachable, "The sandbox is paused: connect resumes it");
        awake(r);
    }
    return ApiResponse{204, "", ""};
}

bool E2bEnvd::mintingKeyActs(const std::optional<std::string>& keyId,
                             const std::string& owner) {
    if (!keyId) return false;
    // Read from the store on every use: a revoked or expired key's tokens stop at once.
    auto key = auth_.activeKey(*keyId);
    if (!key || key->role == Role::approver) return false;
    return key->role == Role::admin || key->tenant == owner;
}

std::optional<ApiResponse> E2bEnvd::proxyPort(StreamHandover& h) {
    auto target = this->target(h.context.request);
    if (!target) throw Error(ErrorCode::not_found, "no sandbox port named");
    auto route = routePort(h.context.request, *target);
    h.context.tenant = route.tenant;
    h.context.tenantSlot = limiter_.acquire(route.tenant);
    std::make_shared<PreviewProxySession>(std::move(h.stream), std::move(h.buffer),
                                          h.header.release(), std::move(h.context), target->port,
                                          std::move(route.open))
        ->start();
    return std::nullopt;
}

E2bEnvd::PortRoute E2bEnvd::routePort(const ApiRequest& head, const Target& t) {
    const Target* target = &t;
    // Airlock's own guest services (egress and package proxies) first: no
    // lookup, no request slot, no tunnel for them, whoever asks.
    sandboxes_.ports.requireReachable(target->port);
    auto r = reachableSandbox(target->sandboxId);
    PortRoute route;
    route.tenant = r.tenant;
    auto& open = route.open;
    auto& ports = sandboxes_.ports;
    std::string id = target->sandboxId;
    unsigned port = target->port;
    if (!target->token.empty()) {
        // Airlock's own preview origin: the exposed port's capability.
        if (wakes(r) && !ports.admitsPreview(id, port, target->token))
            throw Error(ErrorCode::not_found, "no such preview");
        open = [&ports, id, port, token = target->token](AgentStream::Handler handler) {
            return ports.openPreview(id, port, token, std::move(handler));
        };
    } else if (r.portAccess == "public" ||
               (r.portAccess == "token" &&
                mintingKeyActs(
                    tokens_.trafficTokenKey(id, head.header("e2b-traffic-access-token")),
                    r.tenant))) {
        open = [&ports, tenant = r.tenant, id, port](AgentStream::Handler handler) {
            return ports.openTunnel(tenant, id, port, std::move(handler));
        };
    } else if (r.portAccess == "token") {
        throw Error(
            ErrorCode::forbidden,
            "this sandbox's ports need its traffic access token (header e2b-traffic-access-token)");
    } else {
        throw Error(
            ErrorCode::forbidden,
            "this sandbox's ports are reached through its exposed ports (POST /v1/sandboxes/" + id +
                "/ports)");
    }
    if (wakes(r)) {
        // The access rule let this through: the sandbox resumes where the
        // tunnel opens, on a worker (a resume waits on its lock and libvirt).
        open = [this, r, inner = std::move(open)](AgentStream::Handler handler) {
            awake(r);
            return inner(std::move(handler));
        };
    }
    return route;
}

namespace {
// A ProcessInput ({"input": {"stdin"|"pty": base64}}) to the process.
void sendProcessInput(e2b::E2bProcess& p, const json& holder) {
    auto in = holder.find("input");
    if (in == holder.end() || !in->is_object())
        throw Error(ErrorCode::bad_request, "'input' is required");
    rejectUnknownFields(*in, {"stdin", "pty"}, "ProcessInput");
    bool pty = in->contains("pty");
    auto value = in->find(pty ? "pty" : "stdin");
    if (value == in->end() || !value->is_string())
        throw Error(ErrorCode::bad_request, "'input' must hold stdin or pty bytes (base64)");
    p.sendInput(base64Decode(value->get<std::string>()), pty);
}
}  // namespace

std::shared_ptr<e2b::E2bProcess> E2bEnvd::selected(const Caller& caller, const json& body) {
    auto it = body.find("process");
    if (it == body.end() || !it->is_object())
        throw Error(ErrorCode::bad_request, "'process' (a selector) is required");
    rejectUnknownFields(*it, {"pid", "tag"}, "process selector");
    unsigned pid = uintField(*it, "pid", 0, 1u << 22);
    std::string tag = str(*it, "tag");
    if (!pid && tag.empty())
        throw Error(ErrorCode::bad_request, "the selector names no pid or tag");
    auto p = processes_.find(caller.sandboxId, pid, tag);
    if (!p)
        throw Error(ErrorCode::not_found,
                    pid ? "process with pid " + std::to_string(pid) + " not found"
                        : "process with tag " + tag + " not found");
    return p;
}

protocol::FsResult E2bEnvd::fsCall(const Caller& caller, protocol::FsRequest::Action action,
                                   const std::string& path, const std::string& to, bool recursive) {
    protocol::FsRequest request;
    request.action = action;
    request.path = path;
    request.to = to;
    request.recursive = recursive;
    request.user = caller.user;
    return sandboxes_.files.fileOp(caller.tenant, caller.sandboxId, request);
}

json E2bEnvd::listDir(const Caller& caller, const std::string& path, unsigned depth) {
    json entries = json::array();
    std::function<void(const std::string&, unsigned)> walk = [&](const std::string& dir,
                                                                 unsigned level) {
        auto listing = fsCall(caller, Fs::list, dir);
        if (level == 1 && listing.entry->type != protocol::FileEntry::Type::directory)
            throw Error(ErrorCode::bad_request, "path '" + dir + "' is not a directory");
        if (!listing.entries) return;
        for (const auto& e : *listing.entries) {
            if (entries.size() >= kMaxListEntries) return;
            entries.push_back(e2b::entryInfo(e));
            if (level < depth && e.type == protocol::FileEntry::Type::directory)
                walk(e.path, level + 1);
        }
    };
    walk(path, 1);
    return {{"entries", entries}};
}

json E2bEnvd::unaryRpc(const std::string& path, const json& body, const Caller& caller) {
    std::string method = path.substr(path.find('/', 1) + 1);
    if (startsWith(path, kFilesystem)) {
        if (method == "Stat") {
            rejectUnknownFields(body, {"path"}, "StatRequest");
            std::string p = e2b::resolveUserPath(str(body, "path"), caller.user);
            return {{"entry", e2b::entryInfo(*fsCall(caller, Fs::stat, p).entry)}};
        }
        if (method == "ListDir") {
            rejectUnknownFields(body, {"path", "depth"}, "ListDirRequest");
            unsigned depth = std::max(1u, uintField(body, "depth", 1, kMaxListDepth));
            return listDir(caller, e2b::resolveUserPath(str(body, "path"), caller.user), depth);
        }
        if (method == "MakeDir") {
            rejectUnknownFields(body, {"path"}, "MakeDirRequest");
            std::string p = e2b::resolveUserPath(str(body, "path"), caller.user);
            std::string existing;
            try {
                existing = protocol::typeName(fsCall(caller, Fs::stat, p).entry->type);
            } catch (const Error& e) {
                if (e.code() != ErrorCode::not_found) throw;
            }
            if (existing == "directory")
                throw Error(ErrorCode::already_exists, "directory '" + p + "' already exists");
            if (!existing.empty())
                throw Error(ErrorCode::bad_request,
                            "path '" + p + "' already exists and is not a directory");
            return {{"entry", e2b::entryInfo(*fsCall(caller, Fs::mkdir, p).entry)}};
        }
        if (method == "Move") {
            rejectUnknownFields(body, {"source", "destination"}, "MoveRequest");
            std::string from = e2b::resolveUserPath(str(body, "source"), caller.user);
            std::string to = e2b::resolveUserPath(str(body, "destination"), caller.user);
            if (parentOf(to) != "/") fsCall(caller, Fs::mkdir, parentOf(to));
            return {{"entry", e2b::entryInfo(*fsCall(caller, Fs::move, from, to).entry)}};
        }
        if (method == "Remove") {
            rejectUnknownFields(body, {"path"}, "RemoveRequest");
            std::string p = e2b::resolveUserPath(str(body, "path"), caller.user);
            try {
                fsCall(caller, Fs::remove, p, "", true);
            } catch (const Error& e) {
                if (e.code() != ErrorCode::not_found) throw;  // envd removes like os.RemoveAll
            }
            return json::object();
        }
        if (method == "CreateWatcher") {
            rejectUnknownFields(body, {"path", "recursive", "includeEntry", "allowNetworkMounts"},
                                "CreateWatcherRequest");
            protocol::DirWatchRequest watch{
                e2b::resolveUserPath(str(body, "path"), caller.user), boolOf(body, "recursive"),
                boolOf(body, "allowNetworkMounts"), caller.user};
            return {{"watcherId", watchers_.create(caller.tenant, caller.sandboxId, watch,
                                                   boolOf(body, "includeEntry"))}};
        }
        if (method == "GetWatcherEvents" || method == "RemoveWatcher") {
            rejectUnknownFields(body, {"watcherId"}, method + "Request");
            std::string id = str(body, "watcherId");
            if (method == "GetWatcherEvents") return watchers_.events(caller.sandboxId, id);
            watchers_.remove(caller.sandboxId, id);
            return json::object();
        }
    } else {
        if (method == "List") {
            json list = json::array();
            for (const auto& p : processes_.list(caller.sandboxId)) {
                if (!p->pid()) continue;
                const auto& s = p->spec();
                json config{{"cmd", s.cmd}, {"args", s.args}, {"envs", s.envs}};
                if (s.cwd) config["cwd"] = *s.cwd;
                json info{{"config", config}, {"pid", p->pid()}};
                if (s.tag) info["tag"] = *s.tag;
                list.push_back(info);
            }
            return {{"processes", list}};
        }
        if (method == "SendInput") {
            rejectUnknownFields(body, {"process", "input"}, "SendInputRequest");
            sendProcessInput(*selected(caller, body), body);
            return json::object();
        }
        if (method == "SendSignal") {
            rejectUnknownFields(body, {"process", "signal"}, "SendSignalRequest");
            auto p = selected(caller, body);
            std::string sig;
            if (auto it = body.find("signal"); it != body.end() && it->is_string())
                sig = it->get<std::string>();
            else if (it != body.end() && it->is_number_integer())
                sig = std::to_string(it->get<int>());
            if (sig == "SIGNAL_SIGKILL" || sig == "9")
                p->signal("KILL");
            else if (sig == "SIGNAL_SIGTERM" || sig == "15")
                p->signal("TERM");
            else
                throw Error(ErrorCode::bad_request,
                            "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
            return json::object();
        }
        if (method == "CloseStdin") {
            rejectUnknownFields(body, {"process"}, "CloseStdinRequest");
            selected(caller, body)->closeStdin();
            return json::object();
        }
        if (method == "Update") {
            rejectUnknownFields(body, {"process", "pty"}, "UpdateRequest");
            auto p = selected(caller, body);
            auto pty = body.find("pty");
            if (pty != body.end() && pty->is_object()) {
                auto size = pty->find("size");
                if (size == pty->end() || !size->is_object())
                    throw Error(ErrorCode::bad_request, "'pty.size' is required");
                p->resize(std::max(1u, uintField(*size, "rows", 24, 4096)),
                          std::max(1u, uintField(*size, "cols", 80, 4096)));
            }
            return json::object();
        }
    }
    throw Error(ErrorCode::not_found, "no such method: " + path.substr(1));
}

std::optional<ApiResponse> E2bEnvd::streamInput(StreamHandover& h) {
    const ApiRequest& request = h.context.request;
    if (request.contentType.rfind("application/connect+json", 0) != 0)
        throw Error(ErrorCode::bad_request,
                    "StreamInput takes application/connect+json (the Connect JSON codec)");
    Caller caller = callerOf(request, h.context.tenant, h.context.params.at(0));
    // The process the start event named: one message at a time touches it.
    auto process = std::make_shared<std::shared_ptr<e2b::E2bProcess>>();
    ClientStreamPlan plan;
    std::string token = request.header("x-access-token");
    plan.onMessage = [this, token, caller, process](const json& m) {
        // The token is checked again for each event, as for each call: a
        // key revoked mid-stream stops the input at once.
        if (!mintingKeyActs(tokens_.envdTokenKey(caller.sandboxId, token), caller.tenant))
            throw Error(ErrorCode::unauthorized,
                        "unauthorized access: the API key that fetched this token is gone");
        rejectUnknownFields(m, {"start", "data", "keepalive"}, "StreamInputRequest");
        if (m.size() != 1)
            throw Error(ErrorCode::bad_request,
                        "a StreamInputRequest carries one of start, data or keepalive");
        if (auto s = m.find("start"); s != m.end()) {
            if (!s->is_object()) throw Error(ErrorCode::bad_request, "'start' must be an object");
            rejectUnknownFields(*s, {"process"}, "StreamInputRequest.StartEvent");
            *process = selected(caller, *s);
        } else if (auto d = m.find("data"); d != m.end()) {
            if (!*process)
                throw Error(ErrorCode::bad_request, "a data event before the start event");
            if (!d->is_object()) throw Error(ErrorCode::bad_request, "'data' must be an object");
            rejectUnknownFields(*d, {"input"}, "StreamInputRequest.DataEvent");
            sendProcessInput(**process, *d);
        }
        // A keepalive only keeps the connection's idle timer from running out.
    };
    plan.onEnd = [] { return json::object(); };
    std::make_shared<ClientStreamSession>(std::move(h.stream), std::move(h.buffer),
                                          std::move(h.header), std::move(h.context),
                                          std::move(plan))
        ->start();
    return std::nullopt;
}

std::optional<ApiResponse> E2bEnvd::upload(StreamHandover& h) {
    Caller caller = callerOf(h.context.request, h.context.tenant, h.context.params.at(0));
    const ApiRequest& request = h.context.request;
    // As envd: gzip (the SDK's gzip option) is undone before anything else
    // reads the body, multipart or not; no other encoding is taken.
    std::string encoding = request.header("content-encoding");
    for (auto& ch : encoding) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (!encoding.empty() && encoding != "identity" && encoding != "gzip")
        throw Error(ErrorCode::bad_request,
                    "unsupported Content-Encoding: " + encoding + " (gzip or identity)");
    auto p = request.query.find("path");
    std::string pathParam = p == request.query.end() ? "" : p->second;
    std::string user = caller.user;
    // The whole set each file gets (none: it keeps none), as envd.
    protocol::FileMetadata metadata;
    for (auto it = request.headers.lower_bound("x-metadata-");
         it != request.headers.end() && it->first.rfind("x-metadata-", 0) == 0; ++it)
        metadata.emplace(it->first.substr(11), it->second);
    if (auto problem = protocol::fileMetadataProblem(metadata); !problem.empty())
        throw Error(ErrorCode::bad_request, "invalid metadata: " + problem);
    UploadPlan plan;
    plan.errors = ErrorShape::e2b;
    plan.gzip = encoding == "gzip";
    if (request.contentType.rfind("multipart/form-data", 0) == 0) {
        plan.boundary = e2b::multipartBoundary(request.contentType);
        // The part's filename is the whole target path; ?path= names it when there is one file.
        plan.partFile = [pathParam, user, metadata](const std::string& filename) {
            std::string target = !pathParam.empty() ? pathParam : filename;
            if (target.empty()) throw Error(ErrorCode::bad_request, "a file part names no path");
            return UploadPlan::File{e2b::resolveUserPath(target, user), std::nullopt, user,
                                    metadata, true};
        };
    } else {
        if (pathParam.empty())
            throw Error(ErrorCode::bad_request, "?path= is required for an octet-stream upload");
        plan.whole =
            UploadPlan::File{e2b::resolveUserPath(pathParam, user), std::nullopt, user, metadata, true};
    }
    plan.answer = [metadata](const std::vector<UploadPlan::Written>& written) {
        json out = json::array();
        for (const auto& w : written) {
            json entry{{"path", w.asked},
                       {"name", w.asked.substr(w.asked.rfind('/') + 1)},
                       {"type", "file"}};
            // What was asked and the guest's entry confirms it kept (a file
            // system without user attributes keeps none), in the client's
            // own words: nothing the guest chose.
            json kept = json::object();
            auto guest = w.confirmed.find("metadata");
            for (const auto& [k, v] : metadata)
                if (guest != w.confirmed.end() && guest->is_object() && guest->contains(k) &&
                    (*guest)[k] == v)
                    kept[k] = v;
            if (!kept.empty()) entry["metadata"] = kept;
            out.push_back(entry);
        }
        return ApiResponse{200, "application/json", jsonText(out)};
    };
    // The parser keeps its state (and what it buffered) across the move.
    std::make_shared<UploadSession>(std::move(h.stream), std::move(h.buffer), std::move(h.header),
                                    std::move(h.context), std::move(plan))
        ->start();
    return std::nullopt;
}

std::optional<ApiResponse> E2bEnvd::download(StreamHandover& h) {
    Caller caller = callerOf(h.context.request, h.context.tenant, h.context.params.at(0));
    const auto& query = h.context.request.query;
    auto p = query.find("path");
    std::string path = e2b::resolveUserPath(p == query.end() ? "" : p->second, caller.user);
    bool gzip = e2b::acceptsGzip(h.context.request.header("accept-encoding"));
    auto& files = sandboxes_.files;
    auto session = std::make_shared<DownloadSession>(
        std::move(h.stream), std::move(h.context),
        [&files, caller, path](AgentStream::Handler handler) {
            return files.openDownload(caller.tenant, caller.sandboxId, path,
                                                   std::move(handler), caller.user);
        },
        true, "application/octet-stream", DownloadSession::kFileIdle);
    // As envd: gzip whenever the client takes it (Node's fetch always does).
    if (gzip) session->gzipBody();
    session->start();
    return std::nullopt;
}

namespace {
// A process's events into a stream session.
class SessionSubscriber : public e2b::ProcessSubscriber {
  public:
    explicit SessionSubscriber(std::weak_ptr<ConnectStreamSession> s) : session_(std::move(s)) {}
    bool event(std::string json, std::shared_ptr<void> window) override {
        auto s = session_.lock();
        return s && s->push(std::move(json), std::move(window));
    }
    void ended(std::optional<std::pair<std::string, std::string>> error) override {
        if (auto s = session_.lock()) s->end(error);
    }
    void broken() override {
        if (auto s = session_.lock()) s->cut();
    }

  private:
    std::weak_ptr<ConnectStreamSession> session_;
};


}  // namespace

ConnectStreamPlan E2bEnvd::planStream(RouteContext& c) {
    const ApiRequest& request = c.request;
    Caller caller = callerOf(c.request, c.tenant, c.params.at(0));
    if (request.contentType.rfind("application/connect+json", 0) != 0)
        throw Error(ErrorCode::bad_request, "streaming calls take application/connect+json");
    auto envelope = e2b::parseSingleEnvelope(request.body, kMaxRpcBody);
    json body = objectBody(envelope.payload);
    ConnectStreamPlan plan;
    if (std::string k = request.header("keepalive-ping-interval");
        !k.empty() && k.size() < 6 && k.find_first_not_of("0123456789") == std::string::npos)
        plan.keepalive = std::chrono::seconds(std::clamp(std::stol(k), 1L, 600L));
    std::optional<std::chrono::milliseconds> timeout;
    if (std::string t = request.header("connect-timeout-ms"); !t.empty()) {
        if (t.size() > 10 || t.find_first_not_of("0123456789") != std::string::npos)
            throw Error(ErrorCode::bad_request,
                        "Connect-Timeout-Ms must be a number of milliseconds");
        if (std::stoull(t) > 0) timeout = std::chrono::milliseconds(std::stoull(t));
    }

    if (request.path == "/filesystem.Filesystem/WatchDir") {
        rejectUnknownFields(body, {"path", "recursive", "includeEntry", "allowNetworkMounts"},
                            "WatchDirRequest");
        std::string root = e2b::resolveUserPath(str(body, "path"), caller.user);
        bool recursive = boolOf(body, "recursive");
        plan.keepaliveJson = R"({"keepalive":{}})";
        plan.deadline = timeout;
        protocol::DirWatchRequest watch{root, recursive, boolOf(body, "allowNetworkMounts"),
                                        caller.user};
        bool includeEntry = boolOf(body, "includeEntry");
        auto& files = sandboxes_.files;
        plan.run = [&files, caller, watch, includeEntry](
                       const std::shared_ptr<ConnectStreamSession>& session) {
            std::weak_ptr<ConnectStreamSession> weak = session;
            GuestFiles::WatchHandlers handlers;
            handlers.record = [weak, includeEntry](protocol::WatchRecord r,
                                                   std::shared_ptr<void> hold) {
                auto s = weak.lock();
                if (!s) return;
                // The SDK's watchDir returns once this arrives: the watch is in place.
                if (r.kind == protocol::WatchRecord::Kind::started)
                    return (void)s->push(R"({"start":{}})", std::move(hold));
                s->push(jsonText({{"filesystem", e2b::watchEvent(r, includeEntry)}}),
                        std::move(hold));
            };
            handlers.ended = [weak](std::optional<Error> error) {
                auto s = weak.lock();
                if (!s) return;
                if (!error) return s->end(std::nullopt);
                s->end(ConnectStreamSession::Error{e2b::connectCodeFor(error->code()),
                                                   error->what()});
            };
            std::shared_ptr<AgentStream> stream;
            try {
                stream = files.openWatch(caller.tenant, caller.sandboxId, watch, handlers);
            } catch (const Error& e) {
                return session->end(
                    ConnectStreamSession::Error{e2b::connectCodeFor(e.code()), e.what()});
            }
            session->onGone([stream] { stream->reset("cancelled", "the watcher went away"); });
        };
        return plan;
    }

    plan.keepaliveJson = e2b::keepaliveEventJson();
    if (request.path == "/process.Process/Connect") {
        rejectUnknownFields(body, {"process"}, "ConnectRequest");
        auto proc = selected(caller, body);
        plan.run = [proc](const std::shared_ptr<ConnectStreamSession>& session) {
            auto sub = std::make_shared<SessionSubscriber>(session);
            if (!proc->subscribe(sub))
                return session->end(
                    ConnectStreamSession::Error{"not_found", "the process has exited"});
            session->onGone([proc, sub] { proc->unsubscribe(sub.get()); });
        };
        return plan;
    }

    // Start.
    rejectUnknownFields(body, {"process", "pty", "tag", "stdin"}, "StartRequest");
    auto p = body.find("process");
    if (p == body.end() || !p->is_object())
        throw Error(ErrorCode::bad_request, "'process' is required");
    rejectUnknownFields(*p, {"cmd", "args", "envs", "cwd"}, "ProcessConfig");
    e2b::ProcessSpec spec;
    spec.cmd = str(*p, "cmd");
    if (spec.cmd.empty()) throw Error(ErrorCode::bad_request, "'process.cmd' is required");
    if (auto a = p->find("args"); a != p->end() && !a->is_null()) {
        if (!a->is_array())
            throw Error(ErrorCode::bad_request, "'process.args' must be an array of strings");
        for (const auto& v : *a) {
            if (!v.is_string())
                throw Error(ErrorCode::bad_request, "'process.args' must be an array of strings");
            spec.args.push_back(v.get<std::string>());
        }
    }
    if (auto e = p->find("envs"); e != p->end() && !e->is_null()) {
        if (!e->is_object())
            throw Error(ErrorCode::bad_request, "'process.envs' must be an object of strings");
        for (const auto& [k, v] : e->items()) {
            if (!v.is_string())
                throw Error(ErrorCode::bad_request, "'process.envs' must be an object of strings");
            spec.envs[k] = v.get<std::string>();
        }
    }
    if (p->contains("cwd") && !(*p)["cwd"].is_null()) spec.cwd = str(*p, "cwd");
    if (body.contains("tag") && !body["tag"].is_null()) spec.tag = str(body, "tag");
    spec.stdinOpen = boolOf(body, "stdin");
    if (auto pty = body.find("pty"); pty != body.end() && pty->is_object()) {
        spec.pty = true;
        if (auto size = pty->find("size"); size != pty->end() && size->is_object()) {
            spec.rows = std::max(1u, uintField(*size, "rows", 24, 4096));
            spec.cols = std::max(1u, uintField(*size, "cols", 80, 4096));
        }
    }
    spec.user = caller.user;
    // envd: Connect-Timeout-Ms is the process's life.
    if (timeout)
        spec.timeoutS = static_cast<unsigned>(
            std::min<std::uint64_t>((timeout->count() + 999) / 1000, kMaxExecTimeoutS));
    plan.run = [this, caller, spec](const std::shared_ptr<ConnectStreamSession>& session) {
        auto sub = std::make_shared<SessionSubscriber>(session);
        try {
            auto proc = processes_.start(caller.tenant, caller.sandboxId, spec, sub);
            session->onGone([proc, sub] { proc->unsubscribe(sub.get()); });
        } catch (const Error& e) {
            session->end(ConnectStreamSession::Error{e2b::connectCodeFor(e.code()), e.what()});
        } catch (const std::exception& e) {
            session->end(ConnectStreamSession::Error{"internal", e.what()});
        }
    };
    return plan;
}

}  // namespace airlock::api
