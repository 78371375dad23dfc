// libFuzzer target: what a guest client sends its egress proxy (and, through
// the one head parser, its package proxy), and the allowlist and CIDR parsers. Bad input may only be refused (Error or an
// error status); a head that parses must be safe to forward: one request
// head, CRLF-terminated, no NUL, for a host the allowlist syntax accepts.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/Error.hpp"
#include "core/HttpRequestHead.hpp"
#include "egress/AddressPolicy.hpp"
#include "egress/EgressAllowlist.hpp"
#include "egress/ProxyRequest.hpp"

using namespace airlock;
using namespace airlock::egress;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string input(reinterpret_cast<const char*>(data), size);
    ProxyRequestParser parser;
    ProxyRequest request;
    std::size_t headLength = 0;
    auto status = parser.parse(input, request, headLength);
    if (status == ProxyRequestParser::Status::complete) {
        if (headLength == 0 || headLength > input.size() || request.host.empty() ||
            request.port == 0)
            std::abort();
        try {
            EgressAllowlist::parse({request.host.find(':') != std::string::npos
                                        ? "[" + request.host + "]"
                                        : request.host});
        } catch (const Error&) {
            std::abort();  // the parser let through a host the allowlist could never name
        }
        if (!request.connect) {
            const std::string& h = request.upstreamHead;
            if (h.size() < 4 || h.compare(h.size() - 4, 4, "\r\n\r\n") != 0) std::abort();
            if (h.find("\r\n\r\n") != h.size() - 4) std::abort();  // exactly one head
            if (h.find('\0') != std::string::npos) std::abort();
            for (std::size_t i = 0; i < h.size(); ++i)
                if ((h[i] == '\r' && h[i + 1] != '\n') ||
                    (h[i] == '\n' && (i == 0 || h[i - 1] != '\r')))
                    std::abort();
        }
    } else if (status == ProxyRequestParser::Status::error && parser.error().empty()) {
        std::abort();
    }
    // The one head parser itself (the package proxy's too): a head it takes
    // is bounded, its header names are lower case without blanks, and no
    // value or line carries a line break or a NUL.
    HttpRequestHeadParser heads;
    HttpRequestHead head;
    std::size_t length = 0;
    auto parsed = heads.parse(input, head, length);
    if (parsed == HttpRequestHeadParser::Status::complete) {
        if (length == 0 || length > input.size() || length > HttpRequestHeadParser::kMaxHead ||
            head.headers.size() > HttpRequestHeadParser::kMaxHeaders || head.target.empty())
            std::abort();
        for (const auto& h : head.headers) {
            if (h.name.empty() || h.name.find_first_of(" \t") != std::string::npos) std::abort();
            for (char c : h.name)
                if (c >= 'A' && c <= 'Z') std::abort();
            for (const std::string* text : {&h.value, &h.line})
                if (text->find_first_of(std::string("\r\n\0", 3)) != std::string::npos)
                    std::abort();
        }
    } else if (parsed == HttpRequestHeadParser::Status::error && heads.error().empty()) {
        std::abort();
    }
    try {
        EgressAllowlist::parse({input});
    } catch (const Error&) {
    }
    try {
        CidrRange::parse(input);
    } catch (const Error&) {
    }
    return 0;
}
