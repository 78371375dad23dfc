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

std::optional<EnvelopeHeader> envelopeHeader(std::string_view bytes) {
    if (bytes.size() < kEnvelopeHeaderSize) return std::nullopt;
    EnvelopeHeader h;
    h.flags = static_cast<std::uint8_t>(bytes[0]);
    for (std::size_t i = 1; i < kEnvelopeHeaderSize; ++i)
        h.length = (h.length << 8) | static_cast<unsigned char>(bytes[i]);
    return h;
}

Envelope parseSingleEnvelope(std::string_view body, std::size_t maxPayload) {
    auto header = envelopeHeader(body);
    if (!header) throw Error(ErrorCode::bad_request, "a streaming request is one Connect envelope");
    if (header->length > maxPayload)
        throw Error(ErrorCode::payload_too_large,
                    "the request message is larger than " + std::to_string(maxPayload) + " bytes");
    if (body.size() != kEnvelopeHeaderSize + header->length)
        throw Error(ErrorCode::bad_request, "the request body is not exactly one Connect envelope");
    Envelope e{header->flags, std::string(body.substr(kEnvelopeHeaderSize))};
    if (e.flags != kEnvelopeMessage)
        throw Error(ErrorCode::bad_request,
                    "compressed or end-of-stream envelopes are not accepted in a request");
    return e;
}

}  // namespace airlock::e2b
