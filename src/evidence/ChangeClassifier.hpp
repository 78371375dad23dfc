#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

// What a reviewer wants flagged on each changed path: inside the write
// scope or not, generated (a .gitattributes linguist-generated rule, a
// lockfile, a known build output), sensitive (the task's sensitive paths).
// Patterns are git wildmatch globs, workspace-relative.
class ChangeClassifier {
  public:
    ChangeClassifier(std::vector<std::string> writeScope, std::vector<std::string> sensitivePaths,
                     std::string_view gitattributes);

    // An empty write scope means everything is in scope.
    bool inScope(const std::string& path) const;
    bool generated(const std::string& path) const;
    bool sensitive(const std::string& path) const;

  private:
    struct AttributeRule {
        std::string pattern;
        bool generated;
    };
    std::vector<std::string> writeScope_, sensitive_;
    std::vector<AttributeRule> attributes_;
};

// Why an artifact's name or content looks like a secret ("" when it does
// not): a .env file, a private key, a known token format, or the value of
// one of the sandbox's secrets (given; never repeated in the reason).
std::string sensitiveArtifactReason(const std::string& path, std::string_view content,
                                    const std::vector<std::string>& secretValues);

}  // namespace airlock
