#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "daemon/HostMemorySharing.hpp"
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
    std::string record() const { return recordDir_.path() + "/ksm-host-settings"; }

  private:
    test::TempDir dir_, recordDir_;
};

const std::map<std::string, std::string> kHostDefaults = {
    {"run", "0"}, {"pages_to_scan", "100"}, {"sleep_millisecs", "20"}, {"use_zero_pages", "0"}};

TEST(HostMemorySharing, TurnsKsmOnAndGivesTheHostItsValuesBack) {
    FakeKsm ksm(kHostDefaults);
    {
        HostMemorySharing sharing(HostMemorySharing::Mode::automatic, ksm.record(), ksm.path(),
                                  false);
        EXPECT_EQ(sharing.ksmState(), "on (airlockd)");
        EXPECT_EQ(ksm.read("run"), "1");
        EXPECT_EQ(ksm.read("pages_to_scan"), "1000");
        EXPECT_EQ(ksm.read("use_zero_pages"), "1");
    }
    for (const auto& [name, value] : kHostDefaults) EXPECT_EQ(ksm.read(name), value) << name;
}

TEST(HostMemorySharing, TheHostsValuesAreRecordedUntilTheyAreBack) {
    FakeKsm ksm(kHostDefaults);
    {
        HostMemorySharing sharing(HostMemorySharing::Mode::automatic, ksm.record(), ksm.path(),
                                  false);
        std::ifstream in(ksm.record());
        std::string text((std::istreambuf_iterator<char>(in)), {});
        EXPECT_NE(text.find("run=0\n"), std::string::npos) << text;
        EXPECT_NE(text.find("pages_to_scan=100\n"), std::string::npos) << text;
    }
    EXPECT_FALSE(fs::exists(ksm.record())) << "gone once the host has its values back";
}

TEST(HostMemorySharing, AnAirlockdThatWasKilledIsFinishedByTheNext) {
    // What a killed airlockd leaves: KSM on with its rate, and the record.
    auto left = kHostDefaults;
    left["run"] = "1";
    left["pages_to_scan"] = "1000";
    left["use_zero_pages"] = "1";
    FakeKsm ksm(left);
    std::ofstream(ksm.record())
        << "pages_to_scan=100\nrun=0\nsleep_millisecs=20\nuse_zero_pages=0\n";
    {
        HostMemorySharing sharing(HostMemorySharing::Mode::automatic, ksm.record(), ksm.path(),
                                  false);
        EXPECT_EQ(sharing.ksmState(), "on (airlockd)") << "not mistaken for the host's own";
    }
    for (const auto& [name, value] : kHostDefaults) EXPECT_EQ(ksm.read(name), value) << name;
    EXPECT_FALSE(fs::exists(ksm.record()));
}

TEST(HostMemorySharing, LeavesAHostThatAlreadyMergesAlone) {
    auto values = kHostDefaults;
    values["run"] = "1";
    values["pages_to_scan"] = "5000";
    FakeKsm ksm(values);
    {
        HostMemorySharing sharing(HostMemorySharing::Mode::automatic, ksm.record(), ksm.path(),
                                  false);
        EXPECT_EQ(sharing.ksmState(), "on (host)");
        EXPECT_EQ(ksm.read("pages_to_scan"), "5000");
    }
    EXPECT_EQ(ksm.read("run"), "1") << "airlockd did not turn it on, so it does not turn it off";
    EXPECT_EQ(ksm.read("pages_to_scan"), "5000");
}

TEST(HostMemorySharing, OffTouchesNothing) {
    FakeKsm ksm(kHostDefaults);
    {
        HostMemorySharing sharing(HostMemorySharing::Mode::off, ksm.record(), ksm.path(), false);
        EXPECT_EQ(sharing.ksmState(), "off");
        EXPECT_EQ(ksm.read("run"), "0");
    }
    EXPECT_EQ(ksm.read("run"), "0");
}

TEST(HostMemorySharing, AKernelWithoutKsmIsReportedNotFatal) {
    test::TempDir empty;
    HostMemorySharing sharing(HostMemorySharing::Mode::automatic, empty.path() + "/record",
                              empty.path() + "/ksm", false);
    EXPECT_EQ(sharing.ksmState().rfind("unavailable", 0), 0u) << sharing.ksmState();
}

}  // namespace
}  // namespace airlock
