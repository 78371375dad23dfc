#include "api/HttpSession.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <limits>

#include "api/ConnectStreamSession.hpp"
#include "api/DownloadSession.hpp"
#include "api/ErrorMapping.hpp"
#include "api/ForwardSession.hpp"
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
                         Sandboxes& sandboxes, asio::thread_pool& workers,
                         HttpLimits limits, std::shared_ptr<void> connectionSlot)
    : stream_(std::move(socket)),
      router_(router),
      sandboxes_(sandboxes),
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
    request.target = std::string(target);
    if (qpos != std::string_view::npos) request.query = parseQuery(target.substr(qpos + 1));
    request.authorization = std::string(req[http::field::authorization]);
    request.contentType = std::string(req[http::field::content_type]);
    request.host = std::string(req[http::field::host]);
    for (const char* name :
         {"x-api-key", "e2b-sandbox-id", "e2b-sandbox-port", "x-access-token", "connect-timeout-ms",
          "keepalive-ping-interval", "e2b-traffic-access-token", "content-encoding", "accept-encoding",
          "x-airlock-forwarded-by", "x-airlock-caller", "x-airlock-node-auth",
          "x-airlock-placement", "origin", "accept", "mcp-session-id", "mcp-protocol-version",
          "cookie", "x-csrf-token", "last-event-id"})
        if (auto it = req.find(name); it != req.end())
            request.headers[name] = std::string(it->value());
    // E2B's file metadata rides in X-Metadata-<key> headers, keys taken
    // lower-case as envd takes them (the head's own limit bounds them).
    for (const auto& field : req) {
        beast::string_view name = field.name_string();
        if (name.size() > 11 && beast::iequals(name.substr(0, 11), "x-metadata-")) {
            std::string key(name);
            for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            request.headers.emplace(std::move(key), std::string(field.value()));  // the first wins
        }
    }
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
    pending_.reset();
    route_ = nullptr;
    door_ = Door::native;
    // From here every answer is the selected row's (or its door's) shape.
    Router::Selection selection;
    try {
        selection = router_.select(head);
    } catch (...) {
        // A half-given E2b-Sandbox-Id/-Port pair: E2B's shape.
        selection.door = Door::e2b_control;
        return refuse(router_.errorFor(selection, head, std::current_exception()));
    }
    door_ = selection.door;
    route_ = selection.route();
    if (!selection.route()) return refuse(router_.unrouted(selection, head));
    // Admitted before its body is read: nobody without a credential the row
    // accepts makes airlockd hold a body.
    std::optional<Router::Admission> admission;
    try {
        admission = router_.admit(head, selection);
    } catch (...) {
        return refuse(router_.errorFor(selection, head, std::current_exception()));
    }
    if (admission->forward) return forward(std::move(*admission));
    if (admission->wake) {
        // E2B's auto-resume waits on the sandbox's lock and on libvirt: on a
        // worker, then the request goes on here.
        auto wake = std::move(admission->wake);
        admission->wake = nullptr;
        asio::post(workers_, [self = shared_from_this(), wake = std::move(wake),
                              selection = std::move(selection), admission = std::move(*admission),
                              head = std::move(head)]() mutable {
            std::exception_ptr error;
            try {
                wake();
            } catch (...) {
                error = std::current_exception();
            }
            asio::post(self->stream_.get_executor(),
                       [self, error, selection = std::move(selection),
                        admission = std::move(admission), head = std::move(head)]() mutable {
                           if (error)
                               return self->refuse(
                                   self->router_.errorFor(selection, head, error));
                           self->admitted(std::move(selection), std::move(admission),
                                          std::move(head));
                       });
        });
        return;
    }
    admitted(std::move(selection), std::move(*admission), std::move(head));
}

void HttpSession::admitted(Router::Selection selection, Router::Admission admission,
                           ApiRequest head) {
    const Route& route = *selection.route();
    if (route.kind == RouteKind::stream)
        return startStream(selection, std::move(admission), std::move(head));
    std::size_t limit = route.bodyLimit ? route.bodyLimit : limits_.maxBodyBytes;
    auto length = header_->content_length();
    if (length && *length > limit)
        return refuse(router_.errorFor(selection, head,
                                       errorStatus(ErrorCode::payload_too_large,
                                                   "request body exceeds " +
                                                       std::to_string(limit) + " bytes")));
    pending_ = Pending{std::move(selection), std::move(admission)};
    readBody(limit);
}

void HttpSession::refuse(ApiResponse response) {
    // A request without a body is over: the connection stays as the client
    // asked. One whose body was not read is closed (its rest is drained).
    if (header_->is_done())
        return respond(std::move(response), header_->get().keep_alive(), header_->get().version());
    respond(std::move(response), false, 11);
}

void HttpSession::readBody(std::size_t limit) {
    parser_.emplace(std::move(*header_));
    parser_->body_limit(limit);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code e, std::size_t) { self->onBody(e); });
}

void HttpSession::onBody(beast::error_code ec) {
    auto pending = std::move(*pending_);
    pending_.reset();
    if (ec == http::error::body_limit) {
        http::request<http::empty_body> headOnly(parser_->get().base());
        std::size_t limit = pending.selection.route()->bodyLimit;
        if (!limit) limit = limits_.maxBodyBytes;
        return respond(router_.errorFor(pending.selection, requestHead(headOnly),
                                        errorStatus(ErrorCode::payload_too_large,
                                                    "request body exceeds " +
                                                        std::to_string(limit) + " bytes")),
                       false, 11);
    }
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

    // The handler may block for seconds: keep the I/O thread free.
    stream_.expires_never();
    if (pending.selection.route()->kind == RouteKind::connect_stream)
        return startConnectStream(std::move(pending), std::move(request));
    // A handler may answer later from another thread (a long exec answers
    // when the command ends, holding no worker meanwhile).
    asio::post(workers_, [self = shared_from_this(), pending = std::move(pending),
                          request = std::move(request), keepAlive, version]() mutable {
        const Route& route = *pending.selection.route();
        self->router_.run(
            route, std::move(pending.admission), request,
            [self, keepAlive, version](ApiResponse response) mutable {
                asio::post(self->stream_.get_executor(),
                           [self, response = std::move(response), keepAlive, version]() mutable {
                               self->respond(std::move(response), keepAlive, version);
                           });
            });
    });
}

void HttpSession::forward(Router::Admission admission) {
    auto to = std::move(*admission.forward);
    if (route_) router_.table().countHandover(*route_);
    stream_.expires_never();
    auto session = std::make_shared<ForwardSession>(
        std::move(stream_), std::move(buffer_), header_->release(),
        ForwardSession::Target{to.node, to.host, to.port, to.tls, std::move(to.headers)},
        // The tenant's slot and the connection's place under the cap, while it lasts.
        std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
            std::move(admission.slot), connectionSlot_));
    session->start();
}

void HttpSession::startStream(const Router::Selection& selection, Router::Admission admission,
                              ApiRequest head) {
    const Route& route = *selection.route();
    ApiRequest label{head.method, head.path, head.query, {}, {}, head.host, {}, {}, {}};
    try {
        // Every keyed stream is a sandbox's: another tenant's (or a missing)
        // sandbox answers 404 here, before any upgrade.
        if (route.roles != Router::kPublic && route.sandboxStream && !admission.params.empty())
            sandboxes_.get(admission.tenant, admission.params[0]);
        StreamContext ctx =
            router_.streamContext(std::move(admission), std::move(head), connectionSlot_, workers_);
        stream_.expires_never();
        StreamHandover handover{stream_, buffer_, *header_, std::move(ctx)};
        // A factory takes the socket, or answers with the refusal it returns
        // (or throws) and leaves it.
        if (auto refusal = route.stream(handover))
            respond(std::move(*refusal), false, 11);
        else
            router_.table().countHandover(route);
    } catch (...) {
        respond(router_.errorFor(selection, label, std::current_exception()), false, 11);
    }
}

void HttpSession::startConnectStream(Pending pending, ApiRequest request) {
    asio::post(workers_, [self = shared_from_this(), pending = std::move(pending),
                          request = std::move(request)]() mutable {
        std::optional<ConnectStreamPlan> plan;
        std::optional<ApiResponse> error;
        try {
            plan = self->router_.plan(*pending.selection.route(), pending.admission, request);
        } catch (...) {
            error = self->router_.errorFor(pending.selection, request, std::current_exception());
        }
        asio::post(self->stream_.get_executor(), [self, plan = std::move(plan),
                                                  error = std::move(error),
                                                  slot = std::move(pending.admission.slot)]() mutable {
            if (error) return self->respond(std::move(*error), false, 11);
            if (self->route_) self->router_.table().countHandover(*self->route_);
            auto session = std::make_shared<ConnectStreamSession>(
                std::move(self->stream_), plan->keepalive, plan->keepaliveJson,
                // The tenant's slot and the connection's place under the cap, for the stream's
                // life.
                std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
                    std::move(slot), self->connectionSlot_),
                self->workers_);
            if (plan->deadline) session->endAfter(*plan->deadline);
            session->start();
            asio::post(self->workers_, [run = std::move(plan->run), session] { run(session); });
        });
    });
}

void HttpSession::respond(ApiResponse response, bool keepAlive, unsigned version) {
    router_.table().countAnswer(route_, door_, response.status);
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
