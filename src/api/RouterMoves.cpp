// A drain with move, the arriving side: another node sends a sandbox here
// (POST /v1/internal/moves, pieces, start, or abort). Only node-signed
// calls reach it: a tenant's key, even an admin's, never does.
#include <nlohmann/json.hpp>

#include "api/ErrorMapping.hpp"
#include "api/IncomingMoves.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "fleet/Fleet.hpp"

namespace airlock::api {
using nlohmann::json;

namespace {

const std::string& queryField(const ApiRequest& request, const char* key) {
    auto it = request.query.find(key);
    if (it == request.query.end() || it->second.empty())
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' is missing");
    return it->second;
}

}  // namespace

IncomingMoves& Router::arrivals(const Context& c) {
    // The sending node itself, never a tenant's call it carried.
    const auto& from = c.principal.forwardedBy;
    if (from.empty() || c.principal.tenant != "_fleet" || c.principal.keyId != "node:" + from)
        throw Error(ErrorCode::forbidden, "only another node of the fleet sends sandboxes here");
    if (!incoming_ || !fleet_)
        throw Error(ErrorCode::unavailable, "this node takes no sandboxes from other nodes");
    if (!fleet_->node(from) || from == fleet_->self())
        throw Error(ErrorCode::forbidden, "node " + from + " is not another node of this fleet");
    return *incoming_;
}

// POST /v1/internal/moves {"sandbox": MovedSandbox, "files": {"state": {"bytes","sha256"},
// "disk"?}}
ApiResponse Router::beginArrival(Context& c) {
    auto& incoming = arrivals(c);
    auto j = json::parse(c.request.body, nullptr, false);
    if (!j.is_object() || j.size() != 2 || !j.contains("sandbox") || !j.contains("files") ||
        !j["files"].is_object())
        throw Error(ErrorCode::bad_request, "a move is {\"sandbox\": {...}, \"files\": {...}}");
    auto moved = MovedSandbox::fromJson(j["sandbox"]);
    // Only what the fleet places on the sending node, as its own tenant's,
    // moves: a sender cannot re-own or take over another sandbox's id.
    if (!isValidTenantName(moved.record.tenant))
        throw Error(ErrorCode::bad_request, "the moving sandbox's tenant is not a tenant name");
    auto placed = fleet_->directory().find(moved.record.id);
    if (!placed || placed->node != c.principal.forwardedBy || placed->tenant != moved.record.tenant)
        throw Error(ErrorCode::forbidden, "the fleet does not place " + moved.record.id + " on node " +
                                              c.principal.forwardedBy + " for that tenant");
    std::map<std::string, safefs::FileDigest> files;
    for (const auto& [name, f] : j["files"].items()) {
        if (!f.is_object() || f.size() != 2 || !f.contains("bytes") ||
            !f["bytes"].is_number_unsigned() || !f.contains("sha256") || !f["sha256"].is_string())
            throw Error(ErrorCode::bad_request, "file " + name + " is {\"bytes\", \"sha256\"}");
        files[name] =
            safefs::FileDigest{f["bytes"].get<std::uint64_t>(), f["sha256"].get<std::string>()};
    }
    std::string id = moved.record.id;
    incoming.begin(c.principal.forwardedBy, std::move(moved), files);
    return jsonResponse(201, {{"id", id}, {"node", fleet_->self()}});
}

// PUT /v1/internal/moves/piece?sandbox=&file=&offset= (the bytes)
ApiResponse Router::arrivalPiece(Context& c) {
    auto& incoming = arrivals(c);
    const auto& offsetText = queryField(c.request, "offset");
    if (offsetText.size() > 19 || offsetText.find_first_not_of("0123456789") != std::string::npos)
        throw Error(ErrorCode::bad_request, "offset is a byte count");
    incoming.write(c.principal.forwardedBy, queryField(c.request, "sandbox"),
                   queryField(c.request, "file"), std::stoull(offsetText), c.request.body);
    return ApiResponse{204, "", ""};
}

// POST /v1/internal/moves/start?sandbox=
ApiResponse Router::startArrival(Context& c) {
    auto& incoming = arrivals(c);
    SecretCipher journey(fleet_->credential().journeyKey());
    const auto& from = c.principal.forwardedBy;
    std::string placement;
    auto r = incoming.commit(
        from, queryField(c.request, "sandbox"), journey, [&](const SandboxRecord& arrived) {
            // From now on every node finds it here.
            placement = recordPlacement(arrived, "moved here from " + from + " (a drain)");
        });
    auto j = withNode(sandboxJson(r));
    j["placement"] = placement;
    fleet_->membership().refresh();
    return jsonResponse(200, j);
}

// DELETE /v1/internal/moves?sandbox=
ApiResponse Router::abortArrival(Context& c) {
    arrivals(c).abort(c.principal.forwardedBy, queryField(c.request, "sandbox"));
    return ApiResponse{204, "", ""};
}

}  // namespace airlock::api
