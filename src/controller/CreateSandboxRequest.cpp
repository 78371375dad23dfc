#include "controller/CreateSandboxRequest.hpp"

#include "core/Error.hpp"

namespace airlock {

BootMode bootModeFrom(std::string_view name) {
    if (name == "auto") return BootMode::automatic;
    if (name == "cold") return BootMode::cold;
    if (name == "warm") return BootMode::warm;
    throw Error(ErrorCode::bad_request, "boot must be 'auto', 'cold' or 'warm'");
}

TimeoutAction timeoutActionFrom(std::string_view name) {
    if (name == "kill") return TimeoutAction::kill;
    if (name == "pause") return TimeoutAction::pause;
    if (name == "pause_disk_only") return TimeoutAction::pause_disk_only;
    throw Error(ErrorCode::bad_request, "on_timeout must be 'kill', 'pause' or 'pause_disk_only'");
}

PortAccess portAccessFrom(std::string_view name) {
    if (name == "exposed") return PortAccess::exposed;
    if (name == "public") return PortAccess::open;
    if (name == "token") return PortAccess::token;
    throw Error(ErrorCode::bad_request, "port access must be exposed, public or token");
}

std::string_view bootModeName(BootMode mode) {
    switch (mode) {
        case BootMode::automatic: return "auto";
        case BootMode::cold: return "cold";
        case BootMode::warm: return "warm";
    }
    return "auto";
}

std::string_view timeoutActionName(TimeoutAction action) {
    switch (action) {
        case TimeoutAction::kill: return "kill";
        case TimeoutAction::pause: return "pause";
        case TimeoutAction::pause_disk_only: return "pause_disk_only";
    }
    return "kill";
}

std::string_view portAccessName(PortAccess access) {
    switch (access) {
        case PortAccess::exposed: return "exposed";
        case PortAccess::open: return "public";
        case PortAccess::token: return "token";
    }
    return "exposed";
}

}  // namespace airlock

namespace airlock {

IdleAction idleActionFrom(std::string_view name) {
    if (name == "pause") return IdleAction::pause;
    if (name == "hibernate") return IdleAction::hibernate;
    throw Error(ErrorCode::bad_request, "idle action must be 'pause' or 'hibernate'");
}

std::string_view idleActionName(IdleAction action) {
    return action == IdleAction::hibernate ? "hibernate" : "pause";
}

std::string idleRuleJson(const std::optional<IdleRule>& rule) {
    if (!rule) return "";
    return nlohmann::json{{"after_s", rule->afterS}, {"action", idleActionName(rule->action)}}
        .dump();
}

std::optional<IdleRule> idleRuleFrom(const std::string& text) {
    if (text.empty()) return std::nullopt;
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    IdleRule r;
    r.afterS = j.value("after_s", std::int64_t{300});
    r.action = j.value("action", "pause") == "hibernate" ? IdleAction::hibernate : IdleAction::pause;
    return r;
}

}  // namespace airlock
