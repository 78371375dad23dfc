// gtest's main plus a recap: every failed assertion is printed again at the
// very end. A failing VM test prints the daemon's whole log, and a CI report
// that keeps only the head and the tail of the output would otherwise lose
// the one line that says what went wrong.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

namespace {

class FailureRecap : public ::testing::EmptyTestEventListener {
  public:
    // gtest holds its own lock while it calls OnTestPartResult: the test's
    // name is noted at its start instead of asked for then.
    void OnTestStart(const ::testing::TestInfo& test) override {
        current_ = std::string(test.test_suite_name()) + "." + test.name();
    }
    void OnTestEnd(const ::testing::TestInfo&) override { current_ = "(outside a test)"; }

    void OnTestPartResult(const ::testing::TestPartResult& result) override {
        if (!result.failed()) return;
        const std::string& where = current_;
        std::string message = result.message();
        constexpr std::size_t kMessageMax = 1500;
        if (message.size() > kMessageMax) message = message.substr(0, kMessageMax) + " [...]";
        std::string file = result.file_name() ? result.file_name() : "?";
        if (auto slash = file.rfind("/tests/"); slash != std::string::npos)
            file = file.substr(slash + 1);
        failures_.push_back(where + " at " + file + ":" + std::to_string(result.line_number()) +
                            "\n" + message);
    }

    void OnTestProgramEnd(const ::testing::UnitTest&) override {
        if (failures_.empty()) return;
        constexpr std::size_t kShown = 20;
        std::cout << "\n==== failure recap (" << failures_.size() << " failed assertion(s)) ====\n";
        for (std::size_t i = 0; i < failures_.size() && i < kShown; ++i)
            std::cout << "-- " << failures_[i] << "\n";
        if (failures_.size() > kShown)
            std::cout << "-- and " << failures_.size() - kShown << " more\n";
        std::cout.flush();
    }

  private:
    std::string current_ = "(outside a test)";
    std::vector<std::string> failures_;
};

}  // namespace

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::UnitTest::GetInstance()->listeners().Append(new FailureRecap);
    return RUN_ALL_TESTS();
}
