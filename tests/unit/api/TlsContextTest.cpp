#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "api/TlsContext.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock::api {
namespace {

std::string messageOf(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::bad_request);
        return e.what();
    }
    return "(no error)";
}

TEST(TlsContext, LoadsAMatchingPairAndNamesWhatIsWrong) {
    test::TempDir dir;
    std::string d = dir.path();
    std::string cmd = "set -e; cd '" + d +
                      "'; for n in a b; do openssl req -x509 -newkey ec -pkeyopt "
                      "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=$n -keyout $n.key "
                      "-out $n.pem 2>/dev/null; done";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_NE(makeServerTlsContext(d + "/a.pem", d + "/a.key"), nullptr);
    EXPECT_NE(messageOf([&] {
                  makeServerTlsContext(d + "/none.pem", d + "/a.key");
              }).find("--tls-cert " + d + "/none.pem"),
              std::string::npos);
    std::ofstream(d + "/junk.key") << "not a key";
    EXPECT_NE(
        messageOf([&] { makeServerTlsContext(d + "/a.pem", d + "/junk.key"); }).find("--tls-key"),
        std::string::npos);
    EXPECT_NE(
        messageOf([&] { makeServerTlsContext(d + "/a.pem", d + "/b.key"); }).find("does not match"),
        std::string::npos);
}

}  // namespace
}  // namespace airlock::api
