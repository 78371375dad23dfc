#include "packages/DigestStream.hpp"

#include <openssl/evp.h>

#include "core/Error.hpp"
#include "core/Hex.hpp"

namespace airlock::packages {

DigestStream::DigestStream(const std::string& algorithm) : ctx_(EVP_MD_CTX_new()) {
    const EVP_MD* md = algorithm == "sha1"     ? EVP_sha1()
                       : algorithm == "sha256" ? EVP_sha256()
                       : algorithm == "sha512" ? EVP_sha512()
                                               : nullptr;
    if (!ctx_ || !md || EVP_DigestInit_ex(ctx_, md, nullptr) != 1) {
        EVP_MD_CTX_free(ctx_);
        throw Error(ErrorCode::internal, "cannot start a " + algorithm + " digest");
    }
}

DigestStream::~DigestStream() { EVP_MD_CTX_free(ctx_); }

void DigestStream::update(std::string_view bytes) {
    EVP_DigestUpdate(ctx_, bytes.data(), bytes.size());
}

std::string DigestStream::hexDigest() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, out, &n);
    return hexEncode(out, n);
}

}  // namespace airlock::packages
