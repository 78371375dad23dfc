#include "protocol/Messages.hpp"

#include <nlohmann/json.hpp>

#include "protocol/JsonText.hpp"
#include "protocol/Ops.hpp"

namespace airlock::protocol {
namespace {
using nlohmann::json;

json parseObject(const std::string& payload, const char* what) {
    json j = json::parse(payload, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw MessageError{std::string(what) + ": not a JSON object"};
    return j;
}

std::string getString(const json& j, const char* key, const char* what, bool required = true) {
    auto it = j.find(key);
    if (it == j.end()) {
        if (required) throw MessageError{std::string(what) + ": missing '" + key + "'"};
        return {};
    }
    if (!it->is_string())
        throw MessageError{std::string(what) + ": '" + key + "' must be a string"};
    return it->get<std::string>();
}

std::int64_t getInt(const json& j, const char* key, const char* what, std::int64_t fallback) {
    auto it = j.find(key);
    if (it == j.end()) return fallback;
    if (!it->is_number_integer())
        throw MessageError{std::string(what) + ": '" + key + "' must be an integer"};
    return it->get<std::int64_t>();
}

}  // namespace

std::string toJson(const Hello& m) {
    return jsonText({{"version", m.version}, {"nonce", m.nonce}});
}

std::string toJson(const HelloAck& m) {
    return jsonText(
        {{"version", m.version}, {"nonce", m.nonce}, {"epoch", m.epoch}, {"agent", m.agent}});
}

std::string toJson(const ExecRequest& m) {
    json j = {{"op", std::string(opName(m.background ? Op::process_start : Op::exec))},
              {"argv", m.argv},
              {"cwd", m.cwd},
              {"env", m.env},
              {"user", m.user},
              {"timeout_ms", m.timeout_ms},
              {"stdin", m.stdin_data},
              {"stdin_stream", m.stdin_stream},
              {"tty", m.tty},
              {"rows", m.rows},
              {"cols", m.cols},
              {"output_cap", m.output_cap}};
    if (!m.trace.empty()) j["trace"] = m.trace;
    if (m.judge_lines) j["judge_lines"] = true;
    return jsonText(j);
}

bool isJudgeableShell(const std::vector<std::string>& argv) {
    if (argv.empty()) return false;
    const std::string& program = argv[0];
    if (program != "bash" && program != "/bin/bash" && program != "/usr/bin/bash") return false;
    for (std::size_t i = 1; i < argv.size(); ++i)
        if (argv[i] != "-l" && argv[i] != "--login" && argv[i] != "-i") return false;
    return true;
}

std::optional<std::string> openOp(const std::string& payload) {
    json j = json::parse(payload, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    auto it = j.find("op");
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string toJson(const ExecResult& m) {
    json j{{"exit_code", m.exit_code}, {"timed_out", m.timed_out}, {"truncated", m.truncated}};
    if (m.signal) j["signal"] = *m.signal;
    if (!m.error.empty()) j["error"] = m.error;
    return jsonText(j);
}

std::string toJson(const ResetInfo& m) {
    return jsonText({{"code", m.code}, {"message", m.message}});
}

Hello parseHello(const std::string& payload) {
    json j = parseObject(payload, "hello");
    Hello h;
    h.version = static_cast<int>(getInt(j, "version", "hello", -1));
    h.nonce = getString(j, "nonce", "hello");
    if (h.nonce.empty() || h.nonce.size() > 128) throw MessageError{"hello: bad nonce"};
    return h;
}

HelloAck parseHelloAck(const std::string& payload) {
    json j = parseObject(payload, "hello_ack");
    HelloAck h;
    h.version = static_cast<int>(getInt(j, "version", "hello_ack", -1));
    h.nonce = getString(j, "nonce", "hello_ack");
    h.epoch = static_cast<std::uint64_t>(getInt(j, "epoch", "hello_ack", 0));
    h.agent = getString(j, "agent", "hello_ack", false);
    return h;
}

ExecRequest parseExecRequest(const std::string& payload) {
    const char* what = "exec";
    json j = parseObject(payload, what);
    auto op = parseOp(getString(j, "op", what));
    if (op != Op::exec && op != Op::process_start) throw MessageError{"open: unknown op"};
    ExecRequest r;
    r.background = op == Op::process_start;
    auto argv = j.find("argv");
    if (argv == j.end() || !argv->is_array() || argv->empty())
        throw MessageError{"exec: 'argv' must be a non-empty array of strings"};
    if (argv->size() > kMaxArgv) throw MessageError{"exec: too many arguments"};
    std::size_t total = 0;
    for (const auto& a : *argv) {
        if (!a.is_string()) throw MessageError{"exec: 'argv' must hold strings"};
        r.argv.push_back(a.get<std::string>());
        total += r.argv.back().size();
    }
    if (r.argv[0].empty()) throw MessageError{"exec: empty program name"};
    r.cwd = getString(j, "cwd", what, false);
    auto env = j.find("env");
    if (env != j.end()) {
        if (!env->is_object() || env->size() > kMaxEnv)
            throw MessageError{"exec: 'env' must be an object"};
        for (const auto& [k, v] : env->items()) {
            if (!v.is_string() || k.empty() || k.find('=') != std::string::npos)
                throw MessageError{"exec: bad environment entry"};
            r.env[k] = v.get<std::string>();
            total += k.size() + r.env[k].size();
        }
    }
    if (total > kMaxArgBytes) throw MessageError{"exec: arguments and environment too large"};
    r.user = getString(j, "user", what, false);
    if (r.user.empty()) r.user = "user";
    std::int64_t t = getInt(j, "timeout_ms", what, 0);
    if (t < 0) throw MessageError{"exec: negative timeout"};
    r.timeout_ms = static_cast<std::uint64_t>(t);
    r.stdin_data = getString(j, "stdin", what, false);
    auto flag = [&](const char* key) {
        auto it = j.find(key);
        if (it == j.end()) return false;
        if (!it->is_boolean())
            throw MessageError{std::string("exec: '") + key + "' must be a boolean"};
        return it->get<bool>();
    };
    r.stdin_stream = flag("stdin_stream");
    r.tty = flag("tty");
    r.judge_lines = flag("judge_lines");
    std::int64_t rows = getInt(j, "rows", what, 24), cols = getInt(j, "cols", what, 80);
    if (rows < 1 || rows > 1000 || cols < 1 || cols > 1000)
        throw MessageError{"exec: bad terminal size"};
    r.rows = static_cast<unsigned>(rows);
    r.cols = static_cast<unsigned>(cols);
    std::int64_t cap = getInt(j, "output_cap", what, 0);
    if (cap < 0) throw MessageError{"exec: negative output_cap"};
    r.output_cap = static_cast<std::uint64_t>(cap);
    r.trace = getString(j, "trace", what, false);
    if (r.trace.size() > 64 ||
        r.trace.find_first_not_of(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") !=
            std::string::npos)
        throw MessageError{"exec: 'trace' must be at most 64 of [A-Za-z0-9_-]"};
    return r;
}

ExecResult parseExecResult(const std::string& payload) {
    json j = parseObject(payload, "exec result");
    ExecResult r;
    r.exit_code = static_cast<int>(getInt(j, "exit_code", "exec result", -1));
    auto sig = j.find("signal");
    if (sig != j.end() && sig->is_number_integer()) r.signal = sig->get<int>();
    auto to = j.find("timed_out");
    r.timed_out = to != j.end() && to->is_boolean() && to->get<bool>();
    auto tr = j.find("truncated");
    r.truncated = tr != j.end() && tr->is_boolean() && tr->get<bool>();
    r.error = getString(j, "error", "exec result", false);
    return r;
}

ResetInfo parseResetInfo(const std::string& payload) {
    // Total: a reset's payload comes from the peer, and whatever it holds the
    // stream ends anyway. Long texts are cut so a peer cannot fill logs.
    constexpr std::size_t kMaxText = 1024;
    json j = json::parse(payload, nullptr, false);
    if (!j.is_object()) return ResetInfo{"malformed", "the peer sent a malformed reset"};
    auto text = [&](const char* key) {
        auto it = j.find(key);
        if (it == j.end() || !it->is_string()) return std::string();
        std::string s = it->get<std::string>();
        if (s.size() > kMaxText) s.resize(kMaxText);
        return s;
    };
    return ResetInfo{text("code"), text("message")};
}

}  // namespace airlock::protocol
