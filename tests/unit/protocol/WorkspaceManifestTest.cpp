#include <gtest/gtest.h>

#include <string>

#include "protocol/Messages.hpp"
#include "protocol/WorkspaceManifest.hpp"

namespace airlock::protocol {
namespace {

const std::string kId(40, 'a');
std::string nul(const std::string& s) { return s + std::string(1, '\0'); }

bool refused(const std::string& bytes) {
    try {
        parseWorkspaceManifest(bytes);
    } catch (const MessageError&) {
        return true;
    }
    return false;
}

TEST(WorkspaceManifest, WhatTheGuestWritesTheHostReadsBack) {
    std::string bytes;
    appendManifestFile(bytes, {ManifestFile::Mode::file, kId, "src/a.py", ""});
    appendManifestFile(bytes, {ManifestFile::Mode::executable, std::string(40, 'b'), "run.sh", ""});
    appendManifestFile(bytes, {ManifestFile::Mode::link, std::string(40, 'c'), "l", "../target"});
    appendManifestIgnored(bytes, "node_modules", true);
    appendManifestIgnored(bytes, "build.log", false);
    EXPECT_EQ(bytes.substr(0, 7 + 40 + 10), "100644 " + kId + " src/a.py" + std::string(1, '\0'));
    auto back = parseWorkspaceManifest(bytes);
    ASSERT_EQ(back.files.size(), 3u);
    EXPECT_EQ(back.files[0].path, "src/a.py");
    EXPECT_EQ(back.files[0].id, kId);
    EXPECT_EQ(back.files[1].mode, ManifestFile::Mode::executable);
    EXPECT_EQ(back.files[2].mode, ManifestFile::Mode::link);
    EXPECT_EQ(back.files[2].linkTarget, "../target") << "a link's target is the guest's to say";
    EXPECT_EQ(back.ignored, (std::vector<std::string>{"node_modules/", "build.log"}));
    EXPECT_TRUE(parseWorkspaceManifest("").files.empty());
}

TEST(WorkspaceManifest, HostileRecordsAreRefused) {
    for (const std::string& bad : {
             nul("100644 " + kId + " ../x"),                // climbs out
             nul("100644 " + kId + " /etc/passwd"),         // absolute
             nul("100644 " + kId + " a/./b"),               // not canonical
             nul("100644 " + kId + " "),                    // no path
             nul("100600 " + kId + " x"),                   // a mode git has not
             nul("040000 " + kId + " x"),                   // a tree is no file
             nul("100644 " + std::string(40, 'Z') + " x"),  // not lowercase hex
             nul("100644 " + std::string(39, 'a') + " x"),  // short id
             "100644 " + kId + " x",                        // unterminated
             nul("I /etc"),                                 // ignored, absolute
             nul("I ../up/"),                               // ignored, climbing
             nul("120000 " + kId + " l"),                   // a link without its target
             nul("garbage"),
         })
        EXPECT_TRUE(refused(bad)) << bad;
}

}  // namespace
}  // namespace airlock::protocol
