#pragma once
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace airlock::packages {

// A digest over bytes that arrive in pieces ("sha1", "sha256" or "sha512"),
// for verifying downloads while they stream.
class DigestStream {
  public:
    explicit DigestStream(const std::string& algorithm);
    ~DigestStream();
    DigestStream(const DigestStream&) = delete;
    DigestStream& operator=(const DigestStream&) = delete;
    void update(std::string_view bytes);
    std::string hexDigest();  // lower-case; ends the computation

  private:
    evp_md_ctx_st* ctx_;
};

}  // namespace airlock::packages
