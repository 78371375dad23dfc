#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "controller/ExecOptions.hpp"
#include "core/Error.hpp"
#include "core/SecretMasker.hpp"
#include "policy/CommandPolicy.hpp"
#include "store/SandboxStore.hpp"
#include "store/TenantStore.hpp"

namespace airlock {

// The command policy applied to one sandbox's command: the operator's rules,
// its tenant's and its own (deny > approve > allow), whether the command is
// a test run, and the fields every exec audit record starts from. Every exec
// path (REST, WebSocket, background processes, approved runs, the E2B door)
// asks here. No state but the immutable policy; tenants are looked up on
// each call, so a tenant's new rules hold for its next command.
class CommandJudge {
  public:
    using TenantLookup = std::function<std::optional<TenantRecord>(const std::string&)>;
    CommandJudge(const policy::PolicyRules& operatorRules, TenantLookup tenantOf)
        : policy_(operatorRules), tenantOf_(std::move(tenantOf)) {}

    // A sandbox's own rules, from its stored policy_json (none from bad JSON).
    static policy::PolicyRules storedRules(const std::string& policyJson);
    // The sandbox's own rules (its policy_json) with its tenant's.
    policy::PolicyRules rulesOf(const SandboxRecord& r) const;
    policy::Verdict judge(const SandboxRecord& r, const ExecOptions& options) const;
    // An exec whose exit code is a test result: asked for ("purpose":"test")
    // or one of the task's test_commands.
    static bool isTestRun(const SandboxRecord& r, const ExecOptions& options);
    // command, cwd, user ("user" when unset), the door (`path`, when given),
    // purpose (a test run) and the exec id (options.trace, when set).
    static nlohmann::json auditData(const SandboxRecord& r, const ExecOptions& options,
                                    const char* door);
    static nlohmann::json verdictJson(const policy::Verdict& v);
    // Error(policy_denied) naming the rule, with any secret typed into the
    // command masked.
    static Error denied(const policy::Verdict& v, const SecretMasker& masker);

  private:
    policy::CommandPolicy policy_;
    TenantLookup tenantOf_;
};

}  // namespace airlock
