#include "api/E2bEnvd.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "api/E2bApi.hpp"
#include "api/ErrorMapping.hpp"
#include "api/Router.hpp"
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
constexpr std::size_t kMaxUploadBody = 64 * 1024 * 1024;
constexpr std::size_t kMaxListEntries = 10000;
constexpr unsigned kMaxListDepth = 16;
constexpr auto kWatchInterval = std::chrono::milliseconds(250);
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

// A Connect code the core's errors do not have (already_exists).
struct RpcError : std::runtime_error {
    RpcError(std::string c, const std::string& message)
        : std::runtime_error(message), code(std::move(c)) {}
    std::string code;
};

// A poll of a directory tree: path -> "type size mtime".
using Snapshot = std::map<std::string, std::string>;

}  // namespace

E2bEnvd::E2bEnvd(SandboxController& controller, const e2b::SandboxTokens& tokens,
                 Authenticator& auth, TenantLimiter& limiter, asio::thread_pool& workers,
                 std::string publicDomain)
    : controller_(controller),
      tokens_(tokens),
      auth_(auth),
      limiter_(limiter),
      workers_(workers),
      publicDomain_(std::move(publicDomain)),
      processes_(controller) {}

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
    return std::nullopt;
}

bool E2bEnvd::isStreamingRpc(const ApiRequest& head) {
    return head.method == "POST" &&
           (head.path == "/process.Process/Start" || head.path == "/process.Process/Connect" ||
            head.path == "/filesystem.Filesystem/WatchDir");
}

std::size_t E2bEnvd::bodyLimit(const ApiRequest& head) {
    return head.path == "/files" ? kMaxUploadBody : kMaxRpcBody;
}

E2bEnvd::Caller E2bEnvd::admit(const ApiRequest& request, const Target& target) {
    auto owner = controller_.ownerOf(target.sandboxId);
    if (!owner) throw GatewayError("The sandbox was not found");
    auto r = controller_.get(*owner, target.sandboxId);
    if (r.state != SandboxState::running)
        throw GatewayError("The sandbox is " + sandboxStateName(r.state) +
                           (r.state == SandboxState::paused ? ": connect resumes it" : ""));
    if (!mintingKeyActs(tokens_.envdTokenKey(target.sandboxId, request.header("x-access-token")),
                        *owner))
        throw Error(ErrorCode::unauthorized,
                    "unauthorized access, please provide a valid access token (a token dies "
                    "with the API key that fetched it)");
    Caller c;
    c.tenant = *owner;
    c.sandboxId = target.sandboxId;
    // /files names its user in the query; RPCs in Basic credentials.
    if (auto u = request.query.find("username");
        request.path == "/files" && u != request.query.end() && !u->second.empty())
        c.user = e2b::basicAuthUser("Basic " + base64Encode(u->second + ":"));
    else
        c.user = e2b::basicAuthUser(request.authorization);
    if (c.user.empty()) c.user = "user";
    c.slot = limiter_.acquire(c.tenant);
    return c;
}

bool E2bEnvd::mintingKeyActs(const std::optional<std::string>& keyId,
                             const std::string& owner) {
    if (!keyId) return false;
    // Read from the store on every use: a revoked or expired key's tokens stop at once.
    auto key = auth_.activeKey(*keyId);
    if (!key || key->role == Role::approver) return false;
    return key->role == Role::admin || key->tenant == owner;
}

E2bEnvd::PortRoute E2bEnvd::routePort(const ApiRequest& head, const Target& target) {
    // Airlock's own guest services (egress and package proxies) first: no
    // lookup, no request slot, no tunnel for them, whoever asks.
    controller_.ports().requireReachable(target.port);
    auto owner = controller_.ownerOf(target.sandboxId);
    if (!owner) throw GatewayError("The sandbox was not found");
    auto r = controller_.get(*owner, target.sandboxId);
    if (r.state != SandboxState::running)
        throw GatewayError("The sandbox is " + sandboxStateName(r.state));
    PortRoute route;
    route.tenant = *owner;
    auto& controller = controller_;
    std::string id = target.sandboxId;
    unsigned port = target.port;
    if (!target.token.empty()) {
        // Airlock's own preview origin: the exposed port's capability.
        route.open = [&controller, id, port, token = target.token](AgentStream::Handler h) {
            return controller.ports().openPreview(id, port, token, std::move(h));
        };
    } else if (r.portAccess == "public" ||
               (r.portAccess == "token" &&
                mintingKeyActs(
                    tokens_.trafficTokenKey(id, head.header("e2b-traffic-access-token")),
                    *owner))) {
        route.open = [&controller, tenant = *owner, id, port](AgentStream::Handler h) {
            return controller.ports().openTunnel(tenant, id, port, std::move(h));
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
    route.slot = limiter_.acquire(*owner);
    return route;
}

ApiResponse E2bEnvd::errorFor(const ApiRequest& request, std::exception_ptr error,
                              const std::string& sandboxId) const {
    bool rpc = startsWith(request.path, kProcess) || startsWith(request.path, kFilesystem);
    try {
        std::rethrow_exception(error);
    } catch (const RpcError& e) {
        return ApiResponse{e2b::connectHttpStatus(e.code), "application/json",
                           e2b::connectErrorJson(e.code, e.what())};
    } catch (const GatewayError& e) {
        return ApiResponse{
            502, "application/json",
            jsonText({{"sandboxId", sandboxId}, {"message", e.what()}, {"code", 502}})};
    } catch (const Error& e) {
        if (rpc) {
            std::string code = e2b::connectCodeFor(e.code());
            return ApiResponse{e2b::connectHttpStatus(code), "application/json",
                               e2b::connectErrorJson(code, e.what())};
        }
        return e2bError(httpStatusFor(e.code()), e.what());
    } catch (const std::exception& e) {
        logError("e2b", request.method + " " + request.path + ": unexpected " + e.what());
    } catch (...) {
    }
    if (rpc)
        return ApiResponse{500, "application/json",
                           e2b::connectErrorJson("internal", "internal error")};
    return e2bError(500, "internal error");
}

std::shared_ptr<void> E2bEnvd::reserveUpload(std::size_t bytes) {
    auto budget = uploadBytes_;
    if (budget->fetch_add(bytes) + bytes > kUploadBudget) {
        budget->fetch_sub(bytes);
        return nullptr;
    }
    // Not empty (a null pointer tests false): the reservation is the object's life.
    return std::shared_ptr<void>(new char, [budget, bytes](void* p) {
        delete static_cast<char*>(p);
        budget->fetch_sub(bytes);
    });
}

ApiResponse E2bEnvd::handle(const ApiRequest& request, const Target& target,
                            std::optional<Caller> admitted) {
    try {
        if (request.method == "GET" && request.path == "/health") {
            // Reachability only: 502 when the sandbox is gone or paused.
            auto owner = controller_.ownerOf(target.sandboxId);
            if (!owner) throw GatewayError("The sandbox was not found");
            auto r = controller_.get(*owner, target.sandboxId);
            if (r.state != SandboxState::running)
                throw GatewayError("The sandbox is " + sandboxStateName(r.state));
            return ApiResponse{204, "", ""};
        }
        auto caller = admitted ? std::move(*admitted) : admit(request, target);
        if (request.path == "/files" && request.method == "POST") return upload(request, caller);
        bool rpc = startsWith(request.path, kProcess) || startsWith(request.path, kFilesystem);
        if (!rpc)
            throw Error(ErrorCode::not_found, "envd has no " + request.method + " " + request.path);
        if (request.method != "POST")
            throw Error(ErrorCode::bad_request, "Connect calls are POST (GET is not supported)");
        if (request.contentType.rfind("application/json", 0) != 0)
            throw Error(ErrorCode::bad_request,
                        "unary calls take application/json (the Connect JSON codec)");
        return ApiResponse{200, "application/json",
                           jsonText(unaryRpc(request.path, objectBody(request.body), caller))};
    } catch (...) {
        return errorFor(request, std::current_exception(), target.sandboxId);
    }
}

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
    return controller_.files().fileOp(caller.tenant, caller.sandboxId, request);
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
                throw RpcError("already_exists", "directory '" + p + "' already exists");
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
        if (method == "CreateWatcher" || method == "GetWatcherEvents" || method == "RemoveWatcher")
            throw Error(ErrorCode::bad_request, "polled watchers are not supported: use WatchDir");
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
            auto p = selected(caller, body);
            auto in = body.find("input");
            if (in == body.end() || !in->is_object())
                throw Error(ErrorCode::bad_request, "'input' is required");
            rejectUnknownFields(*in, {"stdin", "pty"}, "ProcessInput");
            bool pty = in->contains("pty");
            std::string bytes = base64Decode(str(*in, pty ? "pty" : "stdin"));
            p->sendInput(bytes, pty);
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
        if (method == "StreamInput")
            throw Error(ErrorCode::bad_request, "client streaming is not supported: use SendInput");
    }
    throw Error(ErrorCode::not_found, "no such method: " + path.substr(1));
}

void E2bEnvd::writeFile(const Caller& caller, const std::string& path, const std::string& data) {
    auto deadline = AgentStream::Clock::now() + kFileOpTimeout;
    auto stream = controller_.files().openUpload(caller.tenant, caller.sandboxId, path,
                                                 std::nullopt, nullptr, caller.user);
    try {
        if (!data.empty()) stream->write(0, data, deadline);
        stream->closeWrite();
        std::string closeInfo;
        stream->readToClose(0, deadline, &closeInfo);
    } catch (...) {
        stream->reset("cancelled", "upload failed");
        throw;
    }
    controller_.files().recordFileWrite(caller.tenant, caller.sandboxId, path, path, data.size(),
                                        sha256Hex(data));
}

ApiResponse E2bEnvd::upload(const ApiRequest& request, const Caller& caller) {
    if (request.header("content-encoding").size() &&
        request.header("content-encoding") != "identity")
        throw Error(ErrorCode::bad_request, "compressed uploads are not supported");
    auto pathParam = request.query.find("path");
    std::vector<std::pair<std::string, std::string>> files;  // resolved path, data
    if (request.contentType.rfind("multipart/form-data", 0) == 0) {
        for (auto& part :
             e2b::parseMultipart(request.body, e2b::multipartBoundary(request.contentType))) {
            // The part's filename is the whole target path; ?path= names it when there is one file.
            std::string target = pathParam != request.query.end() && !pathParam->second.empty()
                                     ? pathParam->second
                                     : part.filename;
            if (target.empty()) throw Error(ErrorCode::bad_request, "a file part names no path");
            files.emplace_back(e2b::resolveUserPath(target, caller.user), std::move(part.data));
        }
        if (files.empty()) throw Error(ErrorCode::bad_request, "the multipart body has no file");
    } else {
        if (pathParam == request.query.end() || pathParam->second.empty())
            throw Error(ErrorCode::bad_request, "?path= is required for an octet-stream upload");
        files.emplace_back(e2b::resolveUserPath(pathParam->second, caller.user), request.body);
    }
    json out = json::array();
    for (const auto& [path, data] : files) {
        writeFile(caller, path, data);
        out.push_back(
            {{"path", path}, {"name", path.substr(path.rfind('/') + 1)}, {"type", "file"}});
    }
    return ApiResponse{200, "application/json", jsonText(out)};
}

E2bEnvd::Download E2bEnvd::planDownload(const ApiRequest& request, const Target& target) {
    Download d{admit(request, target), ""};
    auto p = request.query.find("path");
    d.path = e2b::resolveUserPath(p == request.query.end() ? "" : p->second, d.caller.user);
    return d;
}

namespace {
// A process's events into a stream session.
class SessionSubscriber : public e2b::ProcessSubscriber {
  public:
    explicit SessionSubscriber(std::weak_ptr<ConnectStreamSession> s) : session_(std::move(s)) {}
    bool event(std::string json) override {
        auto s = session_.lock();
        return s && s->push(std::move(json));
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

// WatchDir by polling the guest's listing (the agent has no watch stream
// yet): creates, writes (size or time) and removes, a poll every 250 ms.
class DirPoller : public std::enable_shared_from_this<DirPoller> {
  public:
    using Lister = std::function<Snapshot()>;
    DirPoller(asio::thread_pool& workers, std::weak_ptr<ConnectStreamSession> session,
              Lister lister, Snapshot first, std::string root)
        : timer_(workers.get_executor()),
          session_(std::move(session)),
          lister_(std::move(lister)),
          last_(std::move(first)),
          root_(std::move(root)) {}
    void start() { arm(); }
    void stop() { stopped_ = true; }

  private:
    void arm() {
        timer_.expires_after(kWatchInterval);
        timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (!ec) self->poll();
        });
    }
    void poll() {
        auto session = session_.lock();
        if (stopped_ || !session) return;
        Snapshot now;
        try {
            now = lister_();
        } catch (const Error& e) {
            if (e.code() == ErrorCode::not_found)
                return session->end(
                    ConnectStreamSession::Error{"not_found", "the watched directory is gone"});
            return session->cut();  // the sandbox went away
        } catch (const std::exception&) {
            return session->cut();
        }
        auto emit = [&](const std::string& path, const char* type) {
            std::string name = path.rfind(root_, 0) == 0 ? path.substr(root_.size()) : path;
            while (!name.empty() && name[0] == '/') name.erase(0, 1);
            return session->push(jsonText({{"filesystem", {{"name", name}, {"type", type}}}}));
        };
        for (const auto& [path, sig] : now) {
            auto it = last_.find(path);
            if (it == last_.end()) {
                if (!emit(path, "EVENT_TYPE_CREATE")) return;
            } else if (it->second != sig) {
                if (!emit(path, "EVENT_TYPE_WRITE")) return;
            }
        }
        for (const auto& [path, _] : last_)
            if (!now.count(path) && !emit(path, "EVENT_TYPE_REMOVE")) return;
        last_ = std::move(now);
        arm();
    }

    asio::steady_timer timer_;
    std::weak_ptr<ConnectStreamSession> session_;
    Lister lister_;
    Snapshot last_;
    std::string root_;
    std::atomic<bool> stopped_{false};
};
}  // namespace

E2bEnvd::StreamPlan E2bEnvd::planStream(const ApiRequest& request, Caller caller) {
    if (request.contentType.rfind("application/connect+json", 0) != 0)
        throw Error(ErrorCode::bad_request, "streaming calls take application/connect+json");
    auto envelope = e2b::parseSingleEnvelope(request.body, kMaxRpcBody);
    json body = objectBody(envelope.payload);
    StreamPlan plan;
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
    plan.slot = caller.slot;
    caller.slot.reset();

    if (request.path == "/filesystem.Filesystem/WatchDir") {
        rejectUnknownFields(body, {"path", "recursive", "includeEntry", "allowNetworkMounts"},
                            "WatchDirRequest");
        std::string root = e2b::resolveUserPath(str(body, "path"), caller.user);
        bool recursive = boolOf(body, "recursive");
        plan.keepaliveJson = R"({"keepalive":{}})";
        plan.deadline = timeout;
        auto lister = [this, caller, root, recursive]() {
            Snapshot snap;
            auto listing = listDir(caller, root, recursive ? kMaxListDepth : 1);
            for (const auto& e : listing["entries"])
                snap[e.value("path", "")] = e.value("type", "") + " " + e.value("size", "") + " " +
                                            e.value("modifiedTime", "");
            return snap;
        };
        auto& workers = workers_;
        plan.run = [lister, root, &workers](const std::shared_ptr<ConnectStreamSession>& session) {
            Snapshot first;
            try {
                first = lister();
            } catch (const Error& e) {
                std::string code = e2b::connectCodeFor(e.code());
                return session->end(ConnectStreamSession::Error{code, e.what()});
            } catch (const std::exception& e) {  // a malformed guest listing: never out of a worker
                return session->end(ConnectStreamSession::Error{"internal", e.what()});
            }
            auto poller =
                std::make_shared<DirPoller>(workers, session, lister, std::move(first), root);
            session->onGone([poller] { poller->stop(); });
            session->push(R"({"start":{}})");
            poller->start();
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
