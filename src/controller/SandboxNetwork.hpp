#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "controller/CreateSandboxRequest.hpp"
#include "egress/EgressAllowlist.hpp"
#include "egress/EgressGateway.hpp"
#include "packages/PackageGateway.hpp"
#include "store/SandboxStore.hpp"

namespace airlock {

// A sandbox's ways out, as the host hands them over: egress through
// airlockd's proxy, judged by the allowlist on its record, and the package
// proxy, judged by its package rules. No guest has a network interface
// but lo; these two proxies, listening inside each agent session, are the
// only way out. The controller keeps the lifecycle (when a record's list
// changes); this says what the lists and the guest's environment are.
class SandboxNetwork {
  public:
    // Either gateway may be absent: no egress, or no package registry.
    SandboxNetwork(std::shared_ptr<egress::EgressGateway> egress,
                   std::shared_ptr<packages::PackageGateway> packages);

    // A requested allowlist, parsed (bad_request for a malformed entry,
    // and for any entry when there is no egress proxy to apply it).
    egress::EgressAllowlist allowlist(const std::vector<std::string>& allow) const;
    // The package rules a new sandbox is stored with: the tenant's
    // (tenantRulesJson, stored form; empty: the defaults) with the
    // request's changes over them. A fork takes its source's whole, unless
    // the tenant's have tightened past them since (forbidden); an agent key
    // may only tighten (forbidden).
    std::string packageRules(const std::string& tenantRulesJson,
                             const CreateSandboxRequest& request,
                             const SandboxRecord* source) const;
    // Every command's environment: the proxy variables (when there is
    // egress), the registries' (when the package proxy serves them), then
    // the sandbox's own env over them.
    std::map<std::string, std::string> commandEnv(const SandboxRecord& r) const;
    // Connections opened from now on are judged by `list`. A sandbox not
    // attached (no agent session since a restart) gets it from its record
    // when its next session starts.
    void apply(const std::string& sandboxId, const egress::EgressAllowlist& list) const;
    // The guest ports the proxies' listeners take: Airlock's own, never
    // reachable from outside the guest.
    std::vector<unsigned> internalPorts() const;

    const std::shared_ptr<egress::EgressGateway>& egress() const { return egress_; }
    const std::shared_ptr<packages::PackageGateway>& packages() const { return packages_; }

  private:
    std::shared_ptr<egress::EgressGateway> egress_;
    std::shared_ptr<packages::PackageGateway> packages_;
};

}  // namespace airlock
