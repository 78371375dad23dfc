#include "policy/ShellSplitter.hpp"

#include <cctype>

namespace airlock::policy {
namespace {

// A recursive-descent scan; each nesting level ($(...), `...`, ( ... ))
// collects its own commands into the shared output.
class Scanner {
public:
    Scanner(const std::string& s, std::vector<SimpleCommand>& out) : s_(s), out_(out) {}

    // Scans until `terminator` (0: end of input) and consumes it.
    void scan(std::size_t& i, char terminator, int depth) {
        SimpleCommand cur;
        std::string word;
        bool inWord = false;
        enum class Pending { none, output, input } pending = Pending::none;
        auto finishWord = [&] {
            if (!inWord) return;
            if (pending == Pending::output) cur.redirects.push_back(word);
            else if (pending == Pending::input) cur.inputs.push_back(word);
            else cur.words.push_back(word);
            pending = Pending::none;
            word.clear();
            inWord = false;
        };
        auto finishCommand = [&] {
            finishWord();
            if (!cur.words.empty() || !cur.redirects.empty() || !cur.inputs.empty()) out_.push_back(std::move(cur));
            cur = SimpleCommand{};
        };
        // Too deep: whatever is left becomes one opaque word (the classifier
        // treats unparsable input strictly).
        if (depth > 16) {
            cur.words.push_back(s_.substr(i));
            i = s_.size();
            finishCommand();
            return;
        }
        while (i < s_.size()) {
            char c = s_[i];
            if (terminator && c == terminator) {
                ++i;
                finishCommand();
                return;
            }
            switch (c) {
                case ' ':
                case '\t':
                    finishWord();
                    ++i;
                    break;
                case '\n':
                case ';':
                case '&':
                case '|':
                    finishCommand();
                    ++i;
                    break;
                case '(':
                    if (!inWord) {
                        finishCommand();
                        ++i;
                        scan(i, ')', depth + 1);
                    } else {
                        finishCommand();
                        ++i;
                    }
                    break;
                case ')':
                    finishCommand();
                    ++i;
                    break;
                case '{':
                case '}':
                    // Group braces only as words of their own; "a{b,c}" stays a word.
                    if (!inWord && (i + 1 >= s_.size() || std::isspace(static_cast<unsigned char>(s_[i + 1])) ||
                                    s_[i + 1] == ';')) {
                        finishCommand();
                        ++i;
                    } else {
                        word.push_back(c);
                        inWord = true;
                        ++i;
                    }
                    break;
                case '<':
                case '>': {
                    // "2>" / "&>": a word of digits (or nothing) before is the fd.
                    if (inWord && word.find_first_not_of("0123456789") == std::string::npos) {
                        word.clear();
                        inWord = false;
                    } else {
                        finishWord();
                    }
                    bool output = c == '>';
                    ++i;
                    if (i < s_.size() && (s_[i] == '>' || s_[i] == '|')) ++i;
                    if (!output && i < s_.size() && s_[i] == '<') {
                        ++i;  // here-doc / here-string: the delimiter is not a file
                        if (i < s_.size() && s_[i] == '<') ++i;
                        pending = Pending::input;
                        break;
                    }
                    if (i < s_.size() && s_[i] == '&') {
                        ++i;  // >&2, <&0: a descriptor, not a file
                        while (i < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i])) || s_[i] == '-')) ++i;
                        break;
                    }
                    pending = output ? Pending::output : Pending::input;
                    break;
                }
                case '\'': {
                    ++i;
                    while (i < s_.size() && s_[i] != '\'') word.push_back(s_[i++]);
                    if (i < s_.size()) ++i;
                    inWord = true;
                    break;
                }
                case '"': {
                    ++i;
                    inWord = true;
                    while (i < s_.size() && s_[i] != '"') {
                        if (s_[i] == '\\' && i + 1 < s_.size() &&
                            (s_[i + 1] == '"' || s_[i + 1] == '\\' || s_[i + 1] == '$' || s_[i + 1] == '`')) {
                            word.push_back(s_[i + 1]);
                            i += 2;
                        } else if (s_[i] == '$' && i + 1 < s_.size() && s_[i + 1] == '(') {
                            substitution(i, word, depth);
                        } else if (s_[i] == '`') {
                            ++i;
                            scan(i, '`', depth + 1);
                            word += "`...`";
                        } else {
                            word.push_back(s_[i++]);
                        }
                    }
                    if (i < s_.size()) ++i;
                    break;
                }
                case '\\':
                    if (i + 1 < s_.size() && s_[i + 1] == '\n') {
                        i += 2;  // line continuation
                    } else if (i + 1 < s_.size()) {
                        word.push_back(s_[i + 1]);
                        inWord = true;
                        i += 2;
                    } else {
                        ++i;
                    }
                    break;
                case '$':
                    if (i + 1 < s_.size() && s_[i + 1] == '(') {
                        substitution(i, word, depth);
                    } else {
                        word.push_back(c);
                        ++i;
                    }
                    inWord = true;
                    break;
                case '`':
                    ++i;
                    scan(i, '`', depth + 1);
                    word += "`...`";
                    inWord = true;
                    break;
                case '#':
                    if (!inWord) {
                        while (i < s_.size() && s_[i] != '\n') ++i;
                    } else {
                        word.push_back(c);
                        ++i;
                    }
                    break;
                default:
                    word.push_back(c);
                    inWord = true;
                    ++i;
            }
        }
        finishCommand();
    }

private:
    // At "$(": arithmetic $(( )) is skipped, a command substitution scanned.
    void substitution(std::size_t& i, std::string& word, int depth) {
        if (i + 2 < s_.size() && s_[i + 2] == '(') {
            auto end = s_.find("))", i + 3);
            i = end == std::string::npos ? s_.size() : end + 2;
            word += "$((...))";
            return;
        }
        i += 2;
        scan(i, ')', depth + 1);
        word += "$(...)";
    }

    const std::string& s_;
    std::vector<SimpleCommand>& out_;
};

}  // namespace

std::vector<SimpleCommand> ShellSplitter::split(const std::string& script) {
    std::vector<SimpleCommand> out;
    Scanner scanner(script, out);
    std::size_t i = 0;
    // A stray terminator at top level (an unbalanced ")" or "`") ends
    // nothing: scanning goes on to the end.
    while (i < script.size()) scanner.scan(i, 0, 0);
    return out;
}

}  // namespace airlock::policy
