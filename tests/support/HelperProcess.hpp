#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace airlock::test {

// A fixture's helper process (a git server, a package registry, a web
// server): started from argv (PATH searched), SIGTERMed and reaped by the
// destructor, by its own pid. Movable, not copyable.
class HelperProcess {
  public:
    HelperProcess() = default;
    // Throws std::runtime_error when it cannot start.
    explicit HelperProcess(const std::vector<std::string>& argv);
    ~HelperProcess() { stop(); }
    HelperProcess(HelperProcess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }
    HelperProcess& operator=(HelperProcess&& other) noexcept;
    HelperProcess(const HelperProcess&) = delete;
    HelperProcess& operator=(const HelperProcess&) = delete;

    pid_t pid() const { return pid_; }
    void stop();

  private:
    pid_t pid_ = -1;
};

}  // namespace airlock::test
