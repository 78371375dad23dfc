#include "core/SecretMasker.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

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
    std::sort(needles_.begin(), needles_.end(), [](const auto& a, const auto& b) {
        return a.size() != b.size() ? a.size() > b.size() : a < b;
    });
    needles_.erase(std::unique(needles_.begin(), needles_.end()), needles_.end());
}

std::string SecretMasker::mask(std::string text) const {
    if (needles_.empty()) return text;
    // Every occurrence of every form, overlapping ones merged: replacing
    // one needle at a time would leave the rest of an overlapping one.
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (const auto& n : needles_)
        for (std::size_t pos = text.find(n); pos != std::string::npos; pos = text.find(n, pos + 1))
            ranges.emplace_back(pos, pos + n.size());
    if (ranges.empty()) return text;
    std::sort(ranges.begin(), ranges.end());
    std::string out;
    out.reserve(text.size());
    std::size_t at = 0;
    for (std::size_t i = 0; i < ranges.size();) {
        auto [start, end] = ranges[i];
        for (++i; i < ranges.size() && ranges[i].first < end; ++i)
            end = std::max(end, ranges[i].second);
        out.append(text, at, start - at);
        out += "***";
        at = end;
    }
    out.append(text, at, std::string::npos);
    return out;
}

nlohmann::json maskJsonStrings(const nlohmann::json& in, const SecretMasker& masker) {
    if (in.is_string()) return masker.mask(in.get<std::string>());
    if (in.is_array()) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& v : in) out.push_back(maskJsonStrings(v, masker));
        return out;
    }
    if (in.is_object()) {
        nlohmann::json out = nlohmann::json::object();
        for (const auto& [k, v] : in.items()) out[masker.mask(k)] = maskJsonStrings(v, masker);
        return out;
    }
    return in;
}

}  // namespace airlock
