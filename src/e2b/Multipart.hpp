#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace airlock::e2b {

// One part of a multipart/form-data body.
struct MultipartPart {
    std::string name;
    std::string filename;  // verbatim: E2B's SDK puts the whole target path here
    std::string data;
};

// The boundary of a "multipart/form-data; boundary=..." content type;
// Error(bad_request) when there is none.
std::string multipartBoundary(std::string_view contentType);
// Every part of the body; Error(bad_request) for a malformed one (no
// closing boundary, a part without headers, more than maxParts parts).
std::vector<MultipartPart> parseMultipart(std::string_view body, std::string_view boundary,
                                          std::size_t maxParts = 1000);

}  // namespace airlock::e2b
