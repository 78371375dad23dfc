#include "core/StreamingMasker.hpp"

namespace airlock {

std::string StreamingMasker::feed(std::string_view chunk) {
    if (!masker_ || masker_->empty()) return std::string(chunk);
    pending_.append(chunk);
    const auto& needles = masker_->needles();
    // The longest tail that is a proper beginning of some secret form.
    std::size_t hold = 0;
    std::size_t longest = needles.empty() ? 0 : needles.front().size();
    for (std::size_t k = std::min(pending_.size(), longest - 1); k > 0 && hold == 0; --k) {
        std::string_view tail = std::string_view(pending_).substr(pending_.size() - k);
        for (const auto& n : needles)
            if (n.size() > k && std::string_view(n).substr(0, k) == tail) {
                hold = k;
                break;
            }
    }
    // No secret may straddle the cut: one that does is held back whole,
    // with whatever overlaps it (masked together once complete).
    std::size_t cut = pending_.size() - hold;
    for (bool moved = true; moved;) {
        moved = false;
        for (const auto& n : needles) {
            std::size_t from = cut >= n.size() ? cut - n.size() + 1 : 0;
            for (std::size_t pos = pending_.find(n, from); pos != std::string::npos && pos < cut;
                 pos = pending_.find(n, pos + 1)) {
                if (pos + n.size() > cut) {
                    cut = pos;
                    moved = true;
                    break;
                }
            }
        }
    }
    std::string out = masker_->mask(pending_.substr(0, cut));
    pending_.erase(0, cut);
    return out;
}

std::string StreamingMasker::flush() {
    std::string out = masker_ ? masker_->mask(std::move(pending_)) : std::move(pending_);
    pending_.clear();
    return out;
}

}  // namespace airlock
