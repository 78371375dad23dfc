#pragma once
#include <sys/types.h>

#include <string>

#include "core/UniqueFd.hpp"
#include "protocol/Messages.hpp"

namespace airlock::guest {

// A started child: its own session and process group (pid == pgid), with
// either three pipes or one pseudo-terminal master (stdout carries both
// streams then, as on a real terminal).
struct Spawned {
    pid_t pid = -1;
    UniqueFd stdinFd;   // write end (the pty master when tty)
    UniqueFd stdoutFd;  // read end (the pty master, dup'ed, when tty)
    UniqueFd stderrFd;  // read end; invalid when tty
    std::string error;  // set when the command could not be started
    int exitCode = 0;   // 126/127 with error
};

// Fork + exec in the order bubblewrap uses: new session, no-new-privs,
// descriptors close-on-exec, drop privileges, exec. Never throws.
Spawned spawnProcess(const protocol::ExecRequest& request);

int signalFromName(const std::string& name);  // "TERM", "SIGKILL", "9"; 0 if unknown

}  // namespace airlock::guest
