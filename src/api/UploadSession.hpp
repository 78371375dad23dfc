#pragma once
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "agentclient/AgentPipe.hpp"
#include "api/ErrorMapping.hpp"
#include "api/StreamContext.hpp"
#include "core/GzipInflater.hpp"
#include "core/Sha256Stream.hpp"
#include "e2b/MultipartReader.hpp"
#include "protocol/FileMetadata.hpp"

namespace airlock::api {

// What an upload's bytes become and how it answers: the native PUT (the
// body is one file) and E2B's POST /files (one file, or a file per
// multipart part) alike.
struct UploadPlan {
    struct File {
        std::string path;
        std::optional<unsigned> mode;
        std::string user;  // "": the default user
        protocol::FileMetadata metadata = {};  // the file's whole set
        bool asRoot = false;  // envd's: written as root, given to `user`
    };
    struct Written {
        std::string asked, path;  // the path asked for, the one the guest wrote
        std::uint64_t bytes = 0;
        std::string sha256;
        nlohmann::json confirmed;  // the guest's typed answer
    };
    std::optional<File> whole;  // the body is this file
    std::string boundary;       // else: multipart/form-data with this boundary
    // A part's file from its filename (throws a typed Error to refuse it).
    std::function<File(const std::string& filename)> partFile;
    // The answer once every file is written, and the shape of a refusal.
    std::function<ApiResponse(const std::vector<Written>& written)> answer;
    ErrorShape errors = ErrorShape::native;
    bool gzip = false;  // the body is gzip (Content-Encoding): undone as it arrives
};

// An upload whose body goes to the guest chunk by chunk, never whole in
// memory, file after file. Each chunk is handed to the agent stream (it
// waits for the agent's window, no thread does) and only then is the next
// one read from the client: end-to-end backpressure. A multipart body is
// split as it arrives (MultipartReader); each part is its own agent stream,
// confirmed by the guest and audited before the next opens.
class UploadSession : public std::enable_shared_from_this<UploadSession> {
  public:
    UploadSession(boost::beast::tcp_stream&& stream, boost::beast::flat_buffer&& buffer,
                  boost::beast::http::request_parser<boost::beast::http::empty_body>&& header,
                  StreamContext context, UploadPlan plan);
    void start();

  private:
    // The work the body becomes, done one step at a time on the strand.
    struct Step {
        enum class Kind { open, data, close } kind;
        UploadPlan::File file;  // open
        std::string bytes;      // data
    };
    void readChunk();
    void onChunk(boost::beast::error_code ec);
    // Body bytes (undone when gzip) into the steps they make.
    void consume(std::string_view bytes);
    void advance();
    void openFile(UploadPlan::File file);
    void writeData(std::string bytes);
    void closeFile();
    void onAgentEvent(AgentStream::Event&& event);
    void fail(const ErrorStatus& error);
    void fail(std::exception_ptr error);
    AgentPipe* pipe() { return pipes_.empty() ? nullptr : pipes_.back().get(); }

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    boost::beast::http::request_parser<boost::beast::http::buffer_body> parser_;
    StreamContext ctx_;
    UploadPlan plan_;
    std::optional<e2b::MultipartReader> multipart_;
    std::optional<GzipInflater> inflater_;  // a gzip body's bytes not yet undone
    // One pipe per file; a finished one is kept until the session ends (its
    // stream's handler may still be on its way to the strand).
    std::vector<std::unique_ptr<AgentPipe>> pipes_;
    std::deque<Step> steps_;
    std::vector<char> chunk_;
    std::vector<UploadPlan::Written> written_;
    UploadPlan::File current_;
    std::uint64_t received_ = 0;           // of the current file
    std::optional<Sha256Stream> hash_;     // of what went to the guest: the audit's file.written
    boost::asio::steady_timer waitTimer_;  // a chunk the guest takes no window for, or its answer
    bool busy_ = false;                    // a step is under way
    bool bodyDone_ = false;                // the client's body is read to its end
    bool finishing_ = false;               // the file's bytes are sent, the guest's answer awaited
    bool ended_ = false;
};

}  // namespace airlock::api
