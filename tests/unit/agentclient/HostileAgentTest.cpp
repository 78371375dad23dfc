// The host side of the agent channel against a peer that speaks the framing
// perfectly and the protocol maliciously (root in the guest can do exactly
// this): every case ends the session at most, never the process, and is
// reported to the protocol-error handler.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"
#include "protocol/Frame.hpp"
#include "protocol/FrameDecoder.hpp"
#include "protocol/Messages.hpp"
#include "support/FakeGuest.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;
using protocol::Frame;
using protocol::FrameType;
using test::FakeGuest;

struct Reported {
    std::mutex mutex;
    std::vector<std::pair<std::string, bool>> errors;
    std::size_t count() {
        std::lock_guard lock(mutex);
        return errors.size();
    }
};

std::shared_ptr<AgentConnection> connectTo(FakeGuest& guest, Reported& reported,
                                           AgentChannelLimits limits = {}) {
    auto conn = AgentConnection::fromFd(guest.takeHostEnd(), 5s, limits);
    conn->onProtocolError([&reported](const std::string& why, bool ended) {
        std::lock_guard lock(reported.mutex);
        reported.errors.emplace_back(why, ended);
    });
    return conn;
}

bool waitFor(const std::function<bool()>& condition, std::chrono::milliseconds wait = 5s) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < deadline) {
        if (condition()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return condition();
}

protocol::ExecRequest trueCommand() {
    protocol::ExecRequest r;
    r.argv = {"true"};
    return r;
}

// One hostile frame after the host opened stream 1 (an exec).
struct Case {
    const char* name;
    std::function<void(FakeGuest&)> send;
};

class HostileFrame : public ::testing::TestWithParam<Case> {};

TEST_P(HostileFrame, EndsTheSessionNotTheProcessAndIsReported) {
    Reported reported;
    FakeGuest guest([](FakeGuest& g) {
        Frame open;
        if (!g.readType(FrameType::open, open)) return;
        GetParam().send(g);
        while (!g.stop_) {  // keep the channel open: the host must end it
            Frame f;
            g.read(f, 100ms);
        }
    });
    auto conn = connectTo(guest, reported);
    std::promise<std::string> ended;
    conn->execAsync(trueCommand(), 1024,
                    [&ended](std::optional<ExecOutput> out, std::exception_ptr error) {
                        if (out) return ended.set_value("finished");
                        try {
                            std::rethrow_exception(error);
                        } catch (const Error& e) {
                            ended.set_value(std::string(errorCodeName(e.code())));
                        }
                    });
    auto f = ended.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "the exec was left hanging";
    EXPECT_EQ(f.get(), "agent_error");
    EXPECT_TRUE(waitFor([&] { return !conn->alive(); }))
        << "the session goes on after a protocol error";
    ASSERT_TRUE(waitFor([&] { return reported.count() > 0; })) << "no protocol error was reported";
    std::lock_guard lock(reported.mutex);
    EXPECT_TRUE(reported.errors.front().second);
}

INSTANTIATE_TEST_SUITE_P(
    AgentChannel, HostileFrame,
    ::testing::Values(
        Case{"NonJsonResetOnStream0",
             [](FakeGuest& g) { g.send(FrameType::reset, 0, "\x01not json"); }},
        Case{"DataOnStream0", [](FakeGuest& g) { g.send(FrameType::data, 0, "boo", 1); }},
        Case{"ControlOnStream0", [](FakeGuest& g) { g.send(FrameType::control, 0, "{}"); }},
        Case{"CloseOnStream0", [](FakeGuest& g) { g.send(FrameType::close, 0, "{}"); }},
        Case{"WindowOfWrongSize", [](FakeGuest& g) { g.send(FrameType::window, 1, "12345"); }},
        Case{"NeverOpenedStream", [](FakeGuest& g) { g.send(FrameType::data, 4242, "x", 1); }},
        Case{"ResetOnNeverOpenedStream", [](FakeGuest& g) { g.send(FrameType::reset, 77, "[]"); }},
        Case{"HelloFromTheAgent",
             [](FakeGuest& g) { g.send(FrameType::hello, 0, R"({"version":1,"nonce":"x"})"); }},
        Case{"OpenFromTheAgent",
             [](FakeGuest& g) { g.send(FrameType::open, 1, R"({"op":"exec"})"); }},
        Case{"PingFromTheAgent", [](FakeGuest& g) { g.send(FrameType::ping, 0, ""); }},
        Case{"HelloAckOnAStream", [](FakeGuest& g) { g.send(FrameType::hello_ack, 1, "{}"); }},
        Case{"DataOnChannel9", [](FakeGuest& g) { g.send(FrameType::data, 1, "x", 9); }},
        Case{"BadMagicAfterTheHandshake",
             [](FakeGuest& g) { g.writeRaw(std::string(64, '\x42')); }}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Payloads of the wrong shape on a stream that exists end that stream only.
TEST(HostileAgent, MalformedResultsEndTheirStreamNotTheSession) {
    for (std::string payload : {"not json", "[1,2]", R"({"exit_code":"zero"})", "\"str\"", ""}) {
        Reported reported;
        FakeGuest guest([payload](FakeGuest& g) {
            Frame open;
            if (!g.readType(FrameType::open, open)) return;
            g.send(FrameType::control, open.stream,
                   payload);  // a control of any shape is the consumer's
            g.send(FrameType::close, open.stream, payload);
            while (!g.stop_) {
                Frame f;
                if (g.read(f, 100ms) && f.type == FrameType::ping) g.send(FrameType::pong, 0, "");
            }
        });
        auto conn = connectTo(guest, reported);
        try {
            conn->exec(trueCommand(), 1024, 5s);
            FAIL() << "a malformed result was accepted: " << payload;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::agent_error) << payload;
        }
        EXPECT_TRUE(conn->ping(2s)) << "the session ended for one stream's bad result: " << payload;
    }
}

// "sandbox_gone" is the host's word for a sandbox it removes (a conflict);
// a guest that says it is an agent error.
TEST(HostileAgent, AGuestCannotClaimItsSandboxIsGone) {
    Reported reported;
    FakeGuest guest([](FakeGuest& g) {
        Frame open;
        if (!g.readType(FrameType::open, open)) return;
        g.send(FrameType::reset, open.stream,
               R"({"code":"sandbox_gone","message":"sandbox sbx-x is gone: it was deleted"})");
        while (!g.stop_) {
            Frame f;
            if (g.read(f, 100ms) && f.type == FrameType::ping) g.send(FrameType::pong, 0, "");
        }
    });
    auto conn = connectTo(guest, reported);
    try {
        conn->exec(trueCommand(), 1024, 5s);
        FAIL() << "the guest's reset was not an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::agent_error) << e.what();
    }
    EXPECT_TRUE(conn->ping(2s)) << "a reset ends its stream only";
}

// A stream whose agent sends more than its window is reset; the session and
// its other streams go on, and the host buffered no more than the window.
TEST(HostileAgent, WindowOverrunResetsTheStreamOnly) {
    Reported reported;
    std::promise<std::uint32_t> resetSeen;
    FakeGuest guest([&resetSeen](FakeGuest& g) {
        Frame open;
        if (!g.readType(FrameType::open, open)) return;
        std::string chunk(protocol::kMaxPayload, 'z');
        // 1 MiB is the window; the fifth frame overruns it.
        for (int i = 0; i < 6; ++i) g.send(FrameType::data, open.stream, chunk, 1);
        Frame f;
        bool told = false;
        while (!g.stop_) {
            if (!g.read(f, 100ms)) continue;
            if (f.type == FrameType::reset && !told) {
                told = true;
                resetSeen.set_value(f.stream);
            }
            if (f.type == FrameType::ping) g.send(FrameType::pong, 0, "");
        }
    });
    auto conn = connectTo(guest, reported);
    // A pull consumer that never reads: only the window may queue up.
    auto stream = conn->open({{"op", "file_read"}, {"path", "/x"}});
    auto f = resetSeen.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "the overrun stream was not reset";
    EXPECT_EQ(f.get(), stream->id());
    EXPECT_TRUE(conn->alive());
    EXPECT_TRUE(conn->ping(2s));
    std::size_t queued = 0;
    bool sawReset = false;
    while (auto e = stream->next(std::chrono::steady_clock::now() + 500ms)) {
        if (e->kind == AgentStream::Event::Kind::data) queued += e->payload.size();
        if (e->kind == AgentStream::Event::Kind::reset) {
            sawReset = true;
            EXPECT_EQ(protocol::parseResetInfo(e->payload).code, "flow_control");
            break;
        }
    }
    EXPECT_TRUE(sawReset);
    EXPECT_LE(queued, protocol::kInitialWindow);
    ASSERT_TRUE(waitFor([&] { return reported.count() > 0; }));
    std::lock_guard lock(reported.mutex);
    EXPECT_FALSE(reported.errors.front().second)
        << "a flow-control breach ends the stream, not the session";
}

TEST(HostileAgent, ControlFloodOnAnUnreadStreamIsBounded) {
    Reported reported;
    FakeGuest guest([](FakeGuest& g) {
        Frame open;
        if (!g.readType(FrameType::open, open)) return;
        for (int i = 0; i < 10000 && !g.stop_; ++i)
            g.send(FrameType::control, open.stream, R"({"pid":1})");
        while (!g.stop_) {
            Frame f;
            if (g.read(f, 100ms) && f.type == FrameType::ping) g.send(FrameType::pong, 0, "");
        }
    });
    auto conn = connectTo(guest, reported);
    auto stream = conn->open({{"op", "file_read"}, {"path", "/x"}});
    ASSERT_TRUE(waitFor([&] { return stream->finished(); }))
        << "10000 unread control frames were all queued";
    EXPECT_TRUE(conn->ping(2s));
    std::size_t events = 0;
    while (stream->next(std::chrono::steady_clock::now() + 100ms)) ++events;
    EXPECT_LE(events, AgentStream::kMaxQueuedEvents + 1);
}

// A guest that never reads its channel: no host call blocks on it, queued
// bytes stay under the hard bound, and the session ends once it is reached.
TEST(HostileAgent, APeerThatNeverReadsBlocksNoCaller) {
    Reported reported;
    std::atomic<bool> reading{true};
    FakeGuest guest([&reading](FakeGuest& g) {
        Frame open;
        g.readType(FrameType::open, open);
        reading = false;  // from now on nothing is read
        while (!g.stop_) std::this_thread::sleep_for(20ms);
    });
    AgentChannelLimits limits;
    limits.dataQueueBytes = 256 * 1024;
    limits.queueHardBytes = 512 * 1024;
    auto conn = connectTo(guest, reported, limits);
    auto stream = conn->open({{"op", "file_write"}, {"path", "/x"}});
    ASSERT_TRUE(waitFor([&] { return !reading.load(); }));
    auto started = std::chrono::steady_clock::now();
    // Window grants are what an I/O thread sends: they must never block.
    std::string big(4096, 'c');
    bool failed = false;
    for (int i = 0; i < 20000 && !failed; ++i) {
        // Never throws (it runs in I/O handlers): false once the session ended.
        failed = !stream->control(R"({"pad":")" + big + "\"}");
        EXPECT_LE(conn->queuedBytes(), limits.queueHardBytes);
    }
    EXPECT_TRUE(failed) << "megabytes queued for a guest that reads nothing";
    EXPECT_LT(std::chrono::steady_clock::now() - started, 3s) << "a send blocked on the guest";
    EXPECT_FALSE(conn->alive());
    // A data writer on a worker fails at once on the ended session.
    EXPECT_THROW(
        stream->write(0, std::string(2 << 20, 'd'), std::chrono::steady_clock::now() + 300ms),
        Error);
}

TEST(HostileAgent, DataWritersWaitForRoomUntilTheirDeadline) {
    Reported reported;
    FakeGuest guest([](FakeGuest& g) {
        Frame open;
        g.readType(FrameType::open, open);
        g.send(FrameType::window, open.stream, protocol::encodeWindowPayload(64u << 20));
        while (!g.stop_) std::this_thread::sleep_for(20ms);  // reads nothing
    });
    AgentChannelLimits limits;
    limits.dataQueueBytes = 256 * 1024;
    auto conn = connectTo(guest, reported, limits);
    auto stream = conn->open({{"op", "file_write"}, {"path", "/x"}});
    std::this_thread::sleep_for(200ms);  // the extra window arrived
    auto started = std::chrono::steady_clock::now();
    try {
        stream->write(0, std::string(8 << 20, 'd'), std::chrono::steady_clock::now() + 500ms);
        FAIL() << "8 MiB were queued for a guest that reads nothing";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::agent_timeout);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
    EXPECT_LE(conn->queuedBytes(),
              limits.dataQueueBytes + protocol::kMaxPayload + protocol::kHeaderSize);
    EXPECT_TRUE(conn->alive()) << "a slow guest is not a broken one";
}

TEST(HostileAgent, ControlFramesToAPushConsumerAreSmallAndRateBounded) {
    for (bool oversized : {false, true}) {
        Reported reported;
        FakeGuest guest([oversized](FakeGuest& g) {
            Frame open;
            if (!g.readType(FrameType::open, open)) return;
            if (oversized) {
                g.send(FrameType::control, open.stream,
                       "{\"pad\":\"" + std::string(20000, 'p') + "\"}");
            } else {
                for (int i = 0; i < 5000 && !g.stop_; ++i)
                    g.send(FrameType::control, open.stream, R"({"pid":1})");
            }
            while (!g.stop_) {
                Frame f;
                if (g.read(f, 100ms) && f.type == FrameType::ping) g.send(FrameType::pong, 0, "");
            }
        });
        auto conn = connectTo(guest, reported);
        std::atomic<int> controls{0};
        std::atomic<bool> reset{false};
        auto opened = std::chrono::steady_clock::now();
        auto stream =
            conn->open({{"op", "file_read"}, {"path", "/x"}}, [&](AgentStream::Event&& e) {
                if (e.kind == AgentStream::Event::Kind::control) ++controls;
                if (e.kind == AgentStream::Event::Kind::reset) reset = true;
            });
        ASSERT_TRUE(waitFor([&] { return reset.load(); })) << "the stream took every control frame";
        // The bucket refills while a loaded (sanitized) run delivers the flood: the bound is the
        // burst plus what the rate allows over the time it took, never the 5000 sent.
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count();
        EXPECT_LE(controls.load(), static_cast<int>(AgentStream::kControlBurst +
                                                    AgentStream::kControlPerSecond * seconds) +
                                       100);
        EXPECT_LT(controls.load(), 5000) << "every control frame was delivered";
        EXPECT_TRUE(conn->ping(2s)) << "the session ended for one stream's breach";
    }
}

TEST(HostileAgent, ResetStormIsHarmless) {
    Reported reported;
    FakeGuest guest([](FakeGuest& g) {
        Frame open;
        if (!g.readType(FrameType::open, open)) return;
        for (int i = 0; i < 5000; ++i)
            g.send(FrameType::reset, open.stream, R"({"code":"x","message":"y"})");
        while (!g.stop_) {
            Frame f;
            if (g.read(f, 100ms) && f.type == FrameType::ping) g.send(FrameType::pong, 0, "");
        }
    });
    auto conn = connectTo(guest, reported);
    auto stream = conn->open({{"op", "file_read"}, {"path", "/x"}});
    ASSERT_TRUE(waitFor([&] { return stream->finished(); }));
    EXPECT_TRUE(conn->ping(2s)) << "stragglers of an ended stream ended the session";
    EXPECT_EQ(reported.count(), 0u);
}

TEST(HostileAgent, TooManyStreamsAreRefusedNotQueued) {
    Reported reported;
    FakeGuest guest([](FakeGuest& g) {
        while (!g.stop_) {
            Frame f;
            g.read(f, 100ms);
        }
    });
    AgentChannelLimits limits;
    limits.maxStreams = 8;
    auto conn = connectTo(guest, reported, limits);
    std::vector<std::shared_ptr<AgentStream>> open;
    for (int i = 0; i < 8; ++i) open.push_back(conn->open({{"op", "file_read"}, {"path", "/x"}}));
    try {
        conn->open({{"op", "file_read"}, {"path", "/x"}});
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::unavailable);
    }
    // A dropped stream frees its slot when its last reference goes: the
    // connection's thread may hold one for a moment (seen under ASan).
    open.pop_back();
    std::shared_ptr<AgentStream> again;
    EXPECT_TRUE(waitFor([&] {
        try {
            again = conn->open({{"op", "file_read"}, {"path", "/x"}});
            return true;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::unavailable);
            return false;
        }
    }));
}

}  // namespace
}  // namespace airlock
