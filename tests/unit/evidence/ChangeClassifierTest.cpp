#include <gtest/gtest.h>

#include "evidence/ChangeClassifier.hpp"

namespace airlock {
namespace {

TEST(ChangeClassifier, ScopeSensitivePathsAndGeneratedFiles) {
    ChangeClassifier c({"src/**", "tests/**", "package.json"}, {".github/**", "auth/**"},
                       "# comment\n*.snap linguist-generated\ngen/ linguist-generated=true\n"
                       "dist/keep.js -linguist-generated\n");
    EXPECT_TRUE(c.inScope("src/app.py"));
    EXPECT_TRUE(c.inScope("src/deep/x.py"));
    EXPECT_TRUE(c.inScope("package.json"));
    EXPECT_FALSE(c.inScope("docs/notes.md"));
    EXPECT_FALSE(c.inScope("srcx/app.py"));
    EXPECT_TRUE(c.sensitive(".github/workflows/x.yml"));
    EXPECT_TRUE(c.sensitive("auth/login.py"));
    EXPECT_FALSE(c.sensitive("src/auth.py"));
    EXPECT_TRUE(c.generated("dist/bundle.js")) << "a known build output";
    EXPECT_FALSE(c.generated("dist/keep.js")) << ".gitattributes says otherwise";
    EXPECT_TRUE(c.generated("tests/__snapshots__/a.snap"));
    EXPECT_TRUE(c.generated("gen/api.py"));
    EXPECT_TRUE(c.generated("web/package-lock.json")) << "lockfiles";
    EXPECT_TRUE(c.generated("static/app.min.js"));
    EXPECT_FALSE(c.generated("src/app.py"));
    ChangeClassifier open({}, {}, "");
    EXPECT_TRUE(open.inScope("anything/at/all"));
}

TEST(ChangeClassifier, SensitiveArtifactsByNameKeyTokenOrSecretValue) {
    std::vector<std::string> secrets = {"evCanary-123-456-zq"};
    EXPECT_EQ(sensitiveArtifactReason("out/screenshot.png", "PNG", secrets), "");
    EXPECT_NE(sensitiveArtifactReason("app/.env", "A=1", secrets), "");
    EXPECT_NE(sensitiveArtifactReason(
                  "out/debug.log",
                  "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n", secrets)
                  .find("private key"),
              std::string::npos);
    EXPECT_NE(sensitiveArtifactReason("out/log.txt", "token=ghp_" + std::string(36, 'a'), secrets),
              "");
    EXPECT_EQ(sensitiveArtifactReason("out/log.txt", "ghp_short", secrets), "");
    EXPECT_NE(sensitiveArtifactReason("out/log.txt", "AKIAABCDEFGHIJKLMNOP", secrets), "");
    std::string reason = sensitiveArtifactReason("out/log.txt", "x evCanary-123-456-zq y", secrets);
    EXPECT_NE(reason, "");
    EXPECT_EQ(reason.find("evCanary"), std::string::npos) << "the reason never repeats the secret";
}

}  // namespace
}  // namespace airlock
