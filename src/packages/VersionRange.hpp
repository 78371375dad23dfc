#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace airlock::packages {

// Orders version strings the way npm (semver) and PyPI (PEP 440) order the
// common cases: dot-separated release numbers compared numerically, and a
// pre-release ("1.0.0-beta.1", "1.0rc1", "2.0.dev3") below its release.
// Build metadata ("+abc") is ignored. Returns <0, 0 or >0.
int compareVersions(std::string_view a, std::string_view b);
// Whether a version is a pre-release (has a suffix after its numbers).
bool isPrerelease(std::string_view version);

// A version range in the spelling of a deny rule: comparators joined by
// spaces (all must hold) and alternatives joined by "||":
//   "<2.0.0", ">=1.2 <1.4", "1.0.0", "=1.0.0 || >=3". An empty range holds
// for every version. Throws Error(bad_request) on anything else.
class VersionRange {
  public:
    static VersionRange parse(std::string_view text);
    bool contains(std::string_view version) const;
    bool any() const { return alternatives_.empty(); }

  private:
    enum class Op { lt, le, gt, ge, eq };
    struct Comparator {
        Op op;
        std::string version;
    };
    std::vector<std::vector<Comparator>> alternatives_;
};

}  // namespace airlock::packages
