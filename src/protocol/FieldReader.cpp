#include "protocol/FieldReader.hpp"

#include <algorithm>

#include "protocol/Messages.hpp"

namespace airlock::protocol {
using json = nlohmann::json;

FieldReader::FieldReader(const json& object, std::string_view what) : j_(&object), what_(what) {
    if (!j_->is_object()) fail("not a JSON object");
}

FieldReader FieldReader::parse(const std::string& payload, std::string_view what) {
    auto owned = std::make_shared<const json>(json::parse(payload, nullptr, false));
    FieldReader reader(*owned, what);
    reader.owned_ = std::move(owned);
    return reader;
}

void FieldReader::fail(const std::string& why) const {
    throw MessageError(std::string(what_) + ": " + why);
}

const json* FieldReader::find(const char* key) const {
    auto it = j_->find(key);
    return it == j_->end() || it->is_null() ? nullptr : &*it;
}

bool FieldReader::has(const char* key) const { return find(key) != nullptr; }

std::string FieldReader::string(const char* key, bool required, std::size_t maxBytes) const {
    auto value = maybeString(key, maxBytes);
    if (!value && required) fail(std::string("'") + key + "' is required");
    return value.value_or(std::string());
}

std::optional<std::string> FieldReader::maybeString(const char* key, std::size_t maxBytes) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(std::string("'") + key + "' must be a string");
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > maxBytes)
        fail(std::string("'") + key + "' is longer than " + std::to_string(maxBytes) + " bytes");
    return s;
}

bool FieldReader::boolean(const char* key) const {
    const json* v = find(key);
    if (!v) return false;
    if (!v->is_boolean()) fail(std::string("'") + key + "' must be true or false");
    return v->get<bool>();
}

std::optional<std::uint64_t> FieldReader::number(const char* key, std::uint64_t max) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_unsigned() || v->get<std::uint64_t>() > max)
        fail(std::string("'") + key + "' must be a number from 0 to " + std::to_string(max));
    return v->get<std::uint64_t>();
}

std::uint64_t FieldReader::requiredNumber(const char* key, std::uint64_t max) const {
    auto n = number(key, max);
    if (!n) fail(std::string("'") + key + "' is required");
    return *n;
}

std::optional<std::int64_t> FieldReader::integer(const char* key, std::int64_t min,
                                                 std::int64_t max) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    // A non-negative number parses as unsigned: compared as one, it cannot wrap.
    bool fits = false;
    if (v->is_number_unsigned()) {
        auto n = v->get<std::uint64_t>();
        fits = n <= static_cast<std::uint64_t>(std::max<std::int64_t>(max, 0)) && max >= 0 &&
               (min <= 0 || n >= static_cast<std::uint64_t>(min));
    } else if (v->is_number_integer()) {
        auto n = v->get<std::int64_t>();
        fits = n >= min && n <= max;
    }
    if (!fits)
        fail(std::string("'") + key + "' must be an integer from " + std::to_string(min) + " to " +
             std::to_string(max));
    return v->get<std::int64_t>();
}

std::vector<std::string> FieldReader::strings(const char* key, std::size_t maxCount,
                                              std::size_t maxBytes) const {
    std::vector<std::string> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_array() || v->size() > maxCount)
        fail(std::string("'") + key + "' must be an array of at most " + std::to_string(maxCount) +
             " strings");
    out.reserve(v->size());
    for (const auto& s : *v) {
        if (!s.is_string()) fail(std::string("'") + key + "' must hold strings");
        if (s.get_ref<const std::string&>().size() > maxBytes)
            fail(std::string("'") + key + "' holds a string longer than " +
                 std::to_string(maxBytes) + " bytes");
        out.push_back(s.get<std::string>());
    }
    return out;
}

std::map<std::string, std::string> FieldReader::stringMap(const char* key, std::size_t maxCount,
                                                         std::size_t maxKeyBytes,
                                                         std::size_t maxValueBytes) const {
    std::map<std::string, std::string> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_object() || v->size() > maxCount)
        fail(std::string("'") + key + "' must be an object of at most " +
             std::to_string(maxCount) + " strings");
    for (const auto& [k, s] : v->items()) {
        if (!s.is_string()) fail(std::string("'") + key + "' must hold strings");
        if (k.size() > maxKeyBytes || s.get_ref<const std::string&>().size() > maxValueBytes)
            fail(std::string("'") + key + "' holds a key or value over its bound");
        out.emplace(k, s.get<std::string>());
    }
    return out;
}

std::optional<std::vector<FieldReader>> FieldReader::objects(const char* key,
                                                             std::size_t maxCount) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_array() || v->size() > maxCount)
        fail(std::string("'") + key + "' must be an array of at most " + std::to_string(maxCount) +
             " objects");
    std::vector<FieldReader> out;
    out.reserve(v->size());
    for (const auto& o : *v) {
        out.emplace_back(o, what_);
        out.back().owned_ = owned_;  // they read inside what this one may own
    }
    return out;
}

std::string FieldReader::bytes(const char* key, bool required, std::size_t maxBytes) const {
    std::string hexKey = std::string(key) + "_hex";
    auto hex = maybeString(hexKey.c_str(), maxBytes == SIZE_MAX ? SIZE_MAX : 2 * maxBytes);
    if (!hex) return string(key, required, maxBytes);
    if (hex->size() % 2) fail("'" + hexKey + "' must be hex digits");
    auto digit = [&](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        fail("'" + hexKey + "' must be lower-case hex digits");
    };
    std::string out;
    out.reserve(hex->size() / 2);
    for (std::size_t i = 0; i < hex->size(); i += 2)
        out.push_back(static_cast<char>(digit((*hex)[i]) * 16 + digit((*hex)[i + 1])));
    if (required && out.empty()) fail("'" + hexKey + "' must not be empty");
    return out;
}

void writeBytes(nlohmann::json& j, const char* key, const std::string& bytes) {
    j[key] = bytes;
    try {
        (void)j[key].dump();
    } catch (const nlohmann::json::type_error&) {
        static constexpr char kDigits[] = "0123456789abcdef";
        std::string hex;
        hex.reserve(bytes.size() * 2);
        for (unsigned char c : bytes) {
            hex.push_back(kDigits[c >> 4]);
            hex.push_back(kDigits[c & 15]);
        }
        j[std::string(key) + "_hex"] = hex;
    }
}

}  // namespace airlock::protocol
