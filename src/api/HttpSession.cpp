#include "api/HttpSession.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <limits>

#include "api/ConnectStreamSession.hpp"
#include "api/DownloadSession.hpp"
#include "api/E2bApi.hpp"
#include "api/ErrorMapping.hpp"
#include "api/PreviewProxySession.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

namespace {
std::map<std::string, std::string> parseQuery(std::string_view q) {
    auto decode = [](std::string_view s) {
        std::string out;
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '+') {
                out.push_back(' ');
            } else if (s[i] == '%' && i + 2 < s.size() &&
                       std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
                       std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
                out.push_back(
                    static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
                i += 2;
            } else {
                out.push_back(s[i]);
            }
        }
        return out;
    };
    std::map<std::string, std::string> out;
    while (!q.empty()) {
        auto amp = q.find('&');
        auto part = q.substr(0, amp);
        auto eq = part.find('=');
        if (!part.empty())
            out[decode(part.substr(0, eq))] =
                eq == std::string_view::npos ? "" : decode(part.substr(eq + 1));
        if (amp == std::string_view::npos) break;
        q.remove_prefix(amp + 1);
    }
    return out;
}
}  // namespace

HttpSession::HttpSession(asio::ip::tcp::socket&& socket, Router& router,
                         SandboxController& controller, asio::thread_pool& workers,
                         HttpLimits limits, std::shared_ptr<void> connectionSlot)
    : stream_(std::move(socket)),
      router_(router),
      controller_(controller),
      workers_(workers),
      limits_(limits),
      connectionSlot_(std::move(connectionSlot)) {}

void HttpSession::start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->readRequest(); });
}

void HttpSession::readRequest() {
    header_.emplace();
    header_->header_limit(16 * 1024);
    // Streaming routes take any size; JSON routes are bounded in onHeader.
    // (Not boost::none: Beast 1.74 compares a length with an empty optional
    // as "greater" and rejects every Content-Length.)
    header_->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_after(limits_.readTimeout);
    http::async_read_header(
        stream_, buffer_, *header_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onHeader(ec); });
}

namespace {
ApiRequest requestHead(const http::request<http::empty_body>& req) {
    ApiRequest request;
    request.method = std::string(req.method_string());
    std::string_view target(req.target().data(), req.target().size());
    auto qpos = target.find('?');
    request.path = std::string(target.substr(0, qpos));
    if (qpos != std::string_view::npos) request.query = parseQuery(target.substr(qpos + 1));
    request.authorization = std::string(req[http::field::authorization]);
    request.contentType = std::string(req[http::field::content_type]);
    request.host = std::string(req[http::field::host]);
    for (const char* name :
         {"x-api-key", "e2b-sandbox-id", "e2b-sandbox-port", "x-access-token", "connect-timeout-ms",
          "keepalive-ping-interval", "e2b-traffic-access-token", "content-encoding"})
        if (auto it = req.find(name); it != req.end())
            request.headers[name] = std::string(it->value());
    return request;
}
}  // namespace

void HttpSession::onHeader(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof)
        return close();
    if (ec)
        return respond(
            errorResponse(ErrorCode::bad_request, "malformed HTTP request: " + ec.message()), false,
            11);
    ApiRequest head = requestHead(header_->get());
    e2bTarget_.reset();
    e2bCaller_.reset();
    e2bUpload_.reset();
    if (auto* envd = router_.e2bEnvd()) {
        std::optional<E2bEnvd::Target> target;
        try {
            target = envd->target(head);
        } catch (const Error& e) {
            return respond(e2bError(400, e.what()), false, 11);
        }
        if (target) return startE2b(std::move(head), std::move(*target));
    }
    auto match = router_.matchStream(head.method, head.path);
    if (match.factory) return startStream(match, std::move(head));
    if (auto length = header_->content_length(); length && *length > limits_.maxBodyBytes)
        return respond(errorResponse(ErrorCode::payload_too_large,
                                     "request body exceeds " +
                                         std::to_string(limits_.maxBodyBytes) + " bytes"),
                       false, 11);
    readBody(limits_.maxBodyBytes);
}

void HttpSession::readBody(std::size_t limit) {
    parser_.emplace(std::move(*header_));
    parser_->body_limit(limit);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code e, std::size_t) { self->onBody(e); });
}

void HttpSession::onBody(beast::error_code ec) {
    if (ec == http::error::body_limit)
        return respond(errorResponse(ErrorCode::payload_too_large,
                                     "request body exceeds " +
                                         std::to_string(limits_.maxBodyBytes) + " bytes"),
                       false, 11);
    if (ec == beast::error::timeout || ec == asio::error::connection_reset ||
        ec == http::error::end_of_stream)
        return close();
    if (ec)
        return respond(
            errorResponse(ErrorCode::bad_request, "malformed HTTP request: " + ec.message()), false,
            11);

    auto& req = parser_->get();
    http::request<http::empty_body> headOnly(req.base());
    ApiRequest request = requestHead(headOnly);
    request.body = std::move(req.body());
    bool keepAlive = req.keep_alive();
    unsigned version = req.version();

    // The controller may block for seconds: keep the I/O thread free.
    stream_.expires_never();
    if (e2bTarget_) {
        auto target = std::move(*e2bTarget_);
        auto caller = std::move(e2bCaller_);
        auto upload = std::move(e2bUpload_);
        e2bTarget_.reset();
        e2bCaller_.reset();
        if (E2bEnvd::isStreamingRpc(request) && caller)
            return startConnectStream(std::move(request), std::move(target), std::move(*caller));
        auto* envd = router_.e2bEnvd();
        asio::post(workers_, [self = shared_from_this(), envd, request = std::move(request),
                              target = std::move(target), caller = std::move(caller), upload,
                              keepAlive, version]() mutable {
            auto response = envd->handle(request, target, std::move(caller));
            upload.reset();
            asio::post(self->stream_.get_executor(),
                       [self, response = std::move(response), keepAlive, version]() mutable {
                           self->respond(std::move(response), keepAlive, version);
                       });
        });
        return;
    }
    // A handler may answer later from another thread (a long exec answers
    // when the command ends, holding no worker meanwhile).
    asio::post(workers_, [self = shared_from_this(), request = std::move(request), keepAlive,
                          version]() mutable {
        self->router_.handle(request, [self, keepAlive, version](ApiResponse response) {
            asio::post(self->stream_.get_executor(),
                       [self, response = std::move(response), keepAlive, version]() mutable {
                           self->respond(std::move(response), keepAlive, version);
                       });
        });
    });
}

void HttpSession::startStream(const Router::StreamMatch& match, ApiRequest request) {
    std::string tenant;
    TenantLimiter::Slot slot;
    if (match.roles != Router::kPublic) {
        try {
            // Before anything else: a WebSocket without a valid key (401) or
            // with a role that may not use it (403) never gets a 101.
            auto [who, actsOn] = router_.authorize(request, match.roles, match.params);
            tenant = std::move(actsOn);
            // Every keyed stream is a sandbox's: another tenant's (or a
            // missing) sandbox answers 404 here, before any upgrade.
            if (!match.params.empty()) controller_.get(tenant, match.params[0]);
            // A stream counts against its caller's tenant for as long as it is open.
            slot = router_.limiter().acquire(who.tenant);
        } catch (const Error& e) {
            return respond(errorResponse(e.code(), e.what()), false, 11);
        }
    }
    StreamContext ctx{controller_,  workers_,        std::move(request), std::move(tenant),
                      match.params, std::move(slot), connectionSlot_};
    stream_.expires_never();
    StreamHandover handover{stream_, buffer_, *header_, std::move(ctx)};
    if (auto refusal = (*match.factory)(handover)) respond(std::move(*refusal), false, 11);
}

void HttpSession::startE2b(ApiRequest head, E2bEnvd::Target target) {
    auto* envd = router_.e2bEnvd();
    if (!target.envd()) {
        // A guest port (E2B's getHost, or Airlock's own preview origin).
        std::optional<E2bEnvd::PortRoute> route;
        try {
            route = envd->routePort(head, target);
        } catch (...) {
            return respond(envd->errorFor(head, std::current_exception(), target.sandboxId), false,
                           11);
        }
        StreamContext ctx{controller_,    workers_, std::move(head),
                          route->tenant,  {},       std::move(route->slot),
                          connectionSlot_};
        stream_.expires_never();
        std::make_shared<PreviewProxySession>(std::move(stream_), std::move(buffer_),
                                              header_->release(), std::move(ctx), target.port,
                                              std::move(route->open))
            ->start();
        return;
    }
    if (E2bEnvd::isDownload(head)) {
        std::optional<E2bEnvd::Download> d;
        try {
            d = envd->planDownload(head, target);
        } catch (...) {
            return respond(envd->errorFor(head, std::current_exception(), target.sandboxId), false,
                           11);
        }
        auto& controller = controller_;
        auto caller = d->caller;
        auto path = d->path;
        StreamContext ctx{controller_,        workers_,    std::move(head), caller.tenant,
                          {caller.sandboxId}, caller.slot, connectionSlot_};
        stream_.expires_never();
        std::make_shared<DownloadSession>(
            std::move(stream_), std::move(ctx),
            [&controller, caller, path](AgentStream::Handler h) {
                return controller.files().openDownload(caller.tenant, caller.sandboxId, path,
                                                       std::move(h), caller.user);
            },
            true, "application/octet-stream", DownloadSession::kFileIdle)
            ->start();
        return;
    }
    // Admitted before its body is read: nobody without the sandbox's token
    // makes airlockd hold a body.
    std::optional<E2bEnvd::Caller> caller;
    if (!(head.method == "GET" && head.path == "/health")) {
        try {
            caller = envd->admit(head, target);
        } catch (...) {
            return respond(envd->errorFor(head, std::current_exception(), target.sandboxId), false,
                           11);
        }
    }
    std::size_t limit = E2bEnvd::bodyLimit(head);
    auto length = header_->content_length();
    if (length && *length > limit)
        return respond(e2bError(413, "request body exceeds " + std::to_string(limit) + " bytes"),
                       false, 11);
    if (head.method == "POST" && head.path == "/files") {
        e2bUpload_ = envd->reserveUpload(length ? static_cast<std::size_t>(*length) : limit);
        if (!e2bUpload_) {
            auto busy = e2bError(429, "too many uploads in flight; try again");
            busy.headers["Retry-After"] = "1";
            return respond(std::move(busy), false, 11);
        }
    }
    e2bTarget_ = std::move(target);
    e2bCaller_ = std::move(caller);
    readBody(limit);
}

void HttpSession::startConnectStream(ApiRequest request, E2bEnvd::Target target,
                                     E2bEnvd::Caller caller) {
    auto* envd = router_.e2bEnvd();
    asio::post(workers_, [self = shared_from_this(), envd, request = std::move(request),
                          target = std::move(target), caller = std::move(caller)]() mutable {
        std::optional<E2bEnvd::StreamPlan> plan;
        std::optional<ApiResponse> error;
        try {
            plan = envd->planStream(request, std::move(caller));
        } catch (...) {
            error = envd->errorFor(request, std::current_exception(), target.sandboxId);
        }
        asio::post(self->stream_.get_executor(), [self, plan = std::move(plan),
                                                  error = std::move(error)]() mutable {
            if (error) return self->respond(std::move(*error), false, 11);
            auto session = std::make_shared<ConnectStreamSession>(
                std::move(self->stream_), plan->keepalive, plan->keepaliveJson,
                // The tenant's slot and the connection's place under the cap, for the stream's
                // life.
                std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
                    plan->slot, self->connectionSlot_));
            if (plan->deadline) session->endAfter(*plan->deadline);
            session->start();
            asio::post(self->workers_, [run = std::move(plan->run), session] { run(session); });
        });
    });
}

void HttpSession::respond(ApiResponse response, bool keepAlive, unsigned version) {
    response_ = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(response.status), version);
    response_->set(http::field::server, "airlockd");
    if (!response.contentType.empty())
        response_->set(http::field::content_type, response.contentType);
    for (const auto& [name, value] : response.headers) response_->set(name, value);
    response_->body() = std::move(response.body);
    response_->keep_alive(keepAlive);
    response_->prepare_payload();
    stream_.expires_after(limits_.writeTimeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this(), keepAlive](beast::error_code ec, std::size_t n) {
                          self->onWrite(keepAlive, ec, n);
                      });
}

void HttpSession::onWrite(bool keepAlive, beast::error_code ec, std::size_t) {
    response_.reset();
    if (ec || !keepAlive) return close();
    readRequest();
}

void HttpSession::close() {
    beast::error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    // Closing with unread input makes the kernel send a reset, which can
    // destroy the response (a 413) before the client reads it: read and drop
    // what the client still sends, bounded in bytes and time.
    drainBudget_ = 64 * 1024 * 1024;
    stream_.expires_after(std::chrono::seconds(5));
    drain();
}

void HttpSession::drain() {
    drainBuffer_.resize(64 * 1024);
    stream_.async_read_some(asio::buffer(drainBuffer_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                if (ec || n >= self->drainBudget_) return;
                                self->drainBudget_ -= n;
                                self->drain();
                            });
}

}  // namespace airlock::api
