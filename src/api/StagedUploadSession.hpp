#pragma once
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/StreamContext.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::api {

// What a staged upload's body becomes and how it answers.
struct StagedUploadPlan {
    std::string stagedPath;      // made here (0600, never there before), removed at the end
    std::uint64_t maxBytes = 0;  // a body past this answers 413
    // Before each step of the body is staged (the whole of a declared length,
    // else kReserveStep at a time): throws a typed Error to refuse it.
    std::function<void(std::uint64_t bytes)> reserve;
    // On a worker, once the whole body is staged: the answer.
    std::function<ApiResponse(const std::string& stagedPath, std::uint64_t bytes)> finish;
};

// A request body streamed to a host file, chunk by chunk (one chunk in
// memory, no thread while the client is slow), then handed whole to a
// blocking step on the worker pool: a volume's file, written by its tool.
class StagedUploadSession : public std::enable_shared_from_this<StagedUploadSession> {
  public:
    static constexpr std::size_t kChunk = 256 * 1024;
    static constexpr std::uint64_t kReserveStep = 64ull << 20;
    StagedUploadSession(boost::beast::tcp_stream&& stream, boost::beast::flat_buffer&& buffer,
                        boost::beast::http::request_parser<boost::beast::http::empty_body>&& header,
                        StreamContext context, StagedUploadPlan plan);
    ~StagedUploadSession();
    void start();

  private:
    void readChunk();
    void onChunk(boost::beast::error_code ec);
    void complete();
    void answer(const ApiResponse& response);
    void drain();
    void fail(std::exception_ptr error);

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    boost::beast::http::request_parser<boost::beast::http::buffer_body> parser_;
    StreamContext ctx_;
    StagedUploadPlan plan_;
    UniqueFd file_;
    std::vector<char> chunk_;
    std::uint64_t received_ = 0, reserved_ = 0, drainBudget_ = 0;
    bool created_ = false;  // the staged file is ours to remove
    bool ended_ = false;
};

}  // namespace airlock::api
