// The workspace routes: credentials (admin), the workspace of a sandbox,
// its host-computed diff, commit, push (always a publish approval) and
// reset. Parsing here, the work in workspace::WorkspaceService.
#include "api/ErrorMapping.hpp"
#include "api/Router.hpp"
#include "api/WorkspaceParsing.hpp"
#include "core/Error.hpp"

namespace airlock::api {
using nlohmann::json;

workspace::WorkspaceService& Router::workspaces() {
    if (!workspaces_)
        throw Error(ErrorCode::unavailable, "repository workspaces are not enabled on this server");
    return *workspaces_;
}

// POST /v1/credentials
ApiResponse Router::createCredential(Context& c) {
    auto spec = parseCredential(c.request.body);
    return jsonResponse(201, credentialJson(workspaces().credentials().add(c.tenant, spec)));
}

// GET /v1/credentials
ApiResponse Router::listCredentials(Context& c) {
    json list = json::array();
    for (const auto& cred : workspaces().credentials().list(c.tenant))
        list.push_back(credentialJson(cred));
    return jsonResponse(200, {{"credentials", list}});
}

// DELETE /v1/credentials/{}
ApiResponse Router::deleteCredential(Context& c) {
    workspaces().credentials().remove(c.tenant, c.params[0]);
    return ApiResponse{204, "", ""};
}

// GET /v1/sandboxes/{}/workspace
ApiResponse Router::getWorkspace(Context& c) {
    return jsonResponse(200, workspaceInfoJson(workspaces().info(c.tenant, c.params[0])));
}

// GET /v1/sandboxes/{}/workspace/diff
ApiResponse Router::getWorkspaceDiff(Context& c) {
    std::string format;
    if (auto it = c.request.query.find("format"); it != c.request.query.end()) format = it->second;
    if (format == "json")
        return jsonResponse(200, workspaceDiffJson(workspaces().diff(c.tenant, c.params[0])));
    if (!format.empty() && format != "patch")
        throw Error(ErrorCode::bad_request, "format must be 'patch' (the default) or 'json'");
    return ApiResponse{200, "text/x-diff", workspaces().diffPatch(c.tenant, c.params[0])};
}

// POST /v1/sandboxes/{}/workspace/commit
ApiResponse Router::commitWorkspace(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);
    auto req = parseCommitRequest(c.request.body);
    return jsonResponse(201, workspaceCommitJson(workspaces().commit(
                                 c.tenant, c.params[0], req.message, req.authorName, req.authorEmail)));
}

// POST /v1/sandboxes/{}/workspace/push
ApiResponse Router::requestPush(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);
    auto commit = parsePushRequest(c.request.body);
    return jsonResponse(202, pushRequestedJson(workspaces().requestPush(c.tenant, c.params[0], commit)));
}

// GET /v1/sandboxes/{}/workspace/pushes/{}
ApiResponse Router::getPush(Context& c) {
    return jsonResponse(200, pushStatusJson(workspaces().pushState(c.tenant, c.params[0], c.params[1])));
}

// GET /v1/approvals/{}/patch
ApiResponse Router::getApprovalPatch(Context& c) {
    auto g = services_.gates.approval(c.tenant, c.params[0]);
    if (g.commandClass != "publish")
        throw Error(ErrorCode::not_found, "approval " + c.params[0] + " is not a push: no patch");
    return ApiResponse{200, "text/x-diff", workspaces().pushPatch(g)};
}

// POST /v1/sandboxes/{}/workspace/reset
ApiResponse Router::resetWorkspace(Context& c) {
    services_.sandboxes.get(c.tenant, c.params[0]);
    bool clean = parseResetRequest(c.request.body);
    workspaces().reset(c.tenant, c.params[0], clean);
    return jsonResponse(200, workspaceInfoJson(workspaces().info(c.tenant, c.params[0])));
}

}  // namespace airlock::api
