#include "api/UploadSession.hpp"

#include <boost/asio/post.hpp>
#include <limits>

#include "controller/GuestAnswers.hpp"
#include "core/Log.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::api {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using nlohmann::json;

namespace {
constexpr std::size_t kChunk = 256 * 1024;
constexpr auto kAgentWait = std::chrono::seconds(60);
}  // namespace

UploadSession::UploadSession(beast::tcp_stream&& stream, beast::flat_buffer&& buffer,
                             http::request_parser<http::empty_body>&& header, StreamContext context,
                             UploadPlan plan)
    : stream_(std::move(stream)),
      buffer_(std::move(buffer)),
      parser_(std::move(header)),
      ctx_(std::move(context)),
      plan_(std::move(plan)),
      waitTimer_(stream_.get_executor()) {
    parser_.body_limit(
        std::numeric_limits<std::uint64_t>::max());  // streamed: the size is not bounded by memory
    chunk_.resize(kChunk);
    if (!plan_.whole) multipart_.emplace(plan_.boundary);
    if (plan_.gzip) inflater_.emplace();
}

void UploadSession::fail(const ErrorStatus& error) {
    if (ended_) return;
    ended_ = true;
    waitTimer_.cancel();
    if (auto* p = pipe()) {
        if (auto* agent = p->stream()) agent->reset("cancelled", "upload failed");
        p->finish();
    }
    writeSimpleResponse(stream_, renderError(plan_.errors, error), [self = shared_from_this()] {});
}

void UploadSession::fail(std::exception_ptr error) { fail(errorStatusFor(error, ctx_.request)); }

void UploadSession::start() {
    if (plan_.whole) steps_.push_back(Step{Step::Kind::open, *plan_.whole, ""});
    advance();
}

void UploadSession::advance() {
    if (ended_ || busy_) return;
    if (steps_.empty()) {
        // A gzip chunk is undone a piece at a time, each piece written
        // before the next is made: what it inflates to is never all in memory.
        if (!bodyDone_ && inflater_ && inflater_->pending()) {
            std::string piece;
            try {
                piece = inflater_->next(kChunk);
            } catch (...) {
                return fail(std::current_exception());
            }
            if (piece.empty() && inflater_->pending())
                return fail(errorStatus(ErrorCode::bad_request, "the gzip body is malformed"));
            return consume(piece);
        }
        if (!bodyDone_) return readChunk();
        if (!plan_.whole && written_.empty())
            return fail(errorStatus(ErrorCode::bad_request, "the multipart body has no file"));
        ended_ = true;
        ApiResponse response;
        try {
            response = plan_.answer(written_);
        } catch (...) {
            ended_ = false;
            return fail(std::current_exception());
        }
        writeSimpleResponse(stream_, response, [self = shared_from_this()] {});
        return;
    }
    Step step = std::move(steps_.front());
    steps_.pop_front();
    busy_ = true;
    switch (step.kind) {
        case Step::Kind::open:
            return openFile(std::move(step.file));
        case Step::Kind::data:
            return writeData(std::move(step.bytes));
        case Step::Kind::close:
            return closeFile();
    }
}

void UploadSession::openFile(UploadPlan::File file) {
    current_ = std::move(file);
    received_ = 0;
    hash_.emplace();
    finishing_ = false;
    pipes_.push_back(std::make_unique<AgentPipe>(stream_.get_executor(), ctx_.workers));
    // The guest's answer (or its refusal mid-way) arrives on the strand.
    pipe()->onEvent([this](AgentStream::Event&& e) { onAgentEvent(std::move(e)); });
    auto self = shared_from_this();
    auto target = current_;
    pipe()->open(
        self,
        [this, target](AgentStream::Handler handler) {
            return ctx_.sandboxes.files.openUpload(ctx_.tenant, ctx_.params[0], target.path,
                                                      target.mode, std::move(handler),
                                                      target.user, target.metadata,
                                                      target.asRoot);
        },
        [this, self](std::exception_ptr error) {
            if (error) return fail(error);
            busy_ = false;
            advance();
        });
}

void UploadSession::readChunk() {
    if (ended_) return;
    if (parser_.is_done()) {
        bodyDone_ = true;
        try {
            if (inflater_) inflater_->finish();
            if (plan_.whole)
                steps_.push_back(Step{Step::Kind::close, {}, ""});
            else
                multipart_->finish();
        } catch (...) {
            return fail(std::current_exception());
        }
        return advance();
    }
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
    stream_.expires_after(std::chrono::seconds(60));
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onChunk(ec); });
}

void UploadSession::onChunk(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
        if (ended_) return;
        // The client went away mid-upload: the agent discards the partial file.
        logWarn("api", "upload aborted: " + ec.message());
        ended_ = true;
        waitTimer_.cancel();
        if (auto* p = pipe()) {
            if (auto* agent = p->stream()) agent->reset("cancelled", "client went away");
            p->finish();
        }
        return;
    }
    // The guest may have refused the file while this read was pending (the
    // body was often in the buffer already): the session is over, and
    // its stream is gone with it.
    if (ended_) return;
    std::size_t n = chunk_.size() - parser_.get().body().size;
    if (n == 0) return readChunk();
    std::string_view bytes(chunk_.data(), n);
    if (inflater_) {
        try {
            inflater_->feed(bytes);
        } catch (...) {
            return fail(std::current_exception());
        }
        return advance();
    }
    consume(bytes);
}

void UploadSession::consume(std::string_view bytes) {
    if (bytes.empty()) return advance();
    if (plan_.whole) {
        steps_.push_back(Step{Step::Kind::data, {}, std::string(bytes)});
    } else {
        std::vector<e2b::MultipartReader::Event> events;
        try {
            multipart_->feed(bytes, events);
            for (auto& e : events) {
                using Kind = e2b::MultipartReader::Event::Kind;
                if (e.kind == Kind::part_start)
                    steps_.push_back(Step{Step::Kind::open, plan_.partFile(e.filename), ""});
                else if (e.kind == Kind::data)
                    steps_.push_back(Step{Step::Kind::data, {}, std::move(e.bytes)});
                else
                    steps_.push_back(Step{Step::Kind::close, {}, ""});
            }
        } catch (...) {
            return fail(std::current_exception());
        }
    }
    advance();
}

void UploadSession::writeData(std::string bytes) {
    received_ += bytes.size();
    hash_->update(bytes);
    // No thread waits for the guest's window: the next step runs once this
    // one is on its way (backpressure to the client), or the upload fails
    // if the guest takes none of it for kAgentWait.
    waitTimer_.expires_after(kAgentWait);
    waitTimer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (auto* p = self->pipe(); !ec && p && p->stream())
            p->stream()->reset("cancelled", "the guest took no data for a minute");
    });
    pipe()->stream()->writeAsync(
        0, std::move(bytes), false, [self = shared_from_this()](std::exception_ptr error) {
            asio::post(self->stream_.get_executor(), [self, error] {
                self->waitTimer_.cancel();
                if (self->ended_) return;
                if (error) {
                    // The guest's reset says why (403, 404...) and may
                    // be right behind this failure on the strand: it
                    // answers first if it comes within a moment.
                    self->waitTimer_.expires_after(std::chrono::seconds(2));
                    self->waitTimer_.async_wait([self, error](beast::error_code ec) {
                        if (!ec && !self->ended_) self->fail(error);
                    });
                    return;
                }
                self->busy_ = false;
                self->advance();
            });
        });
}

void UploadSession::closeFile() {
    // Every byte of the file is on its way: the guest's close (or reset)
    // answers; no thread waits for it, a timer bounds it.
    finishing_ = true;
    pipe()->stream()->closeWrite();
    waitTimer_.expires_after(kAgentWait);
    waitTimer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (!ec)
            self->fail(
                errorStatus(ErrorCode::agent_timeout, "the agent did not confirm the upload"));
    });
}

void UploadSession::onAgentEvent(AgentStream::Event&& e) {
    if (ended_) return;
    if (e.kind == AgentStream::Event::Kind::reset) {
        auto info = protocol::parseResetInfo(e.payload);
        Error error = agentError(info.code, info.message);
        return fail(errorStatus(error.code(), error.what()));
    }
    if (e.kind != AgentStream::Event::Kind::close) return;
    if (!finishing_)
        return fail(errorStatus(ErrorCode::agent_error, "the agent ended the upload early"));
    waitTimer_.cancel();
    pipe()->finish();
    // The guest's word, read as file_write's typed result: a malformed one
    // fails the upload (a 502), never an unknown shape in an answer. Either
    // way every byte reached the guest, which may have written them: the
    // write is audited.
    UploadPlan::Written w{current_.path, current_.path, received_, hash_->hexDigest(), {}};
    // The masking and the audit write (SQLite) are not for the I/O thread.
    asio::post(ctx_.workers, [self = shared_from_this(), w = std::move(w),
                              payload = std::move(e.payload)]() mutable {
        std::optional<ErrorStatus> malformed;
        try {
            // The guest's own word, masked like every guest answer; the path
            // it resolved ("..", symlinks) is kept beside the asked one.
            auto confirmed = self->ctx_.sandboxes.files.maskedWrite(
                self->ctx_.tenant, self->ctx_.params[0], protocol::parseWrittenFile(payload));
            w.confirmed = protocol::toJsonValue(confirmed);
            w.path = confirmed.path;
        } catch (const protocol::MessageError& bad) {
            Error error = guestAnswerError(bad);
            malformed = errorStatus(error.code(), error.what());
        } catch (const Error& error) {
            malformed = errorStatus(error.code(), error.what());
        } catch (const std::exception& error) {
            malformed = errorStatus(ErrorCode::internal, error.what());
        }
        try {
            self->ctx_.sandboxes.files.recordFileWrite(self->ctx_.tenant, self->ctx_.params[0],
                                                          w.asked, w.path, w.bytes, w.sha256);
        } catch (const std::exception&) {
        }
        asio::post(self->stream_.get_executor(), [self, w = std::move(w), malformed]() mutable {
            if (malformed) return self->fail(*malformed);
            self->written_.push_back(std::move(w));
            self->busy_ = false;
            self->advance();
        });
    });
}

}  // namespace airlock::api
