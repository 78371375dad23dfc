// libFuzzer target: what an E2B client sends the front door before any
// guest sees it: a streaming call's envelope, multipart upload bodies, the
// list's metadata filter, Host headers and Basic credentials. Bad input may
// only be refused with Error; what parses must keep its promises.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/Error.hpp"
#include "e2b/ConnectEnvelope.hpp"
#include "e2b/E2bWire.hpp"
#include "e2b/Multipart.hpp"
#include "e2b/MultipartReader.hpp"

using namespace airlock;
using namespace airlock::e2b;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string input(reinterpret_cast<const char*>(data), size);
    try {
        auto e = parseSingleEnvelope(input, 4096);
        if (e.payload.size() + 5 != input.size() || e.payload.size() > 4096 || e.flags != 0) std::abort();
        if (encodeEnvelope(e.flags, e.payload) != input) std::abort();
    } catch (const Error&) {
    }
    try {
        auto parts = parseMultipart(input, "XyZ", 50);
        if (parts.size() > 50) std::abort();
        std::size_t total = 0;
        for (const auto& p : parts) total += p.data.size() + p.filename.size() + p.name.size();
        if (total > input.size()) std::abort();
        // Fed in two pieces at any point, the reader finds the same parts.
        std::size_t cut = size ? data[0] % (size + 1) : 0;
        MultipartReader reader("XyZ", 50);
        std::vector<MultipartReader::Event> events;
        reader.feed(std::string_view(input).substr(0, cut), events);
        reader.feed(std::string_view(input).substr(cut), events);
        reader.finish();
        std::size_t part = 0;
        std::string joined;
        for (const auto& e : events) {
            if (e.kind == MultipartReader::Event::Kind::part_start) {
                if (part > 0 && joined != parts[part - 1].data) std::abort();
                if (part >= parts.size() || e.filename != parts[part].filename) std::abort();
                ++part;
                joined.clear();
            } else if (e.kind == MultipartReader::Event::Kind::data) {
                joined += e.bytes;
            }
        }
        if (part != parts.size() || (part > 0 && joined != parts[part - 1].data)) std::abort();
    } catch (const Error&) {
    }
    try {
        multipartBoundary(input);
    } catch (const Error&) {
    }
    try {
        for (const auto& [k, v] : parseMetadataFilter(input))
            if (k.empty()) std::abort();
    } catch (const Error&) {
    }
    if (auto h = parseSandboxHost(input, "airlock.test")) {
        if (h->port == 0 || h->port > 65535 || h->sandboxId.empty()) std::abort();
        if (h->sandboxId.find('.') != std::string::npos || h->token.find('.') != std::string::npos) std::abort();
    }
    try {
        auto user = basicAuthUser(input);
        if (user.find('/') != std::string::npos || user.find("..") == 0) std::abort();
    } catch (const Error&) {
    }
    return 0;
}
