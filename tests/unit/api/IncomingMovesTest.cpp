#include "api/IncomingMoves.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "core/Error.hpp"
#include "core/Sha256.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {

// The controller's side, recorded: what reached moveIn, what was dropped.
class FakeMoves : public SandboxMoves {
  public:
    explicit FakeMoves(std::string dir) : dir_(std::move(dir)) {}
    std::vector<SandboxRecord> movable() override { return {}; }
    std::unique_ptr<OutgoingMove> moveOut(const std::string&, const SecretCipher&,
                                          const std::string&) override {
        throw Error(ErrorCode::internal, "not here");
    }
    bool leaving(const std::string&) override { return false; }
    std::string arrivalsDir() const override { return dir_; }
    SandboxRecord moveIn(const MovedSandbox& moved, const SecretCipher&, const std::string& state,
                         const std::string&, const std::string& workspace,
                         const std::string& from) override {
        std::ifstream in(state);
        stateText = std::string(std::istreambuf_iterator<char>(in), {});
        if (!workspace.empty()) {
            std::ifstream pack(workspace);
            workspaceText = std::string(std::istreambuf_iterator<char>(pack), {});
        }
        movedFrom = from;
        if (failStart) throw Error(ErrorCode::hypervisor_error, "no room");
        return moved.record;
    }
    void dropLocalCopy(const std::string& id, const std::string&) override { dropped = id; }

    std::string stateText, workspaceText, movedFrom, dropped;
    bool failStart = false;

  private:
    std::string dir_;
};

class IncomingMovesTest : public ::testing::Test {
  protected:
    MovedSandbox moved(const std::string& id = "sbx-abcdefghijklmnopqrst") {
        MovedSandbox m;
        m.record.id = id;
        m.record.tenant = "acme";
        m.record.memoryMib = 256;
        return m;
    }
    static std::map<std::string, safefs::FileDigest> stateOf(const std::string& bytes) {
        return {{"state", safefs::FileDigest{bytes.size(), sha256Hex(bytes)}}};
    }
    bool exists(const std::string& id) {
        struct stat st {};
        return ::stat((dir_.path() + "/move-" + id).c_str(), &st) == 0;
    }
    test::TempDir dir_;
    FakeMoves moves_{dir_.path()};
    api::IncomingMoves incoming_{moves_};
    SecretCipher journey_{std::array<unsigned char, 32>{}};
    std::function<void(const SandboxRecord&)> placed_ = [](const SandboxRecord&) {};
};

TEST_F(IncomingMovesTest, PiecesInOrderThenStartHandsTheWholeFileOver) {
    const std::string id = "sbx-abcdefghijklmnopqrst";
    incoming_.begin("node1", moved(), stateOf("hello world"));
    incoming_.write("node1", id, "state", 0, "hello ");
    incoming_.write("node1", id, "state", 6, "world");
    auto r = incoming_.commit("node1", id, journey_, placed_);
    EXPECT_EQ(r.id, id);
    EXPECT_EQ(moves_.stateText, "hello world");
    EXPECT_EQ(moves_.movedFrom, "node1");
    EXPECT_FALSE(exists(id)) << "its files go once it started";
}

TEST_F(IncomingMovesTest, PiecesOutOfOrderPastTheSizeOrFromAnotherNodeAreRefused) {
    const std::string id = "sbx-abcdefghijklmnopqrst";
    incoming_.begin("node1", moved(), stateOf("12345"));
    EXPECT_EQ(test::codeOf([&] { incoming_.write("node1", id, "state", 2, "345"); }),
              ErrorCode::conflict);
    EXPECT_EQ(test::codeOf([&] { incoming_.write("node1", id, "state", 0, "123456"); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { incoming_.write("node2", id, "state", 0, "12"); }),
              ErrorCode::not_found);
    EXPECT_EQ(test::codeOf([&] { incoming_.write("node1", id, "disk", 0, "12"); }),
              ErrorCode::bad_request);
    EXPECT_EQ(test::codeOf([&] { incoming_.commit("node1", id, journey_, placed_); }),
              ErrorCode::conflict)
        << "a file short of its size does not start";
    EXPECT_EQ(test::codeOf([&] { incoming_.begin("node1", moved(), stateOf("12345")); }),
              ErrorCode::conflict)
        << "one arrival per id";
}

TEST_F(IncomingMovesTest, AFileAlteredOnTheWayIsRefusedAndDropped) {
    const std::string id = "sbx-abcdefghijklmnopqrst";
    incoming_.begin("node1", moved(), stateOf("12345"));
    incoming_.write("node1", id, "state", 0, "12XY5");
    EXPECT_EQ(test::codeOf([&] { incoming_.commit("node1", id, journey_, placed_); }),
              ErrorCode::bad_request);
    EXPECT_TRUE(moves_.stateText.empty()) << "never started";
    EXPECT_FALSE(exists(id));
}

TEST_F(IncomingMovesTest, FilesLargerThanTheSandboxCouldHaveAreRefusedBeforeAnyByte) {
    auto m = moved();
    std::map<std::string, safefs::FileDigest> huge{
        {"state", safefs::FileDigest{(256ull + 513) << 20, std::string(64, 'a')}}};
    EXPECT_EQ(test::codeOf([&] { incoming_.begin("node1", m, huge); }), ErrorCode::bad_request);
    auto withDisk = stateOf("x");
    withDisk["disk"] = safefs::FileDigest{1, std::string(64, 'a')};
    EXPECT_EQ(test::codeOf([&] { incoming_.begin("node1", m, withDisk); }),
              ErrorCode::bad_request)
        << "a disk the record does not have";
    EXPECT_EQ(test::codeOf([&] { incoming_.begin("node1", m, {}); }), ErrorCode::bad_request);
}

TEST_F(IncomingMovesTest, AWorkspacesCommitsComeOnlyWithAWorkspaceRecord) {
    const std::string id = "sbx-abcdefghijklmnopqrst";
    auto files = stateOf("x");
    files["workspace"] = safefs::FileDigest{4, sha256Hex("PACK")};
    EXPECT_EQ(test::codeOf([&] { incoming_.begin("node1", moved(), files); }),
              ErrorCode::bad_request)
        << "a pack without a workspace";
    auto m = moved();
    m.workspace = R"({"repo":"https://git.example/demo.git"})";
    incoming_.begin("node1", m, files);
    incoming_.write("node1", id, "state", 0, "x");
    incoming_.write("node1", id, "workspace", 0, "PACK");
    incoming_.commit("node1", id, journey_, placed_);
    EXPECT_EQ(moves_.workspaceText, "PACK");
}

TEST_F(IncomingMovesTest, OnlyAFewArriveAtOnceAndAnAbortFreesASlot) {
    for (std::size_t i = 0; i < api::IncomingMoves::kMaxArrivals; ++i)
        incoming_.begin("node1", moved("sbx-abcdefghijklmnopqrs" + std::to_string(i)),
                        stateOf("x"));
    EXPECT_EQ(test::codeOf([&] {
                  incoming_.begin("node1", moved("sbx-abcdefghijklmnopqrsz"), stateOf("x"));
              }),
              ErrorCode::unavailable);
    incoming_.abort("node1", "sbx-abcdefghijklmnopqrs0");
    EXPECT_FALSE(exists("sbx-abcdefghijklmnopqrs0"));
    incoming_.begin("node1", moved("sbx-abcdefghijklmnopqrsz"), stateOf("x"));
}

TEST_F(IncomingMovesTest, ASandboxTheFleetCannotRecordHereGoesAgain) {
    const std::string id = "sbx-abcdefghijklmnopqrst";
    incoming_.begin("node1", moved(), stateOf("x"));
    incoming_.write("node1", id, "state", 0, "x");
    auto failing = [](const SandboxRecord&) { throw Error(ErrorCode::unavailable, "etcd"); };
    EXPECT_EQ(test::codeOf([&] { incoming_.commit("node1", id, journey_, failing); }),
              ErrorCode::unavailable);
    EXPECT_EQ(moves_.dropped, id);
    EXPECT_FALSE(exists(id));
}

}  // namespace
}  // namespace airlock
