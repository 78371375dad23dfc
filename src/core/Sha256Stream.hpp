#pragma once
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace airlock {

// SHA-256 over bytes that arrive in pieces (an upload on its way through).
class Sha256Stream {
  public:
    Sha256Stream();
    ~Sha256Stream();
    Sha256Stream(const Sha256Stream&) = delete;
    Sha256Stream& operator=(const Sha256Stream&) = delete;
    void update(std::string_view bytes);
    // Lower-case hex; ends the computation.
    std::string hexDigest();

  private:
    evp_md_ctx_st* ctx_;
};

}  // namespace airlock
