#include "e2b/MultipartReader.hpp"

#include "core/Error.hpp"
#include "e2b/Multipart.hpp"

namespace airlock::e2b {
namespace {
Error malformed(const std::string& what) { return Error(ErrorCode::bad_request, what); }
}  // namespace

MultipartReader::MultipartReader(std::string_view boundary, std::size_t maxParts)
    : delimiter_("\r\n--" + std::string(boundary)), maxParts_(maxParts) {
    // The first delimiter may open the body without its CRLF.
    pending_ = "\r\n";
}

void MultipartReader::feed(std::string_view bytes, std::vector<Event>& out) {
    if (state_ == State::epilogue) return;  // after the closing delimiter: ignored
    pending_.append(bytes);
    step(out);
}

void MultipartReader::step(std::vector<Event>& out) {
    while (true) {
        switch (state_) {
            case State::preamble: {
                auto at = pending_.find(delimiter_);
                if (at == std::string::npos) {
                    if (pending_.size() > kMaxPreambleBytes)
                        throw malformed("the multipart body has no boundary line");
                    return;
                }
                pending_.erase(0, at + delimiter_.size());
                state_ = State::after_delimiter;
                break;
            }
            case State::after_delimiter: {
                if (pending_.size() < 2) return;
                if (pending_.compare(0, 2, "--") == 0) {
                    state_ = State::epilogue;
                    pending_.clear();
                    return;
                }
                if (pending_.compare(0, 2, "\r\n") != 0)
                    throw malformed("malformed multipart boundary line");
                pending_.erase(0, 2);
                state_ = State::headers;
                break;
            }
            case State::headers: {
                auto end = pending_.find("\r\n\r\n");
                // A part without headers starts with its blank line at once.
                if (pending_.compare(0, 2, "\r\n") == 0) end = 0;
                if (end == std::string::npos) {
                    if (pending_.size() > kMaxHeaderBytes)
                        throw malformed("a multipart part's headers are too long");
                    return;
                }
                if (end > kMaxHeaderBytes) throw malformed("a multipart part's headers are too long");
                if (++parts_ > maxParts_) throw malformed("too many multipart parts");
                Event start{Event::Kind::part_start, "", "", ""};
                std::string_view headers(pending_.data(), end);
                while (!headers.empty()) {
                    std::size_t eol = headers.find("\r\n");
                    std::string_view line = headers.substr(0, eol);
                    if (asciiLowerPrefix(line, "content-disposition:")) {
                        start.name = headerParam(line, "name");
                        start.filename = headerParam(line, "filename");
                    }
                    if (eol == std::string_view::npos) break;
                    headers.remove_prefix(eol + 2);
                }
                out.push_back(std::move(start));
                pending_.erase(0, end == 0 ? 2 : end + 4);
                state_ = State::data;
                break;
            }
            case State::data: {
                auto at = pending_.find(delimiter_);
                if (at == std::string::npos) {
                    // All but what could be the delimiter's start goes on.
                    std::size_t keep = delimiter_.size() - 1;
                    if (pending_.size() > keep) {
                        out.push_back(Event{Event::Kind::data, "", "",
                                            pending_.substr(0, pending_.size() - keep)});
                        pending_.erase(0, pending_.size() - keep);
                    }
                    return;
                }
                if (at > 0) out.push_back(Event{Event::Kind::data, "", "", pending_.substr(0, at)});
                out.push_back(Event{Event::Kind::part_end, "", "", ""});
                pending_.erase(0, at + delimiter_.size());
                state_ = State::after_delimiter;
                break;
            }
            case State::epilogue:
                return;
        }
    }
}

void MultipartReader::finish() const {
    if (state_ == State::preamble) throw malformed("the multipart body has no boundary line");
    if (state_ == State::headers) throw malformed("a multipart part has no headers");
    if (state_ != State::epilogue) throw malformed("the multipart body is not closed");
}

}  // namespace airlock::e2b
