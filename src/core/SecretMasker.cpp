#include "core/SecretMasker.hpp"

#include <algorithm>

#include "core/SecretCipher.hpp"

namespace airlock {

SecretMasker::SecretMasker(const std::vector<std::string>& values) {
    static constexpr char lower[] = "0123456789abcdef", upper[] = "0123456789ABCDEF";
    for (const auto& v : values) {
        if (v.size() < kMinLength) continue;
        std::string hexLower, hexUpper;
        for (unsigned char c : v) {
            hexLower += lower[c >> 4];
            hexLower += lower[c & 15];
            hexUpper += upper[c >> 4];
            hexUpper += upper[c & 15];
        }
        std::string b64 = base64Encode(v);
        // Also without padding: base64 of a longer text holding the value.
        std::string b64bare = b64.substr(0, b64.find('='));
        for (auto& n : {v, b64, b64bare, hexLower, hexUpper})
            if (n.size() >= kMinLength) needles_.push_back(n);
    }
    std::sort(needles_.begin(), needles_.end(),
              [](const auto& a, const auto& b) { return a.size() != b.size() ? a.size() > b.size() : a < b; });
    needles_.erase(std::unique(needles_.begin(), needles_.end()), needles_.end());
}

std::string SecretMasker::mask(std::string text) const {
    for (const auto& n : needles_) {
        std::size_t pos = 0;
        while ((pos = text.find(n, pos)) != std::string::npos) {
            text.replace(pos, n.size(), "***");
            pos += 3;
        }
    }
    return text;
}

}  // namespace airlock
