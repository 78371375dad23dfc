#include "e2b/Multipart.hpp"

#include <cctype>

#include "core/Error.hpp"
#include "e2b/E2bWire.hpp"

namespace airlock::e2b {
namespace {

// The value of `key=` in a header's parameters (quoted or not).
std::string param(std::string_view header, std::string_view key) {
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
}  // namespace

std::string multipartBoundary(std::string_view contentType) {
    if (asciiLower(contentType).rfind("multipart/form-data", 0) != 0)
        throw Error(ErrorCode::bad_request, "expected multipart/form-data");
    std::string b = param(contentType, "boundary");
    if (b.empty() || b.size() > 200)
        throw Error(ErrorCode::bad_request, "the multipart body has no valid boundary");
    return b;
}

std::vector<MultipartPart> parseMultipart(std::string_view body, std::string_view boundary,
                                          std::size_t maxParts) {
    std::string delim = "--" + std::string(boundary);
    std::vector<MultipartPart> parts;
    std::size_t pos = body.find(delim);
    if (pos == std::string_view::npos)
        throw Error(ErrorCode::bad_request, "the multipart body has no boundary line");
    pos += delim.size();
    while (true) {
        if (body.substr(pos, 2) == "--") return parts;  // the closing boundary
        if (body.substr(pos, 2) != "\r\n")
            throw Error(ErrorCode::bad_request, "malformed multipart boundary line");
        pos += 2;
        std::size_t headersEnd = body.find("\r\n\r\n", pos);
        if (headersEnd == std::string_view::npos)
            throw Error(ErrorCode::bad_request, "a multipart part has no headers");
        MultipartPart part;
        std::string_view headers = body.substr(pos, headersEnd - pos);
        while (!headers.empty()) {
            std::size_t eol = headers.find("\r\n");
            std::string_view line = headers.substr(0, eol);
            if (asciiLower(line.substr(0, 20)) == "content-disposition:") {
                part.name = param(line, "name");
                part.filename = param(line, "filename");
            }
            if (eol == std::string_view::npos) break;
            headers.remove_prefix(eol + 2);
        }
        std::size_t dataStart = headersEnd + 4;
        std::size_t next = body.find("\r\n" + delim, dataStart);
        if (next == std::string_view::npos)
            throw Error(ErrorCode::bad_request, "the multipart body is not closed");
        part.data = std::string(body.substr(dataStart, next - dataStart));
        if (parts.size() >= maxParts)
            throw Error(ErrorCode::bad_request, "too many multipart parts");
        parts.push_back(std::move(part));
        pos = next + 2 + delim.size();
    }
}

}  // namespace airlock::e2b
