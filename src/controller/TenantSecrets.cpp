#include "controller/TenantSecrets.hpp"

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/SecretMasker.hpp"

namespace airlock {

std::string TenantSecrets::context(const std::string& tenant, const std::string& name) {
    return "tenant-secret\n" + tenant + "\n" + name;
}

bool TenantSecrets::set(const std::string& tenant, const std::string& name, const SecretSpec& spec,
                        const std::string& by) {
    if (!cipher_) throw Error(ErrorCode::unavailable, "this server keeps no secrets (no key)");
    if (!spec.inject)
        throw Error(ErrorCode::bad_request,
                    "secret " + name +
                        ": a tenant's secret is injected by the egress proxy; give 'inject' "
                        "(a secret the guest holds belongs to a sandbox's create)");
    if (spec.value.size() < SecretMasker::kMinLength)
        throw Error(ErrorCode::unprocessable, "secret " + name + " is shorter than " +
                                                  std::to_string(SecretMasker::kMinLength) +
                                                  " bytes (it could not be masked)");
    if (!store_.find(tenant, name) && store_.list(tenant).size() >= kMaxPerTenant)
        throw Error(
            ErrorCode::quota_exceeded,
            "tenant " + tenant + " has " + std::to_string(kMaxPerTenant) + " secrets already");
    auto now = nowTimestamp();
    bool added = store_.put(TenantSecretRecord{
        tenant, name, cipher_->seal(spec.value, context(tenant, name)), spec.inject->hosts,
        spec.inject->header, spec.inject->format, spec.commands, now, now});
    if (record_)
        record_(tenant, added ? "tenant_secret.created" : "tenant_secret.replaced",
                {{"name", name},
                 {"hosts", spec.inject->hosts},
                 {"header", spec.inject->header},
                 {"by", by}});
    return added;
}

std::vector<TenantSecretRecord> TenantSecrets::list(const std::string& tenant) {
    auto out = store_.list(tenant);
    for (auto& r : out) r.valueSealed.clear();
    return out;
}

TenantSecretRecord TenantSecrets::get(const std::string& tenant, const std::string& name) {
    auto r = store_.find(tenant, name);
    if (!r) throw Error(ErrorCode::not_found, "no secret " + name);
    r->valueSealed.clear();
    return *r;
}

bool TenantSecrets::remove(const std::string& tenant, const std::string& name,
                           const std::string& by) {
    if (!store_.remove(tenant, name)) return false;
    if (record_) record_(tenant, "tenant_secret.removed", {{"name", name}, {"by", by}});
    return true;
}

SecretSpec TenantSecrets::opened(const TenantSecretRecord& r) const {
    if (!cipher_) throw Error(ErrorCode::internal, "a tenant secret is stored and no key is set");
    SecretSpec spec{cipher_->open(r.valueSealed, context(r.tenant, r.name)), r.commands,
                    SecretInjection{r.hosts, r.header, r.format, ""}};
    spec.fromTenant = true;
    return spec;
}

SecretMap TenantSecrets::secretsOf(const std::string& tenant) {
    SecretMap out;
    for (const auto& r : store_.list(tenant)) out[r.name] = opened(r);
    return out;
}

std::optional<SecretSpec> TenantSecrets::secretOf(const std::string& tenant,
                                                  const std::string& name) {
    auto r = store_.find(tenant, name);
    if (!r) return std::nullopt;
    return opened(*r);
}

}  // namespace airlock
