#pragma once
#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "api/HttpTypes.hpp"
#include "api/RouteTable.hpp"
#include "controller/TemplateCatalog.hpp"

namespace airlock::templates {
class TemplateBuilder;
}

namespace airlock::api {

// The routes the `e2b` SDK's Template builder calls, on the E2B front door:
// a build is requested (POST /v3/templates), its COPY archives uploaded
// (GET .../files/{hash} hands out an upload URL whose token authorizes the
// PUT), then triggered with its steps (POST /v2/templates/{id}/builds/{id})
// and polled (GET .../status?logsOffset=N). The steps become a recipe for
// the one template builder; the template is the name the build asked for,
// so Sandbox.create(name) starts from it. There is no image registry:
// fromImage builds only from E2B's base image (Airlock's `base`).
class E2bTemplates {
  public:
    E2bTemplates(templates::TemplateBuilder& builder, const TemplateCatalog& catalog,
                 std::string filesDir, bool tls);
    // The handlers of E2bApi's template rows.
    ApiResponse requestBuild(RouteContext& c);
    ApiResponse fileLink(RouteContext& c);
    ApiResponse upload(RouteContext& c);
    ApiResponse startBuild(RouteContext& c);
    ApiResponse status(RouteContext& c);
    ApiResponse alias(RouteContext& c);
    // The upload's token (query `token`) names a grant for this hash: before its body is read.
    void checkUpload(const ApiRequest& head, const std::vector<std::string>& params);
    bool isBuilt(const std::string& tenant, const std::string& name);
    void removeBuilt(const std::string& tenant, const std::string& name);
    static constexpr std::uint64_t kMaxArchive = 256u << 20;
    static constexpr std::uint64_t kMaxTenantArchives = 2ull << 30;  // kept per tenant
    static constexpr std::uint64_t kMaxContext = 1ull << 30;         // one build's archives together
    static constexpr std::size_t kMaxRequestedPerTenant = 64;
    static constexpr std::size_t kMaxGrantsPerTenant = 256;

  private:
    struct Requested {
        std::string tenant, name, tag;
        std::optional<unsigned> vcpus, memoryMib;
        std::chrono::steady_clock::time_point at;
    };
    struct UploadGrant {
        std::string tenant, hash;
        std::chrono::steady_clock::time_point expires;
    };
    std::string archivePath(const std::string& tenant, const std::string& hash) const;
    // What the tenant's archives hold (archives unused for a day go first).
    std::uint64_t archivedBytes(const std::string& tenant);
    std::string usableTemplates(const std::string& tenant) const;
    void prune();

    templates::TemplateBuilder& builder_;
    const TemplateCatalog& catalog_;
    std::string filesDir_;
    bool tls_;
    std::mutex mutex_;
    std::map<std::string, Requested> requested_;  // by build id, until triggered
    std::map<std::string, UploadGrant> grants_;   // by upload token
};

}  // namespace airlock::api
