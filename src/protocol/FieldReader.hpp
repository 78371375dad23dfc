#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::protocol {

// The fields of one message from the other side, read with their types and
// bounds checked: anything else throws MessageError naming the message
// (`what`) and the field. Fields it is not asked for are ignored.
class FieldReader {
  public:
    // MessageError unless `object` is a JSON object; it is read in place
    // and must outlive the reader (no copy of a guest's answer).
    FieldReader(const nlohmann::json& object, std::string_view what);
    // The same, from a frame's payload (the reader owns what it parsed).
    static FieldReader parse(const std::string& payload, std::string_view what);

    // Absent (or null): "" or, when required, an error.
    std::string string(const char* key, bool required = false,
                       std::size_t maxBytes = SIZE_MAX) const;
    // Absent (or null): nullopt; present, even empty: its value.
    std::optional<std::string> maybeString(const char* key, std::size_t maxBytes = SIZE_MAX) const;
    bool boolean(const char* key) const;  // absent: false
    // An integer from 0 to max; absent (or null): nullopt.
    std::optional<std::uint64_t> number(const char* key, std::uint64_t max) const;
    std::uint64_t requiredNumber(const char* key, std::uint64_t max) const;
    // A signed integer in [min, max]; absent (or null): nullopt.
    std::optional<std::int64_t> integer(const char* key, std::int64_t min, std::int64_t max) const;
    std::vector<std::string> strings(const char* key, std::size_t maxCount,
                                     std::size_t maxBytes = SIZE_MAX) const;
    // A file name or path as writeBytes() sent it: its bytes from
    // "<key>_hex" when present (a name that is not UTF-8), else string().
    std::string bytes(const char* key, bool required = false,
                      std::size_t maxBytes = SIZE_MAX) const;
    // An object of at most maxCount string values, each key and value
    // bounded (absent: empty).
    std::map<std::string, std::string> stringMap(const char* key, std::size_t maxCount,
                                                 std::size_t maxKeyBytes,
                                                 std::size_t maxValueBytes) const;
    // An array of at most maxCount objects (absent: nullopt), each read by
    // its own reader.
    std::optional<std::vector<FieldReader>> objects(const char* key, std::size_t maxCount) const;
    bool has(const char* key) const;

    [[noreturn]] void fail(const std::string& why) const;

  private:
    const nlohmann::json* find(const char* key) const;
    std::shared_ptr<const nlohmann::json> owned_;  // parse()'s; shared, so copies stay valid
    const nlohmann::json* j_;
    std::string_view what_;
};

// Writes a file name or path under `key`. JSON text holds UTF-8 only, so a
// name Linux allows that is not UTF-8 also goes as "<key>_hex" (its bytes),
// and FieldReader::bytes() reads those back: any name round-trips.
void writeBytes(nlohmann::json& j, const char* key, const std::string& bytes);

}  // namespace airlock::protocol
