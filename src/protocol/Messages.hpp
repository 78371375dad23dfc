#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace airlock::protocol {

inline constexpr int kProtocolVersion = 1;
inline constexpr const char* kAgentPortName = "org.airlock.agent.0";

// Thrown by the parse functions: the message is malformed. The receiver
// answers with a reset of that stream; it never crashes.
struct MessageError : std::runtime_error {
    explicit MessageError(const std::string& what) : std::runtime_error(what), message(what) {}
    std::string message;
};

struct Hello {
    int version = kProtocolVersion;
    std::string nonce;
};

struct HelloAck {
    int version = kProtocolVersion;
    std::string nonce;
    std::uint64_t epoch = 0;  // how many host sessions this agent process has seen
    std::string agent;        // agent name and version
};

// Upper bounds the agent enforces whatever the host asks for.
inline constexpr std::size_t kMaxArgv = 4096;
inline constexpr std::size_t kMaxArgBytes = 128 * 1024;
inline constexpr std::size_t kMaxEnv = 1024;

struct ExecRequest {
    std::vector<std::string> argv;
    std::string cwd;  // empty: the user's home
    std::map<std::string, std::string> env;
    std::string user = "user";     // "user" (uid 1000) or "root"
    std::uint64_t timeout_ms = 0;  // 0: none
    std::string stdin_data;
    bool stdin_stream = false;  // stdin arrives as data frames (channel 0) until a close
    bool tty = false;           // run on a pseudo-terminal (stdout carries both streams)
    unsigned rows = 24, cols = 80;
    std::uint64_t output_cap =
        0;                    // per channel; beyond it output is drained and dropped (0: no cap)
    bool background = false;  // op "process_start": outlives the stream and the host session
    // The host's name for this command (its exec id): the guest tags the
    // file activity of the command's session with it. At most 64 of [A-Za-z0-9_-].
    std::string trace;
    // Set by the host, never by a client: an interactive bash on a tty asks
    // the host's command policy about each line before it runs it.
    bool judge_lines = false;
};

// Whether a terminal's command is a shell whose lines can be judged one by
// one: bash, interactive, with no arguments but -l, --login or -i (host and
// guest ask the same question).
bool isJudgeableShell(const std::vector<std::string>& argv);

struct ExecResult {
    int exit_code = -1;
    bool truncated = false;
    std::optional<int> signal;  // set when the process was killed by a signal
    bool timed_out = false;
    std::string error;  // non-empty when the command could not be started
};

struct ResetInfo {
    std::string code;
    std::string message;
};

std::string toJson(const Hello& m);
std::string toJson(const HelloAck& m);
std::string toJson(const ExecRequest& m);
std::string toJson(const ExecResult& m);
std::string toJson(const ResetInfo& m);
// The "op" of an open frame's payload: "" when it names none, nullopt when
// the payload is not a JSON object (one parse: the agent's first look).
std::optional<std::string> openOp(const std::string& payload);

Hello parseHello(const std::string& payload);
HelloAck parseHelloAck(const std::string& payload);
ExecRequest parseExecRequest(const std::string& payload);
ExecResult parseExecResult(const std::string& payload);
// Never throws: a malformed payload gives code "malformed".
ResetInfo parseResetInfo(const std::string& payload);

}  // namespace airlock::protocol
