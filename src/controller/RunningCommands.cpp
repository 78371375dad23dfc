#include "controller/RunningCommands.hpp"

namespace airlock {

RunningCommands::Token RunningCommands::add(const std::string& sandboxId, std::string commandText) {
    std::lock_guard lock(mutex_);
    Token token = ++next_;
    bySandbox_[sandboxId][token] = std::move(commandText);
    return token;
}

void RunningCommands::remove(const std::string& sandboxId, Token token) {
    std::lock_guard lock(mutex_);
    auto it = bySandbox_.find(sandboxId);
    if (it == bySandbox_.end()) return;
    it->second.erase(token);
    if (it->second.empty()) bySandbox_.erase(it);
}

std::string RunningCommands::sole(const std::string& sandboxId) const {
    std::lock_guard lock(mutex_);
    auto it = bySandbox_.find(sandboxId);
    if (it == bySandbox_.end() || it->second.size() != 1) return "";
    return it->second.begin()->second;
}

}  // namespace airlock
