#include "agent/Sha1.hpp"

#include <cstring>

namespace airlock::guest {
namespace {
inline std::uint32_t rol(std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }
}  // namespace

Sha1::Sha1() : h_{0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u} {}

void Sha1::block(const unsigned char* p) {
    std::uint32_t w[80];
    for (int i = 0; i < 16; ++i)
        w[i] = (std::uint32_t(p[4 * i]) << 24) | (std::uint32_t(p[4 * i + 1]) << 16) |
               (std::uint32_t(p[4 * i + 2]) << 8) | std::uint32_t(p[4 * i + 3]);
    for (int i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4];
    for (int i = 0; i < 80; ++i) {
        std::uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999u;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1u;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDCu;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6u;
        }
        std::uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
}

void Sha1::update(std::string_view bytes) {
    total_ += bytes.size();
    auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t n = bytes.size();
    if (bufLen_) {
        std::size_t take = std::min(n, 64 - bufLen_);
        std::memcpy(buf_ + bufLen_, p, take);
        bufLen_ += take;
        p += take;
        n -= take;
        if (bufLen_ < 64) return;
        block(buf_);
        bufLen_ = 0;
    }
    for (; n >= 64; n -= 64, p += 64) block(p);
    std::memcpy(buf_, p, n);
    bufLen_ = n;
}

std::string Sha1::hexDigest() {
    std::uint64_t bits = total_ * 8;
    unsigned char pad[72] = {0x80};
    std::size_t padLen = (bufLen_ < 56 ? 56 - bufLen_ : 120 - bufLen_);
    update(std::string_view(reinterpret_cast<char*>(pad), padLen));
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(std::string_view(reinterpret_cast<char*>(len), 8));
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (std::uint32_t v : h_)
        for (int s = 28; s >= 0; s -= 4) out.push_back(hex[(v >> s) & 0xf]);
    return out;
}

}  // namespace airlock::guest
