#pragma once
#include <string>
#include <vector>

namespace airlock::policy {

// Command classes, least to most strict (docs/security.md, "The command policy").
enum class CommandClass {
    inspection,         // ls, cat, grep, git status ...
    verification,       // tests and linters
    build,              // compilers, build tools
    other,              // anything not recognised (allowed and logged)
    code_execution,     // an interpreter given inline code (python -c, node -e ...)
    network,            // curl, wget, git clone/fetch/push, ssh, scp ...
    dependency_change,  // pip/npm/yarn/pnpm/cargo/go/gem/apt/apk installs, lockfile updates
    secret_access,      // .env files, credential stores, /proc/*/environ
    destructive,        // rm -rf of roots, mkfs, dd to devices, git reset --hard, push --force ...
};
std::string className(CommandClass c);

enum class Decision { allow, approve, deny };
std::string decisionName(Decision d);

// Command-prefix globs (`*` and `?`), matched against each simple command of
// a request (its words joined by single spaces, wrappers such as sudo or env
// removed). deny > approve > allow > the class defaults.
struct PolicyRules {
    std::vector<std::string> deny, approve, allow;
    bool empty() const { return deny.empty() && approve.empty() && allow.empty(); }
};

struct Verdict {
    Decision decision = Decision::allow;
    CommandClass commandClass = CommandClass::inspection;  // of the part that decided
    std::string part;                                      // that part, as matched
    std::string reason;                                    // readable: class, rule or default
    std::vector<std::string> inlineCode;                   // code given to interpreters (logged)
};

// Judges what a client asks to run, before anything reaches the guest. It
// sees the request, not what the programs do once running: the VM boundary
// and the egress proxy contain the rest. Every part of a shell string is
// judged and the strictest decision wins.
class CommandPolicy {
public:
    // Operator rules (airlockd --policy FILE) apply to every sandbox.
    explicit CommandPolicy(PolicyRules operatorRules = {});

    // argv as given (argv[0] may itself be `sh -c ...`).
    Verdict judgeArgv(const std::vector<std::string>& argv, const PolicyRules& sandboxRules = {}) const;
    // A shell string (run with /bin/sh -c).
    Verdict judgeShell(const std::string& script, const PolicyRules& sandboxRules = {}) const;

    static bool globMatch(const std::string& pattern, const std::string& text);
    static Decision defaultDecision(CommandClass c);

private:
    PolicyRules operatorRules_;
};

}  // namespace airlock::policy
