#include "evidence/BundlePath.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace airlock {
namespace {

bool staysUnderRoot(const std::string& path) {
    if (path.empty() || path[0] == '/') return false;
    std::size_t at = 0;
    while (true) {
        auto end = path.find('/', at);
        std::string part = path.substr(at, end == std::string::npos ? end : end - at);
        if (part.empty() || part == "." || part == "..") return false;
        if (end == std::string::npos) return true;
        at = end + 1;
    }
}

TEST(BundlePath, RecordIntegrityEveryGuestNameBecomesAPathInsideTheBundle) {
    std::vector<std::string> corpus = {
        "a\\b.xml", "new\nline", "q\"uote", "<script>.txt", "-dash", std::string(255, 'x'),
        "bad\xff\xfeutf8", "..", ".", "...", "../../x", "/etc/passwd", "a//b", "%2E%2E",
        "sp ace & 'amp'", std::string("nul\0x", 5), "d/d/d/d/d/d/d/d/d/d/d/d/d/deep"};
    for (const auto& name : corpus) {
        std::string p = bundleSafePath(name);
        EXPECT_TRUE(staysUnderRoot(p)) << p;
        for (char c : p) {
            EXPECT_FALSE(c == '\\' || c == '\n' || c == '"' || c == '<' || c == '>' || c == '\'' ||
                         c == '&' || c == ' ' || c == '\0')
                << "'" << p << "' from '" << name << "'";
        }
    }
    EXPECT_EQ(bundleSafePath("reports/junit.xml"), "reports/junit.xml") << "plain names stay";
    EXPECT_EQ(bundleSafePath("../../x"), "%2E%2E/%2E%2E/x");
    EXPECT_NE(bundleSafePath("%2E%2E"), bundleSafePath("..")) << "escaping is one to one";
    EXPECT_NE(bundleSafePath("a b"), bundleSafePath("a%20b"));
}

TEST(BundlePath, AListingEntryNamedLikeAPathIsHostile) {
    for (const char* bad : {"", ".", "..", "a/b", "/"}) EXPECT_FALSE(isListableName(bad)) << bad;
    for (const char* good : {"...", "-x", "a\\b", "new\nline"}) EXPECT_TRUE(isListableName(good));
}

}  // namespace
}  // namespace airlock
