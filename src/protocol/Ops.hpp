#pragma once
#include <optional>
#include <string_view>

namespace airlock::protocol {

// Every operation a stream can be opened for (the "op" of an open frame):
// the closed set host and guest share. The guest dispatches on it (a switch
// the compiler holds complete); the host opens nothing outside it.
enum class Op {
    exec,            // a command, buffered or streamed (ExecRequest)
    file_read,       // a file's bytes, announced size first
    file_write,      // a file from data frames, renamed into place at the close
    fs,              // stat, list, mkdir, remove, move
    workspace_scan,  // the workspace's files and their hashes
    archive_unpack,  // a tar of the workspace unpacked in place
    tunnel,          // a TCP connection to a guest port (previews)
    egress_listen,   // a listener in the guest for the host's proxies
    egress_attach,   // one connection a listener accepted
    file_watch,      // starts watching the workspace's file activity
    file_activity,   // drains what was seen
    reseed,          // entropy and the clock after a restore
    process_start,
    process_list,
    process_get,
    process_signal,
    process_stdin,
    process_logs,
    usage,      // the guest's CPU ticks, memory and root disk, for metrics
    dir_watch,  // a directory's changes as they happen (inotify), a record per line
};

std::string_view opName(Op op);
// nullopt for a name outside the set.
std::optional<Op> parseOp(std::string_view name);
// The process operations a client may ask for by name through the API
// (logs are a stream of their own).
bool isProcessCall(Op op);

}  // namespace airlock::protocol
