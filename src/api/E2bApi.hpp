#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/HttpTypes.hpp"
#include "api/RouteTable.hpp"
#include "controller/FrontDoorServices.hpp"
#include "e2b/E2bWire.hpp"

namespace airlock::api {

// The E2B-compatible control plane (/sandboxes, /v2/sandboxes...): E2B's
// request and response shapes translated to and from the same controller
// calls the native API makes, so policy, quotas, roles and audit apply
// unchanged. Its rows are in the one route table: authenticated by
// X-API-KEY (an Airlock key, or the same key with e2b_ in place of ak_),
// errors rendered as {"code": status, "message"} (the SDK reads the code
// from the body).
class E2bTemplates;

class E2bApi {
  public:
    E2bApi(const FrontDoorServices& services, const e2b::SandboxTokens& tokens,
           std::string publicDomain);

    // Whether a path is the control plane's (the door a request comes through).
    static bool owns(const std::string& path);
    // The control plane's rows (Door::e2b_control), in the one table.
    void addRoutes(RouteTable& table);

    // In a fleet: where a create goes. The answer of the node it went to,
    // or nullopt to make it here.
    using Placer =
        std::function<std::optional<ApiResponse>(RouteContext&, const CreateSandboxRequest&)>;
    void setPlacer(Placer placer) { placer_ = std::move(placer); }
    // In a fleet: the sandboxes other nodes hold for this caller, listed
    // with this node's (E2B's order, filters and pages over them all).
    using OtherNodesSandboxes = std::function<std::vector<SandboxRecord>(RouteContext&)>;
    void setOtherNodesSandboxes(OtherNodesSandboxes other) { otherNodes_ = std::move(other); }
    // The SDK's Template builder (without: its rows answer 503).
    void setTemplates(E2bTemplates* templates) { templates_ = templates; }

  private:
    E2bTemplates& templates();
    E2bTemplates* templates_ = nullptr;
    ApiResponse create(RouteContext& c);
    ApiResponse list(RouteContext& c);
    ApiResponse get(RouteContext& c);
    ApiResponse kill(RouteContext& c);
    ApiResponse setTimeout(RouteContext& c);
    ApiResponse pause(RouteContext& c);
    ApiResponse updateNetwork(RouteContext& c);
    ApiResponse connect(RouteContext& c, bool resumeRoute);
    ApiResponse metrics(RouteContext& c);
    ApiResponse latestMetrics(RouteContext& c);
    ApiResponse createSnapshot(RouteContext& c);
    ApiResponse listSnapshots(RouteContext& c);
    ApiResponse deleteSnapshot(RouteContext& c);
    ApiResponse fork(RouteContext& c);
    // The snapshot a create's templateID means: "snap-..." itself, or the
    // newest of the tenant's snapshots carrying the name; nullopt: a template.
    std::optional<std::string> namedSnapshot(const std::string& tenant,
                                             const std::string& templateId);
    // The access tokens in it are bound to the calling key (keyId).
    nlohmann::json sandboxAnswer(const SandboxRecord& r, const std::string& asked,
                                 const std::string& keyId) const;
    nlohmann::json listedSandbox(const SandboxRecord& r) const;

    Sandboxes& sandboxes_;
    SandboxMetrics& metrics_;
    SandboxSnapshots& snapshotting_;
    SnapshotLibrary& snapshots_;
    const e2b::SandboxTokens& tokens_;
    std::string publicDomain_;
    Placer placer_;
    OtherNodesSandboxes otherNodes_;
};

}  // namespace airlock::api
