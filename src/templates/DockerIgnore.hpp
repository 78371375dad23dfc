#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::templates {

// A build context's .dockerignore, with Docker's (moby/patternmatcher's)
// rules: one pattern a line, '#' at the start of a line a comment, blank
// lines skipped, patterns cleaned and anchored at the context root ('*' and
// '?' stop at '/', "**" spans directories, [a-z] classes, '\' escapes), a
// pattern that matches a directory matches everything under it, '!'
// re-includes, and the last matching pattern decides. Throws
// Error(unprocessable) naming the line of an invalid pattern.
class DockerIgnore {
  public:
    explicit DockerIgnore(std::string_view text);
    // `relPath` relative to the context root ("./a/b", "a//b/" are cleaned).
    bool ignored(std::string_view relPath) const;

  private:
    struct Token {
        enum class Kind : unsigned char { literal, one, set, star, starAll, dirsEntry, dirsLoop };
        Kind kind = Kind::literal;
        char c = 0;
        std::string ranges;  // set: pairs of (low, high) bytes
        bool negated = false;
    };
    struct Pattern {
        bool exclusion = false;
        std::vector<Token> tokens;
    };
    std::vector<Pattern> patterns_;

    static std::optional<std::vector<Token>> compile(std::string_view pattern);  // nullopt: invalid
    static bool matches(const std::vector<Token>& tokens, std::string_view path);
};

}  // namespace airlock::templates
