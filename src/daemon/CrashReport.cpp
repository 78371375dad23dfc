#include "daemon/CrashReport.hpp"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace airlock {
namespace {

// Only async-signal-safe calls in the handler: write(2) and
// backtrace_symbols_fd (which does not allocate once backtrace has run once).
void writeText(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

void onFatalSignal(int sig) {
    writeText("airlockd: fatal signal ");
    char digits[4] = {static_cast<char>('0' + sig / 10 % 10), static_cast<char>('0' + sig % 10),
                      '\n', 0};
    writeText(sig >= 10 ? digits : digits + 1);
    void* frames[64];
    int n = ::backtrace(frames, 64);
    ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
    // SA_RESETHAND restored the default action: dying by the same signal keeps
    // the exit status (and a core dump, where enabled) what it would have been.
    ::raise(sig);
}

}  // namespace

void installCrashReport() {
#if defined(__SANITIZE_ADDRESS__)
    return;  // the sanitizer's own report is better, and its handler is already installed
#endif
    // backtrace loads libgcc on its first call, which may allocate: do it now.
    void* warm[1];
    (void)::backtrace(warm, 1);
    // A stack overflow has no stack left to run the handler on.
    static char altStack[64 * 1024];
    stack_t ss{};
    ss.ss_sp = altStack;
    ss.ss_size = sizeof altStack;
    ::sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_handler = onFatalSignal;
    sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
}

}  // namespace airlock
