// libFuzzer target: an intercepted host's answer, cut into reads anywhere
// and flushed anywhere. Whatever the bytes and the cuts, the guest gets as
// many bytes as the host sent, and no value whole unless a flush fell
// inside it (then never the part after the flush).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "egress/AnswerMasker.hpp"

using namespace airlock::egress;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    // The first byte picks the read sizes; an odd one also flushes after each read.
    unsigned cut = (data[0] % 31) + 1;
    bool flushes = data[0] & 0x80;
    std::string answer(reinterpret_cast<const char*>(data) + 1, size - 1);
    AnswerMasker masker({"VALUE-A-1234", "VAL-B-99"});
    std::string out;
    for (std::size_t at = 0; at < answer.size(); at += cut) {
        out += masker.feed(std::string_view(answer).substr(at, cut));
        if (flushes) out += masker.flush();
    }
    out += masker.flush();
    if (out.size() != answer.size()) std::abort();
    if (!flushes && (out.find("VALUE-A-1234") != std::string::npos ||
                     out.find("VAL-B-99") != std::string::npos))
        std::abort();
    return 0;
}
