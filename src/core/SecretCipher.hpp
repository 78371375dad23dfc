#pragma once
#include <array>
#include <string>

#include "core/Hex.hpp"

namespace airlock {

// AES-256-GCM for secrets at rest. The key comes from AIRLOCK_SECRET_KEY (64
// hex characters) or from a key file made on first use (0600). Sealed text is
// "v1:" + base64(12-byte nonce | ciphertext | 16-byte tag); opening checks the
// tag, so a modified blob is refused, never half-decrypted.
class SecretCipher {
  public:
    explicit SecretCipher(const std::array<unsigned char, 32>& key) : key_(key) {}
    // The key from the environment, else from keyFile (created if missing).
    static SecretCipher fromEnvironmentOrFile(const std::string& keyFile);

    // `boundTo` (associated data, e.g. the owning sandbox's id) is
    // authenticated, not stored: a blob opens only with the same value, so a
    // sealed value copied to another record is refused ("v2:" blobs).
    std::string seal(const std::string& plaintext, const std::string& boundTo = {}) const;
    std::string open(const std::string& sealed, const std::string& boundTo = {})
        const;  // throws Error(internal) on a bad blob

  private:
    std::array<unsigned char, 32> key_;
};

std::string base64Encode(const std::string& bytes);
std::string base64Decode(const std::string& text);  // throws Error(bad_request) on junk
// A 32-byte key kept as 64 hex characters in a 0600 file: read, or made
// once (O_EXCL: two daemons starting together never hold different keys).
// Error(internal) for a file that holds anything else.
std::array<unsigned char, 32> readOrCreateKeyFile(const std::string& path);

}  // namespace airlock
