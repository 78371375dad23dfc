#include <csignal>
#include <cstdio>

#include "core/Error.hpp"
#include "daemon/CrashReport.hpp"
#include "daemon/Daemon.hpp"

int main(int argc, char** argv) {
    airlock::installCrashReport();
    std::signal(SIGPIPE, SIG_IGN);
    try {
        auto options = airlock::parseDaemonOptions({argv + 1, argv + argc});
        if (options.help) {
            std::fputs(airlock::daemonUsage().c_str(), stdout);
            return 0;
        }
        return airlock::runDaemon(options);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "airlockd: %s\n%s", e.what(), airlock::daemonUsage().c_str());
        return 2;
    }
}
