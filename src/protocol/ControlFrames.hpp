#pragma once
#include <cstdint>
#include <string>
#include <variant>

#include "protocol/GuestResults.hpp"

namespace airlock::protocol {

// Every control message a stream carries beside its bytes, guest to host
// and host to guest: one struct each, written and read here by both sides
// (the agent and airlockd), every field's type and bound checked on read.
// On the wire each is a small JSON object named by its one key.

// process_logs: the agent's output ring overran; what follows on `channel`
// may begin in the middle of a secret.     {"skipped": n, "channel": c}
struct OutputSkipped {
    std::uint64_t bytes = 0;
    std::uint8_t channel = 1;
};
// workspace_scan: the manifest's size before its bytes.   {"bytes": n}
struct ManifestSize {
    std::uint64_t bytes = 0;
};
// egress_listen: the guest listens (its port), a client connected (how many so far).
struct ListenerReady {  // {"listening": port}
    std::uint16_t port = 0;
};
struct ListenerAccepted {  // {"accepted": n}
    std::uint64_t connections = 0;
};
// A tunnel's guest end: its destination answered; its client shut down its
// sending side.   {"connected": true}, {"eof": true}
struct TunnelConnected {};
struct TunnelEof {};
// Host to guest, on an exec or process stream: a signal by name, a pty's size.
struct SignalRequest {  // {"signal": "TERM"}
    std::string signal;
};
struct ResizeRequest {  // {"resize": {"rows": r, "cols": c}}
    unsigned rows = 24, cols = 80;
};
// A judged terminal (ExecRequest.judge_lines): the guest's shell is about to
// run a line; it waits for the host's verdict.   {"judge": {"id": n, "line": "..."}}
struct LineToJudge {
    std::uint32_t id = 0;
    std::string line;
};
// Host to guest: what the policy said of that line. "pending" (held for an
// approval) comes before the final "allow" or "deny".
// {"verdict": {"id": n, "state": "allow"|"deny"|"pending", "message": "..."}}
struct LineVerdict {
    std::uint32_t id = 0;
    std::string state;
    std::string message;
};

// The closed set (ExecStarted {"pid"} and FileSize {"size"} are
// GuestResults'): a new control message is a new alternative here.
using ControlFrame = std::variant<ExecStarted, FileSize, OutputSkipped, ManifestSize,
                                  ListenerReady, ListenerAccepted, TunnelConnected, TunnelEof,
                                  SignalRequest, ResizeRequest, LineToJudge, LineVerdict>;

inline constexpr std::size_t kMaxSignalName = 16;
// A longer line is refused by the guest without asking (a pasted script is
// judged as what it is: too long to read in an approval).
inline constexpr std::size_t kMaxJudgedLine = 4096;
inline constexpr std::size_t kMaxVerdictMessage = 1024;
inline constexpr unsigned kMaxPtySide = 4096;

// The payload of a control frame.
std::string controlPayload(const ControlFrame& frame);
// MessageError for a payload that is not exactly one of them (an unknown or
// extra key, a field of the wrong type or out of bounds).
ControlFrame parseControl(const std::string& payload);

}  // namespace airlock::protocol
