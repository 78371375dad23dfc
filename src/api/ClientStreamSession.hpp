#pragma once
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/ErrorMapping.hpp"
#include "api/StreamContext.hpp"

namespace airlock::api {

// What a Connect client-streaming call does with its messages (E2B's
// StreamInput): each one, in order, and the one answer once the client's
// body has ended.
struct ClientStreamPlan {
    // May block (a worker runs it): the next message is read from the
    // client only after it returned. Throws a typed Error to end the call.
    std::function<void(const nlohmann::json& message)> onMessage;
    std::function<nlohmann::json()> onEnd;
    std::size_t maxMessage = 1 << 20;
};

// A Connect client-streaming call over HTTP/1.1: the request body is a run
// of envelopes read as they arrive, never whole; a message's envelope is
// bounded (maxMessage) and handed to the plan before the next byte is read
// (backpressure to the client). The answer is one message envelope and the
// end-of-stream envelope; an error is the end-of-stream envelope's error,
// as Connect streams carry them.
class ClientStreamSession : public std::enable_shared_from_this<ClientStreamSession> {
  public:
    ClientStreamSession(boost::beast::tcp_stream&& stream, boost::beast::flat_buffer&& buffer,
                        boost::beast::http::request_parser<boost::beast::http::empty_body>&& header,
                        StreamContext context, ClientStreamPlan plan);
    void start();

    // The two answers, as bytes (for tests too).
    static std::string answerBody(const nlohmann::json& message);
    static std::string errorBody(const ErrorStatus& error);

  private:
    void readChunk();
    void onChunk(boost::beast::error_code ec);
    // The next whole envelope in pending_ to the plan, or more to read.
    void nextMessage();
    void finish();
    void fail(const ErrorStatus& error);
    void fail(std::exception_ptr error);
    void answer(std::string body);

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    boost::beast::http::request_parser<boost::beast::http::buffer_body> parser_;
    StreamContext ctx_;
    ClientStreamPlan plan_;
    std::vector<char> chunk_;
    std::string pending_;  // bytes read and not yet a whole envelope
    bool bodyDone_ = false;
    bool ended_ = false;
};

}  // namespace airlock::api
