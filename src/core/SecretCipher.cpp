#include "core/SecretCipher.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <vector>

#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/Ids.hpp"
#include "core/UniqueFd.hpp"

namespace airlock {
namespace {

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, void (*)(EVP_CIPHER_CTX*)>;

bool parseHexKey(const std::string& hex, std::array<unsigned char, 32>& key) {
    if (hex.size() != 64) return false;
    for (std::size_t i = 0; i < 32; ++i) {
        auto nibble = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        };
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        key[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    return true;
}

}  // namespace

std::string base64Encode(const std::string& bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(bytes.data()),
                            static_cast<int>(bytes.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

std::string base64Decode(const std::string& text) {
    if (text.size() % 4 != 0) throw Error(ErrorCode::bad_request, "not base64");
    std::string out(3 * text.size() / 4 + 1, '\0');
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(text.data()),
                            static_cast<int>(text.size()));
    if (n < 0) throw Error(ErrorCode::bad_request, "not base64");
    std::size_t pad = 0;
    if (!text.empty() && text.back() == '=') ++pad;
    if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
    out.resize(static_cast<std::size_t>(n) - pad);
    return out;
}

std::array<unsigned char, 32> readOrCreateKeyFile(const std::string& path) {
    std::array<unsigned char, 32> key{};
    for (int attempt = 0; attempt < 2; ++attempt) {
        std::ifstream in(path);
        std::string hex;
        if (in && std::getline(in, hex) && parseHexKey(hex, key)) return key;
        if (in) throw Error(ErrorCode::internal, path + " does not hold a 64-hex-character key");
        std::string fresh = randomBytes(key.size());
        std::copy(fresh.begin(), fresh.end(), key.begin());
        std::string text = hexEncode(key.data(), key.size()) + "\n";
        UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (!fd && errno == EEXIST) continue;  // another daemon made it first: read it
        if (!fd ||
            ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
            ::fsync(fd.get()) != 0)
            throw Error(ErrorCode::internal, "cannot write the key " + path);
        return key;
    }
    throw Error(ErrorCode::internal, "cannot read the key " + path);
}

SecretCipher SecretCipher::fromEnvironmentOrFile(const std::string& keyFile) {
    std::array<unsigned char, 32> key{};
    if (const char* env = std::getenv("AIRLOCK_SECRET_KEY"); env && *env) {
        if (!parseHexKey(env, key))
            throw Error(ErrorCode::bad_request, "AIRLOCK_SECRET_KEY must be 64 hex characters");
        return SecretCipher(key);
    }
    key = readOrCreateKeyFile(keyFile);
    return SecretCipher(key);
}

std::string SecretCipher::seal(const std::string& plaintext, const std::string& boundTo) const {
    unsigned char nonce[12];
    std::string fresh = randomBytes(sizeof nonce);
    std::copy(fresh.begin(), fresh.end(), nonce);
    CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
    std::vector<unsigned char> out(sizeof nonce + plaintext.size() + 16);
    std::copy(nonce, nonce + sizeof nonce, out.begin());
    int len = 0, fin = 0;
    int aadLen = 0;
    if (!ctx ||
        EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) != 1 ||
        (!boundTo.empty() &&
         EVP_EncryptUpdate(ctx.get(), nullptr, &aadLen,
                           reinterpret_cast<const unsigned char*>(boundTo.data()),
                           static_cast<int>(boundTo.size())) != 1) ||
        EVP_EncryptUpdate(ctx.get(), out.data() + sizeof nonce, &len,
                          reinterpret_cast<const unsigned char*>(plaintext.data()),
                          static_cast<int>(plaintext.size())) != 1 ||
        EVP_EncryptFinal_ex(ctx.get(), out.data() + sizeof nonce + len, &fin) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, 16,
                            out.data() + sizeof nonce + len + fin) != 1)
        throw Error(ErrorCode::internal, "encryption failed");
    return (boundTo.empty() ? "v1:" : "v2:") +
           base64Encode(std::string(reinterpret_cast<const char*>(out.data()), out.size()));
}

std::string SecretCipher::open(const std::string& sealed, const std::string& boundTo) const {
    // A bound blob never opens unbound, nor an unbound one where a binding is asked for.
    if (sealed.rfind(boundTo.empty() ? "v1:" : "v2:", 0) != 0)
        throw Error(ErrorCode::internal, "sealed secret has the wrong format or binding");
    std::string raw;
    try {
        raw = base64Decode(sealed.substr(3));
    } catch (const Error&) {
        throw Error(ErrorCode::internal, "sealed secret is not base64");
    }
    if (raw.size() < 12 + 16) throw Error(ErrorCode::internal, "sealed secret too short");
    const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
    std::size_t cipherLen = raw.size() - 12 - 16;
    std::string plain(cipherLen, '\0');
    CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
    int len = 0, fin = 0;
    std::vector<unsigned char> tag(bytes + 12 + cipherLen, bytes + raw.size());
    int aadLen = 0;
    if (!ctx ||
        EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), bytes) != 1 ||
        (!boundTo.empty() &&
         EVP_DecryptUpdate(ctx.get(), nullptr, &aadLen,
                           reinterpret_cast<const unsigned char*>(boundTo.data()),
                           static_cast<int>(boundTo.size())) != 1) ||
        EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len,
                          bytes + 12, static_cast<int>(cipherLen)) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, 16, tag.data()) != 1 ||
        EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len,
                            &fin) != 1)
        throw Error(ErrorCode::internal,
                    "sealed secret failed its integrity check (wrong key or modified)");
    return plain;
}

}  // namespace airlock
