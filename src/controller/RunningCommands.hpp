#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace airlock {

// The commands running through exec in each sandbox, as their (masked)
// text: the package proxy's records name the one behind an install.
class RunningCommands {
  public:
    using Token = std::uint64_t;
    Token add(const std::string& sandboxId, std::string commandText);
    void remove(const std::string& sandboxId, Token token);
    // The one command running there, or "" when none or several.
    std::string sole(const std::string& sandboxId) const;

  private:
    mutable std::mutex mutex_;
    Token next_ = 0;
    std::map<std::string, std::map<Token, std::string>> bySandbox_;
};

}  // namespace airlock
