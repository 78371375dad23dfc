#include "packages/PackageProxy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/GuestListener.hpp"
#include "core/Error.hpp"
#include "core/HttpRequestHead.hpp"
#include "core/Log.hpp"
#include "core/UniqueFd.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Messages.hpp"
#include "protocol/ControlFrames.hpp"

namespace airlock::packages {

namespace asio = boost::asio;
using Kind = AgentStream::Event::Kind;
using Clock = std::chrono::steady_clock;

struct SandboxPackageState {
    std::string id, tenant;
    std::mutex mutex;  // guards rules
    PackageRules rules;
    std::weak_ptr<AgentConnection> agent;
    std::map<Ecosystem, std::shared_ptr<AgentStream>> listeners;
    std::map<Ecosystem, unsigned> ports;
    std::atomic<unsigned> open{0};
    std::atomic<bool> detached{false};
    SandboxPackages snapshot() {
        std::lock_guard lock(mutex);
        return {id, tenant, rules};
    }
};

namespace {
// The path of a request's target: origin form, or the absolute form a
// client that takes us for a forward proxy sends. Empty when it is neither.
std::string originPath(const std::string& target) {
    if (target[0] == '/') return target;
    auto scheme = target.find("://");
    if (scheme == std::string::npos) return "";
    auto path = target.find('/', scheme + 3);
    return path == std::string::npos ? "/" : target.substr(path);
}

std::string responseHead(const GuestResponse& r, std::uint64_t length, bool close) {
    std::string head =
        "HTTP/1.1 " + std::to_string(r.status) + " " +
        (r.reason.empty() ? std::string(r.status == 200 ? "OK" : "Error") : r.reason) + "\r\n";
    head += "Content-Type: " + r.contentType + "\r\n";
    head += "Content-Length: " + std::to_string(length) + "\r\n";
    head += "Cache-Control: no-store\r\n";
    head += close ? "Connection: close\r\n" : "Connection: keep-alive\r\n";
    return head + "\r\n";
}
}  // namespace

PackageProxy::PackageProxy(std::shared_ptr<PackageService> service, PackageProxySettings settings)
    : service_(std::move(service)), settings_(settings), pool_(settings.threads) {}

PackageProxy::~PackageProxy() {
    {
        std::lock_guard lock(mutex_);
        for (auto& [_, s] : sandboxes_) {
            s->detached = true;
            s->listeners.clear();
        }
        sandboxes_.clear();
    }
    pool_.stop();
    pool_.join();
}

void PackageProxy::attach(const std::string& sandboxId, const std::string& tenant,
                          const std::shared_ptr<AgentConnection>& agent,
                          const PackageRules& rules) {
    {
        std::lock_guard lock(mutex_);
        auto it = sandboxes_.find(sandboxId);
        if (it != sandboxes_.end() && it->second->agent.lock() == agent) {
            bool alive = !it->second->listeners.empty();
            for (auto& [_, l] : it->second->listeners) alive = alive && !l->finished();
            if (alive) {
                std::lock_guard l(it->second->mutex);
                it->second->rules = rules;
                return;
            }
        }
    }
    auto state = std::make_shared<SandboxPackageState>();
    state->id = sandboxId;
    state->tenant = tenant;
    state->rules = rules;
    state->agent = agent;
    for (Ecosystem e : {Ecosystem::npm, Ecosystem::pypi, Ecosystem::apt}) {
        if (!serves(e)) continue;
        unsigned port = e == Ecosystem::npm    ? settings_.npmPort
                        : e == Ecosystem::pypi ? settings_.pypiPort
                                               : settings_.aptPort;
        std::weak_ptr<SandboxPackageState> weak = state;
        auto onAccepted = [this, weak, e](std::uint64_t n) {
            auto s = weak.lock();
            if (!s || s->detached) return;
            // Counted here, before a thread is taken: past a sandbox's or a
            // tenant's share the connection is only told 503.
            bool refuse = ++s->open > settings_.maxConnectionsPerSandbox;
            {
                std::lock_guard lock(tenantMutex_);
                refuse = ++tenantOpen_[s->tenant] > settings_.maxConnectionsPerTenant || refuse;
            }
            asio::post(pool_, [this, s, e, n, refuse] { serveConnection(s, e, n, refuse); });
        };
        auto listener = GuestListener::open(
            *agent, port, std::string(ecosystemName(e)) + " package listener", onAccepted);
        state->listeners[e] = std::move(listener.stream);
        state->ports[e] = listener.port;
    }
    std::shared_ptr<SandboxPackageState> previous;
    {
        std::lock_guard lock(mutex_);
        auto& slot = sandboxes_[sandboxId];
        previous = std::move(slot);
        slot = state;
    }
    if (previous) previous->detached = true;
}

bool PackageProxy::update(const std::string& sandboxId, const PackageRules& rules) {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(sandboxId);
    if (it == sandboxes_.end()) return false;
    std::lock_guard l(it->second->mutex);
    it->second->rules = rules;
    return true;
}

void PackageProxy::detach(const std::string& sandboxId) {
    std::shared_ptr<SandboxPackageState> gone;
    {
        std::lock_guard lock(mutex_);
        auto it = sandboxes_.find(sandboxId);
        if (it == sandboxes_.end()) return;
        gone = std::move(it->second);
        sandboxes_.erase(it);
    }
    gone->detached = true;
    gone->listeners.clear();
}

std::vector<unsigned> PackageProxy::listenerPorts() const {
    // Every ecosystem's port, served or not: the set does not depend on upstreams.
    std::vector<unsigned> out;
    for (unsigned p : {settings_.npmPort, settings_.pypiPort, settings_.aptPort})
        if (p != 0) out.push_back(p);  // 0: a free port (tests with an in-process agent)
    return out;
}

unsigned PackageProxy::guestPort(const std::string& sandboxId, Ecosystem e) {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(sandboxId);
    if (it == sandboxes_.end()) return 0;
    auto p = it->second->ports.find(e);
    return p == it->second->ports.end() ? 0 : p->second;
}

void PackageProxy::serveConnection(std::shared_ptr<SandboxPackageState> sandbox, Ecosystem e,
                                   std::uint64_t connection, bool over) {
    struct Count {
        PackageProxy& proxy;
        SandboxPackageState& sandbox;
        ~Count() {
            --sandbox.open;
            std::lock_guard lock(proxy.tenantMutex_);
            auto it = proxy.tenantOpen_.find(sandbox.tenant);
            if (it != proxy.tenantOpen_.end() && --it->second == 0) proxy.tenantOpen_.erase(it);
        }
    } count{*this, *sandbox};
    std::shared_ptr<AgentStream> tunnel;
    try {
        auto agent = sandbox->agent.lock();
        if (!agent || sandbox->detached) return;
        tunnel = agent->open(protocol::EgressAttachRequest{connection});
    } catch (const std::exception& ex) {
        logWarn("packages",
                "cannot attach a package connection of " + sandbox->id + ": " + ex.what());
        return;
    }
    // Each response has one deadline for all its bytes (a floor plus a
    // minimum rate): a guest reading a byte now and then cannot keep a thread.
    Clock::time_point responseDeadline;
    auto startResponse = [&](std::uint64_t bytes) {
        responseDeadline = Clock::now() + settings_.writeTimeout +
                           std::chrono::seconds(bytes / settings_.minBytesPerSecond);
    };
    auto write = [&](std::string_view bytes) { tunnel->write(0, bytes, responseDeadline); };
    startResponse(0);
    std::string buffer;
    bool guestEof = false;
    try {
        if (over) {
            GuestResponse busy;
            busy.status = 503;
            busy.reason = "Service Unavailable: too many package connections from this sandbox";
            busy.body = R"({"error":"too many package connections from this sandbox"})";
            write(responseHead(busy, busy.body.size(), true) + busy.body);
            tunnel->closeWrite();
            return;
        }
        for (;;) {
            auto deadline =
                Clock::now() + (buffer.empty() ? settings_.idleTimeout : settings_.headTimeout);
            // The head is read by the one parser the egress proxy uses too.
            HttpRequestHeadParser parser;
            HttpRequestHead head;
            std::size_t headLength = 0;
            auto parsed = HttpRequestHeadParser::Status::need_more;
            bool ended = false;
            while ((parsed = parser.parse(buffer, head, headLength)) ==
                   HttpRequestHeadParser::Status::need_more) {
                if (guestEof || sandbox->detached) {
                    ended = true;
                    break;
                }
                auto ev = tunnel->next(deadline);
                if (!ev) {
                    ended = true;
                    break;
                }
                if (ev->kind == Kind::data) {
                    buffer += ev->payload;
                } else if (ev->kind == Kind::control) {
                    try {
                        if (std::holds_alternative<protocol::TunnelEof>(
                                protocol::parseControl(ev->payload)))
                            guestEof = true;
                    } catch (const protocol::MessageError&) {
                    }
                } else {
                    return;  // closed or reset by the guest
                }
            }
            if (ended) break;
            std::string path;
            bool valid = parsed == HttpRequestHeadParser::Status::complete &&
                         !(path = originPath(head.target)).empty();
            // After a refused head nothing more is read: the connection ends.
            if (valid)
                buffer.erase(0, headLength);
            else
                buffer.clear();
            bool hasBody = head.header("transfer-encoding") ||
                           head.header("content-length").value_or("0") != "0";
            std::string connection = head.header("connection").value_or("");
            for (auto& ch : connection)
                ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            bool close =
                !valid || hasBody || connection.find("close") != std::string::npos ||
                (head.version == "HTTP/1.0" && connection.find("keep-alive") == std::string::npos);
            GuestResponse resp;
            if (!valid) {
                int status = parsed == HttpRequestHeadParser::Status::error ? parser.errorStatus()
                                                                            : 400;
                resp.status = status;
                resp.reason = status == 431   ? "Request Header Fields Too Large"
                              : status == 505 ? "HTTP Version Not Supported"
                                              : "Bad Request";
                resp.body = jsonText(nlohmann::json{
                    {"error", parsed == HttpRequestHeadParser::Status::error
                                  ? parser.error()
                                  : "a request target must be a path or an absolute URL"}});
            } else {
                GuestRequest req{e, head.method, path, head.header("host").value_or(""),
                                 head.header("accept").value_or("")};
                if (hasBody)
                    req.method = head.method == "GET" ? "POST" : head.method;  // a body: an upload
                resp = service_->handle(sandbox->snapshot(), req);
            }
            UniqueFd file;
            if (!resp.filePath.empty()) {
                file.reset(::open(resp.filePath.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
                if (resp.removeFile) ::unlink(resp.filePath.c_str());
                if (!file) {
                    resp = GuestResponse{};
                    resp.status = 503;
                    resp.reason = "Service Unavailable: the cached file went away; retry";
                    resp.body = R"({"error":"the cached file went away; retry"})";
                }
            }
            bool headOnly = valid && head.method == "HEAD";
            std::uint64_t length = file ? resp.fileSize : resp.body.size();
            startResponse(headOnly ? 0 : length);
            write(responseHead(resp, length, close));
            if (!headOnly) {
                if (file) {
                    std::vector<char> chunk(64 * 1024);
                    std::uint64_t left = length;
                    while (left > 0) {
                        auto n = ::read(file.get(), chunk.data(),
                                        std::min<std::uint64_t>(chunk.size(), left));
                        if (n < 0 && errno == EINTR) continue;
                        if (n <= 0) throw Error(ErrorCode::internal, "a cached file ended early");
                        write(std::string_view(chunk.data(), static_cast<std::size_t>(n)));
                        left -= static_cast<std::uint64_t>(n);
                    }
                } else {
                    write(resp.body);
                }
            }
            if (close) break;
        }
        // A graceful end: our side closed after the last byte; the guest's
        // close follows (bounded wait), else the stream is reset when dropped.
        tunnel->closeWrite();
        auto deadline = Clock::now() + std::chrono::seconds(1);
        while (auto ev = tunnel->next(deadline))
            if (ev->kind == Kind::close || ev->kind == Kind::reset) break;
    } catch (const std::exception& ex) {
        logWarn("packages", "package connection of " + sandbox->id + " ended: " + ex.what());
    }
}

}  // namespace airlock::packages
