#include "e2b/Multipart.hpp"

#include <cctype>

#include "core/Error.hpp"
#include "e2b/E2bWire.hpp"
#include "e2b/MultipartReader.hpp"

namespace airlock::e2b {
std::string headerParam(std::string_view header, std::string_view key) {
    std::string low = asciiLower(header);
    std::size_t at = 0;
    while ((at = low.find(std::string(key) + "=", at)) != std::string::npos) {
        // A whole parameter name: preceded by ';' or space.
        if (at > 0 && low[at - 1] != ';' && low[at - 1] != ' ' && low[at - 1] != '\t') {
            at += key.size();
            continue;
        }
        std::size_t v = at + key.size() + 1;
        if (v < header.size() && header[v] == '"') {
            std::string out;
            for (std::size_t i = v + 1; i < header.size(); ++i) {
                if (header[i] == '\\' && i + 1 < header.size()) {
                    out.push_back(header[++i]);
                } else if (header[i] == '"') {
                    return out;
                } else {
                    out.push_back(header[i]);
                }
            }
            return out;
        }
        std::size_t end = header.find(';', v);
        std::string out(
            header.substr(v, end == std::string_view::npos ? std::string_view::npos : end - v));
        while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
        return out;
    }
    return "";
}

bool asciiLowerPrefix(std::string_view s, std::string_view lowerPrefix) {
    return s.size() >= lowerPrefix.size() && asciiLower(s.substr(0, lowerPrefix.size())) == lowerPrefix;
}

std::string multipartBoundary(std::string_view contentType) {
    if (asciiLower(contentType).rfind("multipart/form-data", 0) != 0)
        throw Error(ErrorCode::bad_request, "expected multipart/form-data");
    std::string b = headerParam(contentType, "boundary");
    if (b.empty() || b.size() > 200)
        throw Error(ErrorCode::bad_request, "the multipart body has no valid boundary");
    return b;
}

std::vector<MultipartPart> parseMultipart(std::string_view body, std::string_view boundary,
                                          std::size_t maxParts) {
    MultipartReader reader(boundary, maxParts);
    std::vector<MultipartReader::Event> events;
    reader.feed(body, events);
    reader.finish();
    std::vector<MultipartPart> parts;
    for (auto& e : events) {
        if (e.kind == MultipartReader::Event::Kind::part_start)
            parts.push_back(MultipartPart{std::move(e.name), std::move(e.filename), ""});
        else if (e.kind == MultipartReader::Event::Kind::data)
            parts.back().data += e.bytes;
    }
    return parts;
}

}  // namespace airlock::e2b
