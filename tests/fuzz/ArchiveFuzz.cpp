// libFuzzer target: the file archive the agent unpacks and the glob matcher
// both sides use. Arbitrary bytes in arbitrary chunks: the reader must never
// crash, only ever announce safe relative paths, and never hand out more
// bytes for an entry than its header said; wildmatch must stay fast on any
// pattern (a hostile .gitignore is the guest's own to write).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/FileArchive.hpp"
#include "protocol/Messages.hpp"
#include "protocol/PathGlob.hpp"

using namespace airlock::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    std::string_view input(reinterpret_cast<const char*>(data + 2), size - 2);
    if (data[0] & 1) {
        // wildmatch: pattern and text split at the first NUL.
        auto nul = input.find('\0');
        std::string_view pattern = input.substr(0, nul),
                         text = nul == std::string_view::npos ? "" : input.substr(nul + 1);
        (void)wildmatch(pattern.substr(0, 1024), text.substr(0, 4096));
        return 0;
    }
    std::size_t chunk = 1 + data[1] % 64;
    std::uint64_t expected = 0, seen = 0;
    ArchiveReader reader({[&](const ArchiveEntry& e) {
                              if (!isSafeRelativePath(e.path)) std::abort();
                              expected = e.size;
                              seen = 0;
                          },
                          [&](const ArchiveEntry&, std::string_view b) {
                              seen += b.size();
                              if (seen > expected) std::abort();
                          },
                          [&](const ArchiveEntry&) {
                              if (seen != expected) std::abort();
                          }});
    try {
        while (!input.empty()) {
            std::size_t n = std::min(chunk, input.size());
            reader.feed(input.substr(0, n));
            input.remove_prefix(n);
        }
    } catch (const MessageError&) {
    }
    return 0;
}
