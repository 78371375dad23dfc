#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/Error.hpp"
#include "evidence/BundleVerifier.hpp"
#include "evidence/BundleWriter.hpp"
#include "evidence/Dsse.hpp"
#include "evidence/EvidenceKey.hpp"
#include "evidence/PatchReplay.hpp"
#include "evidence/TarGzReader.hpp"
#include "evidence/TarGzWriter.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

class BundleVerifierTest : public ::testing::Test {
  protected:
    BundleVerifierTest() : key(EvidenceKey::loadOrCreate(dir.path() + "/keys")) {}

    // A repository with one commit, and a change to it as a full-index binary patch.
    void makeRepository() {
        repo = dir.path() + "/repo";
        std::string g = "git -C " + repo + " -c user.name=t -c user.email=t@e ";
        test::commandOutput("git init -q " + repo +
                            " && printf 'def add(a, b):\\n    return a + b\\n' > " + repo +
                            "/app.py && printf '\\x00\\x01bin' > " + repo + "/blob.bin && " + g +
                            "add -A && " + g + "commit -qm base");
        base = trim(test::commandOutput(g + "rev-parse HEAD"));
        test::commandOutput("printf 'def add(a, b):\\n    return int(a) + int(b)\\n' > " + repo +
                            "/app.py && printf '\\x02' >> " + repo + "/blob.bin && echo new > " +
                            repo + "/new.txt && " + g + "add -A");
        patch = test::commandOutput(g + "diff --cached --binary --full-index");
        finalTree = trim(test::commandOutput(g + "write-tree"));
        test::commandOutput(g + "reset -q --hard " + base + " && " + g + "clean -qfd");
    }

    std::string seal(const std::string& withPatch) {
        BundleWriter w("evd-test", 1700000000);
        w.add("changes/changes.patch", withPatch);
        w.add("commands/commands.jsonl", "{\"cmd\":\"true\"}\n");
        w.add("attestations.intoto.jsonl",
              dsse::sign(key, dsse::kInTotoPayloadType,
                         R"({"_type":"https://in-toto.io/Statement/v1"})")
                      .dump() +
                  "\n");
        return w
            .seal({{"bundle", "evd-test"},
                   {"workspace", {{"base_commit", base}, {"final_tree", finalTree}}}},
                  key)
            .gz;
    }

    test::TempDir dir;
    EvidenceKey key;
    std::string repo, base, patch, finalTree;
};

TEST_F(BundleVerifierTest, TheSealedBundleVerifiesOfflineWithTheStockTools) {
    makeRepository();
    ASSERT_EQ(base.size(), 40u);
    std::string gz = seal(patch);
    auto r = BundleVerifier::verify(gz, {key.publicKeyPem()}, repo);
    EXPECT_TRUE(r.ok());
    for (const auto& p : r.problems) ADD_FAILURE() << p;
    EXPECT_EQ(r.keyid, key.keyid());
    EXPECT_EQ(r.passed.size(), 7u);

    // What docs/evidence.md tells a reviewer to run, with nothing of ours.
    std::ofstream(dir.path() + "/b.tar.gz", std::ios::binary) << gz;
    std::ofstream(dir.path() + "/pub.pem") << key.publicKeyPem();
    std::string x = dir.path() + "/x/evd-test";
    test::commandOutput("mkdir " + dir.path() + "/x && tar -xzf " + dir.path() + "/b.tar.gz -C " +
                        dir.path() + "/x");
    EXPECT_EQ(
        test::commandOutput("cd " + x + " && sha256sum --quiet -c SHA256SUMS 2>&1 && echo sums-ok"),
        "sums-ok\n");
    EXPECT_NE(
        test::commandOutput("openssl dgst -sha256 -verify " + dir.path() + "/pub.pem -signature " +
                            x + "/SHA256SUMS.sig " + x + "/SHA256SUMS 2>&1")
            .find("Verified OK"),
        std::string::npos);
    std::string g = "git -C " + repo + " ";
    EXPECT_EQ(trim(test::commandOutput(g + "checkout -q " + base + " && " + g + "apply --index " +
                                       x + "/changes/changes.patch && " + g + "write-tree")),
              finalTree);
}

TEST_F(BundleVerifierTest, AnyChangedByteAddedFileOrOtherKeyFails) {
    makeRepository();
    std::string gz = seal(patch);
    auto files = TarGzReader::read(gz);
    auto rebuild = [&](const std::map<std::string, std::string>& fs) {
        TarGzWriter t(1700000000);
        for (const auto& [p, c] : fs) t.add(p, c);
        return t.finish();
    };
    // One byte changed in each file in turn.
    for (const auto& [path, content] : files) {
        auto changed = files;
        changed[path][content.size() / 2] ^= 0x20;
        auto r = BundleVerifier::verify(rebuild(changed), {key.publicKeyPem()});
        EXPECT_FALSE(r.ok()) << "a byte changed in " << path;
    }
    auto added = files;
    added["evd-test/extra.txt"] = "smuggled";
    auto r = BundleVerifier::verify(rebuild(added), {key.publicKeyPem()});
    EXPECT_FALSE(r.ok());
    EXPECT_NE(testing::PrintToString(r.problems).find("extra.txt"), std::string::npos);
    auto removed = files;
    removed.erase("evd-test/commands/commands.jsonl");
    EXPECT_FALSE(BundleVerifier::verify(rebuild(removed), {key.publicKeyPem()}).ok());

    auto other = EvidenceKey::loadOrCreate(dir.path() + "/other");
    EXPECT_FALSE(BundleVerifier::verify(gz, {other.publicKeyPem()}).ok());
    EXPECT_TRUE(BundleVerifier::verify(gz, {other.publicKeyPem(), key.publicKeyPem()}).ok());
    EXPECT_FALSE(BundleVerifier::verify(gz, {}).ok());
    EXPECT_FALSE(BundleVerifier::verify("junk", {key.publicKeyPem()}).ok());

    // A patch that, re-sealed and signed, does not give the recorded tree.
    std::string wrong = patch;
    auto at = wrong.find("int(a)");
    ASSERT_NE(at, std::string::npos);
    wrong.replace(at, 6, "int(A)");
    auto replay = BundleVerifier::verify(seal(wrong), {key.publicKeyPem()}, repo);
    EXPECT_FALSE(replay.ok());
}

TEST_F(BundleVerifierTest, RecordIntegrityABundleResignedByAnotherKeyNamesTheWrongKey) {
    makeRepository();
    auto files = TarGzReader::read(seal(patch));
    // Every byte kept, SHA256SUMS signed again by another key the reviewer
    // also accepts (an older one, say): the manifest still names the first.
    auto other = EvidenceKey::loadOrCreate(dir.path() + "/other");
    files["evd-test/SHA256SUMS.sig"] = other.sign(files["evd-test/SHA256SUMS"]);
    TarGzWriter t(1700000000);
    for (const auto& [p, c] : files) t.add(p, c);
    auto r = BundleVerifier::verify(t.finish(), {other.publicKeyPem()});
    EXPECT_FALSE(r.ok());
    EXPECT_NE(testing::PrintToString(r.problems).find("names key"), std::string::npos);
}

TEST_F(BundleVerifierTest, PatchReplayLeavesTheRepositoryUntouched) {
    makeRepository();
    std::string objectsBefore =
        test::commandOutput("find " + repo + "/.git/objects -type f | sort");
    EXPECT_EQ(treeAfterPatch(repo, base, patch), finalTree);
    EXPECT_EQ(test::commandOutput("find " + repo + "/.git/objects -type f | sort"), objectsBefore);
    EXPECT_EQ(test::codeOf([&] { treeAfterPatch(repo, std::string(40, 'a'), patch); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { treeAfterPatch(repo, base, "not a patch"); }),
              ErrorCode::bad_request);
}

}  // namespace
}  // namespace airlock
