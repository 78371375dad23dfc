#include "workspace/WorkspaceCredentials.hpp"

#include "core/Clock.hpp"
#include "core/Error.hpp"

namespace airlock::workspace {

WorkspaceCredentials::WorkspaceCredentials(Credentials& store,
                                           std::shared_ptr<const SecretCipher> cipher,
                                           egress::AddressPolicy addressPolicy, Recorder record)
    : store_(store),
      cipher_(std::move(cipher)),
      addressPolicy_(std::move(addressPolicy)),
      record_(std::move(record)) {}

std::string WorkspaceCredentials::context(const std::string& tenant, const std::string& name) {
    // The sealed secret is bound to its owner and name: a row copied to
    // another tenant or name does not open.
    return "credential/" + tenant + "/" + name;
}

CredentialRecord WorkspaceCredentials::add(const std::string& tenant, const CredentialSpec& spec) {
    if (!cipher_)
        throw Error(ErrorCode::unavailable, "credentials need the secret key (none is configured)");
    CredentialRecord c;
    c.tenant = tenant;
    c.name = spec.name;
    c.kind = spec.kind;
    c.host = spec.host;
    c.username = spec.username;
    c.knownHosts = spec.knownHosts;
    c.scope = spec.scope;
    c.createdAt = nowTimestamp();
    if (store_.list(tenant).size() >= kMaxPerTenant)
        throw Error(ErrorCode::quota_exceeded,
                    "a tenant has at most " + std::to_string(kMaxPerTenant) + " credentials");
    c.secretSealed = cipher_->seal(spec.secret, context(tenant, spec.name));
    if (!store_.insert(c))
        throw Error(ErrorCode::conflict, "a credential named '" + spec.name + "' exists already");
    if (record_)
        record_(tenant, "credential.created",
                {{"name", c.name}, {"kind", c.kind}, {"host", c.host}, {"scope", c.scope}});
    c.secretSealed.clear();
    return c;
}

std::vector<CredentialRecord> WorkspaceCredentials::list(const std::string& tenant) {
    auto list = store_.list(tenant);
    for (auto& c : list) c.secretSealed.clear();
    return list;
}

void WorkspaceCredentials::remove(const std::string& tenant, const std::string& name) {
    if (!store_.remove(tenant, name))
        throw Error(ErrorCode::not_found, "no credential '" + name + "'");
}

std::vector<std::string> WorkspaceCredentials::secretsOf(const std::string& tenant) {
    std::vector<std::string> values;
    if (!cipher_) return values;
    for (const auto& c : store_.list(tenant))
        values.push_back(cipher_->open(c.secretSealed, context(c.tenant, c.name)));
    return values;
}

std::optional<BrokeredCredential> WorkspaceCredentials::open(const std::string& tenant,
                                                             const std::string& name,
                                                             const RemoteUrl& url) {
    if (name.empty()) return std::nullopt;
    auto c = store_.find(tenant, name);
    if (!c) throw Error(ErrorCode::not_found, "no credential '" + name + "'");
    if (c->host != url.credentialHost())
        throw Error(ErrorCode::forbidden, "credential '" + name + "' is for " + c->host + ", not " +
                                              url.credentialHost());
    if ((c->kind == "ssh-key") != (url.scheme == "ssh"))
        throw Error(ErrorCode::bad_request, "credential '" + name + "' is a " + c->kind +
                                                " and the repository is " + url.scheme);
    if (url.scheme == "http") requireClearTextAllowed(url, addressPolicy_);
    BrokeredCredential scoped{c->kind, c->host, c->username, "", "", "", c->scope};
    // A credential with a scope is for the paths it names, the workspace's
    // repository included.
    if (!c->scope.empty() && !scoped.covers(url))
        throw Error(ErrorCode::forbidden, "credential '" + name + "' is scoped to " +
                                              nlohmann::json(c->scope).dump() +
                                              ", which does not hold " + url.path);
    if (!cipher_) throw Error(ErrorCode::unavailable, "no secret key is configured");
    // Without a scope: the repositories beside the workspace's own (its
    // owner's, "/org/" for "/org/app.git"), never another owner's.
    auto scope = c->scope;
    if (scope.empty() && !url.scopeDirectory().empty()) scope = {url.scopeDirectory()};
    return BrokeredCredential{c->kind,
                              c->host,
                              c->username,
                              cipher_->open(c->secretSealed, context(tenant, name)),
                              c->knownHosts,
                              url.path,
                              scope};
}

}  // namespace airlock::workspace
