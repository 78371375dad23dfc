#include "protocol/GuestCalls.hpp"

#include <nlohmann/json.hpp>

#include "protocol/FieldReader.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Messages.hpp"

namespace airlock::protocol {
using json = nlohmann::json;

namespace {
// Every op is named by the one table (Ops.cpp).
std::string opText(Op op) { return std::string(opName(op)); }
}  // namespace

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
    json j{{"op", opText(Op::fs)}, {"action", actionName(r.action)}, {"path", r.path}};
    if (r.action == FsRequest::Action::move) j["to"] = r.to;
    if (r.action == FsRequest::Action::remove) j["recursive"] = r.recursive;
    if (!r.user.empty()) j["user"] = r.user;
    return jsonText(j);
}

std::string toJson(const ProcessCall& c) {
    json j{{"op", opText(c.op)}};
    if (c.op != Op::process_list) j["id"] = c.id;
    if (c.op == Op::process_signal) j["signal"] = c.signal;
    if (c.op == Op::process_stdin) {
        if (c.data) j["data"] = *c.data;
        if (c.eof) j["eof"] = true;
    }
    return jsonText(j);
}

namespace {

json withUser(json j, const std::string& user) {
    if (!user.empty()) j["user"] = user;
    return j;
}

}  // namespace

std::string toJson(const FileWriteRequest& r) {
    json j{{"op", opText(Op::file_write)}, {"path", r.path}};
    if (r.mode) j["mode"] = *r.mode;
    if (!r.metadata.empty()) j["metadata"] = r.metadata;
    if (r.asRoot) j["as_root"] = true;
    return jsonText(withUser(std::move(j), r.user));
}

std::string toJson(const FileReadRequest& r) {
    json j{{"op", opText(Op::file_read)}};
    writeBytes(j, "path", r.path);  // a listed name that is not UTF-8 is read back
    return jsonText(withUser(std::move(j), r.user));
}

std::string toJson(const WorkspaceScanRequest& r) {
    return jsonText(withUser(
        {{"op", opText(Op::workspace_scan)}, {"path", r.path}, {"skip", r.skip}, {"ignored", r.ignored}},
        r.user));
}

std::string toJson(const ArchiveUnpackRequest& r) {
    return jsonText(withUser({{"op", opText(Op::archive_unpack)}, {"path", r.path}}, r.user));
}

std::string toJson(const PortRequest& r) {
    return jsonText({{"op", opText(r.op)}, {"port", r.port}});
}

std::string toJson(const EgressAttachRequest& r) {
    return jsonText({{"op", opText(Op::egress_attach)}, {"connection", r.connection}});
}

std::string toJson(const ProcessLogsRequest& r) {
    return jsonText({{"op", opText(Op::process_logs)}, {"id", r.id}, {"follow", r.follow}});
}

std::string toJson(const FileWatchRequest& r) {
    json j{{"op", opText(r.op)}};
    if (r.op == Op::file_watch) {
        j["path"] = r.path;
        if (!r.mechanism.empty()) j["mechanism"] = r.mechanism;
    }
    return jsonText(j);
}

std::string toJson(const ReseedRequest& r) {
    json j{{"op", opText(Op::reseed)}, {"entropy", r.entropy}};
    if (r.timeNs) j["time_ns"] = *r.timeNs;
    return jsonText(j);
}

std::string toJson(const DirWatchRequest& r) {
    json j{{"op", opText(Op::dir_watch)}, {"path", r.path}};
    if (r.recursive) j["recursive"] = true;
    if (r.networkMounts) j["network_mounts"] = true;
    if (!r.user.empty()) j["user"] = r.user;
    return jsonText(j);
}

std::string toJson(const UsageRequest&) { return jsonText(json{{"op", opText(Op::usage)}}); }

std::string toJson(const GuestRequest& request) {
    return std::visit([](const auto& r) { return toJson(r); }, request);
}

FileWriteRequest parseFileWrite(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::file_write));
    FileWriteRequest r{f.string("path", true), std::nullopt, f.string("user")};
    if (auto mode = f.number("mode", 07777)) r.mode = static_cast<unsigned>(*mode);
    r.metadata = f.stringMap("metadata", kMaxFileMetadataBytes / 10, kMaxFileMetadataKey,
                             kMaxFileMetadataBytes);
    if (auto problem = fileMetadataProblem(r.metadata); !problem.empty()) f.fail(problem);
    r.asRoot = f.boolean("as_root");
    return r;
}

FileReadRequest parseFileRead(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::file_read));
    return {f.bytes("path", true), f.string("user")};
}

WorkspaceScanRequest parseWorkspaceScan(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::workspace_scan));
    return {f.string("path", true), f.strings("skip", 1'000'000), f.boolean("ignored"),
            f.string("user")};
}

ArchiveUnpackRequest parseArchiveUnpack(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::archive_unpack));
    return {f.string("path", true), f.string("user")};
}

PortRequest parsePortRequest(Op op, const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(op));
    auto port = f.number("port", 65535);  // its handler judges 0
    if (!port) throw MessageError(opText(op) + ": 'port' is required");
    return {op, static_cast<unsigned>(*port)};
}

EgressAttachRequest parseEgressAttach(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::egress_attach));
    auto connection = f.number("connection", UINT64_MAX);
    if (!connection) throw MessageError("egress_attach: 'connection' is required");
    return {*connection};
}

FsRequest parseFsRequest(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::fs));
    FsRequest r;
    std::string action = f.string("action", true);
    bool known = false;
    for (auto a : {FsRequest::Action::stat, FsRequest::Action::list, FsRequest::Action::mkdir,
                   FsRequest::Action::remove, FsRequest::Action::move})
        if (actionName(a) == action) {
            r.action = a;
            known = true;
        }
    if (!known) throw MessageError("fs: unknown action '" + action.substr(0, 32) + "'");
    r.path = f.string("path", true);
    if (r.action == FsRequest::Action::move) r.to = f.string("to", true);
    r.recursive = f.boolean("recursive");
    r.user = f.string("user");
    return r;
}

ProcessCall parseProcessCall(Op op, const std::string& payload) {
    if (!isProcessCall(op) || op == Op::process_start || op == Op::process_logs)
        throw MessageError(opText(op) + ": not a process call");
    auto f = FieldReader::parse(payload, opName(op));
    ProcessCall c;
    c.op = op;
    if (op != Op::process_list) c.id = f.string("id", true);
    // An empty signal is the handler's to refuse; only an absent one is TERM.
    if (op == Op::process_signal) c.signal = f.maybeString("signal").value_or("TERM");
    if (op == Op::process_stdin) {
        c.data = f.maybeString("data");  // empty: still tells whether stdin is open
        c.eof = f.boolean("eof");
    }
    return c;
}

ProcessLogsRequest parseProcessLogs(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::process_logs));
    return {f.string("id", true), f.boolean("follow")};
}

FileWatchRequest parseFileWatch(Op op, const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(op));
    if (op != Op::file_watch) return {op, {}, {}};
    return {op, f.string("path", true), f.string("mechanism")};
}

DirWatchRequest parseDirWatch(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::dir_watch));
    return {f.string("path", true), f.boolean("recursive"), f.boolean("network_mounts"),
            f.string("user")};
}

ReseedRequest parseReseed(const std::string& payload) {
    auto f = FieldReader::parse(payload, opName(Op::reseed));
    return {f.string("entropy", true), f.number("time_ns", UINT64_MAX)};
}

}  // namespace airlock::protocol
