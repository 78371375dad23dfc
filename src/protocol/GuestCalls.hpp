#pragma once
#include <optional>
#include <string>

#include "protocol/Ops.hpp"

namespace airlock::protocol {

// One operation on a guest path (op fs), as the host asks for it.
struct FsRequest {
    enum class Action { stat, list, mkdir, remove, move };
    Action action = Action::stat;
    std::string path;        // absolute, resolved in the guest
    std::string to;          // move: the destination, absolute
    bool recursive = false;  // remove: a whole tree
    std::string user;        // whose rights it runs with; "" = the agent's default user
};
std::string actionName(FsRequest::Action action);

// A call on a background process (process_list, _get, _signal, _stdin).
struct ProcessCall {
    Op op = Op::process_list;
    std::string id;                   // get, signal, stdin: the process
    std::string signal = "TERM";      // signal
    std::optional<std::string> data;  // stdin: bytes to write
    bool eof = false;                 // stdin: close it after them
};

// The open payloads; the guest reads the same fields.
std::string toJson(const FsRequest& request);
std::string toJson(const ProcessCall& call);

}  // namespace airlock::protocol
