#include "controller/ExecOptions.hpp"

#include <nlohmann/json.hpp>

namespace airlock {

std::map<std::string, std::string> parseEnvJson(const std::string& json) {
    std::map<std::string, std::string> out;
    auto j = nlohmann::json::parse(json, nullptr, false);
    if (j.is_object())
        for (const auto& [k, v] : j.items())
            if (v.is_string()) out[k] = v.get<std::string>();
    return out;
}

protocol::ExecRequest toAgentRequest(const ExecOptions& options,
                                     const std::map<std::string, std::string>& sandboxEnv) {
    protocol::ExecRequest r;
    r.argv =
        options.shell ? std::vector<std::string>{"/bin/sh", "-c", *options.shell} : options.argv;
    r.cwd = options.cwd;
    r.env = sandboxEnv;
    for (const auto& [k, v] : options.env) r.env[k] = v;
    r.user = options.user.empty() ? "user" : options.user;
    r.timeout_ms = std::uint64_t(options.timeoutS) * 1000;
    r.stdin_data = options.stdinData;
    r.trace = options.trace;
    return r;
}

std::string commandText(const ExecOptions& options) {
    if (options.shell) return *options.shell;
    std::string out;
    for (const auto& a : options.argv) {
        if (!out.empty()) out += ' ';
        out += a;
    }
    return out;
}

namespace {
std::string squeezeSpaces(const std::string& s) {
    std::string out;
    for (char c : s) {
        bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
        if (space) {
            if (!out.empty() && out.back() != ' ') out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}
}  // namespace

bool matchesTestCommand(const std::string& command, const std::vector<std::string>& testCommands) {
    std::string whole = squeezeSpaces(command);
    auto amp = whole.rfind("&&");
    std::string last = amp == std::string::npos ? whole : squeezeSpaces(whole.substr(amp + 2));
    for (const auto& t : testCommands) {
        std::string want = squeezeSpaces(t);
        if (!want.empty() && (want == whole || want == last)) return true;
    }
    return false;
}

}  // namespace airlock
