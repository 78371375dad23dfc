#include "core/StreamingMasker.hpp"

namespace airlock {

std::string StreamingMasker::feed(std::string_view chunk) {
    if (!masker_ || masker_->empty()) return std::string(chunk);
    if (afterGap_) {
        gapHead_.append(chunk);
        return resolveGapHead(false);
    }
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
    std::string head = afterGap_ ? resolveGapHead(true) : std::string();
    std::string out = masker_ ? masker_->mask(std::move(pending_)) : std::move(pending_);
    pending_.clear();
    return head + out;
}

std::string StreamingMasker::gap() {
    if (!masker_ || masker_->empty()) return {};
    // Whatever is held is (or overlaps) the beginning of a secret whose
    // rest was dropped: masked whole, never shown in part.
    std::string out;
    if (afterGap_) {  // a second gap before the first one's head was decided
        out = resolveGapHead(true);
        out += feed({});
    }
    if (!pending_.empty()) out += "***";
    pending_.clear();
    afterGap_ = true;
    return out;
}

std::string StreamingMasker::resolveGapHead(bool final) {
    const auto& needles = masker_->needles();
    std::size_t longest = needles.front().size();
    if (!final && gapHead_.size() < longest - 1) return {};
    // The longest head that is a proper suffix of a secret form: the rest of
    // a secret whose beginning was lost. (A whole one is masked as usual.)
    std::size_t cut = 0;
    for (const auto& n : needles)
        for (std::size_t k = std::min(gapHead_.size(), n.size() - 1); k > cut; --k)
            if (std::string_view(gapHead_).substr(0, k) ==
                std::string_view(n).substr(n.size() - k)) {
                cut = k;
                break;
            }
    afterGap_ = false;
    std::string rest = gapHead_.substr(cut);
    gapHead_.clear();
    std::string out = cut ? "***" : "";
    // What follows the masked end goes through the usual path (it may hold
    // or begin other secrets); when final, flush() masks what is left.
    if (final) {
        pending_.insert(0, rest);
        return out;
    }
    return out + feed(rest);
}

}  // namespace airlock
