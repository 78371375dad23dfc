#include "core/Sha256Stream.hpp"

#include <openssl/evp.h>

#include "core/Error.hpp"
#include "core/Hex.hpp"

namespace airlock {

Sha256Stream::Sha256Stream() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1)
        throw Error(ErrorCode::internal, "sha256 init failed");
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(ctx_); }

void Sha256Stream::update(std::string_view bytes) {
    if (EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()) != 1)
        throw Error(ErrorCode::internal, "sha256 update failed");
}

std::string Sha256Stream::hexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_, digest, &len) != 1)
        throw Error(ErrorCode::internal, "sha256 final failed");
    return hexEncode(digest, len);
}

}  // namespace airlock
