#include "templates/DockerIgnore.hpp"

#include <algorithm>

#include "core/Error.hpp"

namespace airlock::templates {
namespace {

constexpr std::size_t kMaxIgnoreText = 1024 * 1024;

std::string_view trimSpace(std::string_view s) {
    auto blank = [](char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
    };
    while (!s.empty() && blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && blank(s.back())) s.remove_suffix(1);
    return s;
}

// Go's filepath.Clean: no empty or '.' segments, '..' resolved lexically
// (kept at the front of a relative path), no trailing '/'.
std::string cleanPath(std::string_view path) {
    bool rooted = path.starts_with('/');
    std::vector<std::string_view> parts;
    while (!path.empty()) {
        auto slash = path.find('/');
        auto part = path.substr(0, slash);
        path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
        if (part.empty() || part == ".") continue;
        if (part == ".." && !parts.empty() && parts.back() != "..") {
            parts.pop_back();
        } else if (part != ".." || !rooted) {
            parts.push_back(part);
        }
    }
    std::string out = rooted ? "/" : "";
    for (std::size_t i = 0; i < parts.size(); ++i) (out += i ? "/" : "") += parts[i];
    return out.empty() ? "." : out;
}

}  // namespace

DockerIgnore::DockerIgnore(std::string_view text) {
    if (text.size() > kMaxIgnoreText)
        throw Error(ErrorCode::unprocessable, ".dockerignore is larger than 1 MiB");
    if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
    for (unsigned lineNo = 1; !text.empty(); ++lineNo) {
        auto nl = text.find('\n');
        auto line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        if (line.starts_with('#')) continue;  // only at the very start, as Docker
        auto pattern = trimSpace(line);
        if (pattern.empty()) continue;
        Pattern p;
        if (pattern.front() == '!') {
            p.exclusion = true;
            pattern = trimSpace(pattern.substr(1));
        }
        std::string cleaned = pattern.empty() ? "" : cleanPath(pattern);
        if (cleaned.size() > 1 && cleaned.front() == '/') cleaned.erase(0, 1);
        auto tokens = cleaned.empty() ? std::nullopt : compile(cleaned);
        if (!tokens)
            throw Error(ErrorCode::unprocessable,
                        ".dockerignore line " + std::to_string(lineNo) + ": invalid pattern");
        p.tokens = std::move(*tokens);
        patterns_.push_back(std::move(p));
    }
}

// patternmatcher's translation: '*' any run without '/', '?' one non-'/',
// "**/" any run of whole directories (or none), a trailing "**" anything,
// [...] a class ('^' negates), '\' makes the next character literal.
std::optional<std::vector<DockerIgnore::Token>> DockerIgnore::compile(std::string_view p) {
    using Kind = Token::Kind;
    std::vector<Token> tokens;
    for (std::size_t i = 0; i < p.size(); ++i) {
        char c = p[i];
        Token t;
        if (c == '*') {
            if (i + 1 < p.size() && p[i + 1] == '*') {
                ++i;
                if (i + 1 < p.size() && p[i + 1] == '/') ++i;
                if (i + 1 == p.size()) {
                    t.kind = Kind::starAll;
                } else {
                    t.kind = Kind::dirsEntry;
                    tokens.push_back(t);
                    t.kind = Kind::dirsLoop;
                }
            } else {
                t.kind = Kind::star;
            }
        } else if (c == '?') {
            t.kind = Kind::one;
        } else if (c == '\\') {
            if (++i == p.size()) return std::nullopt;
            t.c = p[i];
        } else if (c == '[') {
            t.kind = Kind::set;
            ++i;
            if (i < p.size() && p[i] == '^') {
                t.negated = true;
                ++i;
            }
            bool closed = false;
            for (; i < p.size(); ++i) {
                if (p[i] == ']' && !t.ranges.empty()) {
                    closed = true;
                    break;
                }
                auto single = [&](char& out) {
                    if (p[i] == '\\' && ++i == p.size()) return false;
                    out = p[i];
                    return true;
                };
                char lo = 0, hi = 0;
                if (!single(lo)) return std::nullopt;
                hi = lo;
                if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
                    i += 2;
                    if (!single(hi) || hi < lo) return std::nullopt;
                }
                (t.ranges += lo) += hi;
            }
            if (!closed) return std::nullopt;
        } else {
            t.c = c;
        }
        tokens.push_back(t);
    }
    return tokens;
}

// A Thompson simulation over the tokens: linear in the path for each token,
// no backtracking blow-up on hostile patterns.
bool DockerIgnore::matches(const std::vector<Token>& tokens, std::string_view path) {
    using Kind = Token::Kind;
    const std::size_t n = tokens.size();
    std::vector<char> cur(n + 1, 0), nxt(n + 1, 0);
    auto close = [&](std::vector<char>& s) {
        for (std::size_t k = 0; k < n; ++k) {
            if (!s[k]) continue;
            auto kind = tokens[k].kind;
            if (kind == Kind::star || kind == Kind::starAll) s[k + 1] = 1;
            if (kind == Kind::dirsEntry) s[k + 1] = s[k + 2] = 1;
        }
    };
    cur[0] = 1;
    close(cur);
    for (char c : path) {
        std::fill(nxt.begin(), nxt.end(), 0);
        bool any = false;
        for (std::size_t k = 0; k < n; ++k) {
            if (!cur[k]) continue;
            const auto& t = tokens[k];
            switch (t.kind) {
                case Kind::literal:
                    if (c == t.c) nxt[k + 1] = 1;
                    break;
                case Kind::one:
                    if (c != '/') nxt[k + 1] = 1;
                    break;
                case Kind::set: {
                    bool in = false;
                    for (std::size_t r = 0; r + 1 < t.ranges.size(); r += 2)
                        in = in || (static_cast<unsigned char>(c) >=
                                        static_cast<unsigned char>(t.ranges[r]) &&
                                    static_cast<unsigned char>(c) <=
                                        static_cast<unsigned char>(t.ranges[r + 1]));
                    if (c != '/' && in != t.negated) nxt[k + 1] = 1;
                    break;
                }
                case Kind::star:
                    if (c != '/') nxt[k] = 1;
                    break;
                case Kind::starAll:
                    nxt[k] = 1;
                    break;
                case Kind::dirsEntry:
                    break;
                case Kind::dirsLoop:
                    nxt[k] = 1;
                    if (c == '/') nxt[k + 1] = 1;
                    break;
            }
        }
        close(nxt);
        for (char s : nxt) any = any || s;
        if (!any) return false;
        cur.swap(nxt);
    }
    return cur[n];
}

bool DockerIgnore::ignored(std::string_view relPath) const {
    std::string path = cleanPath(relPath);
    if (path.starts_with('/')) path.erase(0, 1);
    if (path.empty() || path == "." || patterns_.empty()) return false;
    // Docker's MatchesOrParentMatches: a pattern that matches a parent
    // directory matches the path; the last pattern that applies decides.
    bool matched = false;
    for (const auto& p : patterns_) {
        if (p.exclusion != matched) continue;
        bool match = matches(p.tokens, path);
        for (auto slash = path.find('/'); !match && slash != std::string::npos;
             slash = path.find('/', slash + 1))
            match = matches(p.tokens, std::string_view(path).substr(0, slash));
        if (match) matched = !p.exclusion;
    }
    return matched;
}

}  // namespace airlock::templates
