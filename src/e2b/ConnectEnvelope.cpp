#include "e2b/ConnectEnvelope.hpp"

#include "core/Error.hpp"

namespace airlock::e2b {

std::string encodeEnvelope(std::uint8_t flags, std::string_view payload) {
    std::string out;
    out.reserve(5 + payload.size());
    auto n = static_cast<std::uint32_t>(payload.size());
    out.push_back(static_cast<char>(flags));
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<char>((n >> shift) & 0xff));
    out.append(payload);
    return out;
}

Envelope parseSingleEnvelope(std::string_view body, std::size_t maxPayload) {
    if (body.size() < 5)
        throw Error(ErrorCode::bad_request, "a streaming request is one Connect envelope");
    auto byte = [&](std::size_t i) {
        return static_cast<std::uint32_t>(static_cast<unsigned char>(body[i]));
    };
    std::uint32_t n = (byte(1) << 24) | (byte(2) << 16) | (byte(3) << 8) | byte(4);
    if (n > maxPayload)
        throw Error(ErrorCode::bad_request,
                    "the request message is larger than " + std::to_string(maxPayload) + " bytes");
    if (body.size() != 5 + static_cast<std::size_t>(n))
        throw Error(ErrorCode::bad_request, "the request body is not exactly one Connect envelope");
    Envelope e{static_cast<std::uint8_t>(byte(0)), std::string(body.substr(5))};
    if (e.flags != kEnvelopeMessage)
        throw Error(ErrorCode::bad_request,
                    "compressed or end-of-stream envelopes are not accepted in a request");
    return e;
}

}  // namespace airlock::e2b
