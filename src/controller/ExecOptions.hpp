#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocol/Messages.hpp"

namespace airlock {

// A client's exec request after validation: exactly one of argv or shell.
struct ExecOptions {
    std::vector<std::string> argv;
    std::optional<std::string> shell;
    std::string cwd;
    std::map<std::string, std::string> env;
    std::string user;
    unsigned timeoutS = 60;
    std::string stdinData;
    // "test": its exit code is a test result in the evidence. A command that
    // matches one of the task's test_commands is marked so without asking.
    std::string purpose;
    // The exec id the audit records carry; the guest tags the command's file
    // activity with it. Set by the controller, never by a client.
    std::string trace;
    // Who asked: the key ("key:<id> (<name>, <role>)") the audit names. Set
    // by the front door from the authenticated caller, never by a client.
    std::string caller;
};

inline constexpr unsigned kMaxExecTimeoutS = 24 * 3600;

// What the client asked to run, as text: the shell string, or argv joined
// by spaces (what policy globs, secret scopes and the audit log see).
std::string commandText(const ExecOptions& options);

// Whether a command is one of the task's test commands: the same text up
// to spacing, or the last "&&" step of it (a "cd dir && npm test").
bool matchesTestCommand(const std::string& command, const std::vector<std::string>& testCommands);

// A stored JSON object of strings (a sandbox's env) as a map; junk -> empty.
std::map<std::string, std::string> parseEnvJson(const std::string& json);

// Merges the sandbox's default env under the request's and turns a shell
// string into sh -c.
protocol::ExecRequest toAgentRequest(const ExecOptions& options,
                                     const std::map<std::string, std::string>& sandboxEnv);

}  // namespace airlock
