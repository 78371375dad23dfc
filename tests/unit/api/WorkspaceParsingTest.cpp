#include "api/WorkspaceParsing.hpp"

#include <gtest/gtest.h>

#include "support/TestEnv.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;
using test::codeOf;

TEST(WorkspaceParsing, InfoRendersWhatIsUnknownAsNull) {
    workspace::WorkspaceInfo info;
    info.repo = "https://git.example/org/app.git";
    info.branch = "agent/task";
    info.submodules = {{"lib", "vendor/lib", "https://git.example/org/lib.git", "abc", "/mirror"}};
    info.skippedSubmodules = {{"priv", "vendor/priv", "https://git.example/x/priv.git", "def", ""}};
    auto j = workspaceInfoJson(info);
    EXPECT_TRUE(j["head"].is_null()) << "no commit yet";
    EXPECT_TRUE(j["changed_files"].is_null()) << "not running: unknown, not 0";
    EXPECT_EQ(j["submodules"], json::parse(R"([{"path":"vendor/lib","commit":"abc"}])"));
    EXPECT_EQ(j["skipped_submodules"][0]["url"], "https://git.example/x/priv.git");
    EXPECT_FALSE(j.dump().find("/mirror") != std::string::npos) << "host paths never leave";
    info.head = "0123";
    info.changedFiles = 0;
    j = workspaceInfoJson(info);
    EXPECT_EQ(j["head"], "0123");
    EXPECT_EQ(j["changed_files"], 0);
}

TEST(WorkspaceParsing, APushShowsItsDecisionOnlyOnceDecided) {
    workspace::PushStatus p;
    p.pushId = "psh-1";
    p.approvalId = "apr-1";
    p.state = "pending";
    p.commit = "c0ffee";
    p.lease = "beef";
    auto requested = pushRequestedJson(p);
    EXPECT_EQ(requested, json::parse(
                             R"({"push_id":"psh-1","approval_id":"apr-1","state":"pending",
                                 "commit":"c0ffee","branch":"","repo":""})"));
    auto pending = pushStatusJson(p);
    EXPECT_EQ(pending["lease"], "beef");
    EXPECT_FALSE(pending.contains("decided_by"));
    EXPECT_FALSE(pending.contains("error"));
    p.state = "failed";
    p.decidedBy = "key-1";
    p.decidedAt = "2026-12-04T00:00:00Z";
    p.error = "the remote moved";
    auto failed = pushStatusJson(p);
    EXPECT_EQ(failed["decided_by"], "key-1");
    EXPECT_EQ(failed["decision_reason"], "");
    EXPECT_EQ(failed["error"], "the remote moved");
}

TEST(WorkspaceParsing, CommitRequestsAreStrict) {
    auto ok = parseCommitRequest(R"({"message":"fix","author":{"name":"A","email":"a@x"}})");
    EXPECT_EQ(ok.authorName, "A");
    EXPECT_EQ(codeOf([] { parseCommitRequest(R"({"message":"fix","author":{"name":"A","email":"a@x"},"x":1})"); }),
              ErrorCode::bad_request);
    EXPECT_EQ(codeOf([] { parseCommitRequest(R"({"message":"  ","author":{"name":"A","email":"a@x"}})"); }),
              ErrorCode::bad_request);
}

}  // namespace
}  // namespace airlock::api
