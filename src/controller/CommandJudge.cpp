#include "controller/CommandJudge.hpp"
#include "store/TaskSpec.hpp"

namespace airlock {

policy::PolicyRules CommandJudge::storedRules(const std::string& json) {
    policy::PolicyRules rules;
    auto j = nlohmann::json::parse(json, nullptr, false);
    if (!j.is_object()) return rules;
    auto list = [&](const char* key, std::vector<std::string>& out) {
        if (auto it = j.find(key); it != j.end() && it->is_array())
            for (const auto& g : *it)
                if (g.is_string()) out.push_back(g.get<std::string>());
    };
    list("deny", rules.deny);
    list("approve", rules.approve);
    list("allow", rules.allow);
    return rules;
}

policy::PolicyRules CommandJudge::rulesOf(const SandboxRecord& r) const {
    auto rules = storedRules(r.policyJson);
    if (auto t = tenantOf_ ? tenantOf_(r.tenant) : std::nullopt) {
        // deny > approve > allow: the tenant's deny and approve rules win
        // over the sandbox's own allow.
        rules.deny.insert(rules.deny.end(), t->deny.begin(), t->deny.end());
        rules.approve.insert(rules.approve.end(), t->approve.begin(), t->approve.end());
        rules.allow.insert(rules.allow.end(), t->allow.begin(), t->allow.end());
    }
    return rules;
}

policy::Verdict CommandJudge::judge(const SandboxRecord& r, const ExecOptions& options) const {
    auto rules = rulesOf(r);
    return options.shell ? policy_.judgeShell(*options.shell, rules)
                         : policy_.judgeArgv(options.argv, rules);
}

bool CommandJudge::isTestRun(const SandboxRecord& r, const ExecOptions& options) {
    if (options.purpose == "test") return true;
    auto task = taskOf(r);
    return task && matchesTestCommand(commandText(options), task->testCommands);
}

nlohmann::json CommandJudge::auditData(const SandboxRecord& r, const ExecOptions& options,
                                       const char* door) {
    nlohmann::json data{{"command", commandText(options)},
                        {"cwd", options.cwd},
                        {"user", options.user.empty() ? "user" : options.user}};
    if (door) data["path"] = door;
    if (isTestRun(r, options)) data["purpose"] = "test";
    if (!options.trace.empty()) data["exec_id"] = options.trace;
    if (!options.caller.empty()) data["by"] = options.caller;
    return data;
}

nlohmann::json CommandJudge::verdictJson(const policy::Verdict& v) {
    nlohmann::json j{{"decision", policy::decisionName(v.decision)},
                     {"class", policy::className(v.commandClass)},
                     {"reason", v.reason},
                     {"part", v.part}};
    if (!v.inlineCode.empty()) j["inline_code"] = v.inlineCode;
    return j;
}

Error CommandJudge::denied(const policy::Verdict& v, const SecretMasker& masker) {
    return Error(ErrorCode::policy_denied, masker.mask("denied by the command policy: " + v.reason +
                                                       " (in \"" + v.part + "\")"));
}

}  // namespace airlock
