#include "protocol/GuestCalls.hpp"

#include <nlohmann/json.hpp>

namespace airlock::protocol {
using json = nlohmann::json;

std::string actionName(FsRequest::Action action) {
    switch (action) {
        case FsRequest::Action::stat:
            return "stat";
        case FsRequest::Action::list:
            return "list";
        case FsRequest::Action::mkdir:
            return "mkdir";
        case FsRequest::Action::remove:
            return "remove";
        case FsRequest::Action::move:
            return "move";
    }
    return "stat";
}

std::string toJson(const FsRequest& r) {
    json j{{"op", "fs"}, {"action", actionName(r.action)}, {"path", r.path}};
    if (r.action == FsRequest::Action::move) j["to"] = r.to;
    if (r.action == FsRequest::Action::remove) j["recursive"] = r.recursive;
    if (!r.user.empty()) j["user"] = r.user;
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string toJson(const ProcessCall& c) {
    json j{{"op", std::string(opName(c.op))}};
    if (c.op != Op::process_list) j["id"] = c.id;
    if (c.op == Op::process_signal) j["signal"] = c.signal;
    if (c.op == Op::process_stdin) {
        if (c.data) j["data"] = *c.data;
        if (c.eof) j["eof"] = true;
    }
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace airlock::protocol
