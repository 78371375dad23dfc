#pragma once
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/StreamContext.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::api {

// A 200 whose body is a host file staged for the purpose (a volume's file,
// copied out by its tool): written chunk by chunk, each read only once the
// one before reached the client, so a slow client costs one chunk of memory
// and no thread. The file is the session's: its descriptor (of a file
// already unlinked) goes with it.
class StagedDownloadSession : public std::enable_shared_from_this<StagedDownloadSession> {
  public:
    static constexpr std::size_t kChunk = 256 * 1024;
    StagedDownloadSession(boost::beast::tcp_stream&& stream, StreamContext context, UniqueFd file,
                          std::uint64_t size, std::string contentType);
    void start();

  private:
    void writeNext();
    void finish();

    boost::beast::tcp_stream stream_;
    StreamContext ctx_;  // holds the tenant's slot and the connection's place
    UniqueFd file_;
    std::uint64_t size_, sent_ = 0;
    std::string contentType_;
    std::vector<char> chunk_;
    std::shared_ptr<boost::beast::http::response<boost::beast::http::empty_body>> header_;
    std::shared_ptr<boost::beast::http::response_serializer<boost::beast::http::empty_body>>
        serializer_;
};

}  // namespace airlock::api
