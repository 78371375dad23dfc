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
    std::size_t replaced = 0;
    return mask(std::move(text), replaced);
}

std::string SecretMasker::mask(std::string text, std::size_t& replaced) const {
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
        ++replaced;
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

bool isFieldName(const std::string& key) {
    // Lowercase first (snake_case or camelCase): env names, by custom upper
    // case, are data.
    if (key.empty() || key.size() > 64 || !((key[0] >= 'a' && key[0] <= 'z') || key[0] == '_'))
        return false;
    for (char c : key)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    return true;
}

bool isVerdictField(const std::string& key) {
    static const char* const kFields[] = {
        // outcomes and classes the host decides
        "decision", "result", "kind", "severity", "state", "status", "outcome", "event", "class",
        "purpose", "mechanism", "change", "ecosystem", "role", "predicateType", "_type",
        "payloadType", "alg", "schema",
        // digests and the host's identifiers
        "sha256", "sha1", "digest", "gitTree", "gitCommit", "commit", "base", "base_commit",
        "final_tree", "final_commit", "tree", "keyid", "id", "exec_id", "approval_id",
        "evidence_id", "sandbox", "sandbox_id", "snapshot_id", "tenant"};
    for (const char* f : kFields)
        if (key == f) return true;
    return false;
}

namespace {

// A value as the host writes a verdict or an identifier: one short token.
bool isToken(const std::string& v) {
    if (v.empty() || v.size() > 128) return false;
    for (char c : v)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == ':' || c == '/' || c == '+'))
            return false;
    return true;
}

// JSON pointer escaping of one reference token (RFC 6901).
std::string pointerToken(const std::string& key) {
    std::string out;
    for (char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

nlohmann::json maskValues(const nlohmann::json& in, const SecretMasker& masker,
                          const std::string& at, nlohmann::json& counts) {
    if (in.is_string()) {
        std::size_t n = 0;
        std::string out = masker.mask(in.get<std::string>(), n);
        if (n) counts[at.empty() ? "/" : at] = n;
        return out;
    }
    if (in.is_array()) {
        nlohmann::json out = nlohmann::json::array();
        for (std::size_t i = 0; i < in.size(); ++i)
            out.push_back(maskValues(in[i], masker, at + "/" + std::to_string(i), counts));
        return out;
    }
    if (in.is_object()) {
        nlohmann::json out = nlohmann::json::object();
        for (const auto& [k, v] : in.items()) {
            std::string key = k;
            if (!isFieldName(k)) {
                std::size_t n = 0;
                key = masker.mask(k, n);
                if (n) counts[at + "/" + pointerToken(key) + "#key"] = n;
            }
            if (isVerdictField(k) && v.is_string() &&
                isToken(v.get_ref<const std::string&>()))
                out[key] = v;
            else
                out[key] = maskValues(v, masker, at + "/" + pointerToken(key), counts);
        }
        return out;
    }
    return in;
}

}  // namespace

nlohmann::json maskRecord(const nlohmann::json& record, const SecretMasker& masker,
                          bool annotate) {
    if (masker.empty()) return record;
    nlohmann::json counts = nlohmann::json::object();
    nlohmann::json out = maskValues(record, masker, "", counts);
    if (annotate && out.is_object() && !counts.empty()) {
        // Counts the record already carried (masked once before) are kept.
        if (out.contains("masked") && out["masked"].is_object())
            for (const auto& [k, v] : out["masked"].items())
                if (!counts.contains(k)) counts[k] = v;
        counts.erase("/masked");
        out["masked"] = counts;
    }
    return out;
}

}  // namespace airlock
