#include "protocol/Ops.hpp"

#include <array>
#include <utility>

namespace airlock::protocol {
namespace {

constexpr std::array<std::pair<Op, std::string_view>, static_cast<std::size_t>(Op::dir_watch) + 1>
    kNames{{
    {Op::exec, "exec"},
    {Op::file_read, "file_read"},
    {Op::file_write, "file_write"},
    {Op::fs, "fs"},
    {Op::workspace_scan, "workspace_scan"},
    {Op::archive_unpack, "archive_unpack"},
    {Op::tunnel, "tunnel"},
    {Op::egress_listen, "egress_listen"},
    {Op::egress_attach, "egress_attach"},
    {Op::file_watch, "file_watch"},
    {Op::file_activity, "file_activity"},
    {Op::reseed, "reseed"},
    {Op::process_start, "process_start"},
    {Op::process_list, "process_list"},
    {Op::process_get, "process_get"},
    {Op::process_signal, "process_signal"},
    {Op::process_stdin, "process_stdin"},
    {Op::process_logs, "process_logs"},
    {Op::usage, "usage"},
    {Op::dir_watch, "dir_watch"},
}};

// One name per op: an entry left out would be an empty name that parses.
constexpr bool everyOpNamed() {
    for (std::size_t i = 0; i < kNames.size(); ++i)
        if (kNames[i].second.empty() || kNames[i].first != static_cast<Op>(i)) return false;
    return true;
}
static_assert(everyOpNamed(), "kNames must name every Op, in the enum's order");

}  // namespace

std::string_view opName(Op op) {
    for (const auto& [o, name] : kNames)
        if (o == op) return name;
    return "";
}

std::optional<Op> parseOp(std::string_view name) {
    for (const auto& [o, n] : kNames)
        if (n == name) return o;
    return std::nullopt;
}

bool isProcessCall(Op op) {
    return op == Op::process_start || op == Op::process_list || op == Op::process_get ||
           op == Op::process_signal || op == Op::process_stdin;
}

}  // namespace airlock::protocol
