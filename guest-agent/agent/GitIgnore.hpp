#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace airlock::guest {

// The rules of a working tree's .gitignore files, as git reads them: last
// match wins, a deeper file's rules after its ancestors', "!" re-includes,
// a trailing "/" matches directories only, a pattern with an inner "/" is
// anchored to its file's directory, "**" spans directories. Only the files
// in the tree count: nothing under .git (info/exclude, config) can hide a
// change from the host's diff.
class GitIgnore {
  public:
    // The rules of the .gitignore in directory `dir` ("" = the top).
    void addFile(const std::string& dir, std::string_view contents);
    bool ignored(const std::string& relPath, bool isDirectory) const;
    std::size_t ruleCount() const { return rules_.size(); }
    static constexpr std::size_t kMaxRules = 20000;

  private:
    struct Rule {
        std::string base;  // the directory of its .gitignore ("" or "a/b")
        std::string pattern;
        bool negate = false, dirOnly = false, anchored = false;
    };
    std::vector<Rule> rules_;
};

}  // namespace airlock::guest
