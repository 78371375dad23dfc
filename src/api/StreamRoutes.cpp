// The streaming routes of the one table: each factory takes the connection
// over into the session that serves it. The HTTP session has authorized the
// caller (and found the sandbox) before any of them runs.
#include <boost/beast/websocket.hpp>

#include "api/DownloadSession.hpp"
#include "api/ErrorMapping.hpp"
#include "api/PreviewProxySession.hpp"
#include "api/Router.hpp"
#include "api/UploadSession.hpp"
#include "api/WsExecSession.hpp"

namespace airlock::api {
using nlohmann::json;
namespace {

std::string queryOr(const ApiRequest& request, const char* key) {
    auto it = request.query.find(key);
    return it == request.query.end() ? std::string() : it->second;
}

}  // namespace

// GET /v1/sandboxes/{}/exec/ws
std::optional<ApiResponse> Router::execWebSocket(StreamHandover& h) {
    auto head = h.header.release();
    if (!boost::beast::websocket::is_upgrade(head))
        return errorResponse(ErrorCode::bad_request, "this endpoint speaks WebSocket only");
    std::make_shared<WsExecSession>(std::move(h.stream), std::move(head), std::move(h.context))
        ->start();
    return std::nullopt;
}

// PUT /v1/sandboxes/{}/files
std::optional<ApiResponse> Router::uploadFile(StreamHandover& h) {
    UploadPlan::File file{queryOr(h.context.request, "path"), std::nullopt, ""};
    if (auto m = h.context.request.query.find("mode"); m != h.context.request.query.end()) {
        try {
            std::size_t used = 0;
            unsigned long v = std::stoul(m->second, &used, 8);
            if (used != m->second.size() || v > 07777) throw std::invalid_argument("mode");
            file.mode = static_cast<unsigned>(v);
        } catch (const std::exception&) {
            return errorResponse(ErrorCode::bad_request, "mode must be octal, e.g. 0644");
        }
    }
    UploadPlan plan;
    plan.whole = std::move(file);
    plan.answer = [](const std::vector<UploadPlan::Written>& written) {
        const auto& w = written.at(0);
        json j = w.confirmed;
        j["bytes_received"] = w.bytes;
        j["sha256"] = w.sha256;
        return jsonResponse(201, j);
    };
    // The parser keeps its state (and what it buffered) across the move.
    std::make_shared<UploadSession>(std::move(h.stream), std::move(h.buffer), std::move(h.header),
                                    std::move(h.context), std::move(plan))
        ->start();
    return std::nullopt;
}

// GET /v1/sandboxes/{}/files
std::optional<ApiResponse> Router::downloadFile(StreamHandover& h) {
    auto path = queryOr(h.context.request, "path");
    auto& files = services_.files;
    auto tenant = h.context.tenant;
    auto sandbox = h.context.params[0];
    std::make_shared<DownloadSession>(
        std::move(h.stream), std::move(h.context),
        [&files, tenant, sandbox, path](AgentStream::Handler handler) {
            return files.openDownload(tenant, sandbox, path, std::move(handler));
        },
        true, "application/octet-stream", DownloadSession::kFileIdle)
        ->start();
    return std::nullopt;
}

// GET /v1/sandboxes/{}/processes/{}/logs
std::optional<ApiResponse> Router::processLogs(StreamHandover& h) {
    auto follow = queryOr(h.context.request, "follow");
    bool doFollow = follow == "1" || follow == "true";
    auto& processes = services_.processes;
    auto tenant = h.context.tenant;
    auto sandbox = h.context.params[0];
    auto process = h.context.params[1];
    std::make_shared<DownloadSession>(
        std::move(h.stream), std::move(h.context),
        [&processes, tenant, sandbox, process, doFollow](AgentStream::Handler handler) {
            return processes.openLogs(tenant, sandbox, process, doFollow, std::move(handler));
        },
        false, "text/plain; charset=utf-8",
        doFollow ? std::chrono::milliseconds(0) : DownloadSession::kFileIdle)
        ->start();
    return std::nullopt;
}

// Any method on /preview/{sandbox}/{port}/{token}/...
std::optional<ApiResponse> Router::previewProxy(StreamHandover& h) {
    if (!publicDomain_.empty())
        return errorResponse(ErrorCode::not_found,
                             "previews are served on their own origin (<token>.<port>-<sandbox>." +
                                 publicDomain_ + "): see the port's url");
    std::make_shared<PreviewProxySession>(std::move(h.stream), std::move(h.buffer),
                                          h.header.release(), std::move(h.context))
        ->start();
    return std::nullopt;
}

}  // namespace airlock::api
