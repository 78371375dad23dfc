#include "controller/ExecOptions.hpp"

namespace airlock {

protocol::ExecRequest toAgentRequest(const ExecOptions& options,
                                     const std::map<std::string, std::string>& sandboxEnv) {
    protocol::ExecRequest r;
    r.argv = options.shell ? std::vector<std::string>{"/bin/sh", "-c", *options.shell} : options.argv;
    r.cwd = options.cwd;
    r.env = sandboxEnv;
    for (const auto& [k, v] : options.env) r.env[k] = v;
    r.user = options.user.empty() ? "user" : options.user;
    r.timeout_ms = std::uint64_t(options.timeoutS) * 1000;
    r.stdin_data = options.stdinData;
    return r;
}

}  // namespace airlock
