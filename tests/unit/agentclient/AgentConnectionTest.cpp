#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <thread>

#include "agent/Agent.hpp"
#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentProtocolError.hpp"
#include "core/Error.hpp"
#include "protocol/Frame.hpp"
#include "protocol/FrameDecoder.hpp"
#include "support/InProcessAgent.hpp"
#include "support/RawChannel.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;

protocol::ExecRequest shell(const std::string& script, std::uint64_t timeoutMs = 20000) {
    protocol::ExecRequest r;
    r.argv = {"/bin/sh", "-c", script};
    r.user = "root";  // the host running the tests has no user "user"
    r.timeout_ms = timeoutMs;
    return r;
}

class AgentChannel : public ::testing::Test {
  protected:
    test::InProcessAgent agent;
    std::shared_ptr<AgentConnection> conn = agent.connect();
};

TEST_F(AgentChannel, HandshakeGivesAnEpoch) {
    EXPECT_GE(conn->epoch(), 1u);
    EXPECT_NE(conn->agentVersion().find("airlock-agent"), std::string::npos);
    EXPECT_TRUE(conn->ping(2s));
}

TEST_F(AgentChannel, ExecReturnsStdoutStderrAndExitCode) {
    auto out = conn->exec(shell("echo out; echo err >&2; exit 3"), 1 << 20, 10s);
    EXPECT_EQ(out.result.exit_code, 3);
    EXPECT_EQ(out.stdoutData, "out\n");
    EXPECT_EQ(out.stderrData, "err\n");
    EXPECT_FALSE(out.truncated);
}

TEST_F(AgentChannel, CwdEnvAndStdinReachTheCommand) {
    auto r = shell("pwd; echo $GREETING; cat");
    r.cwd = "/tmp";
    r.env = {{"GREETING", "hi there"}};
    r.stdin_data = "from stdin";
    auto out = conn->exec(r, 1 << 20, 10s);
    EXPECT_EQ(out.stdoutData, "/tmp\nhi there\nfrom stdin");
}

TEST_F(AgentChannel, StdinOfMegabytesStreamsUnderFlowControl) {
    // More than one frame (256 KiB) and more than the initial window (1 MiB):
    // it cannot ride inside the open frame.
    std::string input;
    for (int i = 0; input.size() < 3 * 1024 * 1024 + 17; ++i) input += std::to_string(i) + "\n";
    auto r = shell("wc -c; sha256sum </dev/null >/dev/null");
    r.stdin_data = input;
    auto out = conn->exec(r, 1 << 20, 30s);
    EXPECT_EQ(out.result.exit_code, 0);
    EXPECT_EQ(std::stoull(out.stdoutData), input.size());
}

TEST_F(AgentChannel, HostDeadlineCancelsACommandAndFreesItsStream) {
    auto started = std::chrono::steady_clock::now();
    EXPECT_THROW(conn->exec(shell("sleep 30", 0), 1024, 300ms), Error);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
    EXPECT_TRUE(conn->ping(2s));
    EXPECT_EQ(conn->exec(shell("echo again"), 1024, 10s).stdoutData, "again\n");
}

TEST(AgentRawMode, AProductionAgentRefusesTheBenchRawOp) {
    test::InProcessAgent agent;  // as airlock-agent: no baseline installed
    test::RawChannel channel(agent.takeHostEnd(), 5s);
    try {
        channel.run("sink", 10, 5s);
        FAIL() << "the raw op was served";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("unknown op 'raw'"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(channel.ping(2s)) << "the refusal ended the session";
}

TEST_F(AgentChannel, BinaryOutputIsPreserved) {
    auto out = conn->exec(shell("printf '\\000\\001\\377abc'"), 1 << 20, 10s);
    EXPECT_EQ(out.stdoutData, std::string("\0\1\377abc", 6));
}

TEST_F(AgentChannel, FloodIsCappedAndTheCommandStillFinishes) {
    // 20 MiB through a 1 MiB credit window: credit flow must keep it moving.
    auto out = conn->exec(shell("head -c 20000000 /dev/zero; echo done >&2"), 64 * 1024, 60s);
    EXPECT_EQ(out.result.exit_code, 0);
    EXPECT_EQ(out.stdoutData.size(), 64u * 1024);
    EXPECT_TRUE(out.truncated);
    EXPECT_EQ(out.stderrData, "done\n");
}

TEST_F(AgentChannel, TimeoutKillsTheWholeProcessGroup) {
    auto marker = "/tmp/airlock-timeout-" + std::to_string(::getpid());
    auto out = conn->exec(shell("(sleep 3; touch " + marker + ") & sleep 30", 500), 1 << 20, 10s);
    EXPECT_TRUE(out.result.timed_out);
    EXPECT_EQ(out.result.signal.value_or(0), 9);
    std::this_thread::sleep_for(3500ms);  // the grandchild would have touched the file by now
    EXPECT_FALSE(std::filesystem::exists(marker))
        << "a member of the process group survived the timeout";
}

TEST_F(AgentChannel, MissingProgramIsReportedNotFatal) {
    protocol::ExecRequest r;
    r.argv = {"/no/such/program"};
    r.user = "root";
    auto out = conn->exec(r, 1 << 20, 10s);
    EXPECT_EQ(out.result.exit_code, 127);
    EXPECT_NE(out.result.error.find("No such file"), std::string::npos);
    EXPECT_EQ(conn->exec(shell("echo still-alive"), 1024, 10s).stdoutData, "still-alive\n");
}

TEST_F(AgentChannel, BadCwdIsReported) {
    auto r = shell("true");
    r.cwd = "/definitely/not/here";
    auto out = conn->exec(r, 1024, 10s);
    EXPECT_NE(out.result.exit_code, 0);
    EXPECT_NE(out.result.error.find("/definitely/not/here"), std::string::npos);
}

TEST_F(AgentChannel, ManyConcurrentExecsOverOneChannel) {
    std::vector<std::future<ExecOutput>> futures;
    for (int i = 0; i < 40; ++i)
        futures.push_back(std::async(std::launch::async, [this, i] {
            return conn->exec(shell("sleep 0.2; echo n" + std::to_string(i)), 1024, 30s);
        }));
    for (int i = 0; i < 40; ++i)
        EXPECT_EQ(futures[i].get().stdoutData, "n" + std::to_string(i) + "\n");
}

TEST_F(AgentChannel, HostSideWaitLimitThrowsAgentTimeout) {
    try {
        conn->exec(shell("sleep 5", 0), 1024, 300ms);
        FAIL() << "expected agent_timeout";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::agent_timeout);
    }
    EXPECT_EQ(conn->exec(shell("echo ok"), 1024, 10s).stdoutData, "ok\n");
}

// Speaks to the agent with raw frames: it must survive garbage and recover
// with the next hello.
TEST(AgentRobustness, GarbageGetsAResetAndANewHelloRecovers) {
    test::InProcessAgent agent;
    UniqueFd fd = agent.takeHostEnd();
    auto readFrame = [&](protocol::FrameDecoder& d, protocol::Frame& f) {
        for (int i = 0; i < 50; ++i) {
            if (d.next(f) == protocol::FrameDecoder::Result::frame) {
                // The agent announces its own start; that is not what these checks wait for.
                if (f.type == protocol::FrameType::reset &&
                    protocol::parseResetInfo(f.payload).code == "agent_started")
                    continue;
                return true;
            }
            pollfd p{fd.get(), POLLIN, 0};
            if (::poll(&p, 1, 100) > 0) {
                char buf[4096];
                ssize_t n = ::read(fd.get(), buf, sizeof buf);
                if (n <= 0) return false;
                d.feed(std::string_view(buf, static_cast<std::size_t>(n)));
            }
        }
        return false;
    };
    auto sendAll = [&](const std::string& s) {
        ASSERT_EQ(::write(fd.get(), s.data(), s.size()), ssize_t(s.size()));
    };
    protocol::FrameDecoder d;
    d.setResync(true);
    protocol::Frame f;
    sendAll(protocol::encodeFrame(protocol::FrameType::hello, 0,
                                  protocol::toJson(protocol::Hello{1, "n1"})));
    ASSERT_TRUE(readFrame(d, f));
    EXPECT_EQ(f.type, protocol::FrameType::hello_ack);
    // An open with a bad body: that stream is reset, the session lives.
    sendAll(protocol::encodeFrame(protocol::FrameType::open, 5, "{not json"));
    ASSERT_TRUE(readFrame(d, f));
    EXPECT_EQ(f.type, protocol::FrameType::reset);
    EXPECT_EQ(f.stream, 5u);
    // An op outside the closed set: that stream is reset, the session lives.
    sendAll(protocol::encodeFrame(protocol::FrameType::open, 7, R"({"op":"format_disk"})"));
    ASSERT_TRUE(readFrame(d, f));
    EXPECT_EQ(f.type, protocol::FrameType::reset);
    EXPECT_EQ(f.stream, 7u);
    EXPECT_EQ(protocol::parseResetInfo(f.payload).code, "bad_request");
    // Garbage on the wire: the session is reset.
    sendAll(std::string(64, '\x55'));
    ASSERT_TRUE(readFrame(d, f));
    EXPECT_EQ(f.type, protocol::FrameType::reset);
    EXPECT_EQ(f.stream, 0u);
    EXPECT_EQ(protocol::parseResetInfo(f.payload).code, "protocol_error");
    sendAll(protocol::encodeFrame(protocol::FrameType::hello, 0,
                                  protocol::toJson(protocol::Hello{1, "n2"})));
    ASSERT_TRUE(readFrame(d, f));
    ASSERT_EQ(f.type, protocol::FrameType::hello_ack);
    EXPECT_EQ(protocol::parseHelloAck(f.payload).nonce, "n2");
    EXPECT_EQ(protocol::parseHelloAck(f.payload).epoch, 2u);
}

// A fake agent that prefixes its answer with stale bytes of an old session.
TEST(AgentHandshake, SkipsStaleBytesBeforeTheAck) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    UniqueFd host(fds[0]), guest(fds[1]);
    std::thread fake([&] {
        protocol::FrameDecoder d;
        std::string stale =
            protocol::encodeFrame(protocol::FrameType::data, 3, std::string(500, 'o'));
        std::string junk = stale.substr(200) + stale.substr(0, 7);
        (void)!::write(guest.get(), junk.data(), junk.size());
        char buf[4096];
        ssize_t n = ::read(guest.get(), buf, sizeof buf);
        d.feed(std::string_view(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0))));
        protocol::Frame f;
        if (d.next(f) != protocol::FrameDecoder::Result::frame) return;
        auto hello = protocol::parseHello(f.payload);
        std::string ack =
            protocol::encodeFrame(protocol::FrameType::hello_ack, 0,
                                  protocol::toJson(protocol::HelloAck{1, hello.nonce, 7, "fake"}));
        (void)!::write(guest.get(), ack.data(), ack.size());
    });
    auto conn = AgentConnection::fromFd(std::move(host), 5s);
    fake.join();
    EXPECT_EQ(conn->epoch(), 7u);
}

TEST(AgentHandshake, SilentPeerTimesOut) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    UniqueFd guest(fds[1]);
    try {
        AgentConnection::fromFd(UniqueFd(fds[0]), 300ms);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::agent_timeout);
    }
}

// A guest that floods its channel instead of answering the hello is a
// protocol error once it has sent more than any stale tail could hold; it
// does not keep the host reading until the handshake's deadline.
TEST(AgentHandshake, AFloodInsteadOfAnAnswerIsAProtocolError) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    UniqueFd host(fds[0]), guest(fds[1]);
    std::atomic<bool> stop{false};
    std::thread flood([&] {
        std::string zeros(64 * 1024, '\0');
        while (!stop && ::send(guest.get(), zeros.data(), zeros.size(), MSG_NOSIGNAL) > 0) {
        }
    });
    AgentChannelLimits limits;
    limits.handshakeBytes = 1024 * 1024;
    std::string caught;
    try {
        // Were the flood not bounded, this would end as agent_timeout.
        AgentConnection::fromFd(std::move(host), 60s, limits);
    } catch (const AgentProtocolError& e) {
        caught = e.what();
        EXPECT_EQ(e.code(), ErrorCode::agent_error);
    } catch (const std::exception& e) {
        caught = std::string("wrong error: ") + e.what();
    }
    stop = true;
    ::shutdown(guest.get(), SHUT_RDWR);
    flood.join();
    EXPECT_NE(caught.find("without answering its hello"), std::string::npos) << caught;
}

TEST(AgentHandshake, PeerDeathFailsPendingExec) {
    auto agent = std::make_unique<test::InProcessAgent>();
    auto conn = agent->connect();
    auto pending = std::async(std::launch::async, [&] {
        try {
            conn->exec(shell("sleep 20"), 1024, 30s);
            return std::string("finished");
        } catch (const Error& e) {
            return std::string(errorCodeName(e.code()));
        }
    });
    std::this_thread::sleep_for(300ms);
    agent.reset();  // the agent goes away: its end of the socket closes
    EXPECT_EQ(pending.get(), "agent_error");
    EXPECT_FALSE(conn->alive());
}

// The host removing a sandbox closes its session with a reason: a call still
// open fails with it at once, as a conflict, not as a guest that vanished.
TEST(AgentHandshake, CloseWithAReasonFailsOpenCallsWithIt) {
    test::InProcessAgent agent;
    auto conn = agent.connect();
    auto marker = std::filesystem::temp_directory_path() /
                  ("airlock-close-reason-" + std::to_string(::getpid()));
    std::filesystem::remove(marker);
    auto pending = std::async(std::launch::async, [&] {
        try {
            conn->exec(shell("touch " + marker.string() + "; sleep 20"), 1024, 30s);
            return std::string("finished");
        } catch (const Error& e) {
            return std::string(errorCodeName(e.code())) + ": " + e.what();
        }
    });
    ASSERT_TRUE(test::waitFor([&] { return std::filesystem::exists(marker); }, 10s, 10ms));
    auto closedAt = std::chrono::steady_clock::now();
    conn->close("sandbox sbx-a is gone: its timeout passed");
    ASSERT_EQ(pending.wait_for(5s), std::future_status::ready) << "the call outlived its session";
    EXPECT_EQ(pending.get(), "conflict: sandbox sbx-a is gone: its timeout passed");
    EXPECT_LT(std::chrono::steady_clock::now() - closedAt, 5s);
    EXPECT_FALSE(conn->alive());
    std::filesystem::remove(marker);
}

}  // namespace
}  // namespace airlock
