#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

// Test results from a JUnit XML file, the de-facto Ant/Jenkins shape:
// <testsuites> of <testsuite> (nested suites too) of <testcase name classname
// time>, each with <failure>, <error> or <skipped> or none of them (passed).
// Only what the file states: nothing is inferred from log text.
//
// The file comes from the guest, so it is parsed as hostile: at most
// kMaxBytes, no DTD (an internal subset is refused: no entity tricks), no
// network, at most kMaxCases test cases, suites nested at most 32 deep.
struct JunitCase {
    std::string suite, classname, name;
    std::string status;   // passed | failed | error | skipped
    std::string message;  // the failure's or error's message attribute (capped)
    double timeS = 0;
};

class JunitReport {
  public:
    static constexpr std::size_t kMaxBytes = 16u << 20;
    static constexpr std::size_t kMaxCases = 100000;
    // Throws Error(bad_request) with the reason when the text is not JUnit XML.
    static JunitReport parse(std::string_view xml);

    const std::vector<JunitCase>& cases() const { return cases_; }
    std::size_t count(const std::string& status) const;
    std::size_t failedOrError() const { return count("failed") + count("error"); }

  private:
    std::vector<JunitCase> cases_;
};

}  // namespace airlock
