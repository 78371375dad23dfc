#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::guest {

// SHA-1, for git object ids only (the host recomputes every object it takes
// in; an id from the guest only tells it which blobs it already has).
class Sha1 {
  public:
    Sha1();
    void update(std::string_view bytes);
    std::string hexDigest();  // finishes the hash

  private:
    void block(const unsigned char* p);
    std::uint32_t h_[5];
    unsigned char buf_[64];
    std::size_t bufLen_ = 0;
    std::uint64_t total_ = 0;
};

}  // namespace airlock::guest
