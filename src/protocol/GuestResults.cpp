#include "protocol/GuestResults.hpp"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "protocol/FieldReader.hpp"
#include "protocol/Messages.hpp"

namespace airlock::protocol {
using json = nlohmann::json;

namespace {

bool isMode(const std::string& mode) {
    return mode.size() == 4 && mode.find_first_not_of("01234567") == std::string::npos;
}

// "%Y-%m-%dT%H:%M:%SZ" and nothing else: no room for any other text (a
// secret the guest would echo through a field nobody masks).
std::string timestamp(const FieldReader& f, const char* key) {
    constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:ddZ";
    std::string t = f.string(key, true, kShape.size());
    bool ok = t.size() == kShape.size();
    for (std::size_t i = 0; ok && i < t.size(); ++i)
        ok = kShape[i] == 'd' ? t[i] >= '0' && t[i] <= '9' : t[i] == kShape[i];
    if (!ok) f.fail(std::string("'") + key + "' must be a UTC time (YYYY-MM-DDTHH:MM:SSZ)");
    return t;
}

FileEntry::Type parseType(const FieldReader& f, const char* key) {
    std::string type = f.string(key, true);
    for (auto t : {FileEntry::Type::file, FileEntry::Type::directory, FileEntry::Type::symlink,
                   FileEntry::Type::other})
        if (typeName(t) == type) return t;
    f.fail(std::string("'") + key + "' must be file, directory, symlink or other");
}

FileEntry readEntry(const FieldReader& f) {
    FileEntry e;
    e.name = f.bytes("name", true, kMaxGuestName);
    e.path = f.bytes("path", true, kMaxGuestPath);
    if (e.name.empty()) f.fail("'name' must not be empty");
    if (e.path.empty() || e.path[0] != '/') f.fail("'path' must be absolute");
    e.type = parseType(f, "type");
    e.size = f.requiredNumber("size", INT64_MAX);
    e.mode = f.string("mode", true);
    if (!isMode(e.mode)) f.fail("'mode' must be four octal digits");
    e.mtime = timestamp(f, "mtime");
    e.uid = static_cast<std::uint32_t>(f.requiredNumber("uid", UINT32_MAX));
    e.gid = static_cast<std::uint32_t>(f.requiredNumber("gid", UINT32_MAX));
    if (auto target = f.bytes("target", false, kMaxGuestPath); !target.empty()) {
        if (e.type != FileEntry::Type::symlink) f.fail("only a symlink has a 'target'");
        if (target[0] != '/') f.fail("'target' must be absolute");
        e.target = std::move(target);
        e.targetType = parseType(f, "target_type");
        if (e.targetType == FileEntry::Type::symlink)
            f.fail("'target_type' is the resolved target's, never a symlink");
        e.targetMode = f.string("target_mode", true);
        if (!isMode(e.targetMode)) f.fail("'target_mode' must be four octal digits");
    }
    e.metadata = f.stringMap("metadata", kMaxFileMetadataBytes / 10, kMaxFileMetadataKey,
                             kMaxFileMetadataBytes);
    if (auto problem = fileMetadataProblem(e.metadata); !problem.empty()) f.fail(problem);
    return e;
}

ProcessInfo readProcess(const FieldReader& f) {
    ProcessInfo p;
    p.pid = static_cast<std::uint32_t>(f.requiredNumber("pid", kMaxGuestPid - 1));
    if (p.pid == 0 || f.string("id", true) != std::to_string(p.pid))
        f.fail("'id' must be the process's pid in decimal");
    p.cmd = f.strings("cmd", kMaxArgv, kMaxArgBytes);
    std::string state = f.string("state", true);
    if (state != "running" && state != "exited") f.fail("'state' must be running or exited");
    p.running = state == "running";
    p.startedAt = timestamp(f, "started_at");
    p.outputBytes = f.requiredNumber("output_bytes", INT64_MAX);
    if (!p.running) {
        if (auto code = f.integer("exit_code", INT32_MIN, INT32_MAX))
            p.exitCode = static_cast<int>(*code);
        if (auto sig = f.integer("signal", 1, 128)) p.signal = static_cast<int>(*sig);
    }
    return p;
}

PathActivity readPathActivity(const FieldReader& p) {
    PathActivity a;
    a.path = p.string("path", true, kMaxGuestPath);
    if (a.path.empty() || a.path[0] == '/' || a.path.find('\0') != std::string::npos)
        p.fail("'path' must be relative to the watched directory");
    a.reads = p.requiredNumber("reads", INT64_MAX);
    a.writes = p.requiredNumber("writes", INT64_MAX);
    a.firstMs = static_cast<std::int64_t>(p.requiredNumber("first_ms", INT64_MAX));
    a.lastMs = static_cast<std::int64_t>(p.requiredNumber("last_ms", INT64_MAX));
    if (a.writes > 0) {
        a.firstWriteMs = static_cast<std::int64_t>(p.requiredNumber("first_write_ms", INT64_MAX));
        a.lastWriteMs = static_cast<std::int64_t>(p.requiredNumber("last_write_ms", INT64_MAX));
        a.lastWriter = p.string("last_writer", false, kMaxTraceBytes);
    }
    a.execs = p.strings("execs", kMaxActivityExecs, kMaxTraceBytes);
    return a;
}

}  // namespace

std::string typeName(FileEntry::Type type) {
    switch (type) {
        case FileEntry::Type::file:
            return "file";
        case FileEntry::Type::directory:
            return "directory";
        case FileEntry::Type::symlink:
            return "symlink";
        case FileEntry::Type::other:
            return "other";
    }
    return "other";
}

json toJsonValue(const FileEntry& e) {
    json j{{"type", typeName(e.type)}, {"size", e.size}, {"mode", e.mode},
           {"mtime", e.mtime},         {"uid", e.uid},   {"gid", e.gid}};
    writeBytes(j, "name", e.name);
    writeBytes(j, "path", e.path);
    if (e.target) {
        writeBytes(j, "target", *e.target);
        j["target_type"] = typeName(e.targetType);
        j["target_mode"] = e.targetMode;
    }
    if (!e.metadata.empty()) j["metadata"] = e.metadata;
    return j;
}

json toJsonValue(const FsResult& r) {
    if (r.removed) return {{"removed", *r.removed}};
    json j = r.entry ? toJsonValue(*r.entry) : json::object();
    if (r.entries) {
        json entries = json::array();
        for (const auto& e : *r.entries) entries.push_back(toJsonValue(e));
        j["entries"] = std::move(entries);
    }
    if (r.truncated) j["truncated"] = true;
    return j;
}

json toJsonValue(const WrittenFile& w) {
    if (w.entry) return toJsonValue(*w.entry);
    return {{"path", w.path}, {"size", w.size}};
}

json toJsonValue(const ProcessInfo& p) {
    json j{{"id", std::to_string(p.pid)},
           {"pid", p.pid},
           {"cmd", p.cmd},
           {"state", p.running ? "running" : "exited"},
           {"started_at", p.startedAt},
           {"output_bytes", p.outputBytes}};
    if (!p.running) {
        if (p.exitCode) j["exit_code"] = *p.exitCode;
        if (p.signal) j["signal"] = *p.signal;
    }
    return j;
}

json toJsonValue(const ProcessList& list) {
    json processes = json::array();
    for (const auto& p : list.processes) processes.push_back(toJsonValue(p));
    return {{"processes", std::move(processes)}};
}

json toJsonValue(const FileSize& size) { return {{"size", size.size}}; }

json toJsonValue(const ExecStarted& started) { return {{"pid", started.pid}}; }

json toJsonValue(const FileActivityReport& r) {
    if (!r.watching) return {{"watching", false}};
    json paths = json::array();
    for (const auto& p : r.paths) {
        json j{{"path", p.path},        {"reads", p.reads},    {"writes", p.writes},
               {"first_ms", p.firstMs}, {"last_ms", p.lastMs}, {"execs", p.execs}};
        if (p.writes > 0) {
            j["first_write_ms"] = p.firstWriteMs;
            j["last_write_ms"] = p.lastWriteMs;
            j["last_writer"] = p.lastWriter;
        }
        paths.push_back(std::move(j));
    }
    return {{"watching", true},          {"root", r.root},
            {"mechanism", r.mechanism},  {"now_ms", r.nowMs},
            {"paths", std::move(paths)}, {"dropped", r.dropped},
            {"overflow", r.overflow}};
}

FileEntry parseFileEntry(const json& answer) {
    return readEntry(FieldReader(answer, "file entry"));
}

FsResult parseFsResult(FsRequest::Action action, const json& answer) {
    FieldReader f(answer, "fs result");
    FsResult r;
    if (action == FsRequest::Action::remove) {
        r.removed = f.string("removed", true, kMaxGuestPath);
        return r;
    }
    r.entry = readEntry(f);
    if (action == FsRequest::Action::list) {
        if (auto entries = f.objects("entries", kMaxListEntries)) {
            if (r.entry->type != FileEntry::Type::directory) f.fail("only a directory has entries");
            r.entries.emplace();
            r.entries->reserve(entries->size());
            for (const auto& e : *entries) r.entries->push_back(readEntry(e));
        }
        r.truncated = f.boolean("truncated");
    }
    return r;
}

WrittenFile parseWrittenFile(const std::string& payload) {
    auto f = FieldReader::parse(payload, "file_write result");
    WrittenFile w;
    if (f.has("type")) {
        w.entry = readEntry(f);
        w.path = w.entry->path;
        w.size = w.entry->size;
        return w;
    }
    w.path = f.string("path", true, kMaxGuestPath);
    w.size = f.requiredNumber("size", INT64_MAX);
    return w;
}

FileSize parseFileSize(const std::string& payload) {
    return {FieldReader::parse(payload, "file size").requiredNumber("size", INT64_MAX)};
}

ExecStarted parseExecStarted(const std::string& payload) {
    auto f = FieldReader::parse(payload, "exec start");
    auto pid = f.requiredNumber("pid", kMaxGuestPid - 1);
    if (pid == 0) f.fail("'pid' must not be 0");
    return {static_cast<std::uint32_t>(pid)};
}

ProcessInfo parseProcessInfo(const json& answer) {
    return readProcess(FieldReader(answer, "process"));
}

ProcessList parseProcessList(const json& answer) {
    FieldReader f(answer, "process list");
    auto processes = f.objects("processes", kMaxGuestProcesses);
    if (!processes) f.fail("'processes' is required");
    ProcessList list;
    list.processes.reserve(processes->size());
    for (const auto& p : *processes) list.processes.push_back(readProcess(p));
    return list;
}

std::string watchKindName(WatchRecord::Kind kind) {
    switch (kind) {
        case WatchRecord::Kind::started:
            return "started";
        case WatchRecord::Kind::create:
            return "create";
        case WatchRecord::Kind::write:
            return "write";
        case WatchRecord::Kind::remove:
            return "remove";
        case WatchRecord::Kind::rename:
            return "rename";
        case WatchRecord::Kind::chmod:
            return "chmod";
    }
    return "started";
}

json toJsonValue(const WatchRecord& r) {
    json j{{"kind", watchKindName(r.kind)}};
    if (r.kind != WatchRecord::Kind::started) writeBytes(j, "name", r.name);
    if (r.entry) j["entry"] = toJsonValue(*r.entry);
    return j;
}

WatchRecord parseWatchRecord(std::string_view line) {
    if (line.size() > kMaxWatchLine) throw MessageError("a watch record is too long");
    json j = json::parse(line, nullptr, false);
    FieldReader f(j, "watch record");
    WatchRecord r;
    std::string kind = f.string("kind", true);
    bool known = false;
    for (auto k : {WatchRecord::Kind::started, WatchRecord::Kind::create, WatchRecord::Kind::write,
                   WatchRecord::Kind::remove, WatchRecord::Kind::rename, WatchRecord::Kind::chmod})
        if (watchKindName(k) == kind) r.kind = k, known = true;
    if (!known) f.fail("'kind' is not a watch record's");
    if (r.kind == WatchRecord::Kind::started) return r;
    r.name = f.bytes("name", true, kMaxGuestPath);
    if (r.name.empty() || r.name[0] == '/') f.fail("'name' must be relative and not empty");
    if (f.has("entry")) {
        if (r.kind == WatchRecord::Kind::remove || r.kind == WatchRecord::Kind::rename)
            f.fail("a removed or renamed path has no entry");
        r.entry = readEntry(FieldReader(j.at("entry"), "watch entry"));
    }
    return r;
}

json toJsonValue(const GuestUsage& u) {
    return json{{"cpu_count", u.cpuCount},       {"cpu_ticks", u.cpuTicks},
                {"idle_ticks", u.idleTicks},     {"mem_total", u.memTotal},
                {"mem_available", u.memAvailable}, {"mem_cached", u.memCached},
                {"disk_total", u.diskTotal},     {"disk_available", u.diskAvailable},
                {"now_ms", static_cast<std::uint64_t>(std::max<std::int64_t>(u.nowMs, 0))}};
}

GuestUsage parseGuestUsage(const json& answer) {
    FieldReader f(answer, "usage");
    GuestUsage u;
    u.cpuCount = static_cast<std::uint32_t>(f.requiredNumber("cpu_count", 4096));
    u.cpuTicks = f.requiredNumber("cpu_ticks", INT64_MAX);
    u.idleTicks = f.requiredNumber("idle_ticks", INT64_MAX);
    u.memTotal = f.requiredNumber("mem_total", INT64_MAX);
    u.memAvailable = f.requiredNumber("mem_available", INT64_MAX);
    u.memCached = f.requiredNumber("mem_cached", INT64_MAX);
    u.diskTotal = f.requiredNumber("disk_total", INT64_MAX);
    u.diskAvailable = f.requiredNumber("disk_available", INT64_MAX);
    u.nowMs = static_cast<std::int64_t>(f.requiredNumber("now_ms", INT64_MAX));
    if (u.cpuCount == 0) f.fail("'cpu_count' must be at least 1");
    if (u.idleTicks > u.cpuTicks) f.fail("'idle_ticks' must not exceed 'cpu_ticks'");
    if (u.memAvailable > u.memTotal || u.memCached > u.memTotal)
        f.fail("memory figures must not exceed 'mem_total'");
    if (u.diskAvailable > u.diskTotal) f.fail("'disk_available' must not exceed 'disk_total'");
    return u;
}

FileActivityReport parseFileActivity(const json& answer) {
    FieldReader f(answer, "file activity");
    FileActivityReport r;
    r.watching = f.boolean("watching");
    if (!r.watching) return r;
    r.root = f.string("root", true, kMaxGuestPath);
    if (r.root.empty() || r.root[0] != '/') f.fail("'root' must be absolute");
    r.mechanism = f.string("mechanism", true);
    if (r.mechanism != "fanotify" && r.mechanism != "inotify")
        f.fail("'mechanism' must be fanotify or inotify");
    r.nowMs = static_cast<std::int64_t>(f.requiredNumber("now_ms", INT64_MAX));
    r.dropped = f.number("dropped", INT64_MAX).value_or(0);
    r.overflow = f.boolean("overflow");
    auto paths = f.objects("paths", kMaxActivityPaths);
    if (!paths) f.fail("'paths' is required");
    r.paths.reserve(paths->size());
    for (const auto& p : *paths) {
        try {
            r.paths.push_back(readPathActivity(p));
        } catch (const MessageError&) {
            if (r.dropped < INT64_MAX) ++r.dropped;
        }
    }
    return r;
}

}  // namespace airlock::protocol
