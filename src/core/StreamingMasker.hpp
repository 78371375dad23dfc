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
    // The producer dropped bytes here (a process's output ring overran).
    // A held tail is a secret's beginning whose rest is lost: it is returned
    // masked whole ("***"). What follows may start mid-secret: its head is
    // held until it is as long as the longest secret form, and the longest
    // head that ends some secret form is masked.
    std::string gap();
    std::size_t held() const { return pending_.size() + gapHead_.size(); }

  private:
    // The head after a gap, with a secret's end masked; "" while undecided.
    std::string resolveGapHead(bool final);

    std::shared_ptr<const SecretMasker> masker_;
    std::string pending_;
    bool afterGap_ = false;
    std::string gapHead_;  // bytes after a gap, until resolveGapHead decides
};

}  // namespace airlock
