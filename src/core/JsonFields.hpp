#pragma once
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace airlock {

// Strict JSON object reading: every request body goes through these so that
// unknown fields and wrong types are rejected with a clear bad_request.
void requireObject(const nlohmann::json& j, std::string_view what);
void rejectUnknownFields(const nlohmann::json& j, std::initializer_list<std::string_view> allowed,
                         std::string_view what);
nlohmann::json parseJsonBody(std::string_view body);
// A required string field; Error(bad_request) naming it when absent or not a string.
std::string stringField(const nlohmann::json& j, const char* key);
// A string field of a record we wrote ourselves, or "" when `j` is not an
// object or the field is absent or not a string.
std::string stringOrEmpty(const nlohmann::json& j, const char* key);
// Whether JSON text nests arrays and objects at most maxDepth deep (strings
// skipped). nlohmann's parser is iterative, but copying and dumping a
// document recurse: text from outside is checked before it is parsed.
bool jsonNestingWithin(std::string_view text, unsigned maxDepth);

}  // namespace airlock
