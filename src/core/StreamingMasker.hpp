#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "core/SecretMasker.hpp"

namespace airlock {

// SecretMasker for output that arrives in chunks (streamed execs, process
// logs): a secret split across two chunks is still masked. Each chunk is
// emitted masked except for a tail that could be the beginning of a secret;
// that tail waits for the next chunk (or flush()). Output that cannot be a
// secret's beginning is never held back, so prompts still show at once.
class StreamingMasker {
  public:
    explicit StreamingMasker(std::shared_ptr<const SecretMasker> masker)
        : masker_(std::move(masker)) {}
    // What may be shown now of everything fed so far.
    std::string feed(std::string_view chunk);
    // The held tail, masked: at the end of the stream.
    std::string flush();
    std::size_t held() const { return pending_.size(); }

  private:
    std::shared_ptr<const SecretMasker> masker_;
    std::string pending_;
};

}  // namespace airlock
