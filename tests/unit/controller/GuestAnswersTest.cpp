// The host's reading of a guest's answers against a scripted guest: what
// root in the guest may send. A malformed answer is an agent_error (a 502
// for the client) for that call alone; a well-formed one reaches the caller
// typed and masked.
#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>

#include "controller/GuestAnswers.hpp"
#include "controller/GuestFiles.hpp"
#include "core/Error.hpp"
#include "support/FakeGuest.hpp"
#include "support/FakeSandboxAccess.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;
using json = nlohmann::json;
using protocol::Frame;
using protocol::FrameType;

// Answers each open, in order, with the next payload as its close; and
// keeps the session alive (pongs).
class AnsweringGuest {
  public:
    explicit AnsweringGuest(std::deque<std::string> answers)
        : answers_(std::move(answers)), guest_([this](test::FakeGuest& g) { serve(g); }) {
        agent_ = AgentConnection::fromFd(guest_.takeHostEnd(), 5s);
    }
    AgentConnection& agent() { return *agent_; }
    // The open payloads the guest got.
    std::vector<json> opens() {
        std::lock_guard lock(mutex_);
        return opens_;
    }

  private:
    void serve(test::FakeGuest& g) {
        while (!g.stop_) {
            Frame f;
            if (!g.read(f, 100ms)) continue;
            if (f.type == FrameType::ping) g.send(FrameType::pong, 0, "");
            if (f.type != FrameType::open) continue;
            std::string answer;
            {
                std::lock_guard lock(mutex_);
                opens_.push_back(json::parse(f.payload, nullptr, false));
                if (answers_.empty()) continue;
                answer = answers_.front();
                answers_.pop_front();
            }
            g.send(FrameType::close, f.stream, answer);
        }
    }
    std::mutex mutex_;
    std::deque<std::string> answers_;
    std::vector<json> opens_;
    test::FakeGuest guest_;
    std::shared_ptr<AgentConnection> agent_;

  public:
    std::shared_ptr<AgentConnection> connection() { return agent_; }
};

const std::string kEchoedSecret = "s3cr3t-Value-5150";

json entry(const std::string& path, const char* type = "file") {
    return {{"name", path.substr(path.rfind('/') + 1)},
            {"path", path},
            {"type", type},
            {"size", 3},
            {"mode", "0644"},
            {"mtime", "2026-01-02T03:04:05Z"},
            {"uid", 0},
            {"gid", 0}};
}

protocol::FsRequest statRequest(const std::string& path) {
    protocol::FsRequest r;
    r.path = path;
    return r;
}

std::string agentErrorOf(const std::function<void()>& call) {
    try {
        call();
    } catch (const Error& e) {
        return e.code() == ErrorCode::agent_error ? e.what() : "";
    }
    return "";
}

TEST(GuestAnswers, AMalformedAnswerIsAnAgentErrorForThatCallAlone) {
    json sizeAsText = entry("/w/a");
    sizeAsText["size"] = "3";
    AnsweringGuest guest({sizeAsText.dump(), R"({"processes":"none"})", entry("/w/b").dump()});
    SecretMasker none;
    auto why = agentErrorOf([&] { askGuest(guest.agent(), statRequest("/w/a"), none); });
    EXPECT_NE(why.find("malformed answer"), std::string::npos) << why;
    EXPECT_NE(why.find("'size'"), std::string::npos) << why;
    EXPECT_NE(agentErrorOf([&] { listGuestProcesses(guest.agent(), none); }), "");
    // The session goes on: the next answer is read as it should be.
    auto ok = askGuest(guest.agent(), statRequest("/w/b"), none);
    ASSERT_TRUE(ok.entry);
    EXPECT_EQ(ok.entry->path, "/w/b");
    EXPECT_TRUE(guest.agent().alive());
}

TEST(GuestAnswers, EveryTextTheGuestChoseIsMaskedAndUnknownFieldsAreDropped) {
    json listing = entry("/w", "directory");
    listing["entries"] = json::array({entry("/w/" + kEchoedSecret + ".txt")});
    listing["leak"] = kEchoedSecret;  // not a field of the answer: never passed on
    json process{{"id", "42"},
                 {"pid", 42},
                 {"cmd", {"/bin/sh", "-c", "echo " + kEchoedSecret}},
                 {"state", "running"},
                 {"started_at", "2026-01-02T03:04:05Z"},
                 {"output_bytes", 0},
                 {"extra", kEchoedSecret}};
    AnsweringGuest guest({listing.dump(), process.dump(),
                          json{{"processes", json::array({process})}}.dump(),
                          json{{"removed", "/w/" + kEchoedSecret}}.dump()});
    SecretMasker masker({kEchoedSecret});
    protocol::FsRequest list = statRequest("/w");
    list.action = protocol::FsRequest::Action::list;
    auto listed = protocol::toJsonValue(askGuest(guest.agent(), list, masker)).dump();
    EXPECT_EQ(listed.find(kEchoedSecret), std::string::npos) << listed;
    EXPECT_NE(listed.find("/w/***.txt"), std::string::npos) << listed;
    EXPECT_EQ(listed.find("leak"), std::string::npos) << listed;

    protocol::ProcessCall get{protocol::Op::process_get, "42", "TERM", {}, false};
    auto one = askGuest(guest.agent(), get, masker);
    EXPECT_EQ(one.cmd.back(), "echo ***");
    auto all = listGuestProcesses(guest.agent(), masker);
    ASSERT_EQ(all.processes.size(), 1u);
    EXPECT_EQ(protocol::toJsonValue(all).dump().find(kEchoedSecret), std::string::npos);

    protocol::FsRequest remove = statRequest("/w/x");
    remove.action = protocol::FsRequest::Action::remove;
    EXPECT_EQ(askGuest(guest.agent(), remove, masker).removed, "/w/***");
    // What the guest was asked: each op as it should be.
    auto opens = guest.opens();
    ASSERT_EQ(opens.size(), 4u);
    EXPECT_EQ(opens[0].value("action", ""), "list");
    EXPECT_EQ(opens[1].value("op", ""), "process_get");
    EXPECT_EQ(opens[2].value("op", ""), "process_list");
    EXPECT_EQ(opens[3].value("action", ""), "remove");
}

// Nothing the guest chose is passed on unless it is the field's shape:
// text in a time field cannot carry a secret past the masking.
TEST(GuestAnswers, ATimeFieldHoldsATimeAndNothingElse) {
    json listing = entry("/w/a");
    listing["mtime"] = kEchoedSecret;
    AnsweringGuest guest({listing.dump()});
    SecretMasker masker({kEchoedSecret});
    auto why = agentErrorOf([&] { askGuest(guest.agent(), statRequest("/w/a"), masker); });
    EXPECT_NE(why.find("'mtime'"), std::string::npos) << why;
    EXPECT_EQ(why.find(kEchoedSecret), std::string::npos) << why;
}

// A change the API asked for is evidence even when the guest answers it
// malformed: it may have made it all the same.
TEST(GuestAnswers, AChangeIsAuditedEvenWhenItsAnswerIsMalformed) {
    test::FakeSandboxAccess access;
    access.secrets = {kEchoedSecret};
    AnsweringGuest guest({R"({"name":"x"})", entry("/w/b").dump()});
    access.agentOverride = guest.connection();
    GuestFiles files(access);
    protocol::FsRequest mkdir = statRequest("/w/" + kEchoedSecret);
    mkdir.action = protocol::FsRequest::Action::mkdir;
    EXPECT_NE(agentErrorOf([&] { files.fileOp("t1", access.sandbox.id, mkdir); }), "");
    auto audited = access.recordsOf("file.mkdir");
    ASSERT_EQ(audited.size(), 1u);
    EXPECT_EQ(audited[0].data["path"], "/w/***") << "masked like every guest answer";
    EXPECT_NE(audited[0].data.value("error", "").find("malformed"), std::string::npos)
        << audited[0].data.dump();
    // A read is no change: nothing to audit, whatever the answer.
    EXPECT_NO_THROW(files.fileOp("t1", access.sandbox.id, statRequest("/w/b")));
    EXPECT_EQ(access.records().size(), 1u);
}

}  // namespace
}  // namespace airlock
