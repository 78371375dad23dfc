#pragma once
#include <string>

#include "core/Error.hpp"
#include "store/Database.hpp"

namespace airlock {

// Which tenants a store query covers. "All tenants" must be asked for by
// name: an empty tenant string (a missing key, a parse slip) can never widen
// a query to every tenant's rows.
class TenantScope {
  public:
    static TenantScope all() { return TenantScope(std::string(), true); }
    // Throws Error(internal) for an empty tenant.
    static TenantScope only(const std::string& tenant) {
        if (tenant.empty()) throw Error(ErrorCode::internal, "a tenant scope needs a tenant");
        return TenantScope(tenant, false);
    }
    bool isAll() const { return all_; }
    const std::string& tenant() const { return tenant_; }
    // A query's tenant filter and its parameter: " WHERE tenant = ?" (or
    // `joiner` when a condition comes before it), nothing for every tenant.
    std::string whereTenant(const char* joiner = " WHERE") const {
        return all_ ? std::string() : std::string(joiner) + " tenant = ?";
    }
    Database::Params tenantParam() const {
        return all_ ? Database::Params{} : Database::Params{tenant_};
    }

  private:
    TenantScope(std::string tenant, bool all) : tenant_(std::move(tenant)), all_(all) {}
    std::string tenant_;
    bool all_;
};

}  // namespace airlock
