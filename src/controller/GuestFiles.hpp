#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agentclient/AgentStream.hpp"
#include "controller/SandboxAccess.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock {

// A sandbox's files as the API and the workspace see them: uploads and
// downloads streamed through the agent, one-shot operations (stat, list,
// mkdir, remove, move), and the guest's file activity under a directory.
// Paths are checked here for shape and against the write scope, and
// resolved in the guest; every change is audited; every answer the guest
// wrote is masked. It holds no state of its own (no lock): the sandbox's
// record, session and scope come from SandboxAccess on each call.
class GuestFiles {
  public:
    explicit GuestFiles(SandboxAccess& sandboxes) : sandboxes_(sandboxes) {}

    // user: whose file-system identity reads or writes ("": the default user).
    std::shared_ptr<AgentStream> openUpload(const std::string& tenant, const std::string& id,
                                            const std::string& path, std::optional<unsigned> mode,
                                            AgentStream::Handler handler = nullptr,
                                            const std::string& user = "",
                                            const protocol::FileMetadata& metadata = {},
                                            bool asRoot = false);
    std::shared_ptr<AgentStream> openDownload(const std::string& tenant, const std::string& id,
                                              const std::string& path, AgentStream::Handler handler,
                                              const std::string& user = "");
    // A directory's changes as the guest reports them (op dir_watch), record
    // by record, masked: `record` gets each with a hold whose release gives
    // its bytes back to the guest's window (a reader that stops stops the
    // guest's watch, which ends when its own bound is passed); `ended` once,
    // with the error when the guest refused or broke the stream. Both run on
    // the agent connection's thread.
    struct WatchHandlers {
        std::function<void(protocol::WatchRecord record, std::shared_ptr<void> hold)> record;
        std::function<void(std::optional<Error> error)> ended;
    };
    std::shared_ptr<AgentStream> openWatch(const std::string& tenant, const std::string& id,
                                           const protocol::DirWatchRequest& request,
                                           WatchHandlers handlers);
    // One operation on a guest path; the guest's answer, masked. Changes are
    // checked against the write scope and audited.
    protocol::FsResult fileOp(const std::string& tenant, const std::string& id,
                              const protocol::FsRequest& request);
    // An upload's confirmation as the guest wrote it, masked like every
    // guest answer (its entry's name, path, target and metadata).
    protocol::WrittenFile maskedWrite(const std::string& tenant, const std::string& id,
                                      protocol::WrittenFile written);
    // Audit of a file the API wrote into the guest (what the upload carried).
    void recordFileWrite(const std::string& tenant, const std::string& id,
                         const std::string& requestedPath, const std::string& writtenPath,
                         std::uint64_t bytes, const std::string& sha256);

    // File activity of the guest's processes under a directory (the
    // workspace): watchFiles starts it (false, audited, when the guest
    // cannot); drainFileActivity moves what the guest gathered since the last
    // drain into "file.activity" records (nothing when not running). Every
    // path in a drain is guest-written: checked for shape, capped and masked,
    // and a bad drain never fails the caller.
    bool watchFiles(const std::string& tenant, const std::string& id, const std::string& path);
    void drainFileActivity(const SandboxRecord& r);

  private:
    SandboxAccess& sandboxes_;
};

// Error(bad_request) unless `path` is absolute, at most 4096 bytes, no NUL.
void requireAbsolutePath(const std::string& path);

}  // namespace airlock
