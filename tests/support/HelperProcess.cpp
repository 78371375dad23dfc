#include "support/HelperProcess.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <stdexcept>

extern char** environ;

namespace airlock::test {

HelperProcess::HelperProcess(const std::vector<std::string>& argv) {
    if (argv.empty()) throw std::runtime_error("a helper process needs a command");
    std::vector<std::string> args = argv;
    std::vector<char*> raw;
    for (auto& a : args) raw.push_back(a.data());
    raw.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawnp(&pid, raw[0], nullptr, nullptr, raw.data(), environ) != 0)
        throw std::runtime_error("cannot start " + argv[0]);
    pid_ = pid;
}

HelperProcess& HelperProcess::operator=(HelperProcess&& other) noexcept {
    if (this != &other) {
        stop();
        pid_ = other.pid_;
        other.pid_ = -1;
    }
    return *this;
}

void HelperProcess::stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

}  // namespace airlock::test
