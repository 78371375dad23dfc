#include "core/Ids.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>

#include "core/Error.hpp"

namespace airlock {
namespace {
constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz234567";
constexpr std::size_t kIdChars = 20;

std::string base32(const std::string& bytes, std::size_t chars) {
    std::string out;
    out.reserve(chars);
    unsigned buffer = 0;
    int bits = 0;
    for (unsigned char c : bytes) {
        buffer = (buffer << 8) | c;
        bits += 8;
        while (bits >= 5 && out.size() < chars) {
            out.push_back(kAlphabet[(buffer >> (bits - 5)) & 31]);
            bits -= 5;
        }
    }
    return out;
}
}  // namespace

std::string randomBytes(std::size_t count) {
    std::string out(count, '\0');
    std::size_t filled = 0;
    while (filled < count) {
        ssize_t n = ::getrandom(out.data() + filled, count - filled, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Error(ErrorCode::internal, "getrandom failed");
        }
        filled += static_cast<std::size_t>(n);
    }
    return out;
}

std::string newId(std::string_view prefix) {
    return std::string(prefix) + base32(randomBytes(13), kIdChars);
}

bool isValidId(std::string_view id, std::string_view prefix) {
    if (id.size() != prefix.size() + kIdChars || id.substr(0, prefix.size()) != prefix)
        return false;
    for (char c : id.substr(prefix.size()))
        if (kAlphabet.find(c) == std::string_view::npos) return false;
    return true;
}

std::string newSecretToken() { return base32(randomBytes(32), 51); }

std::string newUuid() {
    std::string b = randomBytes(16);
    b[6] = static_cast<char>((b[6] & 0x0f) | 0x40);
    b[8] = static_cast<char>((b[8] & 0x3f) | 0x80);
    char out[37];
    const auto* u = reinterpret_cast<const unsigned char*>(b.data());
    std::snprintf(out, sizeof out,
                  "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                  u[14], u[15]);
    return out;
}

}  // namespace airlock
