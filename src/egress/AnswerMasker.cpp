#include "egress/AnswerMasker.hpp"

#include <algorithm>

namespace airlock::egress {

AnswerMasker::AnswerMasker(std::vector<std::string> values) {
    for (auto& v : values)
        if (!v.empty()) values_.push_back(std::move(v));
    for (const auto& v : values_) keep_ = std::max(keep_, v.size() - 1);
}

void AnswerMasker::mask() {
    for (const auto& v : values_)
        for (auto at = held_.find(v); at != std::string::npos; at = held_.find(v, at + v.size()))
            std::fill_n(held_.begin() + static_cast<std::ptrdiff_t>(at), v.size(), '*');
}

std::string AnswerMasker::feed(std::string_view bytes) {
    held_.append(bytes);
    mask();
    // A value not yet whole begins within the last keep_ bytes.
    if (held_.size() <= keep_) return {};
    std::string out = held_.substr(0, held_.size() - keep_);
    held_.erase(0, held_.size() - keep_);
    return out;
}

std::string AnswerMasker::flush() {
    mask();
    return std::exchange(held_, {});
}

}  // namespace airlock::egress
