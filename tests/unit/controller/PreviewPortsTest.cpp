#include <gtest/gtest.h>

#include "controller/PreviewPorts.hpp"
#include "core/Error.hpp"
#include "store/Database.hpp"
#include "support/TestEnv.hpp"

namespace airlock {

class PreviewPortsTest : public ::testing::Test {
  protected:
    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    PortStore store{db};
    PreviewPorts ports{store};
    const std::string a = "sbx-aaaaaaaaaaaaaaaaaaaa", b = "sbx-bbbbbbbbbbbbbbbbbbbb";
};

TEST_F(PreviewPortsTest, AnExposedPortKeepsItsOwnTokenUntilClosed) {
    auto first = ports.expose(a, 8080);
    EXPECT_EQ(ports.expose(a, 8080).token, first.token) << "exposing again changed the token";
    auto other = ports.expose(a, 3000);
    EXPECT_NE(other.token, first.token);
    EXPECT_EQ(ports.list(a).size(), 2u);
    EXPECT_TRUE(ports.list(b).empty());
    ports.close(a, 8080);
    EXPECT_EQ(ports.list(a).size(), 1u);
    EXPECT_NE(ports.expose(a, 8080).token, first.token) << "a closed port's token came back";
}

TEST_F(PreviewPortsTest, OnlyTheRightTokenForTheRightPortAndSandboxAdmits) {
    auto p = ports.expose(a, 8080);
    EXPECT_TRUE(ports.admits(a, 8080, p.token));
    EXPECT_FALSE(ports.admits(a, 8081, p.token));
    EXPECT_FALSE(ports.admits(b, 8080, p.token));
    EXPECT_FALSE(ports.admits(a, 8080, p.token.substr(1)));
    std::string flipped = p.token;
    flipped.back() = flipped.back() == 'a' ? 'b' : 'a';
    EXPECT_FALSE(ports.admits(a, 8080, flipped));
    EXPECT_FALSE(ports.admits(a, 8080, ""));
    EXPECT_FALSE(ports.admits("../etc", 8080, p.token));
}

TEST_F(PreviewPortsTest, BadPortsAndUnknownOnesAreClearErrors) {
    for (unsigned bad : {0u, 65536u}) {
        try {
            ports.expose(a, bad);
            FAIL() << bad;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::bad_request);
        }
    }
    try {
        ports.close(a, 9999);
        FAIL() << "closed a port never exposed";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::not_found);
    }
}

}  // namespace airlock
