#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "protocol/FileMetadata.hpp"
#include "protocol/GuestCalls.hpp"

namespace airlock::protocol {

// The guest's answers, one struct per result. The guest builds them and
// sends toJson(); the host reads them with the parse functions. On the host
// every field is the word of root in the guest: each parse checks every
// field's type and bounds and throws MessageError on anything else (the host
// answers 502; no shape the API does not describe reaches a client). Fields
// a parse does not know are dropped.

inline constexpr std::size_t kMaxGuestPath = 4096;
inline constexpr std::size_t kMaxGuestName = 255;      // a Linux file name
inline constexpr std::size_t kMaxListEntries = 10000;  // one fs list
inline constexpr std::size_t kMaxGuestProcesses = 1024;
inline constexpr std::uint32_t kMaxGuestPid = 1u << 22;  // Linux's PID_MAX_LIMIT: pids are below

// One path as lstat saw it (fs stat, list, mkdir, move; file_write).
struct FileEntry {
    enum class Type { file, directory, symlink, other };
    std::string name;  // the last component ("/" for the root)
    std::string path;
    Type type = Type::other;
    std::uint64_t size = 0;
    std::string mode;   // four octal digits, "0644"
    std::string mtime;  // UTC, "%Y-%m-%dT%H:%M:%SZ" exactly
    std::uint32_t uid = 0, gid = 0;
    // A symlink's target, every link on the way resolved (absolute), and
    // the target's type and mode; none for a link that leads nowhere (a
    // missing target, a loop). The fields above are the link's own.
    std::optional<std::string> target = std::nullopt;
    Type targetType = Type::other;
    std::string targetMode = {};
    // Its user metadata (FileMetadata.hpp), as the guest read it back.
    FileMetadata metadata = {};
};
std::string typeName(FileEntry::Type type);

// op fs: stat, mkdir and move answer the entry; list the entry and, for a
// directory, its entries (sorted, at most kMaxListEntries: truncated
// beyond); remove the removed path.
struct FsResult {
    std::optional<FileEntry> entry;
    std::optional<std::vector<FileEntry>> entries;
    bool truncated = false;
    std::optional<std::string> removed;
};

// file_write's close: the written file's entry, or only its path and size
// when the guest could not stat it afterwards.
struct WrittenFile {
    std::string path;  // as the guest resolved it
    std::uint64_t size = 0;
    std::optional<FileEntry> entry;
};

// file_read's control frame before the bytes (and its close after them).
struct FileSize {
    std::uint64_t size = 0;
};

// exec's and process_start's control frame once the command runs.
struct ExecStarted {
    std::uint32_t pid = 0;
};

// A background process (process_start, _get, _signal, _stdin; process_logs' close).
struct ProcessInfo {
    std::uint32_t pid = 0;  // its id is the pid in decimal
    std::vector<std::string> cmd;
    bool running = true;
    std::string startedAt;  // UTC, "%Y-%m-%dT%H:%M:%SZ" exactly
    std::uint64_t outputBytes = 0;
    std::optional<int> exitCode;  // exited
    std::optional<int> signal;    // exited by a signal
};

// process_list.
struct ProcessList {
    std::vector<ProcessInfo> processes;
};

// file_watch's answer and file_activity's: what the guest's processes read
// and wrote under the watched directory since the last drain. Times are the
// guest's wall clock in Unix ms, with its "now" beside them: the host moves
// them onto its own clock (a restored guest's may lag).
inline constexpr std::size_t kMaxActivityPaths = 4096;  // the agent keeps no more per drain
inline constexpr std::size_t kMaxActivityExecs = 8;     // command traces per path
inline constexpr std::size_t kMaxTraceBytes = 64;
struct PathActivity {
    std::string path;  // relative to the watched directory
    std::uint64_t reads = 0, writes = 0;
    std::int64_t firstMs = 0, lastMs = 0;
    std::int64_t firstWriteMs = 0, lastWriteMs = 0;  // 0: never written
    std::vector<std::string> execs;                  // the traces of the commands seen
    // The trace of the command whose write came last ("" when that write was
    // in no command): whose the file's content is, whatever came before.
    std::string lastWriter;
};
struct FileActivityReport {
    bool watching = false;  // nothing else is sent when not
    std::string root;
    std::string mechanism;  // "fanotify" or "inotify"
    std::int64_t nowMs = 0;
    std::vector<PathActivity> paths;
    std::uint64_t dropped = 0;  // paths past the agent's bound
    bool overflow = false;      // the kernel's queue overflowed
};

// dir_watch's data: one record per line. The first says the watch is in
// place; then a change each, named relative to the watched directory, with
// the entry as it is after a create, write or chmod (when it still exists).
inline constexpr std::size_t kMaxWatchLine = 16 * 1024;
struct WatchRecord {
    enum class Kind { started, create, write, remove, rename, chmod };
    Kind kind = Kind::started;
    std::string name;
    std::optional<FileEntry> entry;
};
std::string watchKindName(WatchRecord::Kind kind);
nlohmann::json toJsonValue(const WatchRecord& record);
// One line; Error-free: MessageError for anything malformed.
WatchRecord parseWatchRecord(std::string_view line);

// usage: what the guest's kernel counts, raw (the host makes rates of them).
struct GuestUsage {
    std::uint32_t cpuCount = 0;
    std::uint64_t cpuTicks = 0, idleTicks = 0;  // /proc/stat's cpu line: all, idle + iowait
    std::uint64_t memTotal = 0, memAvailable = 0, memCached = 0;  // bytes
    std::uint64_t diskTotal = 0, diskAvailable = 0;               // the root filesystem, bytes
    std::int64_t nowMs = 0;                                       // the guest's clock
};

nlohmann::json toJsonValue(const FileEntry& entry);
nlohmann::json toJsonValue(const FsResult& result);
nlohmann::json toJsonValue(const WrittenFile& written);
nlohmann::json toJsonValue(const ProcessInfo& process);
nlohmann::json toJsonValue(const ProcessList& list);
nlohmann::json toJsonValue(const FileSize& size);
nlohmann::json toJsonValue(const ExecStarted& started);
nlohmann::json toJsonValue(const FileActivityReport& report);
nlohmann::json toJsonValue(const GuestUsage& usage);

// What one action of op fs answers: a remove its path, anything else an
// entry (a list's entries only for a list).
FsResult parseFsResult(FsRequest::Action action, const nlohmann::json& answer);
FileEntry parseFileEntry(const nlohmann::json& answer);
WrittenFile parseWrittenFile(const std::string& payload);
FileSize parseFileSize(const std::string& payload);
ExecStarted parseExecStarted(const std::string& payload);
ProcessInfo parseProcessInfo(const nlohmann::json& answer);
ProcessList parseProcessList(const nlohmann::json& answer);
// A path entry with a bad field (a path too long once on the wire, say: a
// name that is not UTF-8 grows there) is skipped and counted in `dropped`,
// so one odd file name cannot empty a drain; anything else malformed
// (an entry that is no object included) throws.
FileActivityReport parseFileActivity(const nlohmann::json& answer);
// Figures that cannot be (idle above all, available above total, no CPU) throw.
GuestUsage parseGuestUsage(const nlohmann::json& answer);

}  // namespace airlock::protocol
