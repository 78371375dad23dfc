#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "protocol/FileMetadata.hpp"
#include "protocol/Messages.hpp"
#include "protocol/Ops.hpp"

namespace airlock::protocol {

// One operation on a guest path (op fs), as the host asks for it.
struct FsRequest {
    enum class Action { stat, list, mkdir, remove, move };
    Action action = Action::stat;
    std::string path;        // absolute, resolved in the guest
    std::string to;          // move: the destination, absolute
    bool recursive = false;  // remove: a whole tree
    std::string user;        // whose rights it runs with; "" = the agent's default user
};
std::string actionName(FsRequest::Action action);

// A call on a background process (process_list, _get, _signal, _stdin).
struct ProcessCall {
    Op op = Op::process_list;
    std::string id;                   // get, signal, stdin: the process
    std::string signal = "TERM";      // signal
    std::optional<std::string> data;  // stdin: bytes to write
    bool eof = false;                 // stdin: close it after them
};

// The opens of the streaming ops. Paths are absolute and resolved in the
// guest; user "" is the agent's default user.
struct FileWriteRequest {  // file_write: the bytes follow on channel 0
    std::string path;
    std::optional<unsigned> mode;  // default 0644
    std::string user;
    FileMetadata metadata = {};  // the file's whole set (none: it has none)
    // Written as root and given to `user`, with the directories made for it
    // (envd's uploads: the user's file wherever it goes, as in E2B). Else
    // written as `user`, whose permissions decide.
    bool asRoot = false;
};
struct FileReadRequest {  // file_read: a regular file's bytes, then its size
    std::string path;
    std::string user;
};
struct WorkspaceScanRequest {  // workspace_scan: a tree's entries and hashes
    std::string path;
    std::vector<std::string> skip;  // relative paths left out (submodules)
    bool ignored = false;           // list the git-ignored paths too
    std::string user;
};
struct ArchiveUnpackRequest {  // archive_unpack: a tar stream into a directory
    std::string path;
    std::string user;
};
struct PortRequest {  // tunnel (to guest 127.0.0.1:port), egress_listen (on it)
    Op op = Op::tunnel;
    unsigned port = 0;
};
struct EgressAttachRequest {  // egress_attach: a connection the guest accepted
    std::uint64_t connection = 0;
};
struct ProcessLogsRequest {  // process_logs: a background process's output
    std::string id;
    bool follow = false;
};
struct FileWatchRequest {  // file_watch starts on path; file_activity drains
    Op op = Op::file_watch;
    std::string path;
    std::string mechanism;  // "" (fanotify, else inotify) or "inotify"
};
struct UsageRequest {};  // usage: no fields
struct DirWatchRequest {  // dir_watch: a directory (and below it when recursive)
    std::string path;
    bool recursive = false;
    bool networkMounts = false;  // a directory on NFS, CIFS or FUSE is refused unless
    std::string user;
};
struct ReseedRequest {    // reseed: a clone's fresh entropy and the host's clock
    std::string entropy;  // lowercase hex
    std::optional<std::uint64_t> timeNs;
};

// The open payloads, as the host sends them.
std::string toJson(const FsRequest& request);
std::string toJson(const ProcessCall& call);
std::string toJson(const FileWriteRequest& request);
std::string toJson(const FileReadRequest& request);
std::string toJson(const WorkspaceScanRequest& request);
std::string toJson(const ArchiveUnpackRequest& request);
std::string toJson(const PortRequest& request);
std::string toJson(const EgressAttachRequest& request);
std::string toJson(const ProcessLogsRequest& request);
std::string toJson(const FileWatchRequest& request);
std::string toJson(const ReseedRequest& request);
std::string toJson(const UsageRequest& request);
std::string toJson(const DirWatchRequest& request);

// Every request the host may open a stream with: the API of the agent
// connection takes nothing else in production.
using GuestRequest =
    std::variant<ExecRequest, FsRequest, ProcessCall, FileWriteRequest, FileReadRequest,
                 WorkspaceScanRequest, ArchiveUnpackRequest, PortRequest, EgressAttachRequest,
                 ProcessLogsRequest, FileWatchRequest, ReseedRequest, UsageRequest,
                 DirWatchRequest>;
std::string toJson(const GuestRequest& request);

// As the guest reads them: a field of the wrong type, or a required one
// missing, throws MessageError (the stream is reset, nothing else). Values
// are judged by the handler (a path's form, a user's existence).
FsRequest parseFsRequest(const std::string& payload);
ProcessCall parseProcessCall(Op op, const std::string& payload);  // list, get, signal, stdin
FileWriteRequest parseFileWrite(const std::string& payload);
FileReadRequest parseFileRead(const std::string& payload);
WorkspaceScanRequest parseWorkspaceScan(const std::string& payload);
ArchiveUnpackRequest parseArchiveUnpack(const std::string& payload);
PortRequest parsePortRequest(Op op, const std::string& payload);
EgressAttachRequest parseEgressAttach(const std::string& payload);
ProcessLogsRequest parseProcessLogs(const std::string& payload);
FileWatchRequest parseFileWatch(Op op, const std::string& payload);
ReseedRequest parseReseed(const std::string& payload);
DirWatchRequest parseDirWatch(const std::string& payload);

}  // namespace airlock::protocol
