// The routes into a guest: files and directories (paths resolved inside the
// guest), background processes and preview ports.
#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "core/Error.hpp"
#include "core/JsonFields.hpp"

namespace airlock::api {
using nlohmann::json;

namespace {
std::string queryValue(const Router::Context& c, const char* key) {
    auto it = c.request.query.find(key);
    if (it == c.request.query.end() || it->second.empty())
        throw Error(ErrorCode::bad_request,
                    std::string("query parameter '") + key + "' is required");
    return it->second;
}

json portJson(const ExposedPort& p, const Router::Context& c, const std::string& publicDomain,
              unsigned listenPort) {
    std::string host = c.request.host.empty() ? "127.0.0.1:8080" : c.request.host;
    if (!publicDomain.empty()) {
        // Its own origin: <token>.<port>-<id>.<domain>, on the listener's port.
        auto colon = host.rfind(':');
        std::string portSuffix = colon != std::string::npos && host.find(']') == std::string::npos
                                     ? host.substr(colon)
                                 : listenPort && listenPort != 80 ? ":" + std::to_string(listenPort)
                                                                  : "";
        return {{"port", p.port},
                {"url", "http://" + p.token + "." + std::to_string(p.port) + "-" + p.sandboxId +
                            "." + publicDomain + portSuffix + "/"},
                {"created_at", p.createdAt}};
    }
    return {{"port", p.port},
            {"url", "http://" + host + "/preview/" + p.sandboxId + "/" + std::to_string(p.port) +
                        "/" + p.token + "/"},
            {"created_at", p.createdAt}};
}
}  // namespace

// GET /v1/sandboxes/{}/fs
ApiResponse Router::listGuestDirectory(Context& c) {
    protocol::FsRequest r;
    r.action = protocol::FsRequest::Action::list;
    r.path = queryValue(c, "path");
    return jsonResponse(
        200, protocol::toJsonValue(services_.files.fileOp(c.tenant, c.params[0], r)));
}

// DELETE /v1/sandboxes/{}/files
ApiResponse Router::removeGuestPath(Context& c) {
    std::string recursive =
        c.request.query.count("recursive") ? c.request.query.at("recursive") : "";
    protocol::FsRequest r;
    r.action = protocol::FsRequest::Action::remove;
    r.path = queryValue(c, "path");
    r.recursive = recursive == "1" || recursive == "true";
    services_.files.fileOp(c.tenant, c.params[0], r);
    return ApiResponse{204, "", ""};
}

// POST /v1/sandboxes/{}/fs/mkdir
ApiResponse Router::makeGuestDirectory(Context& c) {
    json body = parseJsonBody(c.request.body);
    rejectUnknownFields(body, {"path"}, "mkdir request");
    protocol::FsRequest r;
    r.action = protocol::FsRequest::Action::mkdir;
    r.path = stringField(body, "path");
    return jsonResponse(
        201, protocol::toJsonValue(services_.files.fileOp(c.tenant, c.params[0], r)));
}

// POST /v1/sandboxes/{}/fs/move
ApiResponse Router::moveGuestPath(Context& c) {
    json body = parseJsonBody(c.request.body);
    rejectUnknownFields(body, {"from", "to"}, "move request");
    protocol::FsRequest r;
    r.action = protocol::FsRequest::Action::move;
    r.path = stringField(body, "from");
    r.to = stringField(body, "to");
    if (r.to.empty() || r.to[0] != '/')
        throw Error(ErrorCode::bad_request, "'to' must be an absolute path");
    return jsonResponse(
        200, protocol::toJsonValue(services_.files.fileOp(c.tenant, c.params[0], r)));
}

// POST /v1/sandboxes/{}/processes
ApiResponse Router::startProcess(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);
    auto start = parseProcessStart(c.request.body);
    return jsonResponse(201, protocol::toJsonValue(services_.processes.start(
                                 c.tenant, c.params[0], start.options, start.stdinOpen)));
}

// GET /v1/sandboxes/{}/processes
ApiResponse Router::listProcesses(Context& c) {
    return jsonResponse(200,
                        protocol::toJsonValue(services_.processes.list(c.tenant, c.params[0])));
}

// GET /v1/sandboxes/{}/processes/{}
ApiResponse Router::getProcess(Context& c) {
    protocol::ProcessCall call;
    call.op = protocol::Op::process_get;
    call.id = c.params[1];
    return jsonResponse(
        200, protocol::toJsonValue(services_.processes.call(c.tenant, c.params[0], call)));
}

// POST /v1/sandboxes/{}/processes/{}/signal
ApiResponse Router::signalProcess(Context& c) {
    json body = parseJsonBody(c.request.body);
    rejectUnknownFields(body, {"signal"}, "signal request");
    protocol::ProcessCall call;
    call.op = protocol::Op::process_signal;
    call.id = c.params[1];
    if (body.contains("signal")) call.signal = stringField(body, "signal");
    return jsonResponse(
        200, protocol::toJsonValue(services_.processes.call(c.tenant, c.params[0], call)));
}

// POST /v1/sandboxes/{}/processes/{}/stdin
ApiResponse Router::writeProcessStdin(Context& c) {
    json body = parseJsonBody(c.request.body);
    rejectUnknownFields(body, {"data", "eof"}, "stdin request");
    protocol::ProcessCall call;
    call.op = protocol::Op::process_stdin;
    call.id = c.params[1];
    if (body.contains("data")) call.data = stringField(body, "data");
    if (body.contains("eof")) {
        if (!body["eof"].is_boolean())
            throw Error(ErrorCode::bad_request, "'eof' must be a boolean");
        call.eof = body["eof"].get<bool>();
    }
    return jsonResponse(
        200, protocol::toJsonValue(services_.processes.call(c.tenant, c.params[0], call)));
}

// POST /v1/sandboxes/{}/ports
ApiResponse Router::exposePort(Context& c) {
    json body = parseJsonBody(c.request.body);
    rejectUnknownFields(body, {"port"}, "port request");
    if (!body.contains("port") || !body["port"].is_number_integer())
        throw Error(ErrorCode::bad_request, "'port' must be an integer");
    auto p = body["port"].get<std::int64_t>();
    if (p < 1 || p > 65535) throw Error(ErrorCode::bad_request, "'port' must be 1-65535");
    return jsonResponse(
        201, portJson(services_.ports.expose(c.tenant, c.params[0], static_cast<unsigned>(p)),
                      c, publicDomain_, listenPort_));
}

// GET /v1/sandboxes/{}/ports
ApiResponse Router::listPorts(Context& c) {
    json list = json::array();
    for (const auto& p : services_.ports.list(c.tenant, c.params[0]))
        list.push_back(portJson(p, c, publicDomain_, listenPort_));
    return jsonResponse(200, {{"ports", list}});
}

// DELETE /v1/sandboxes/{}/ports/{}
ApiResponse Router::closePort(Context& c) {
    unsigned port = 0;
    try {
        port = static_cast<unsigned>(std::stoul(c.params[1]));
    } catch (...) {
        throw Error(ErrorCode::bad_request, "bad port");
    }
    services_.ports.close(c.tenant, c.params[0], port);
    return ApiResponse{204, "", ""};
}

}  // namespace airlock::api
