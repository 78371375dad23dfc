// The streamed paths (what the WebSocket exec and process logs use) with
// the safety controls: approval gates that wait, secrets injected by scope
// and masked in the streamed output, also when a value is split across
// output chunks. Real in-process agents; commands run on the host as root.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ControllerFixture.hpp"
#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;
using test::codeOf;
using Kind = AgentStream::Event::Kind;

// Collects a stream's output the way the WebSocket session does: push
// events, window returned once consumed.
struct Collector {
    std::mutex mutex;
    std::condition_variable cv;
    std::string out;
    bool ended = false;
    std::string endPayload;
    std::shared_ptr<AgentStream> stream;
    AgentStream::Handler handler() {
        return [this](AgentStream::Event&& e) {
            std::lock_guard lock(mutex);
            if (e.kind == Kind::data) {
                out += e.payload;
                pendingGrant += e.payload.size();
            } else if (e.kind == Kind::close || e.kind == Kind::reset) {
                ended = true;
                endPayload = e.payload;
            }
            cv.notify_all();
        };
    }
    bool waitEnd() {
        std::unique_lock lock(mutex);
        return cv.wait_for(lock, 20s, [&] {
            if (stream && pendingGrant) stream->grant(std::exchange(pendingGrant, 0));
            return ended;
        });
    }
    std::size_t pendingGrant = 0;
};

class StreamedExecTest : public test::ControllerFixture {
  protected:
    SandboxRecord sandbox() {
        CreateSandboxRequest r;
        r.policy.approve = {"echo gated*"};
        r.secrets["API_TOKEN"] = SecretSpec{"s3cr3t-Value-9137", {}};
        r.secrets["DEPLOY_KEY"] = SecretSpec{"deploy-Key-5521", {"deploy*"}};
        return controller->create("t1", r);
    }
    // Starts a background process, waits for its exit, returns its log as
    // process logs stream it (masked); "" after a failed assertion.
    std::string logsOfExited(const SandboxRecord& s, const std::string& script) {
        ExecOptions o;
        o.argv = {"/bin/sh", "-c", script};
        o.user = "root";
        auto started = controller->processes().start("t1", s.id, o, false);
        std::string pid = std::to_string(started.pid);
        bool exited = test::waitFor(
            [&] {
                protocol::ProcessCall get;
                get.op = protocol::Op::process_get;
                get.id = pid;
                return !controller->processes().call("t1", s.id, get).running;
            },
            10s);
        EXPECT_TRUE(exited) << "process " << pid << " did not exit";
        Collector c;
        c.stream = controller->processes().openLogs("t1", s.id, pid, false, c.handler());
        EXPECT_TRUE(c.waitEnd()) << "the log of " << pid << " did not end";
        std::lock_guard lock(c.mutex);
        return c.out;
    }
    ExecOptions shell(const std::string& s) {
        ExecOptions o;
        o.shell = s;
        o.user = "root";
        return o;
    }
    struct Decision {
        std::mutex mutex;
        std::condition_variable cv;
        std::optional<GatedExec> got;
        SandboxCommands::DecisionCallback callback() {
            return [this](const GatedExec& g) {
                std::lock_guard lock(mutex);
                got = g;
                cv.notify_all();
            };
        }
        std::optional<GatedExec> wait() {
            std::unique_lock lock(mutex);
            cv.wait_for(lock, 10s, [&] { return got.has_value(); });
            return got;
        }
    };
};

TEST_F(StreamedExecTest, SecretsAreInjectedAndMaskedEvenWhenSplitAcrossChunks) {
    auto s = sandbox();
    Collector c;
    // The value leaves in pieces: a masker per chunk alone would miss it.
    auto started = controller->commands().openStreamed(
        "t1", s.id,
        shell("printf 'token=%s' \"$(printf %s \"$API_TOKEN\" | cut -c1-6)\"; sleep 0.3; "
              "printf '%s\\n' \"$(printf %s \"$API_TOKEN\" | cut -c7-)\"; echo "
              "deploy=${DEPLOY_KEY:-unset}"),
        TerminalOptions{false, 24, 80, false}, c.handler());
    ASSERT_TRUE(started.stream);
    c.stream = started.stream;
    ASSERT_TRUE(c.waitEnd());
    EXPECT_EQ(c.out, "token=***\ndeploy=unset\n") << "scoped secrets stay out of other commands";
}

TEST_F(StreamedExecTest, TheAuditKeepsHowAStreamedExecEndedAndItsOutputSizeNotItsBytes) {
    auto s = sandbox();
    Collector c;
    auto started = controller->commands().openStreamed(
        "t1", s.id, shell("printf 'out=%s' \"$API_TOKEN\"; echo err >&2; exit 3"),
        TerminalOptions{false, 24, 80, false}, c.handler());
    ASSERT_TRUE(started.stream);
    c.stream = started.stream;
    ASSERT_TRUE(c.waitEnd());
    std::vector<AuditEvent> ended;
    ASSERT_TRUE(test::waitFor(
        [&] {
            ended = controller->audit("t1", s.id, AuditQuery{"exec.executed", "", 0, 10});
            return !ended.empty();
        },
        5s));
    auto d = nlohmann::json::parse(ended[0].dataJson);
    EXPECT_EQ(d["exit_code"], 3);
    EXPECT_EQ(d["path"], "exec/ws");
    EXPECT_EQ(d["stdout_bytes"], std::string("out=***").size()) << "counted after masking";
    EXPECT_EQ(d["stderr_bytes"], 4);
    EXPECT_FALSE(d.contains("stdout"));
    EXPECT_EQ(ended[0].dataJson.find("s3cr3t"), std::string::npos);
    // The same exec id as its allowed record: one command in the evidence.
    auto allowed = controller->audit("t1", s.id, AuditQuery{"exec.allowed", "", 0, 10});
    ASSERT_EQ(allowed.size(), 1u);
    std::string id = d.value("exec_id", "");
    EXPECT_EQ(id.rfind("ex-", 0), 0u) << d.dump();
    EXPECT_EQ(nlohmann::json::parse(allowed[0].dataJson).value("exec_id", ""), id);
}

TEST_F(StreamedExecTest, AGatedStreamWaitsForItsDecisionThenRuns) {
    auto s = sandbox();
    Decision d;
    Collector c;
    auto started =
        controller->commands().openStreamed("t1", s.id, shell("echo gated $API_TOKEN"),
                             TerminalOptions{false, 24, 80, false}, c.handler(), d.callback());
    ASSERT_FALSE(started.stream) << "nothing runs before a human decides";
    ASSERT_TRUE(started.pending);
    auto pending = controller->gates().pending(TenantScope::only("t1"));
    ASSERT_EQ(pending.size(), 1u);
    EXPECT_EQ(pending[0].command, "echo gated $API_TOKEN");
    // Only the approved command may run under that approval.
    EXPECT_EQ(codeOf([&] {
                  controller->commands().openApproved("t1", s.id, started.pending->id,
                                               shell("echo gated $API_TOKEN"), TerminalOptions{},
                                               c.handler());
              }),
              ErrorCode::conflict)
        << "not approved yet";
    controller->decideApproval("t1", started.pending->approvalId, true, "fine", "alice");
    auto decision = d.wait();
    ASSERT_TRUE(decision);
    EXPECT_EQ(decision->state, "running");
    EXPECT_EQ(decision->decidedBy, "alice");
    EXPECT_EQ(codeOf([&] {
                  controller->commands().openApproved("t1", s.id, started.pending->id, shell("echo other"),
                                               TerminalOptions{}, c.handler());
              }),
              ErrorCode::conflict);
    c.stream = controller->commands().openApproved("t1", s.id, started.pending->id,
                                            shell("echo gated $API_TOKEN"),
                                            TerminalOptions{false, 24, 80, false}, c.handler());
    ASSERT_TRUE(c.waitEnd());
    EXPECT_EQ(c.out, "gated ***\n");
    controller->gates().finishStreamed(started.pending->id, 0, "");
    auto g = controller->gates().get("t1", s.id, started.pending->id);
    EXPECT_EQ(g.state, "exited");
    EXPECT_EQ(g.exitCode, 0);
}

TEST_F(StreamedExecTest, DenialsAndDepartedClientsEndGatedStreams) {
    auto s = sandbox();
    Decision denied;
    Collector c;
    auto first = controller->commands().openStreamed("t1", s.id, shell("echo gated one"), TerminalOptions{},
                                      c.handler(), denied.callback());
    ASSERT_TRUE(first.pending);
    controller->decideApproval("t1", first.pending->approvalId, false, "no", "bob");
    auto d = denied.wait();
    ASSERT_TRUE(d);
    EXPECT_EQ(d->state, "denied");

    Decision never;
    auto second = controller->commands().openStreamed("t1", s.id, shell("echo gated two"), TerminalOptions{},
                                       c.handler(), never.callback());
    ASSERT_TRUE(second.pending);
    controller->gates().abandonStreamed(second.pending->id);  // the WebSocket client left
    EXPECT_TRUE(controller->gates().pending(TenantScope::only("t1")).empty())
        << "nobody is asked to approve it any more";
    EXPECT_EQ(controller->gates().get("t1", s.id, second.pending->id).state, "cancelled");
    EXPECT_EQ(codeOf([&] {
                  controller->decideApproval("t1", second.pending->approvalId, true, "", "alice");
              }),
              ErrorCode::conflict);
    // Without a way to wait (background processes) a gated command is refused.
    EXPECT_EQ(codeOf([&] {
                  controller->commands().openStreamed("t1", s.id, shell("echo gated three"), TerminalOptions{},
                                       c.handler());
              }),
              ErrorCode::policy_denied);
}

TEST_F(StreamedExecTest, ProcessLogsAreMasked) {
    auto s = sandbox();
    EXPECT_EQ(logsOfExited(s, "echo secret=$API_TOKEN"), "secret=***\n");
}

// The agent keeps the last 1 MiB of a background process's output. Here the
// ring's first byte falls 4 bytes into the secret: the log must not show
// the 13 that remain, and the agent must say that it skipped bytes.
TEST_F(StreamedExecTest, ProcessLogsMaskASecretCutByTheOutputRing) {
    auto s = sandbox();
    constexpr std::size_t kRing = 1024 * 1024, kSecret = 17, kInto = 4;
    std::string after = std::to_string(kRing + kInto - kSecret);
    std::string out = logsOfExited(s,
                                   "head -c 1000 /dev/zero | tr '\\0' A; printf %s \"$API_TOKEN\"; "
                                   "head -c " +
                                       after + " /dev/zero | tr '\\0' B");
    ASSERT_GE(out.size(), 3u);
    EXPECT_EQ(out.substr(0, 3), "***") << out.substr(0, 40);
    EXPECT_EQ(out.find("Value"), std::string::npos);
    EXPECT_EQ(out.find("9137"), std::string::npos);
    EXPECT_EQ(out.size(), 3 + std::stoul(after)) << "only the secret's end is replaced";
    EXPECT_EQ(out.find_first_not_of('B', 3), std::string::npos);
}

// Attack 1 of "the record the agent cannot bend": the streaming masker holds
// back a tail that could begin a secret, and the tenant's brokered git
// credentials were among the values it looked for. Printing guesses and
// watching which one is held back spelled out a credential the guest never
// had. Guest output is now compared with the guest's own secrets only: a
// true prefix of a brokered credential and a wrong guess arrive alike, at
// once and unchanged, on every streaming path.
constexpr const char* kBrokered = "ghp_Brokered-Credential-4242x";

class RecordIntegrityMasker : public StreamedExecTest {
  public:  // the test body takes the paths' addresses
    RecordIntegrityMasker() {
        controller->setExtraSecrets(
            [](const SandboxRecord&) { return std::vector<std::string>{kBrokered}; });
    }
    ~RecordIntegrityMasker() override { controller->setExtraSecrets(nullptr); }

    // What the client holds once `text` arrived, or "(held back)" when it did
    // not within a generous wait (the script waits for us, not a timer).
    static std::string shownOnceArrived(Collector& c, const std::string& text) {
        std::unique_lock lock(c.mutex);
        bool arrived = c.cv.wait_for(lock, 5s, [&] {
            if (c.stream && c.pendingGrant) c.stream->grant(std::exchange(c.pendingGrant, 0));
            return c.out.find(text) != std::string::npos;
        });
        return arrived ? c.out : "(held back)";
    }
    // Prints the guess, waits for the go file, then a newline and the
    // guest's own secret (which stays masked).
    std::string script(const std::string& guess, const std::string& go) {
        return "printf '%s' '" + guess + "'; while [ ! -e " + go +
               " ]; do sleep 0.02; done; printf '\\n%s\\n' \"$API_TOKEN\"";
    }
    struct Seen {
        std::string atArrival, whole;
    };
    Seen viaStreamedExec(const SandboxRecord& s, const std::string& guess) {
        std::string go = dir.path() + "/go-" + std::to_string(++runs);
        Collector c;
        auto started = controller->commands().openStreamed(
            "t1", s.id, shell(script(guess, go)), TerminalOptions{false, 24, 80, false},
            c.handler());
        EXPECT_TRUE(started.stream);
        if (!started.stream) return {};
        {
            std::lock_guard lock(c.mutex);
            c.stream = started.stream;
        }
        Seen seen{shownOnceArrived(c, guess), ""};
        std::ofstream(go).put('x');
        EXPECT_TRUE(c.waitEnd());
        std::lock_guard lock(c.mutex);
        seen.whole = c.out;
        return seen;
    }
    Seen viaFollowedLog(const SandboxRecord& s, const std::string& guess) {
        std::string go = dir.path() + "/go-" + std::to_string(++runs);
        ExecOptions o;
        o.argv = {"/bin/sh", "-c", script(guess, go)};
        o.user = "root";
        auto started = controller->processes().start("t1", s.id, o, false);
        Collector c;
        auto stream = controller->processes().openLogs("t1", s.id, std::to_string(started.pid),
                                                       true, c.handler());
        {
            std::lock_guard lock(c.mutex);
            c.stream = stream;
        }
        Seen seen{shownOnceArrived(c, guess), ""};
        std::ofstream(go).put('x');
        EXPECT_TRUE(c.waitEnd());
        std::lock_guard lock(c.mutex);
        seen.whole = c.out;
        return seen;
    }
    int runs = 0;
};

TEST_F(RecordIntegrityMasker, MaskerIsNoPrefixOracleForSecretsScopedToOtherCommands) {
    // DEPLOY_KEY is given to `deploy*` commands only (perhaps gated behind an
    // approval): a printf stream never had it, so it is never compared.
    auto s = sandbox();
    const std::string right = std::string("deploy-Key-5521").substr(0, 12), wrong = "deploy-Kez-5";
    ASSERT_EQ(right.size(), wrong.size());
    using Path = Seen (RecordIntegrityMasker::*)(const SandboxRecord&, const std::string&);
    for (auto [name, path] : {std::pair<const char*, Path>{"streamed exec",
                                                           &RecordIntegrityMasker::viaStreamedExec},
                              {"followed process log", &RecordIntegrityMasker::viaFollowedLog}}) {
        SCOPED_TRACE(name);
        for (const auto& guess : {right, wrong}) {
            auto seen = (this->*path)(s, guess);
            EXPECT_EQ(seen.atArrival, guess) << "held back: the hold-back is an oracle";
            EXPECT_EQ(seen.whole, guess + "\n***\n") << "the unscoped secret is still masked";
        }
    }
}

TEST_F(RecordIntegrityMasker, MaskerIsNoPrefixOracleForBrokeredCredentials) {
    auto s = sandbox();
    // (Ending where no form of the sandbox's own secrets begins: those may be held.)
    const std::string right = std::string(kBrokered).substr(0, 16);  // a true prefix
    const std::string wrong = "xhp_Brokered-Cre";                    // not one
    ASSERT_EQ(right.size(), wrong.size());
    using Path = Seen (RecordIntegrityMasker::*)(const SandboxRecord&, const std::string&);
    for (auto [name, path] : {std::pair<const char*, Path>{"streamed exec (WebSocket, E2B "
                                                           "process streams)",
                                                           &RecordIntegrityMasker::viaStreamedExec},
                              {"followed process log", &RecordIntegrityMasker::viaFollowedLog}}) {
        SCOPED_TRACE(name);
        for (const auto& guess : {right, wrong}) {
            auto seen = (this->*path)(s, guess);
            // At once and whole: nothing held back waiting for the next byte.
            EXPECT_EQ(seen.atArrival, guess) << guess;
            // The guest's own secret is still masked in the same stream.
            EXPECT_EQ(seen.whole, guess + "\n***\n") << guess;
        }
        // Not even the whole credential is compared with guest output.
        auto whole = (this->*path)(s, kBrokered);
        EXPECT_EQ(whole.atArrival, kBrokered);
    }
    // The REST exec's output: the same bytes for the guest, nothing replaced.
    ExecOptions o = shell(std::string("printf '%s' '") + kBrokered + "'");
    auto out = controller->commands().exec("t1", s.id, o);
    EXPECT_EQ(out.stdoutData, kBrokered);
    // The audit log is written whole, never streamed: there the credential a
    // client typed into the command is masked (no oracle: whole values only).
    AuditQuery q;
    q.type = "exec.executed";
    auto events = controller->audit("t1", s.id, q);
    ASSERT_FALSE(events.empty());
    for (const auto& e : events)
        EXPECT_EQ(e.dataJson.find(kBrokered), std::string::npos) << e.dataJson;
}

// Host-made text still hides a host-only value: the records the host writes
// about a sandbox (workspace fetches and pushes, evidence) are masked with it.
TEST_F(RecordIntegrityMasker, HostWrittenRecordsStillHideBrokeredCredentials) {
    auto s = sandbox();
    controller->recordEvent(s, "push.rejected",
                            {{"reason", std::string("remote said: bad credential ") + kBrokered}});
    auto events = controller->audit("t1", s.id, AuditQuery{"push.rejected", "", 0, 10});
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].dataJson.find(kBrokered), std::string::npos) << events[0].dataJson;
    EXPECT_NE(events[0].dataJson.find("bad credential ***"), std::string::npos)
        << events[0].dataJson;
}

}  // namespace
}  // namespace airlock
