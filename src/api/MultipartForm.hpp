#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

// One field of a multipart/form-data body (RFC 7578).
struct FormPart {
    std::string name;         // Content-Disposition's name, unique within the form
    std::string filename;     // as the client sent it ("" when none): never a path to trust
    std::string contentType;  // the part's Content-Type, "" when it had none (RFC 7578: text/plain)
    std::string body;         // the bytes between its header block and the next delimiter
};

// Parses a multipart/form-data body held in memory. `contentTypeHeader` is
// the request's Content-Type, whose boundary parameter (quoted or not)
// splits the body. CRLF line breaks per RFC 2046, bare LF tolerated; the
// preamble and epilogue are ignored; a "--boundary" that is not a whole
// delimiter line is content. Error(bad_request) for: a Content-Type that is
// not multipart/form-data or has no/an invalid boundary, a body without its
// first or final delimiter, a part without "Content-Disposition: form-data;
// name=...", two parts of one name, more than `maxParts` parts, a part's
// header block over 8 KiB, a malformed header. Parts come back in body order.
std::vector<FormPart> parseMultipartForm(std::string_view contentTypeHeader, std::string_view body,
                                         std::size_t maxParts = 16);

}  // namespace airlock
