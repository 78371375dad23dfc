// The console's rows: the page itself (/console/), the sessions a browser
// signs in with (an API key exchanged for an HttpOnly cookie), and the live
// event stream (GET /v1/events) that the console and API clients follow.
#include <chrono>

#include "api/ErrorMapping.hpp"
#include "api/EventStreamSession.hpp"
#include "api/Router.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/JsonFields.hpp"
#include "e2b/E2bWire.hpp"

namespace airlock::api {
using nlohmann::json;

namespace {

bool safeMethod(const std::string& method) {
    return method == "GET" || method == "HEAD" || method == "OPTIONS";
}

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

std::string Router::ownOrigin(const ApiRequest& head) const {
    return (secureCookies_ ? "https://" : "http://") + lower(head.host);
}

void Router::requireOwnOrigin(const ApiRequest& head, bool required) const {
    std::string origin = head.header("origin");
    if (origin.empty() && !required) return;
    if (origin.empty())
        throw Error(ErrorCode::forbidden,
                    "a request made with a console session must carry its Origin");
    if (lower(origin) != ownOrigin(head))
        throw Error(ErrorCode::forbidden, "a console session is not used from another origin (" +
                                              origin.substr(0, 100) + ")");
}

std::string Router::sessionCookie(const std::string& token, std::chrono::seconds maxAge) const {
    return std::string(WebSessions::kCookie) + "=" + token + "; Path=/; Max-Age=" +
           std::to_string(maxAge.count()) + "; HttpOnly; SameSite=Strict" +
           (secureCookies_ ? "; Secure" : "");
}

std::optional<Principal> Router::sessionCaller(const ApiRequest& head) {
    std::string token = WebSessions::cookieValue(head.header("cookie"), WebSessions::kCookie);
    if (token.empty()) return std::nullopt;
    auto session = sessions_.find(token);
    if (!session)
        throw Error(ErrorCode::unauthorized, "the console session ended or expired: sign in again");
    auto who = auth_.activeKey(session->keyId);
    if (!who) {
        sessions_.revoke(token);
        throw Error(ErrorCode::unauthorized,
                    "the key this session signed in with was revoked or has expired");
    }
    // Cross-site requests: SameSite=Strict keeps the cookie home; a
    // mutating one must also come from this origin and echo the session's
    // token, which only this origin's pages can read.
    bool mutating = !safeMethod(head.method);
    requireOwnOrigin(head, mutating);
    if (mutating && !e2b::SandboxTokens::same(head.header("x-csrf-token"), session->csrfToken))
        throw Error(ErrorCode::forbidden,
                    "a change made with a console session needs its X-CSRF-Token header");
    return who;
}

json Router::sessionJson(const Principal& who, const WebSession& s) const {
    return json{{"id", s.id},
                {"role", roleName(who.role)},
                {"tenant", who.tenant},
                {"key_id", who.keyId},
                {"key_name", who.keyName},
                {"csrf_token", s.csrfToken},
                {"expires_at", formatTimestamp(s.expiresAt)}};
}

// POST /v1/sessions {"key"}: the key, checked, becomes a session cookie.
ApiResponse Router::createSession(Context& c) {
    requireOwnOrigin(c.request, false);  // no one signs a browser in from elsewhere
    json j = parseJsonBody(c.request.body);
    rejectUnknownFields(j, {"key"}, "session request");
    std::string key = stringField(j, "key");
    if (key.empty() || key.size() > 256)
        throw Error(ErrorCode::bad_request, "'key' must be an API key");
    Principal who = auth_.principalFor("Bearer " + key);
    auto [token, session] = sessions_.create(who.keyId);
    ApiResponse r = jsonResponse(201, sessionJson(who, session));
    r.headers["Set-Cookie"] = sessionCookie(
        token, std::chrono::duration_cast<std::chrono::seconds>(WebSessions::kLifetime));
    r.headers["Cache-Control"] = "no-store";
    return r;
}

std::optional<WebSession> Router::currentSession(Context& c) {
    std::string token = WebSessions::cookieValue(c.request.header("cookie"), WebSessions::kCookie);
    if (token.empty() || !c.request.authorization.empty()) return std::nullopt;
    return sessions_.find(token);
}

// GET /v1/sessions/current
ApiResponse Router::getSession(Context& c) {
    auto session = currentSession(c);
    if (!session)
        throw Error(ErrorCode::not_found, "this request carries an API key, not a console session");
    ApiResponse r = jsonResponse(200, sessionJson(c.principal, *session));
    r.headers["Cache-Control"] = "no-store";
    return r;
}

// DELETE /v1/sessions/current: signs out (the cookie is cleared too).
ApiResponse Router::deleteSession(Context& c) {
    if (!currentSession(c))
        throw Error(ErrorCode::not_found, "this request carries an API key, not a console session");
    sessions_.revoke(WebSessions::cookieValue(c.request.header("cookie"), WebSessions::kCookie));
    ApiResponse r{204, "", ""};
    r.headers["Set-Cookie"] = sessionCookie("", std::chrono::seconds(0));
    return r;
}

// GET /console/**: the console's page and files.
ApiResponse Router::consoleFile(Context& c) {
    const std::string& path = c.request.path;
    if (path == "/console") {
        ApiResponse r{308, "", ""};
        r.headers["Location"] = "/console/";
        return r;
    }
    return console_ ? console_->serve(path.substr(std::string("/console/").size()))
                    : errorResponse(ErrorCode::not_found, "this server serves no console");
}

// GET /v1/events: the audit log as Server-Sent Events, resumable.
std::optional<ApiResponse> Router::events(StreamHandover& h) {
    if (!eventFeed_) return errorResponse(ErrorCode::not_found, "this server streams no events");
    auto& ctx = h.context;
    std::optional<std::int64_t> cursor;
    std::string from = ctx.request.header("last-event-id");
    if (from.empty() && ctx.request.query.count("after")) from = ctx.request.query.at("after");
    if (!from.empty()) {
        try {
            std::size_t used = 0;
            long long v = std::stoll(from, &used);
            if (used != from.size() || v < 0) throw std::invalid_argument("cursor");
            cursor = v;
        } catch (const std::exception&) {
            return errorResponse(ErrorCode::bad_request,
                                 "Last-Event-ID (or 'after') must be an event's id, a number");
        }
    }
    auto scope = ctx.principal.role == Role::admin ? TenantScope::all()
                                                   : TenantScope::only(ctx.principal.tenant);
    std::string keyId = ctx.principal.keyId;
    std::string token = ctx.request.authorization.empty()
                            ? WebSessions::cookieValue(ctx.request.header("cookie"),
                                                       WebSessions::kCookie)
                            : std::string();
    auto& audit = services_.audit;
    EventStreamSession::Source source{
        [&audit, scope](std::int64_t after, int limit) {
            return audit.auditFeed(scope, after, limit);
        },
        [&audit] { return audit.auditHead(); },
        [this, keyId, token] {
            return auth_.activeKey(keyId).has_value() &&
                   (token.empty() || sessions_.find(token).has_value());
        }};
    std::make_shared<EventStreamSession>(std::move(h.stream), std::move(h.context), *eventFeed_,
                                         std::move(source), cursor)
        ->start();
    return std::nullopt;
}

}  // namespace airlock::api
