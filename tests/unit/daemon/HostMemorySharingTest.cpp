#include "daemon/HostMemorySharing.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "support/TestEnv.hpp"

namespace airlock {
namespace {

namespace fs = std::filesystem;

// A scratch copy of /sys/kernel/mm/ksm's files that matter.
class FakeKsm {
  public:
    explicit FakeKsm(std::map<std::string, std::string> values) {
        for (const auto& [name, value] : values) write(name, value);
    }
    std::string read(const std::string& name) const {
        std::ifstream in(dir_.path() + "/" + name);
        std::string v;
        std::getline(in, v);
        return v;
    }
    void write(const std::string& name, const std::string& value) const {
        std::ofstream(dir_.path() + "/" + name) << value << '\n';
    }
    std::string path() const { return dir_.path(); }

  private:
    test::TempDir dir_;
};

const std::map<std::string, std::string> kHostDefaults = {
    {"run", "0"}, {"pages_to_scan", "100"}, {"sleep_millisecs", "20"}, {"use_zero_pages", "0"}};

TEST(HostMemorySharing, TurnsKsmOnAndGivesTheHostItsValuesBack) {
    FakeKsm ksm(kHostDefaults);
    {
        HostMemorySharing sharing(HostMemorySharing::Mode::automatic, ksm.path(), false);
        EXPECT_EQ(sharing.ksmState(), "on (airlockd)");
        EXPECT_EQ(ksm.read("run"), "1");
        EXPECT_EQ(ksm.read("pages_to_scan"), "1000");
        EXPECT_EQ(ksm.read("use_zero_pages"), "1");
    }
    for (const auto& [name, value] : kHostDefaults) EXPECT_EQ(ksm.read(name), value) << name;
}

TEST(HostMemorySharing, LeavesAHostThatAlreadyMergesAlone) {
    auto values = kHostDefaults;
    values["run"] = "1";
    values["pages_to_scan"] = "5000";
    FakeKsm ksm(values);
    {
        HostMemorySharing sharing(HostMemorySharing::Mode::automatic, ksm.path(), false);
        EXPECT_EQ(sharing.ksmState(), "on (host)");
        EXPECT_EQ(ksm.read("pages_to_scan"), "5000");
    }
    EXPECT_EQ(ksm.read("run"), "1") << "airlockd did not turn it on, so it does not turn it off";
    EXPECT_EQ(ksm.read("pages_to_scan"), "5000");
}

TEST(HostMemorySharing, OffTouchesNothing) {
    FakeKsm ksm(kHostDefaults);
    {
        HostMemorySharing sharing(HostMemorySharing::Mode::off, ksm.path(), false);
        EXPECT_EQ(sharing.ksmState(), "off");
        EXPECT_EQ(ksm.read("run"), "0");
    }
    EXPECT_EQ(ksm.read("run"), "0");
}

TEST(HostMemorySharing, AKernelWithoutKsmIsReportedNotFatal) {
    test::TempDir empty;
    HostMemorySharing sharing(HostMemorySharing::Mode::automatic, empty.path() + "/ksm", false);
    EXPECT_EQ(sharing.ksmState().rfind("unavailable", 0), 0u) << sharing.ksmState();
}

}  // namespace
}  // namespace airlock
