#include "evidence/ChangeClassifier.hpp"

#include <cctype>

#include "evidence/DependencyChanges.hpp"
#include "protocol/PathGlob.hpp"

namespace airlock {
namespace {

// gitignore-style: a pattern without a slash (but a trailing one) matches
// at any depth; a leading slash anchors it; "dir/" matches what is under it.
bool attributeMatch(std::string pattern, const std::string& path) {
    if (pattern.empty()) return false;
    bool dirOnly = pattern.back() == '/';
    if (dirOnly) pattern.pop_back();
    bool anchored = pattern.find('/') != std::string::npos;
    if (!pattern.empty() && pattern.front() == '/') pattern.erase(0, 1);
    std::vector<std::string> candidates;
    if (anchored) {
        candidates.push_back(pattern);
    } else {
        candidates.push_back(pattern);
        candidates.push_back("**/" + pattern);
    }
    for (const auto& p : candidates) {
        if (!dirOnly && protocol::wildmatch(p, path)) return true;
        if (protocol::wildmatch(p + "/**", path)) return true;
    }
    return false;
}

// As the workspace's write scope is judged (workspace::inScope): git's
// wildmatch over the whole path.
bool anyMatch(const std::vector<std::string>& globs, const std::string& path) {
    for (const auto& g : globs)
        if (protocol::wildmatch(g, path)) return true;
    return false;
}

// Build outputs and files tools write, whatever the repository says.
const std::vector<std::string>& knownGenerated() {
    static const std::vector<std::string> globs = {"dist/**",           "**/dist/**",
                                                   "build/**",          "**/build/**",
                                                   "**/*.min.js",       "**/*.min.css",
                                                   "*.min.js",          "*.min.css",
                                                   "**/*.map",          "*.map",
                                                   "**/__pycache__/**", "__pycache__/**",
                                                   "**/*.pyc",          "*.pyc",
                                                   "node_modules/**",   "**/node_modules/**",
                                                   "coverage/**",       "**/*_pb2.py",
                                                   "*_pb2.py",          "**/*.pb.go",
                                                   "*.pb.go",           "**/*.generated.*",
                                                   "*.generated.*"};
    return globs;
}

}  // namespace

ChangeClassifier::ChangeClassifier(std::vector<std::string> writeScope,
                                   std::vector<std::string> sensitivePaths,
                                   std::string_view gitattributes)
    : writeScope_(std::move(writeScope)), sensitive_(std::move(sensitivePaths)) {
    std::size_t start = 0;
    while (start < gitattributes.size()) {
        auto end = gitattributes.find('\n', start);
        if (end == std::string_view::npos) end = gitattributes.size();
        std::string line(gitattributes.substr(start, end - start));
        start = end + 1;
        std::vector<std::string> words;
        std::size_t i = 0;
        while (i < line.size()) {
            while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
            std::size_t j = i;
            while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
            if (j > i) words.push_back(line.substr(i, j - i));
            i = j;
        }
        if (words.size() < 2 || words[0][0] == '#') continue;
        for (std::size_t w = 1; w < words.size(); ++w) {
            const auto& a = words[w];
            if (a == "linguist-generated" || a == "linguist-generated=true")
                attributes_.push_back({words[0], true});
            else if (a == "-linguist-generated" || a == "linguist-generated=false" ||
                     a == "!linguist-generated")
                attributes_.push_back({words[0], false});
        }
    }
}

bool ChangeClassifier::inScope(const std::string& path) const {
    return writeScope_.empty() || anyMatch(writeScope_, path);
}

bool ChangeClassifier::generated(const std::string& path) const {
    // The last matching .gitattributes line decides, as git's does.
    for (auto it = attributes_.rbegin(); it != attributes_.rend(); ++it)
        if (attributeMatch(it->pattern, path)) return it->generated;
    if (dependencies::isLockfile(path)) return true;
    for (const auto& g : knownGenerated())
        if (protocol::wildmatch(g, path)) return true;
    return false;
}

bool ChangeClassifier::sensitive(const std::string& path) const {
    return anyMatch(sensitive_, path);
}

std::string sensitiveArtifactReason(const std::string& path, std::string_view content,
                                    const std::vector<std::string>& secretValues) {
    auto slash = path.rfind('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name == ".env" || name.rfind(".env.", 0) == 0) return "a .env file";
    for (const char* keyName : {"id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"})
        if (name == keyName) return "an SSH private key file name";
    for (const auto& v : secretValues)
        if (v.size() >= 6 && content.find(v) != std::string_view::npos)
            return "holds the value of one of the sandbox's secrets";
    if (content.find("PRIVATE KEY-----") != std::string_view::npos &&
        content.find("-----BEGIN ") != std::string_view::npos)
        return "holds a PEM private key";
    // Token formats with fixed prefixes: a linear scan for each prefix, then
    // the run of characters after it (no regex: artifacts can be large).
    struct Token {
        const char* prefix;
        const char* what;
        std::size_t minRun;
        bool underscore, dash;
    };
    static const Token tokens[] = {
        {"AKIA", "an AWS access key id", 16, false, false},
        {"ghp_", "a GitHub token", 36, false, false},
        {"gho_", "a GitHub token", 36, false, false},
        {"ghu_", "a GitHub token", 36, false, false},
        {"ghs_", "a GitHub token", 36, false, false},
        {"ghr_", "a GitHub token", 36, false, false},
        {"github_pat_", "a GitHub fine-grained token", 22, true, false},
        {"glpat-", "a GitLab token", 20, true, true},
        {"xoxb-", "a Slack token", 10, false, true},
        {"xoxp-", "a Slack token", 10, false, true},
        {"xoxa-", "a Slack token", 10, false, true},
        {"sk-", "an API secret key (sk-...)", 32, true, true},
        {"npm_", "an npm token", 36, false, false},
    };
    for (const auto& t : tokens) {
        std::string_view prefix(t.prefix);
        for (auto at = content.find(prefix); at != std::string_view::npos;
             at = content.find(prefix, at + 1)) {
            std::size_t run = 0;
            for (std::size_t k = at + prefix.size(); k < content.size(); ++k) {
                char c = content[k];
                bool ok = std::isalnum(static_cast<unsigned char>(c)) ||
                          (t.underscore && c == '_') || (t.dash && c == '-');
                if (!ok) break;
                if (++run >= t.minRun) break;
            }
            if (run >= t.minRun) return std::string("holds ") + t.what;
        }
    }
    return {};
}

}  // namespace airlock
