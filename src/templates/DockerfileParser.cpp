#include "templates/DockerfileParser.hpp"

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/ShellQuote.hpp"
#include "core/AsciiLower.hpp"
#include "core/JsonFields.hpp"

namespace airlock::templates {
namespace {

constexpr std::size_t kMaxDockerfileText = 1024 * 1024;
constexpr std::size_t kMaxLine = 64 * 1024;
constexpr unsigned kMaxInstructions = 10000;
constexpr std::size_t kMaxExposedPorts = 1024;
constexpr unsigned kMaxSubstitutionDepth = 16;

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool isNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string_view trimLeft(std::string_view s) {
    while (!s.empty() && isBlank(s.front())) s.remove_prefix(1);
    return s;
}
std::string_view trim(std::string_view s) {
    s = trimLeft(s);
    while (!s.empty() && isBlank(s.back())) s.remove_suffix(1);
    return s;
}
std::string upper(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

// Text from the Dockerfile in a message: printable and short.
std::string shownText(std::string_view s) {
    constexpr std::size_t kMax = 80;
    std::string out;
    for (std::size_t i = 0; i < s.size() && i < kMax; ++i) {
        auto c = static_cast<unsigned char>(s[i]);
        out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
    }
    if (s.size() > kMax) out += "...";
    return out;
}

std::string shellJoin(const std::vector<std::string>& args) {
    std::string out;
    for (const auto& a : args) {
        if (!out.empty()) out += ' ';
        out += shellQuote(a);
    }
    return out;
}

// Lexical '.'/'..' resolution of an absolute path; '..' stops at '/' as in Docker.
std::string cleanAbsolute(std::string_view path) {
    std::vector<std::string_view> parts;
    while (!path.empty()) {
        auto slash = path.find('/');
        auto part = path.substr(0, slash);
        path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
        if (part.empty() || part == ".") continue;
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
            continue;
        }
        parts.push_back(part);
    }
    std::string out;
    for (auto p : parts) (out += '/') += p;
    return out.empty() ? "/" : out;
}

// A path that names a directory by its spelling ("x/", ".", "x/..").
bool spelledAsDirectory(std::string_view p) {
    return p.ends_with('/') || p == "." || p == ".." || p.ends_with("/.") || p.ends_with("/..");
}

struct Command {
    bool exec = false;
    std::vector<std::string> args;  // exec form
    std::string shell;              // shell form
};

struct Heredoc {
    std::string name;
    bool chomp = false;  // <<-: leading tabs stripped
    std::vector<std::string_view> body;
    std::string_view terminator;
};

class Parser {
  public:
    Parser(std::string_view text, const std::map<std::string, std::string>& buildArgs,
           const std::map<std::string, std::string>& baseEnv)
        : buildArgs_(buildArgs), baseEnv_(baseEnv) {
        if (text.size() > kMaxDockerfileText)
            throw Error(ErrorCode::unprocessable, "Dockerfile is larger than 1 MiB");
        if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
        while (true) {
            auto nl = text.find('\n');
            auto line = text.substr(0, nl);
            if (line.ends_with('\r')) line.remove_suffix(1);
            lines_.push_back(line);
            if (nl == std::string_view::npos) break;
            text.remove_prefix(nl + 1);
        }
        for (std::size_t i = 0; i < lines_.size(); ++i) {
            if (lines_[i].size() > kMaxLine)
                throw DockerfileError(static_cast<unsigned>(i + 1), "",
                                      "the line is longer than 64 KiB");
            if (lines_[i].find('\0') != std::string_view::npos)
                throw DockerfileError(static_cast<unsigned>(i + 1), "",
                                      "the line holds a NUL byte");
        }
    }

    ParsedDockerfile run() {
        readDirectives();
        unsigned count = 0;
        while (nextInstruction()) {
            if (++count > kMaxInstructions) fail("more than 10000 instructions");
            dispatch();
        }
        if (!haveFrom_)
            throw DockerfileError(1, "FROM", "no FROM instruction: name the template to build on");
        finishStart();
        return std::move(out_);
    }

  private:
    const std::map<std::string, std::string>& buildArgs_;
    const std::map<std::string, std::string>& baseEnv_;
    std::vector<std::string_view> lines_;
    std::size_t next_ = 0;
    char escape_ = '\\';

    // The instruction being handled.
    unsigned line_ = 0;
    std::string keyword_;
    std::string args_;

    ParsedDockerfile out_;
    bool haveFrom_ = false;
    std::string workdir_ = "/";
    std::map<std::string, std::optional<std::string>> globalArgs_;  // declared before FROM
    std::map<std::string, std::optional<std::string>> stageArgs_;
    std::vector<std::string> stageArgOrder_;
    std::map<std::string, std::string> env_;
    std::optional<Command> cmd_, entrypoint_;
    std::set<unsigned> exposed_;

    [[noreturn]] void fail(const std::string& detail) const {
        throw DockerfileError(line_, keyword_, detail);
    }

    // `# escape=`, `# syntax=`, `# check=` at the very top only, as BuildKit.
    void readDirectives() {
        bool sawEscape = false;
        for (; next_ < lines_.size(); ++next_) {
            auto line = lines_[next_];
            if (!line.starts_with('#')) return;
            auto body = trim(line.substr(1));
            auto eq = body.find('=');
            if (eq == std::string_view::npos) return;
            auto key = asciiLower(trim(body.substr(0, eq)));
            auto value = trim(body.substr(eq + 1));
            if (key.empty() || !isNameStart(key[0])) return;
            for (char c : key)
                if (!isNameChar(c)) return;
            if (key == "escape") {
                line_ = static_cast<unsigned>(next_ + 1);
                keyword_ = "";
                if (sawEscape) fail("the escape directive appears twice");
                if (value != "\\" && value != "`") fail("the escape directive takes \\ or `");
                escape_ = value[0];
                sawEscape = true;
            } else if (key != "syntax" && key != "check") {
                return;  // any other "# k=v" is a comment and ends the directives
            }
        }
    }

    static bool skippable(std::string_view line) {
        auto t = trimLeft(line);
        return t.empty() || t.front() == '#';
    }

    // The physical line without its continuation mark, if it has one.
    std::optional<std::string_view> continued(std::string_view line) const {
        auto t = line;
        while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
        if (t.empty() || t.back() != escape_) return std::nullopt;
        t.remove_suffix(1);
        return t;
    }

    // Joins continuation lines (comment and blank lines inside are dropped,
    // as Docker does) into line_/keyword_/args_.
    bool nextInstruction() {
        while (next_ < lines_.size() && skippable(lines_[next_])) ++next_;
        if (next_ >= lines_.size()) return false;
        line_ = static_cast<unsigned>(next_ + 1);
        std::string logical;
        std::string_view cur = trimLeft(lines_[next_++]);
        while (true) {
            auto body = continued(cur);
            if (!body) {
                logical += cur;
                break;
            }
            logical += *body;
            while (next_ < lines_.size() && skippable(lines_[next_])) ++next_;
            if (next_ >= lines_.size()) break;
            cur = lines_[next_++];
        }
        std::string_view view = logical;
        std::size_t end = 0;
        while (end < view.size() && !isBlank(view[end])) ++end;
        keyword_ = upper(view.substr(0, end));
        for (char c : keyword_)
            if (!std::isalnum(static_cast<unsigned char>(c))) {
                keyword_ = shownText(keyword_);
                fail("unknown instruction");
            }
        args_ = std::string(trim(view.substr(end)));
        return true;
    }

    void dispatch() {
        const auto& k = keyword_;
        static const std::set<std::string> supported = {
            "FROM", "ARG",   "RUN",    "COPY", "ADD",        "ENV",       "WORKDIR",
            "USER", "LABEL", "EXPOSE", "CMD",  "ENTRYPOINT", "MAINTAINER"};
        if (!supported.contains(k)) fail("unsupported instruction");
        if (k == "ARG") return arg();
        if (!haveFrom_) {
            if (k != "FROM")
                fail("a Dockerfile must begin with FROM (only ARG may come before it)");
            return from();
        }
        if (k == "FROM") fail("multi-stage builds are not supported (a second FROM)");
        if (k == "RUN") return runStep();
        if (k == "COPY" || k == "ADD") return copy();
        if (k == "ENV") return env();
        if (k == "WORKDIR") return workdir();
        if (k == "USER") return user();
        if (k == "LABEL") return label();
        if (k == "EXPOSE") return expose();
        if (k == "CMD") {
            cmd_ = command();
        } else if (k == "ENTRYPOINT") {
            entrypoint_ = command();
        } else if (k == "MAINTAINER") {
            if (args_.empty()) fail("MAINTAINER requires a name");
            out_.labels["maintainer"] = args_;
        }
    }

    // ---- words, quotes and substitution ----

    // Splits on unquoted blanks; quotes and escapes stay for processWord.
    // Not strict: an unterminated quote ends the last word instead of failing.
    std::vector<std::string> splitWords(std::string_view s, bool strict = true) const {
        std::vector<std::string> words;
        std::string cur;
        bool inWord = false;
        for (std::size_t i = 0; i < s.size(); ++i) {
            char c = s[i];
            if (isBlank(c)) {
                if (inWord) words.push_back(std::move(cur));
                cur.clear();
                inWord = false;
                continue;
            }
            inWord = true;
            if (c == escape_) {
                cur += c;
                if (i + 1 < s.size()) cur += s[++i];
            } else if (c == '\'' || c == '"') {
                cur += c;
                std::size_t j = i + 1;
                for (; j < s.size() && s[j] != c; ++j) {
                    if (c == '"' && s[j] == escape_ && j + 1 < s.size()) cur += s[j++];
                    cur += s[j];
                }
                if (j >= s.size()) {
                    if (strict) fail("unterminated quote");
                    i = j;
                } else {
                    cur += c;
                    i = j;
                }
            } else {
                cur += c;
            }
        }
        if (inWord) words.push_back(std::move(cur));
        return words;
    }

    std::optional<std::string> lookup(const std::string& name) const {
        if (!haveFrom_) {
            auto it = globalArgs_.find(name);
            return it == globalArgs_.end() ? std::nullopt : it->second;
        }
        if (auto it = env_.find(name); it != env_.end()) return it->second;
        auto it = stageArgs_.find(name);
        return it == stageArgs_.end() ? std::nullopt : it->second;
    }

    // Quote removal (when `quotes`), escapes and $ substitution of one word.
    std::string processWord(std::string_view raw, bool quotes = true, unsigned depth = 0) const {
        if (depth > kMaxSubstitutionDepth) fail("substitutions nested too deeply");
        std::string out;
        std::size_t i = 0, n = raw.size();
        while (i < n) {
            char c = raw[i];
            if (quotes && c == '\'') {
                auto end = raw.find('\'', i + 1);
                if (end == std::string_view::npos) fail("unterminated quote");
                out.append(raw.substr(i + 1, end - i - 1));
                i = end + 1;
            } else if (quotes && c == '"') {
                for (++i;;) {
                    if (i >= n) fail("unterminated quote");
                    char d = raw[i];
                    if (d == '"') {
                        ++i;
                        break;
                    }
                    if (d == escape_ && i + 1 < n &&
                        (raw[i + 1] == '"' || raw[i + 1] == '$' || raw[i + 1] == escape_)) {
                        out += raw[i + 1];
                        i += 2;
                    } else if (d == '$') {
                        i = substitute(raw, i, out, quotes, depth);
                    } else {
                        out += d;
                        ++i;
                    }
                }
            } else if (c == escape_ && i + 1 < n &&
                       (quotes || raw[i + 1] == '$' || raw[i + 1] == escape_)) {
                out += raw[i + 1];
                i += 2;
            } else if (c == '$') {
                i = substitute(raw, i, out, quotes, depth);
            } else {
                out += c;
                ++i;
            }
        }
        return out;
    }

    // `raw[i]` is '$': appends the substitution, returns the index after it.
    std::size_t substitute(std::string_view raw, std::size_t i, std::string& out, bool quotes,
                           unsigned depth) const {
        std::size_t n = raw.size(), j = i + 1;
        if (j < n && raw[j] != '{') {
            if (!isNameStart(raw[j])) {
                out += '$';
                return j;
            }
            std::size_t k = j;
            while (k < n && isNameChar(raw[k])) ++k;
            out += lookup(std::string(raw.substr(j, k - j))).value_or("");
            return k;
        }
        if (j >= n) {
            out += '$';
            return j;
        }
        std::size_t k = j + 1;
        while (k < n && isNameChar(raw[k])) ++k;
        std::string name(raw.substr(j + 1, k - j - 1));
        if (k >= n) fail("missing '}' in " + shownText(raw.substr(i)));
        if (name.empty() || !isNameStart(name[0])) fail("bad substitution " + shownText(raw.substr(i)));
        auto value = lookup(name);
        if (raw[k] == '}') {
            out += value.value_or("");
            return k + 1;
        }
        bool colon = raw[k] == ':';
        if (colon) ++k;
        if (k >= n || (raw[k] != '-' && raw[k] != '+' && raw[k] != '?'))
            fail("unsupported substitution " + shownText(raw.substr(i)) +
                 " (${name}, ${name:-word}, ${name:+word} and ${name:?word} are)");
        char op = raw[k++];
        // The word runs to the matching '}'.
        std::size_t m = k;
        for (unsigned nest = 1; m < n; ++m) {
            if (raw[m] == escape_) {
                ++m;
            } else if (raw[m] == '$' && m + 1 < n && raw[m + 1] == '{') {
                ++nest;
                ++m;
            } else if (raw[m] == '}' && --nest == 0) {
                break;
            }
        }
        if (m >= n) fail("missing '}' in " + shownText(raw.substr(i)));
        auto word = raw.substr(k, m - k);
        bool present = value && (!colon || !value->empty());
        if (op == '-') {
            out += present ? *value : processWord(word, quotes, depth + 1);
        } else if (op == '+') {
            if (present) out += processWord(word, quotes, depth + 1);
        } else {
            if (!present) {
                auto message = processWord(word, quotes, depth + 1);
                fail(name + ": " + (message.empty() ? "not set" : shownText(message)));
            }
            out += *value;
        }
        return m + 1;
    }

    // `["a", "b"]`; anything else is the shell form (as Docker).
    std::optional<std::vector<std::string>> execForm(std::string_view s) const {
        if (!s.starts_with('[') || !jsonNestingWithin(s, 1)) return std::nullopt;
        auto j = nlohmann::json::parse(s, nullptr, false);
        if (j.is_discarded() || !j.is_array()) return std::nullopt;
        std::vector<std::string> args;
        for (const auto& e : j) {
            if (!e.is_string()) return std::nullopt;
            args.push_back(e.get<std::string>());
            if (args.back().find('\0') != std::string::npos)
                fail("an argument holds a NUL character");
        }
        return args;
    }

    // Leading `--name[=value]` words, removed from `rest`.
    std::vector<std::pair<std::string, std::string>> takeFlags(std::string_view& rest) const {
        std::vector<std::pair<std::string, std::string>> flags;
        while (rest.starts_with("--")) {
            std::size_t end = 0;
            while (end < rest.size() && !isBlank(rest[end])) ++end;
            auto word = rest.substr(2, end - 2);
            auto eq = word.find('=');
            flags.emplace_back(
                std::string(word.substr(0, eq)),
                eq == std::string_view::npos ? "" : std::string(word.substr(eq + 1)));
            rest = trimLeft(rest.substr(end));
        }
        return flags;
    }

    // BuildKit's heredoc words (`<<EOF`, `<<-"EOF"`) and their bodies, read
    // from the lines after the instruction.
    std::vector<Heredoc> heredocs(std::string_view rest) {
        std::vector<Heredoc> docs;
        if (rest.find("<<") == std::string_view::npos) return docs;
        for (const auto& w : splitWords(rest, false)) {
            if (!w.starts_with("<<")) continue;
            std::string_view r = std::string_view(w).substr(2);
            Heredoc doc;
            if (r.starts_with('-')) {
                doc.chomp = true;
                r.remove_prefix(1);
            }
            if (r.size() >= 2 && (r.front() == '\'' || r.front() == '"') && r.back() == r.front())
                r = r.substr(1, r.size() - 2);
            if (r.empty() || r.find_first_of("<'\"") != std::string_view::npos) continue;
            doc.name = r;
            docs.push_back(std::move(doc));
        }
        for (auto& doc : docs) {
            while (true) {
                if (next_ >= lines_.size())
                    fail("heredoc <<" + shownText(doc.name) + " is not terminated");
                auto line = lines_[next_++];
                auto cmp = line;
                if (doc.chomp)
                    while (cmp.starts_with('\t')) cmp.remove_prefix(1);
                if (cmp == doc.name) {
                    doc.terminator = line;
                    break;
                }
                doc.body.push_back(line);
            }
        }
        return docs;
    }

    // ---- instructions ----

    void arg() {
        auto words = splitWords(args_);
        if (words.empty()) fail("ARG requires a name");
        for (const auto& w : words) {
            auto eq = w.find('=');
            std::string name = w.substr(0, eq);
            if (name.empty() || !isNameStart(name[0]))
                fail("invalid ARG name '" + shownText(name) + "'");
            for (char c : name)
                if (!isNameChar(c)) fail("invalid ARG name '" + shownText(name) + "'");
            std::optional<std::string> value;
            if (eq != std::string::npos) value = processWord(std::string_view(w).substr(eq + 1));
            if (auto given = buildArgs_.find(name); given != buildArgs_.end())
                value = given->second;
            if (!haveFrom_) {
                globalArgs_[name] = value;
                continue;
            }
            // A bare ARG after FROM takes the value declared before FROM.
            if (!value)
                if (auto g = globalArgs_.find(name); g != globalArgs_.end()) value = g->second;
            if (!stageArgs_.contains(name)) stageArgOrder_.push_back(name);
            stageArgs_[name] = value;
        }
    }

    void from() {
        std::string_view rest = args_;
        for (const auto& [flag, value] : takeFlags(rest))
            fail("FROM flag --" + shownText(flag) + " is not supported");
        auto words = splitWords(rest);
        if (words.empty()) fail("FROM requires a template name");
        if (!(words.size() == 1 || (words.size() == 3 && upper(words[1]) == "AS")))
            fail("FROM takes a template name and optionally AS <name>");
        auto name = processWord(words[0]);
        if (asciiLower(name) == "scratch")
            fail("FROM scratch is not supported: FROM names the template to build on");
        if (!isTemplateReference(name)) {
            if (looksLikeImageReference(name))
                fail("'" + shownText(name) +
                     "' is a container image reference. There is no image registry here: "
                     "images cannot be pulled; FROM names an Airlock template (name[:tag])");
            fail("'" + shownText(name) + "' is not a template name (name[:tag])");
        }
        out_.from = name;
        haveFrom_ = true;
        env_ = baseEnv_;  // the base's env overrides ARGs, as Docker's image env does
    }

    std::vector<std::pair<std::string, std::string>> argEnv() const {
        std::vector<std::pair<std::string, std::string>> env;
        for (const auto& name : stageArgOrder_) {
            const auto& value = stageArgs_.at(name);
            if (value && !env_.contains(name)) env.emplace_back(name, *value);
        }
        return env;
    }

    void runStep() {
        std::string_view rest = args_;
        for (const auto& [flag, value] : takeFlags(rest))
            fail("RUN flag --" + shownText(flag) + " is not supported");
        RunStep step;
        step.env = argEnv();
        if (auto exec = execForm(rest)) {
            if (exec->empty()) fail("RUN requires a command");
            step.shell = shellJoin(*exec);
        } else {
            if (rest.empty()) fail("RUN requires a command");
            auto docs = heredocs(rest);
            if (docs.size() == 1 && splitWords(rest, false).size() == 1) {
                // `RUN <<EOF`: the body is the script (BuildKit).
                std::string script;
                for (auto line : docs[0].body) {
                    if (docs[0].chomp)
                        while (line.starts_with('\t')) line.remove_prefix(1);
                    (script += line) += '\n';
                }
                step.shell =
                    script.starts_with("#!")
                        ? "f=$(mktemp) && printf '%s' " + shellQuote(script) +
                              " > \"$f\" && chmod +x \"$f\" && \"$f\"; s=$?; rm -f \"$f\"; exit $s"
                        : script;
            } else {
                // The shell reads heredocs inside a command itself.
                step.shell = rest;
                for (const auto& doc : docs) {
                    for (auto line : doc.body) (step.shell += '\n') += line;
                    (step.shell += '\n') += doc.terminator;
                }
            }
        }
        out_.steps.emplace_back(std::move(step));
    }

    std::string userSpec(std::string_view spec, const char* what) const {
        auto valid = [](std::string_view part) {
            if (part.empty() || part.size() > 64 || part.front() == '-' || part.front() == '.')
                return false;
            for (char c : part)
                if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' &&
                    c != '.')
                    return false;
            return true;
        };
        auto colon = spec.find(':');
        if (!valid(spec.substr(0, colon)) ||
            (colon != std::string_view::npos && !valid(spec.substr(colon + 1))))
            fail(std::string(what) + " '" + shownText(spec) + "' is not user[:group]");
        return std::string(spec);
    }

    void copy() {
        const auto& k = keyword_;
        std::string_view rest = args_;
        CopyStep proto;
        for (const auto& [flag, value] : takeFlags(rest)) {
            if (flag == "chown") {
                proto.owner = userSpec(processWord(value), "--chown");
            } else if (flag == "chmod") {
                auto mode = processWord(value);
                bool octal = mode.size() == 3 || mode.size() == 4;
                for (char c : mode) octal = octal && c >= '0' && c <= '7';
                if (!octal) fail("--chmod '" + shownText(mode) + "' is not an octal mode");
                proto.mode = mode;
            } else if (flag == "from") {
                fail(k + " --from is not supported: multi-stage builds are not supported");
            } else if (flag != "link") {  // --link only changes layer caching
                fail(k + " flag --" + shownText(flag) + " is not supported");
            }
        }
        std::vector<std::string> args;
        if (auto exec = execForm(rest)) {
            for (const auto& a : *exec) args.push_back(processWord(a, false));
        } else {
            for (const auto& w : splitWords(rest)) {
                if (w.starts_with("<<")) fail(k + " from a heredoc is not supported");
                args.push_back(processWord(w));
            }
        }
        if (args.size() < 2) fail(k + " requires at least one source and a destination");
        std::string dest = args.back();
        args.pop_back();
        if (dest.empty()) fail(k + " requires a destination");
        bool directory = spelledAsDirectory(dest) || args.size() > 1;
        dest = cleanAbsolute(dest.starts_with('/') ? dest : workdir_ + "/" + dest);
        if (directory && dest != "/") dest += '/';
        for (const auto& src : args) {
            auto lower = asciiLower(src);
            if (lower.find("://") != std::string::npos || lower.starts_with("git@"))
                fail(k + " from a URL is not supported: " + shownText(src));
            CopyStep step = proto;
            step.src = contextPath(src);
            step.dest = dest;
            out_.steps.emplace_back(std::move(step));
        }
    }

    // A source inside the build context, cleaned; its root is "./".
    std::string contextPath(std::string_view src) const {
        if (src.empty()) fail("an empty source path");
        if (src.starts_with('/'))
            fail("source '" + shownText(src) + "' must be relative to the build context");
        std::vector<std::string_view> parts;
        for (auto rest = src; !rest.empty();) {
            auto slash = rest.find('/');
            auto part = rest.substr(0, slash);
            rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
            if (part.empty() || part == ".") continue;
            if (part == "..") {
                if (parts.empty()) fail("source '" + shownText(src) + "' is outside the build context");
                parts.pop_back();
                continue;
            }
            parts.push_back(part);
        }
        std::string out;
        for (auto p : parts) (out += out.empty() ? "" : "/") += p;
        if (out.empty()) return "./";
        if (spelledAsDirectory(src)) out += '/';
        return out;
    }

    // KEY=VALUE pairs, or the legacy `KEY rest of the line`.
    std::vector<std::pair<std::string, std::string>> pairs() const {
        auto words = splitWords(args_);
        if (words.empty()) fail(keyword_ + " requires KEY=VALUE");
        std::vector<std::pair<std::string, std::string>> out;
        if (words[0].find('=') == std::string::npos) {
            std::string_view view = args_;
            std::size_t end = 0;
            while (end < view.size() && !isBlank(view[end])) ++end;
            auto value = trim(view.substr(end));
            if (value.empty()) fail(keyword_ + " requires KEY=VALUE (or KEY VALUE)");
            out.emplace_back(processWord(view.substr(0, end)), processWord(value));
        } else {
            for (const auto& w : words) {
                auto eq = w.find('=');
                if (eq == std::string::npos) fail("'" + shownText(w) + "' is not KEY=VALUE");
                out.emplace_back(processWord(std::string_view(w).substr(0, eq)),
                                 processWord(std::string_view(w).substr(eq + 1)));
            }
        }
        for (const auto& [key, value] : out)
            if (key.empty() || key.find_first_of(" \t\r\n=") != std::string::npos)
                fail("invalid key '" + shownText(key) + "'");
        return out;
    }

    void env() {
        EnvStep step;
        step.vars = pairs();  // all substituted before any is set, as Docker
        for (const auto& [key, value] : step.vars) env_[key] = value;
        out_.steps.emplace_back(std::move(step));
    }

    void label() {
        for (auto& [key, value] : pairs()) out_.labels[key] = std::move(value);
    }

    void workdir() {
        auto path = processWord(args_);
        if (path.empty()) fail("WORKDIR requires a path");
        workdir_ = cleanAbsolute(path.starts_with('/') ? path : workdir_ + "/" + path);
        out_.steps.emplace_back(WorkdirStep{workdir_});
    }

    void user() {
        auto spec = processWord(args_);
        if (spec.empty()) fail("USER requires a user");
        out_.steps.emplace_back(UserStep{userSpec(spec, "USER")});
    }

    static std::optional<unsigned> portNumber(std::string_view s) {
        if (s.empty() || s.size() > 5) return std::nullopt;
        unsigned v = 0;
        for (char c : s) {
            if (c < '0' || c > '9') return std::nullopt;
            v = v * 10 + static_cast<unsigned>(c - '0');
        }
        if (v == 0 || v > 65535) return std::nullopt;
        return v;
    }

    void expose() {
        auto words = splitWords(args_);
        if (words.empty()) fail("EXPOSE requires a port");
        for (const auto& w : words) {
            auto spec = processWord(w);
            if (spec.empty()) continue;
            std::string_view s = spec;
            auto slash = s.find('/');
            if (slash != std::string_view::npos) {
                auto proto = asciiLower(s.substr(slash + 1));
                if (proto != "tcp" && proto != "udp" && proto != "sctp")
                    fail("'" + shownText(spec) + "' is not port[/tcp|udp|sctp]");
                s = s.substr(0, slash);
            }
            auto dash = s.find('-');
            auto first = portNumber(s.substr(0, dash));
            auto last = dash == std::string_view::npos ? first : portNumber(s.substr(dash + 1));
            if (!first || !last || *last < *first)
                fail("'" + shownText(spec) + "' is not a port or range");
            for (unsigned p = *first; p <= *last; ++p) {
                if (!exposed_.insert(p).second) continue;
                if (exposed_.size() > kMaxExposedPorts) fail("more than 1024 exposed ports");
                out_.exposedPorts.push_back(p);
            }
        }
    }

    Command command() const {
        Command c;
        if (auto exec = execForm(args_)) {
            c.exec = true;
            c.args = std::move(*exec);
        } else {
            if (args_.empty()) fail(keyword_ + " requires a command");
            c.shell = args_;
        }
        return c;
    }

    // Docker's combination: an exec ENTRYPOINT takes CMD as its arguments
    // (a shell CMD as `/bin/sh -c`); a shell ENTRYPOINT ignores CMD.
    void finishStart() {
        std::string line;
        if (entrypoint_ && !entrypoint_->exec) {
            line = entrypoint_->shell;
        } else {
            std::vector<std::string> args;
            if (entrypoint_) args = entrypoint_->args;
            if (cmd_ && cmd_->exec) args.insert(args.end(), cmd_->args.begin(), cmd_->args.end());
            if (cmd_ && !cmd_->exec) {
                if (entrypoint_)
                    args.insert(args.end(), {"/bin/sh", "-c", cmd_->shell});
                else
                    line = cmd_->shell;
            }
            if (line.empty()) line = shellJoin(args);
        }
        if (!line.empty()) out_.start = StartSpec{line, {}};
    }
};

bool allOf(std::string_view s, std::string_view extra, bool lowerOnly) {
    for (char c : s) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  (!lowerOnly && c >= 'A' && c <= 'Z') || extra.find(c) != std::string_view::npos;
        if (!ok) return false;
    }
    return true;
}

}  // namespace

DockerfileError::DockerfileError(unsigned line, std::string instruction, const std::string& detail)
    : Error(ErrorCode::unprocessable, "Dockerfile line " + std::to_string(line) +
                                          (instruction.empty() ? "" : " (" + instruction + ")") +
                                          ": " + detail),
      line_(line),
      instruction_(std::move(instruction)) {}

ParsedDockerfile parseDockerfile(std::string_view text,
                                 const std::map<std::string, std::string>& buildArgs,
                                 const std::map<std::string, std::string>& baseEnv) {
    return Parser(text, buildArgs, baseEnv).run();
}

bool isTemplateReference(std::string_view ref) {
    auto colon = ref.find(':');
    auto name = ref.substr(0, colon);
    if (name.empty() || name.size() > 64 || !allOf(name, "_-", true)) return false;
    if (colon == std::string_view::npos) return true;
    auto tag = ref.substr(colon + 1);
    return !tag.empty() && tag.size() <= 64 && allOf(tag, "_.-", true);
}

bool looksLikeImageReference(std::string_view ref) {
    if (ref.empty() || !allOf(ref, "_.-:/@", false)) return false;
    if (ref.find_first_of("/@") != std::string_view::npos) return true;
    for (char c : ref)
        if (c >= 'A' && c <= 'Z') return true;
    auto name = ref.substr(0, ref.find(':'));
    return name.find('.') != std::string_view::npos;  // a registry host
}

}  // namespace airlock::templates
