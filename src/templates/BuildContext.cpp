#include "templates/BuildContext.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/Error.hpp"
#include "core/Sha256Stream.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::templates {
namespace {

constexpr std::size_t kBlock = 512;
constexpr std::size_t kMaxPath = 4096;            // PATH_MAX: longer cannot be extracted anyway
constexpr std::size_t kMaxComponent = 255;        // NAME_MAX
constexpr std::uint64_t kMaxLongName = 64 << 10;  // a GNU 'L'/'K' entry's data
constexpr std::uint64_t kMaxPaxData = 1 << 20;    // a pax 'x'/'g' entry's data
constexpr int kMaxMetaInARow = 16;                // extended headers before one entry
constexpr std::size_t kChunk = 1 << 20;           // file bytes read at a time
constexpr std::uint64_t kMaxOctal11 = 077777777777ull;  // what 11 octal digits hold

using Block = std::array<unsigned char, kBlock>;

// Paths in messages: bounded and printable, whatever the archive held.
std::string shown(std::string_view path) {
    std::string out;
    for (char c : path.substr(0, 200)) {
        auto u = static_cast<unsigned char>(c);
        out += (u < 0x20 || u == 0x7f) ? '?' : c;
    }
    if (path.size() > 200) out += "...";
    return "'" + out + "'";
}

[[noreturn]] void malformed(const std::string& why) {
    throw Error(ErrorCode::bad_request, "the build context is not a valid tar: " + why);
}

[[noreturn]] void refused(const std::string& why) {
    throw Error(ErrorCode::bad_request, "the build context " + why);
}

// ---- reading ----------------------------------------------------------

void preadAll(int fd, char* out, std::size_t size, std::uint64_t offset) {
    std::size_t done = 0;
    while (done < size) {
        ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw Error(ErrorCode::internal, "cannot read the build context");
        if (n == 0) throw Error(ErrorCode::internal, "the build context is shorter than it was");
        done += static_cast<std::size_t>(n);
    }
}

// A tar file read front to back; its size is known up front, so a header
// promising more bytes than are left is caught before anything is read.
class TarFile {
  public:
    explicit TarFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
        struct stat st {};
        if (!fd_ || ::fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode))
            throw Error(ErrorCode::internal, "cannot open the build context " + path);
        size_ = static_cast<std::uint64_t>(st.st_size);
    }
    std::uint64_t offset() const { return offset_; }
    std::uint64_t size() const { return size_; }
    int fd() const { return fd_.get(); }

    // The next block; false at the end of the file.
    bool readBlock(Block& out) {
        if (offset_ == size_) return false;
        if (size_ - offset_ < kBlock) malformed("it ends inside a header block");
        preadAll(fd_.get(), reinterpret_cast<char*>(out.data()), kBlock, offset_);
        offset_ += kBlock;
        return true;
    }
    // `size` data bytes and their padding must be there.
    void require(std::uint64_t size, const std::string& what) const {
        if (size > size_ - offset_ || padded(size) > size_ - offset_)
            malformed("it ends inside the data of " + what);
    }
    std::string read(std::uint64_t size, const std::string& what) {
        require(size, what);
        std::string out(static_cast<std::size_t>(size), '\0');
        preadAll(fd_.get(), out.data(), out.size(), offset_);
        offset_ += padded(size);
        return out;
    }
    void skip(std::uint64_t size, const std::string& what) {
        require(size, what);
        offset_ += padded(size);
    }
    // Streams the data through SHA-256: never the whole file in memory.
    std::string hash(std::uint64_t size, const std::string& what) {
        require(size, what);
        Sha256Stream sha;
        std::string buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, kChunk)), '\0');
        for (std::uint64_t done = 0; done < size;) {
            auto n = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, buf.size()));
            preadAll(fd_.get(), buf.data(), n, offset_ + done);
            sha.update(std::string_view(buf.data(), n));
            done += n;
        }
        offset_ += padded(size);
        return sha.hexDigest();
    }
    static std::uint64_t padded(std::uint64_t size) {
        return size + (kBlock - size % kBlock) % kBlock;
    }

  private:
    UniqueFd fd_;
    std::uint64_t size_ = 0;
    std::uint64_t offset_ = 0;
};

// A header field as a C string: up to its first NUL.
std::string_view field(const Block& b, std::size_t at, std::size_t len) {
    auto p = reinterpret_cast<const char*>(b.data() + at);
    return std::string_view(p, ::strnlen(p, len));
}

// A numeric field: octal digits (leading spaces, ending in a space or NUL)
// or GNU's base-256 (high bit of the first byte set; 0xff.. negative).
std::int64_t number(const Block& b, std::size_t at, std::size_t len, const char* what) {
    const unsigned char* p = b.data() + at;
    if (p[0] & 0x80) {
        unsigned char inv = (p[0] & 0x40) ? 0xff : 0x00;
        std::uint64_t x = 0;
        for (std::size_t i = 0; i < len; ++i) {
            unsigned char c = p[i] ^ inv;
            if (i == 0) c &= 0x7f;
            if (x >> 55) malformed(std::string("its ") + what + " field overflows");
            x = x << 8 | c;
        }
        if (x >> 63) malformed(std::string("its ") + what + " field overflows");
        return inv ? ~static_cast<std::int64_t>(x) : static_cast<std::int64_t>(x);
    }
    std::size_t i = 0;
    while (i < len && p[i] == ' ') ++i;
    std::uint64_t x = 0;
    for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
        if (x >> 60) malformed(std::string("its ") + what + " field overflows");
        x = x * 8 + (p[i] - '0');
    }
    for (; i < len; ++i)
        if (p[i] != ' ' && p[i] != '\0')
            malformed(std::string("its ") + what + " field is not a number");
    return static_cast<std::int64_t>(x);
}

bool allZero(const Block& b) {
    return std::all_of(b.begin(), b.end(), [](unsigned char c) { return c == 0; });
}

// The header checksum, as unsigned bytes or (old tars) signed ones.
bool checksumOk(const Block& b) {
    std::int64_t stored = number(b, 148, 8, "checksum");
    std::int64_t unsignedSum = 0, signedSum = 0;
    for (std::size_t i = 0; i < kBlock; ++i) {
        bool inField = i >= 148 && i < 156;
        unsignedSum += inField ? ' ' : b[i];
        signedSum += inField ? ' ' : static_cast<signed char>(b[i]);
    }
    return stored == unsignedSum || stored == signedSum;
}

// What a pax 'x' header sets for the entry after it.
struct Pending {
    std::optional<std::string> path, linkPath;      // pax
    std::optional<std::string> longName, longLink;  // GNU 'L', 'K'
    std::optional<std::uint64_t> size;
    std::optional<std::int64_t> mtime;
    int count = 0;
};

std::uint64_t decimal(std::string_view v, const char* what) {
    if (v.empty() || v.size() > 19) malformed(std::string("its pax ") + what + " is not a number");
    std::uint64_t x = 0;
    for (char c : v) {
        if (c < '0' || c > '9') malformed(std::string("its pax ") + what + " is not a number");
        x = x * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return x;
}

// pax records: "<length> <key>=<value>\n", the length counting the whole record.
void readPax(std::string_view data, Pending& pending) {
    while (!data.empty()) {
        std::size_t space = data.find(' ');
        if (space == std::string_view::npos || space == 0 || space > 20)
            malformed("a pax record has no length");
        std::uint64_t length = decimal(data.substr(0, space), "record length");
        if (length <= space + 1 || length > data.size() || data[length - 1] != '\n')
            malformed("a pax record's length is wrong");
        std::string_view record = data.substr(space + 1, length - space - 2);
        data.remove_prefix(length);
        std::size_t eq = record.find('=');
        if (eq == std::string_view::npos || eq == 0) malformed("a pax record has no key");
        std::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
        // An empty value takes the keyword back out of effect (POSIX).
        if (key == "path") {
            pending.path = value.empty() ? std::nullopt : std::optional<std::string>(value);
        } else if (key == "linkpath") {
            pending.linkPath = value.empty() ? std::nullopt : std::optional<std::string>(value);
        } else if (key == "size") {
            pending.size = value.empty() ? std::nullopt : std::optional(decimal(value, "size"));
        } else if (key == "mtime") {
            // Seconds with an optional sign and fraction; only whole seconds are kept.
            std::string_view whole = value.substr(0, value.find('.'));
            bool negative = !whole.empty() && whole.front() == '-';
            if (negative) whole.remove_prefix(1);
            auto secs = static_cast<std::int64_t>(decimal(whole, "mtime") & 0x7fffffffffffffffull);
            pending.mtime = negative ? -secs : secs;
        } else if (key.substr(0, 11) == "GNU.sparse.") {
            refused("holds a sparse file, which is not supported");
        }
        // Everything else (atime, uid, uname, xattrs...) has no part in a copy.
    }
}

// A context-relative path: no leading ./, no empty or '.' components, no
// trailing slash; "" for the context's root. Absolute paths and '..'
// components are refused: extracting them would write outside the copy.
std::string cleanEntryPath(std::string_view raw) {
    if (raw.empty()) malformed("an entry has no name");
    if (raw.size() > kMaxPath) refused("has a path longer than 4096 bytes");
    if (raw.find('\0') != std::string_view::npos) malformed("a path holds a NUL byte");
    if (raw.front() == '/') refused("has an absolute path " + shown(raw));
    std::string out;
    std::size_t i = 0;
    while (i <= raw.size()) {
        std::size_t slash = std::min(raw.find('/', i), raw.size());
        std::string_view comp = raw.substr(i, slash - i);
        i = slash + 1;
        if (comp.empty() || comp == ".") continue;
        if (comp == "..") refused("has a path with a '..' component " + shown(raw));
        if (comp.size() > kMaxComponent)
            refused("has a path component over 255 bytes " + shown(raw));
        if (!out.empty()) out += '/';
        out += comp;
    }
    return out;
}

std::string typeName(char type) {
    switch (type) {
        case '1':
            return "a hardlink";
        case '3':
            return "a character device";
        case '4':
            return "a block device";
        case '6':
            return "a FIFO";
        case 'S':
            return "a sparse file";
        case 'M':
            return "a multi-volume continuation";
        case 'V':
            return "a volume label";
        case 'D':
            return "a GNU dump directory";
        default:
            break;
    }
    auto u = static_cast<unsigned char>(type);
    if (u >= 0x21 && u < 0x7f) return std::string("an entry of type '") + type + "'";
    return "an entry of type " + std::to_string(u);
}

// Those of `paths` (sorted) that lie under `parent`: the range starting at parent + "/".
bool anyUnder(const std::vector<std::string_view>& sorted, const std::string& parent) {
    std::string prefix = parent + "/";
    auto it = std::lower_bound(sorted.begin(), sorted.end(), std::string_view(prefix));
    return it != sorted.end() && it->substr(0, prefix.size()) == prefix;
}

// ---- copy sources -----------------------------------------------------

// Docker's containsWildcards: '\' escapes the next character.
bool hasWildcards(std::string_view s) {
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\')
            ++i;
        else if (s[i] == '*' || s[i] == '?' || s[i] == '[')
            return true;
    }
    return false;
}

// One UTF-8 character at `i` (an invalid byte is one character of its own,
// as Go reads it); `valid` false for such a byte.
char32_t decodeRune(std::string_view s, std::size_t& i, bool* valid = nullptr) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80         ? 1
                      : (c >> 5) == 6  ? 2
                      : (c >> 4) == 14 ? 3
                      : (c >> 3) == 30 ? 4
                                       : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len != 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
        auto cc = static_cast<unsigned char>(s[i + k]);
        if ((cc >> 6) != 2) ok = false;
        cp = (cp << 6) | (cc & 0x3f);
    }
    if (valid) *valid = ok;
    if (!ok) {
        ++i;
        return 0xfffd;
    }
    i += len;
    return cp;
}

// A component pattern as Go's filepath.Match reads it, checked whole up
// front (a malformed pattern is an error even where matching would stop early).
class Glob {
  public:
    explicit Glob(std::string_view pattern) {
        std::size_t i = 0;
        while (i < pattern.size()) {
            char c = pattern[i];
            if (c == '*') {
                tokens_.emplace_back(Token::star);
                ++i;
            } else if (c == '?') {
                tokens_.emplace_back(Token::any);
                ++i;
            } else if (c == '[') {
                ++i;
                Token t(Token::cls);
                if (i < pattern.size() && pattern[i] == '^') {
                    t.negated = true;
                    ++i;
                }
                while (true) {
                    if (i < pattern.size() && pattern[i] == ']' && !t.ranges.empty()) {
                        ++i;
                        break;
                    }
                    char32_t lo = classChar(pattern, i), hi = lo;
                    if (pattern[i] == '-') {
                        ++i;
                        hi = classChar(pattern, i);
                    }
                    t.ranges.emplace_back(lo, hi);
                }
                tokens_.push_back(std::move(t));
            } else {
                if (c == '\\') {
                    ++i;
                    if (i == pattern.size()) bad();
                }
                // Literals compare as bytes, as Go's matchChunk does.
                Token t(Token::literal);
                t.byte = static_cast<unsigned char>(pattern[i++]);
                tokens_.push_back(std::move(t));
            }
        }
    }

    // Single-star backtracking: every token but '*' takes one character
    // of a width fixed by the name's bytes, so the leftmost match after the
    // last '*' is the one to keep: exact, and never exponential.
    bool matches(std::string_view name) const {
        std::size_t t = 0, n = 0;
        std::size_t starT = std::string_view::npos, starN = 0;
        while (n < name.size()) {
            if (t < tokens_.size() && tokens_[t].kind == Token::star) {
                starT = ++t;
                starN = n;
                continue;
            }
            if (t < tokens_.size() && tokens_[t].take(name, n)) {
                ++t;
                continue;
            }
            if (starT == std::string_view::npos) return false;
            t = starT;
            n = ++starN;  // '*' takes one more byte, as Go's Match retries
        }
        while (t < tokens_.size() && tokens_[t].kind == Token::star) ++t;
        return t == tokens_.size();
    }

  private:
    struct Token {
        enum Kind { star, any, cls, literal };
        explicit Token(Kind k) : kind(k) {}
        Kind kind;
        bool negated = false;
        unsigned char byte = 0;                             // literal
        std::vector<std::pair<char32_t, char32_t>> ranges;  // class
        // Takes what it matches at `n` of `name`, advancing `n`; each
        // token's width there is fixed by the bytes, never a choice.
        bool take(std::string_view name, std::size_t& n) const {
            if (kind == literal) {
                if (static_cast<unsigned char>(name[n]) != byte) return false;
                ++n;
                return true;
            }
            std::size_t next = n;
            char32_t r = decodeRune(name, next);
            bool ok = kind == any;
            if (kind == cls) {
                bool in = std::any_of(ranges.begin(), ranges.end(), [&](const auto& lh) {
                    return lh.first <= r && r <= lh.second;
                });
                ok = in != negated;
            }
            if (ok) n = next;
            return ok;
        }
    };
    [[noreturn]] static void bad() { throw Error(ErrorCode::bad_request, "malformed pattern"); }
    // Go's getEsc: a class character, '\' escaping, never a bare '-' or ']',
    // and the class must go on after it.
    static char32_t classChar(std::string_view p, std::size_t& i) {
        if (i >= p.size() || p[i] == '-' || p[i] == ']') bad();
        if (p[i] == '\\' && ++i >= p.size()) bad();
        bool valid = true;
        char32_t r = decodeRune(p, i, &valid);
        if (!valid || i >= p.size()) bad();
        return r;
    }
    std::vector<Token> tokens_;
};

// A COPY source: its components, each a literal or a pattern.
struct Source {
    std::vector<std::string> comps;
    std::vector<std::optional<Glob>> globs;  // per component; nullopt: literal
    bool wantsDirectory = false;             // "app/" or "app/."
};

Source parseSource(std::string_view src) {
    std::string s = "copy source " + shown(src);
    if (src.size() > kMaxPath) throw Error(ErrorCode::bad_request, s + " is too long");
    if (src.find('\0') != std::string_view::npos)
        throw Error(ErrorCode::bad_request, s + " holds a NUL byte");
    Source out;
    std::size_t i = 0;
    // A leading '/' is the context's root (Docker's COPY /x reads context/x).
    while (i <= src.size()) {
        std::size_t slash = std::min(src.find('/', i), src.size());
        std::string_view comp = src.substr(i, slash - i);
        i = slash + 1;
        if (comp.empty() || comp == ".") continue;
        if (comp == "..") {
            if (out.comps.empty())
                throw Error(ErrorCode::bad_request, s + " is outside the build context");
            out.comps.pop_back();
            continue;
        }
        out.comps.emplace_back(comp);
    }
    out.wantsDirectory = !out.comps.empty() && (src.ends_with("/") || src.ends_with("/."));
    for (const auto& comp : out.comps) {
        if (!hasWildcards(comp)) {
            out.globs.emplace_back();
            continue;
        }
        try {
            out.globs.emplace_back(Glob(comp));
        } catch (const Error&) {
            throw Error(ErrorCode::bad_request, s + " has a malformed pattern");
        }
    }
    return out;
}

// ---- writing ----------------------------------------------------------

// A ustar file written through a buffer; Error(internal) on any failure.
class TarWriter {
  public:
    explicit TarWriter(int fd) : fd_(fd) {}

    void header(const std::string& name, char type, std::uint32_t mode, std::uint64_t size,
                std::int64_t mtime, const std::string& link) {
        if (link.size() > 100) longEntry('K', link);
        std::string nameField = name, prefixField;
        if (name.size() > 100) {
            // ustar's prefix: split at a '/' with at most 155 bytes before
            // it and 1-100 after; else a GNU longname entry first.
            std::size_t slash = name.rfind('/', std::min<std::size_t>(155, name.size() - 1));
            if (slash != std::string::npos && slash > 0 && name.size() - slash - 1 <= 100 &&
                name.size() - slash - 1 > 0) {
                prefixField = name.substr(0, slash);
                nameField = name.substr(slash + 1);
            } else {
                longEntry('L', name);
                nameField = name.substr(0, 100);
            }
        }
        Block b{};
        put(b, 0, 100, nameField);
        octal(b, 100, 8, mode & 07777);
        octal(b, 108, 8, 0);  // uid
        octal(b, 116, 8, 0);  // gid
        sizeField(b, size);
        octal(b, 136, 12,
              static_cast<std::uint64_t>(std::clamp<std::int64_t>(mtime, 0, kMaxOctal11)));
        b[156] = static_cast<unsigned char>(type);
        put(b, 157, 100, link.substr(0, 100));
        std::memcpy(b.data() + 257,
                    "ustar\0"
                    "00",
                    8);
        put(b, 345, 155, prefixField);
        emit(b);
    }
    void data(std::string_view bytes) { append(bytes); }
    void pad(std::uint64_t size) {
        append(std::string(static_cast<std::size_t>((kBlock - size % kBlock) % kBlock), '\0'));
    }
    void finish() {
        append(std::string(2 * kBlock, '\0'));
        flush();
    }

  private:
    // GNU's "././@LongLink" entry carrying the name (or link) after it.
    void longEntry(char type, const std::string& value) {
        Block b{};
        put(b, 0, 100, "././@LongLink");
        octal(b, 100, 8, 0);
        octal(b, 108, 8, 0);
        octal(b, 116, 8, 0);
        sizeField(b, value.size() + 1);
        octal(b, 136, 12, 0);
        b[156] = static_cast<unsigned char>(type);
        std::memcpy(b.data() + 257, "ustar  \0", 8);
        emit(b);
        append(value);
        append(std::string_view("\0", 1));
        pad(value.size() + 1);
    }
    static void put(Block& b, std::size_t at, std::size_t len, std::string_view v) {
        std::memcpy(b.data() + at, v.data(), std::min(len, v.size()));
    }
    static void octal(Block& b, std::size_t at, std::size_t len, std::uint64_t v) {
        // len-1 digits, zero-padded, then a NUL.
        for (std::size_t i = len - 1; i-- > 0; v >>= 3)
            b[at + i] = static_cast<unsigned char>('0' + (v & 7));
        b[at + len - 1] = '\0';
    }
    static void sizeField(Block& b, std::uint64_t size) {
        if (size <= kMaxOctal11) return octal(b, 124, 12, size);
        // GNU base-256 for 8 GiB and over: a marker byte, then big-endian.
        b[124] = 0x80;
        for (std::size_t i = 11; i >= 1; --i, size >>= 8)
            b[124 + i] = static_cast<unsigned char>(size & 0xff);
    }
    void emit(Block& b) {
        std::memset(b.data() + 148, ' ', 8);
        unsigned sum = 0;
        for (unsigned char c : b) sum += c;
        for (std::size_t i = 6; i-- > 0; sum >>= 3)
            b[148 + i] = static_cast<unsigned char>('0' + (sum & 7));
        b[154] = '\0';
        b[155] = ' ';
        append(std::string_view(reinterpret_cast<const char*>(b.data()), kBlock));
    }
    void append(std::string_view bytes) {
        buf_.append(bytes);
        if (buf_.size() >= kChunk) flush();
    }
    void flush() {
        std::size_t done = 0;
        while (done < buf_.size()) {
            ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) throw Error(ErrorCode::internal, "cannot write the copy's tar");
            done += static_cast<std::size_t>(n);
        }
        buf_.clear();
    }
    int fd_;
    std::string buf_;
};

}  // namespace

// ---- BuildContext -----------------------------------------------------

BuildContext BuildContext::open(const std::string& tarPath, std::size_t maxEntries,
                                std::uint64_t maxBytes) {
    TarFile tar(tarPath);
    {
        // Compressed contexts, named: a bare checksum error would puzzle.
        // Only when the first block is no tar header: a plain tar whose
        // first file is named "BZh..." starts with bzip2's magic too.
        Block first{};
        bool tarHeader = false;
        preadAll(tar.fd(), reinterpret_cast<char*>(first.data()),
                 static_cast<std::size_t>(std::min<std::uint64_t>(tar.size(), kBlock)), 0);
        try {
            tarHeader = tar.size() >= kBlock && checksumOk(first);
        } catch (const Error&) {
        }
        auto starts = [&](std::string_view m) {
            return !tarHeader && tar.size() >= m.size() &&
                   std::memcmp(first.data(), m.data(), m.size()) == 0;
        };
        if (starts("\x1f\x8b"))
            refused("is gzip-compressed: gzip contexts are not supported, send a plain tar");
        if (starts("BZh") || starts("\xfd\x37\x7a\x58\x5a") || starts("\x28\xb5\x2f\xfd"))
            refused("is compressed (bzip2, xz or zstd): send a plain tar");
    }

    BuildContext ctx;
    ctx.tarPath_ = tarPath;
    std::unordered_map<std::string, std::size_t> byPath;
    std::size_t headers = 0;
    std::uint64_t totalBytes = 0;
    Pending pending;
    int zeroBlocks = 0;
    Block b{};
    while (true) {
        const std::uint64_t at = tar.offset();
        if (!tar.readBlock(b)) {
            if (zeroBlocks == 1 && pending.count == 0) break;  // EOF after one zero block
            malformed(at == 0 ? "it is empty" : "it ends without its end-of-archive blocks");
        }
        if (allZero(b)) {
            if (pending.count) malformed("an extended header has no entry after it");
            if (++zeroBlocks == 2) break;
            continue;
        }
        if (zeroBlocks) malformed("a lone zero block at offset " + std::to_string(at - kBlock));
        if (!checksumOk(b)) malformed("a header checksum is wrong at offset " + std::to_string(at));
        const char type = static_cast<char>(b[156]);
        const bool posixUstar = std::memcmp(b.data() + 257, "ustar\0", 6) == 0;
        std::int64_t rawSize = number(b, 124, 12, "size");
        if (rawSize < 0) malformed("a size is negative");
        const auto headerSize = static_cast<std::uint64_t>(rawSize);

        // Extended headers: they describe the entry after them.
        if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
            if (++pending.count > kMaxMetaInARow) malformed("too many extended headers in a row");
            std::string what = "an extended header";
            if (type == 'g') {
                if (headerSize > kMaxPaxData) malformed("a pax header is over 1 MiB");
                tar.skip(headerSize, what);  // global: no part in a copy
            } else if (type == 'x') {
                if (headerSize > kMaxPaxData) malformed("a pax header is over 1 MiB");
                readPax(tar.read(headerSize, what), pending);
            } else {
                if (headerSize > kMaxLongName) malformed("a GNU long name is over 64 KiB");
                std::string value = tar.read(headerSize, what);
                value.resize(::strnlen(value.c_str(), value.size()));
                (type == 'L' ? pending.longName : pending.longLink) = std::move(value);
            }
            continue;
        }

        if (++headers > maxEntries)
            refused("has more than " + std::to_string(maxEntries) + " entries");
        std::string rawName;
        if (pending.path)
            rawName = *pending.path;
        else if (pending.longName)
            rawName = *pending.longName;
        else {
            std::string_view prefix = posixUstar ? field(b, 345, 155) : std::string_view();
            rawName = prefix.empty() ? std::string(field(b, 0, 100))
                                     : std::string(prefix) + "/" + std::string(field(b, 0, 100));
        }
        ContextEntry e;
        e.type = type;
        if (type == '\0' || type == '7') e.type = '0';
        // V7 tars mark directories by a trailing slash on a plain entry.
        if (type == '\0' && !rawName.empty() && rawName.back() == '/') e.type = '5';
        if (e.type != '0' && e.type != '5' && e.type != '2')
            refused("holds " + typeName(type) + " " + shown(rawName) + ", which is not supported");
        e.path = cleanEntryPath(rawName);
        e.mode = static_cast<std::uint32_t>(number(b, 100, 8, "mode") & 07777);
        e.mtime = pending.mtime ? *pending.mtime : number(b, 136, 12, "mtime");
        const std::uint64_t size = pending.size ? *pending.size : headerSize;
        if (e.type == '2') {
            e.linkTarget = pending.linkPath   ? *pending.linkPath
                           : pending.longLink ? *pending.longLink
                                              : std::string(field(b, 157, 100));
            if (e.linkTarget.empty() || e.linkTarget.size() > kMaxPath ||
                e.linkTarget.find('\0') != std::string::npos)
                malformed("the symlink " + shown(e.path) + " has no usable target");
        }
        pending = Pending{};
        if (e.type != '0') {
            // Directories and symlinks carry no data; one that claims some
            // would be read differently by different tars.
            if (size != 0) malformed("the entry " + shown(e.path) + " has data but is no file");
        } else {
            if (size > maxBytes - totalBytes)
                refused("holds more than " + std::to_string(maxBytes) + " bytes of files");
            totalBytes += size;
            e.size = size;
            e.dataOffset = tar.offset();
            e.sha256 = tar.hash(size, shown(e.path));
        }
        if (e.path.empty()) {
            if (e.type != '5') malformed("a file entry names the context's root");
            continue;  // "./": the root, nothing to copy
        }
        // Named twice: the later one is what extraction would leave.
        auto [it, fresh] = byPath.try_emplace(e.path, ctx.entries_.size());
        if (fresh)
            ctx.entries_.push_back(std::move(e));
        else
            ctx.entries_[it->second] = std::move(e);
    }

    // Nothing may lie under a symlink or file of the archive: extracting
    // "link/x" after "link -> /etc" writes through the link.
    std::vector<std::string_view> sorted;
    sorted.reserve(ctx.entries_.size());
    for (const auto& e : ctx.entries_) sorted.push_back(e.path);
    std::sort(sorted.begin(), sorted.end());
    for (const auto& e : ctx.entries_)
        if (e.type != '5' && anyUnder(sorted, e.path))
            refused("has entries under " + shown(e.path) + ", which is " +
                    (e.type == '2' ? "a symlink" : "a file"));
    return ctx;
}

BuildContext::Plan BuildContext::plan(std::string_view src) const {
    const Source s = parseSource(src);
    const std::size_t n = s.comps.size();
    Plan plan;
    bool sawNonDirectory = false;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        const ContextEntry& e = entries_[i];
        // Match the source's components against the entry's first ones.
        std::size_t pos = 0, matched = 0;
        bool ok = true;
        while (matched < n && pos <= e.path.size()) {
            std::size_t slash = std::min(e.path.find('/', pos), e.path.size());
            std::string_view comp = std::string_view(e.path).substr(pos, slash - pos);
            ok = s.globs[matched] ? s.globs[matched]->matches(comp) : comp == s.comps[matched];
            if (!ok) break;
            ++matched;
            pos = slash + 1;
        }
        if (!ok || matched < n) continue;
        if (pos > e.path.size()) {
            // The entry is the match itself.
            if (e.type == '5') {
                plan.selected.push_back(i);  // a directory: its contents are copied
                continue;
            }
            if (s.wantsDirectory) {
                sawNonDirectory = true;
                continue;
            }
            plan.selected.push_back(i);
            plan.writes.push_back({e.path.substr(e.path.rfind('/') + 1), i});
        } else {
            // Under a matched directory (for "" everything is).
            plan.selected.push_back(i);
            plan.writes.push_back({e.path.substr(pos), i});
        }
    }
    std::string s0 = "copy source " + shown(src);
    if (plan.selected.empty()) {
        if (sawNonDirectory) throw Error(ErrorCode::unprocessable, s0 + " is not a directory");
        throw Error(ErrorCode::unprocessable, s0 + " is not in the build context");
    }
    // Globs can land two matches at one path: the later wins, as a copy
    // of one after the other would leave it.
    std::unordered_map<std::string, std::size_t> at;
    std::vector<Planned> writes;
    for (auto& w : plan.writes) {
        auto [it, fresh] = at.try_emplace(w.relPath, writes.size());
        if (fresh)
            writes.push_back(std::move(w));
        else
            writes[it->second] = std::move(w);
    }
    plan.writes = std::move(writes);
    std::vector<std::string_view> sorted;
    for (const auto& w : plan.writes) sorted.push_back(w.relPath);
    std::sort(sorted.begin(), sorted.end());
    for (const auto& w : plan.writes)
        if (entries_[w.index].type != '5' && anyUnder(sorted, w.relPath))
            throw Error(ErrorCode::unprocessable,
                        s0 + " puts both a file and a directory at " + shown(w.relPath));
    return plan;
}

std::vector<ContextEntry> BuildContext::select(std::string_view src) const {
    std::vector<ContextEntry> out;
    for (std::size_t i : plan(src).selected) out.push_back(entries_[i]);
    return out;
}

std::string BuildContext::digestOf(std::string_view src) const {
    Plan p = plan(src);
    std::sort(p.writes.begin(), p.writes.end(),
              [](const Planned& a, const Planned& b) { return a.relPath < b.relPath; });
    // Fixed fields, each NUL-terminated: paths and targets hold no NUL, so
    // no two different lists encode alike.
    Sha256Stream sha;
    sha.update(std::string_view("airlock-copy-v1\0", 16));
    for (const auto& w : p.writes) {
        const ContextEntry& e = entries_[w.index];
        std::string record = w.relPath;
        record += '\0';
        record += e.type;
        record += '\0';
        record += std::to_string(e.mode);
        record += '\0';
        record += std::to_string(e.size);
        record += '\0';
        record += e.type == '0' ? e.sha256 : e.linkTarget;
        record += '\0';
        sha.update(record);
    }
    return sha.hexDigest();
}

std::size_t BuildContext::writeSelection(std::string_view src, const std::string& outTarPath,
                                         const std::function<bool(std::string_view)>& skip) const {
    const Plan p = plan(src);
    TarFile in(tarPath_);
    UniqueFd out(::open(outTarPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!out) throw Error(ErrorCode::internal, "cannot create " + outTarPath);
    std::size_t written = 0;
    try {
        TarWriter w(out.get());
        std::string buf;
        for (const auto& planned : p.writes) {
            const ContextEntry& e = entries_[planned.index];
            if (skip && skip(e.path)) continue;
            if (e.type == '5') {
                w.header(planned.relPath + "/", '5', e.mode, 0, e.mtime, "");
            } else if (e.type == '2') {
                w.header(planned.relPath, '2', e.mode, 0, e.mtime, e.linkTarget);
            } else {
                w.header(planned.relPath, '0', e.mode, e.size, e.mtime, "");
                if (e.dataOffset > in.size() || e.size > in.size() - e.dataOffset)
                    throw Error(ErrorCode::internal,
                                "the build context changed since it was indexed");
                // The bytes copied are the bytes digestOf keyed: checked.
                Sha256Stream sha;
                buf.resize(static_cast<std::size_t>(std::min<std::uint64_t>(e.size, kChunk)));
                for (std::uint64_t done = 0; done < e.size;) {
                    auto n =
                        static_cast<std::size_t>(std::min<std::uint64_t>(e.size - done, kChunk));
                    preadAll(in.fd(), buf.data(), n, e.dataOffset + done);
                    sha.update(std::string_view(buf.data(), n));
                    w.data(std::string_view(buf.data(), n));
                    done += n;
                }
                if (sha.hexDigest() != e.sha256)
                    throw Error(ErrorCode::internal,
                                "the build context changed since it was indexed");
                w.pad(e.size);
            }
            ++written;
        }
        w.finish();
        if (::fsync(out.get()) != 0 && errno != EINVAL)
            throw Error(ErrorCode::internal, "cannot write the copy's tar");
    } catch (...) {
        out.reset();
        ::unlink(outTarPath.c_str());
        throw;
    }
    if (::close(out.release()) != 0) {
        ::unlink(outTarPath.c_str());
        throw Error(ErrorCode::internal, "cannot write the copy's tar");
    }
    return written;
}

}  // namespace airlock::templates
