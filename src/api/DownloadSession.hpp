#pragma once
#include <array>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>

#include "agentclient/AgentPipe.hpp"
#include "core/GzipDeflater.hpp"
#include "api/StreamContext.hpp"

namespace airlock::api {

// A response body streamed from an agent stream (file download, process log
// follow). Data events queue on the connection's strand and are written in
// order; each chunk's window goes back to the agent only after it reached the
// client, so a slow client slows the guest's sender, not our memory.
class DownloadSession : public std::enable_shared_from_this<DownloadSession> {
  public:
    using Opener = std::function<std::shared_ptr<AgentStream>(AgentStream::Handler)>;
    // sized: the agent announces {"size"} first (Content-Length); otherwise
    // the body ends when the connection closes. idle: a guest that sends
    // nothing for this long ends the download (504 before the header, a
    // short body after it); 0 for a body that may rest (a followed log).
    static constexpr std::chrono::seconds kFileIdle{60};
    DownloadSession(boost::beast::tcp_stream&& stream, StreamContext context, Opener opener,
                    bool sized, std::string contentType, std::chrono::milliseconds idle);
    // The body goes out gzip-encoded (Content-Encoding: gzip, no length:
    // it ends with the connection), the announced size still bounding what
    // is read. Before start().
    void gzipBody() { deflater_.emplace(); }
    void start();

  private:
    void onEvent(AgentStream::Event&& event);
    void writeHeader(std::optional<std::uint64_t> length);
    void writeChunk(const AgentPipe::Chunk& chunk, std::function<void(bool)> done);
    void finish();
    void fail(const ApiResponse& response);
    // A body that may rest (a followed log) would not notice its client
    // left until its next write: the socket is read, and its end ends it.
    void watchClient();

    boost::beast::tcp_stream stream_;
    StreamContext ctx_;
    Opener opener_;
    bool sized_;
    std::string contentType_;
    std::chrono::milliseconds idle_;
    AgentPipe pipe_;
    // Body chunks wait for the header; the header waits for the size.
    std::deque<AgentPipe::Chunk> beforeHeader_;
    bool headerSent_ = false;
    bool ended_ = false;
    std::optional<std::uint64_t> remaining_;  // of the announced Content-Length
    std::optional<GzipDeflater> deflater_;
    std::optional<std::uint64_t> rawRemaining_;  // gzip: of the announced size, before encoding
    bool gzipEnded_ = false;                     // gzip: the trailer (or the cut) is queued
    std::array<char, 512> clientBytes_{};     // what a client sends after its request: dropped
    std::size_t clientBytesRead_ = 0;
    static constexpr std::size_t kMaxClientBytes = 16 * 1024;
    std::shared_ptr<boost::beast::http::response<boost::beast::http::empty_body>> header_;
    std::shared_ptr<boost::beast::http::response_serializer<boost::beast::http::empty_body>>
        serializer_;
};

}  // namespace airlock::api
