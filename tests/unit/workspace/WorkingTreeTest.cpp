#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>

#include "core/Error.hpp"
#include "workspace/WorkingTree.hpp"

namespace airlock::workspace {
namespace {
namespace fs = std::filesystem;

std::string blobHex(git_repository* repo, const std::string& bytes) {
    git_oid id;
    git_blob_create_from_buffer(&id, repo, bytes.data(), bytes.size());
    return oidHex(id);
}

class WorkingTreeTest : public ::testing::Test {
  protected:
    void SetUp() override {
        initGit();
        dir_ = fs::temp_directory_path() /
               ("airlock-wt-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        git_repository* raw = nullptr;
        ASSERT_EQ(git_repository_init(&raw, dir_.c_str(), 1), 0);
        repo_.reset(raw);
        // The base: a source file, a script, a binary file, a link, a doc.
        Scan base;
        base.files = {{"README.md", GIT_FILEMODE_BLOB, blobHex(repo_.get(), "# demo\n"), ""},
                      {"assets/logo.bin", GIT_FILEMODE_BLOB,
                       blobHex(repo_.get(), std::string("\0\1\2\3", 4)), ""},
                      {"scripts/build.sh", GIT_FILEMODE_BLOB_EXECUTABLE,
                       blobHex(repo_.get(), "#!/bin/sh\necho build\necho more\necho lines\n"), ""},
                      {"src/app.py", GIT_FILEMODE_BLOB,
                       blobHex(repo_.get(), "def add(a, b):\n    return a + b\n"), ""},
                      {"src/link", GIT_FILEMODE_LINK, "", "app.py"}};
        base_ = buildWorkingTree(repo_.get(), base, {}, [](const std::string& p) -> std::string {
            ADD_FAILURE() << "the base has every blob; asked for " << p;
            return {};
        });
    }
    void TearDown() override {
        repo_.reset();
        fs::remove_all(dir_);
    }
    fs::path dir_;
    Repository repo_;
    git_oid base_{};
};

TEST_F(WorkingTreeTest, TheTreeNamesOnlyContentTheHostHoldsAndTheDiffShowsEveryKindOfChange) {
    std::set<std::string> read;
    std::map<std::string, std::string> guest{
        {"src/app.py", "def add(a, b):\n    return a + b + 0\n"},
        {"tests/test_more.py", "def test_more():\n    assert True\n"},
        {"assets/logo.bin", std::string("\0\1\2\3\4\5", 6)},
        {"docs/notes.md", "notes\n"}};
    Scan now;
    auto scriptId = blobHex(repo_.get(), "#!/bin/sh\necho build\necho more\necho lines\n");
    // Changed files claim ids the host lacks (read back); the renamed script
    // claims an id the host has (not read); the README is gone.
    now.files = {{"assets/logo.bin", GIT_FILEMODE_BLOB, std::string(40, '0'), ""},
                 {"docs/notes.md", GIT_FILEMODE_BLOB, std::string(40, '1'), ""},
                 {"scripts/make.sh", GIT_FILEMODE_BLOB_EXECUTABLE, scriptId, ""},
                 {"src/app.py", GIT_FILEMODE_BLOB_EXECUTABLE, std::string(40, 'a'), ""},
                 {"src/link", GIT_FILEMODE_LINK, "", "app.py"},
                 {"tests/test_more.py", GIT_FILEMODE_BLOB, std::string(40, 'b'), ""}};
    auto tree = buildWorkingTree(repo_.get(), now, {}, [&](const std::string& p) {
        read.insert(p);
        return guest.at(p);
    });
    EXPECT_EQ(read, (std::set<std::string>{"assets/logo.bin", "docs/notes.md", "src/app.py",
                                           "tests/test_more.py"}));
    auto d = diffTrees(repo_.get(), base_, tree, {"src/**", "tests/**"});
    EXPECT_NE(d.patch.find("diff --git a/src/app.py b/src/app.py"), std::string::npos) << d.patch;
    EXPECT_NE(d.patch.find("new mode 100755"), std::string::npos);
    EXPECT_NE(d.patch.find("+    return a + b + 0"), std::string::npos);
    EXPECT_NE(d.patch.find("rename from scripts/build.sh"), std::string::npos);
    EXPECT_NE(d.patch.find("deleted file mode 100644"), std::string::npos);
    EXPECT_NE(d.patch.find("GIT binary patch"), std::string::npos);
    // Full index lines: git apply needs them for binary patches.
    EXPECT_TRUE(std::regex_search(d.patch, std::regex("\nindex [0-9a-f]{40}\\.\\.[0-9a-f]{40}")));
    std::map<std::string, std::string> status;
    for (const auto& f : d.files) status[f.path] = f.status;
    EXPECT_EQ(status["README.md"], "deleted");
    EXPECT_EQ(status["scripts/make.sh"], "renamed");
    EXPECT_EQ(status["tests/test_more.py"], "added");
    EXPECT_EQ(status["src/app.py"], "modified");
    std::set<std::string> outside(d.outOfScope.begin(), d.outOfScope.end());
    EXPECT_EQ(outside, (std::set<std::string>{"README.md", "assets/logo.bin", "docs/notes.md",
                                              "scripts/build.sh", "scripts/make.sh"}));
}

TEST_F(WorkingTreeTest, AnUnchangedTreeIsTheBaseTree) {
    Scan same;
    same.files = {{"README.md", GIT_FILEMODE_BLOB, blobHex(repo_.get(), "# demo\n"), ""},
                  {"assets/logo.bin", GIT_FILEMODE_BLOB,
                   blobHex(repo_.get(), std::string("\0\1\2\3", 4)), ""},
                  {"scripts/build.sh", GIT_FILEMODE_BLOB_EXECUTABLE,
                   blobHex(repo_.get(), "#!/bin/sh\necho build\necho more\necho lines\n"), ""},
                  {"src/app.py", GIT_FILEMODE_BLOB,
                   blobHex(repo_.get(), "def add(a, b):\n    return a + b\n"), ""},
                  {"src/link", GIT_FILEMODE_LINK, "", "app.py"}};
    auto tree = buildWorkingTree(repo_.get(), same, {},
                                 [](const std::string&) -> std::string { return {}; });
    EXPECT_TRUE(git_oid_equal(&tree, &base_));
    EXPECT_TRUE(diffTrees(repo_.get(), base_, tree, {}).files.empty());
}

TEST(WorkspaceScan, MalformedOutputFromTheGuestIsRefused) {
    std::string good = "100644 " + std::string(40, 'a') + " src/a.py" + std::string(1, '\0') +
                       "120000 " + std::string(40, 'b') + " l" + std::string(1, '\0') + "target" +
                       std::string(1, '\0') + "I node_modules/" + std::string(1, '\0');
    auto scan = parseScan(good);
    ASSERT_EQ(scan.files.size(), 2u);
    EXPECT_EQ(scan.files[1].linkTarget, "target");
    EXPECT_EQ(scan.ignored, std::vector<std::string>{"node_modules/"});
    for (const std::string& bad :
         {std::string("100644 ") + std::string(40, 'a') + " ../x" + std::string(1, '\0'),
          std::string("100600 ") + std::string(40, 'a') + " x" + std::string(1, '\0'),
          std::string("100644 ") + std::string(40, 'Z') + " x" + std::string(1, '\0'),
          std::string("100644 ") + std::string(40, 'a') + " x",
          std::string("I /etc") + std::string(1, '\0'),
          std::string("120000 ") + std::string(40, 'a') + " l" + std::string(1, '\0')})
        EXPECT_THROW(parseScan(bad), Error) << bad;
}

}  // namespace
}  // namespace airlock::workspace
