#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/StreamHandler.hpp"
#include "agent/UserDb.hpp"
#include "core/UniqueFd.hpp"
#include "protocol/FileArchive.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/WorkspaceManifest.hpp"

namespace airlock::guest {

// op "workspace_scan": the files of a working tree that git would see, as
// a protocol::WorkspaceManifest streamed on channel 1 under credit, then a
// close with the counts. What the tree's .gitignore files exclude is
// neither read nor hashed (with "ignored": true, each top-most ignored path
// is listed). Skipped: every ".git" entry and the "skip" paths
// (submodules). Read with the user's identity.
class WorkspaceScanStream : public StreamHandler {
  public:
    WorkspaceScanStream(std::uint32_t id, FrameSink& sink,
                        const protocol::WorkspaceScanRequest& request);
    void tick(std::int64_t nowMs) override;
    bool readyToProduce() const override { return !done() && sendable() > 0; }
    static constexpr std::size_t kMaxEntries = 1'000'000;
    static constexpr std::size_t kMaxManifestBytes = 64 * 1024 * 1024;

  private:
    void start(const protocol::WorkspaceScanRequest& request);
    std::string manifest_;
    std::size_t sent_ = 0;
    nlohmann::json summary_;
};

// op "archive_unpack": a FileArchive stream (channel 0) written under
// "path" with the user's identity; the directory is made (owned by the
// user) when missing. Nothing is followed: every parent is opened with
// O_NOFOLLOW from the root, so a symlink in the tree never leads a write
// outside it.
class ArchiveUnpackStream : public StreamHandler {
  public:
    ArchiveUnpackStream(std::uint32_t id, FrameSink& sink,
                        const protocol::ArchiveUnpackRequest& request);
    void onData(std::uint8_t channel, std::string bytes) override;
    void onCloseWrite() override;

  private:
    void start(const protocol::ArchiveUnpackRequest& request);
    void begin(const protocol::ArchiveEntry& e);
    void data(const protocol::ArchiveEntry& e, std::string_view bytes);
    void end(const protocol::ArchiveEntry& e);
    // The directory `rel` ("" = the root) opened without following links,
    // made when missing; -1 with errno set on failure.
    int dirFd(const std::string& rel);
    std::string root_;
    UserEntry user_;
    UniqueFd rootFd_;
    std::map<std::string, UniqueFd> dirs_;  // opened parents (bounded: cleared when large)
    UniqueFd file_;
    std::string linkTarget_;
    std::unique_ptr<protocol::ArchiveReader> reader_;
    std::uint64_t entries_ = 0, bytes_ = 0;
    int error_ = 0;
    std::string errorPath_;
};

}  // namespace airlock::guest
