// libFuzzer target: every message parser on arbitrary payloads. Malformed
// input may only ever raise MessageError; what parses must round-trip.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "protocol/Messages.hpp"

using namespace airlock::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string payload(reinterpret_cast<const char*>(data), size);
    try {
        auto r = parseExecRequest(payload);
        auto again = parseExecRequest(toJson(r));
        if (again.argv != r.argv || again.env != r.env || again.timeout_ms != r.timeout_ms) std::abort();
    } catch (const MessageError&) {
    }
    try {
        parseHello(payload);
    } catch (const MessageError&) {
    }
    try {
        parseHelloAck(payload);
    } catch (const MessageError&) {
    }
    try {
        parseExecResult(payload);
    } catch (const MessageError&) {
    }
    try {
        parseResetInfo(payload);
    } catch (const MessageError&) {
    }
    openOp(payload);
    return 0;
}
