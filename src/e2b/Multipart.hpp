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

// The value of `key=` in a header's parameters (quoted or not); "" when absent.
std::string headerParam(std::string_view header, std::string_view key);
// Whether `s` starts with `lowerPrefix`, ignoring ASCII case.
bool asciiLowerPrefix(std::string_view s, std::string_view lowerPrefix);

// The boundary of a "multipart/form-data; boundary=..." content type;
// Error(bad_request) when there is none.
std::string multipartBoundary(std::string_view contentType);
// Every part of a whole body (MultipartReader's, collected); Error(bad_request)
// for a malformed one (no closing boundary, a part without headers, more than
// maxParts parts).
std::vector<MultipartPart> parseMultipart(std::string_view body, std::string_view boundary,
                                          std::size_t maxParts = 1000);

}  // namespace airlock::e2b
