#pragma once
#include <string>

#include "protocol/GuestCalls.hpp"
#include "agent/StreamHandler.hpp"
#include "agent/UserDb.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::guest {

// Upload: data frames (channel 0) into a temporary file next to the target,
// renamed over it on the host's close, so a reader never sees half a file and
// a failed upload leaves the old one intact. Parent directories are created.
class FileWriteStream : public StreamHandler {
public:
    FileWriteStream(std::uint32_t id, FrameSink& sink, const protocol::FileWriteRequest& request);
    ~FileWriteStream() override;
    void onData(std::uint8_t channel, std::string bytes) override;
    void onCloseWrite() override;

private:
    void start(const protocol::FileWriteRequest& request);
    std::string path_, tempPath_;
    UserEntry user_;
    bool asRoot_ = false;  // envd's uploads: written as root, given to user_
    UniqueFd fd_;
    std::uint64_t size_ = 0;
};

// Download: the file's bytes as data frames (channel 1) under credit, then a
// close with the size.
class FileReadStream : public StreamHandler {
public:
    FileReadStream(std::uint32_t id, FrameSink& sink, const protocol::FileReadRequest& request);
    void tick(std::int64_t nowMs) override;
    bool readyToProduce() const override { return fd_.valid() && sendable() > 0; }

private:
    void start(const protocol::FileReadRequest& request);
    UniqueFd fd_;
    std::uint64_t size_ = 0, sent_ = 0;
    std::string buf_;
};

// One-shot file-system operations: stat, list, mkdir, remove, move.
// Answers with a close carrying the result or a reset carrying the error.
void runFsOp(std::uint32_t id, FrameSink& sink, const protocol::FsRequest& request);

// Resolves the "user" field of a file request (default "user").
// A request's user ("": "user"); false with why when there is none such.
bool resolveUser(const std::string& name, UserEntry& out, std::string& error);
// An absolute path, normalized; false for anything else.
bool absolutePath(const std::string& path, std::string& out);

}  // namespace airlock::guest
