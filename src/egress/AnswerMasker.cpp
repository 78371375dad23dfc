#include "egress/AnswerMasker.hpp"

#include <algorithm>

namespace airlock::egress {

AnswerMasker::AnswerMasker(std::vector<std::string> values) {
    for (auto& v : values)
        if (!v.empty()) values_.push_back(std::move(v));
    for (const auto& v : values_) keep_ = std::max(keep_, v.size() - 1);
}

void AnswerMasker::mask() {
    // A value that began in bytes already sent still has the rest of it
    // masked: the guest gets a part, never the whole.
    for (const auto& v : values_)
        for (auto at = window_.find(v); at != std::string::npos; at = window_.find(v, at + 1)) {
            std::size_t from = std::max(at, sent_);
            std::fill(window_.begin() + static_cast<std::ptrdiff_t>(from),
                      window_.begin() + static_cast<std::ptrdiff_t>(at + v.size()), '*');
        }
}

std::string AnswerMasker::release(std::size_t upTo) {
    std::string out = window_.substr(sent_, upTo - sent_);
    sent_ = upTo;
    // Of what went, only what a value could still straddle is kept.
    if (sent_ > keep_) {
        window_.erase(0, sent_ - keep_);
        sent_ = keep_;
    }
    return out;
}

std::string AnswerMasker::feed(std::string_view bytes) {
    window_.append(bytes);
    mask();
    // A value not yet whole begins within the last keep_ bytes.
    if (window_.size() - sent_ <= keep_) return {};
    return release(window_.size() - keep_);
}

std::string AnswerMasker::flush() {
    mask();
    return release(window_.size());
}

}  // namespace airlock::egress
