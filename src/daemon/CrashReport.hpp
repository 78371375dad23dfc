#pragma once

namespace airlock {

// On a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) writes the
// signal and a backtrace to stderr (the daemon's log), then lets the signal
// kill the process as it would have: a crash leaves evidence, not silence.
// Call once, early in main.
void installCrashReport();

}  // namespace airlock
