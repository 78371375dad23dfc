#include "core/JsonFields.hpp"

#include "core/Error.hpp"

namespace airlock {

void requireObject(const nlohmann::json& j, std::string_view what) {
    if (!j.is_object())
        throw Error(ErrorCode::bad_request, std::string(what) + " must be a JSON object");
}

void rejectUnknownFields(const nlohmann::json& j, std::initializer_list<std::string_view> allowed,
                         std::string_view what) {
    requireObject(j, what);
    for (const auto& [key, value] : j.items()) {
        bool known = false;
        for (auto a : allowed) known = known || key == a;
        if (!known)
            throw Error(ErrorCode::bad_request,
                        "unknown field '" + key + "' in " + std::string(what));
    }
}

nlohmann::json parseJsonBody(std::string_view body) {
    if (body.empty()) throw Error(ErrorCode::bad_request, "request body must be JSON, got nothing");
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded()) throw Error(ErrorCode::bad_request, "request body is not valid JSON");
    return j;
}

bool jsonNestingWithin(std::string_view text, unsigned maxDepth) {
    unsigned depth = 0;
    bool inString = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (inString) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > maxDepth) return false;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return true;
}

std::string stringField(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string())
        throw Error(ErrorCode::bad_request, std::string("'") + key + "' must be a string");
    return it->get<std::string>();
}

std::string stringOrEmpty(const nlohmann::json& j, const char* key) {
    if (!j.is_object()) return {};
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace airlock
