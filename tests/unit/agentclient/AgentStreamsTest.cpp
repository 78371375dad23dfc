// The v1 channel end to end in one process: the real agent loop behind a
// socketpair, the real host client in front of it. Commands and files touch
// the host (as root), so everything lives under a temporary directory.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"
#include "protocol/Frame.hpp"
#include "support/InProcessAgent.hpp"
#include "support/RawChannel.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using Kind = AgentStream::Event::Kind;
namespace fs = std::filesystem;
using test::codeOf;

class AgentStreams : public ::testing::Test {
  protected:
    test::TempDir dir;
    test::InProcessAgent agent;
    std::shared_ptr<AgentConnection> conn = agent.connect();

    json fsOp(json request) {
        request["op"] = "fs";
        request["user"] = "root";
        return conn->call(request, 10s);
    }

    std::string download(const std::string& path,
                         std::optional<std::uint64_t>* announced = nullptr) {
        auto s = conn->open({{"op", "file_read"}, {"path", path}, {"user", "root"}});
        std::string data;
        auto deadline = AgentStream::Clock::now() + 30s;
        while (auto e = s->next(deadline)) {
            if (e->kind == Kind::data) data += e->payload;
            if (e->kind == Kind::control && announced)
                *announced = json::parse(e->payload)["size"].get<std::uint64_t>();
            if (e->kind == Kind::reset) {
                auto info = protocol::parseResetInfo(e->payload);
                throw agentError(info.code, info.message);
            }
            if (e->kind == Kind::close) return data;
        }
        throw Error(ErrorCode::agent_timeout, "download timed out");
    }

    json upload(const std::string& path, const std::string& content, std::size_t chunk = 100000) {
        auto s =
            conn->open({{"op", "file_write"}, {"path", path}, {"user", "root"}, {"mode", 0600}});
        for (std::size_t off = 0; off < content.size(); off += chunk)
            s->write(0, std::string_view(content).substr(off, chunk),
                     AgentStream::Clock::now() + 30s);
        s->closeWrite();
        while (auto e = s->next(AgentStream::Clock::now() + 30s)) {
            if (e->kind == Kind::close) return json::parse(e->payload);
            if (e->kind == Kind::reset) {
                auto info = protocol::parseResetInfo(e->payload);
                throw agentError(info.code, info.message);
            }
        }
        throw Error(ErrorCode::agent_timeout, "upload timed out");
    }
};

std::string randomBytes(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

TEST_F(AgentStreams, UploadCreatesParentsAndDownloadReturnsTheSameBytes) {
    std::string content = randomBytes(5 * 1024 * 1024 + 17, 1);  // several windows' worth
    std::string path = dir.path() + "/deep/er/file.bin";
    auto result = upload(path, content);
    EXPECT_EQ(result["size"], content.size());
    EXPECT_EQ(result["mode"], "0600");
    std::optional<std::uint64_t> size;
    EXPECT_EQ(download(path, &size), content);
    EXPECT_EQ(size.value_or(0), content.size());
    // No temporary file is left next to it.
    EXPECT_EQ(
        std::distance(fs::directory_iterator(dir.path() + "/deep/er"), fs::directory_iterator{}),
        1);
}

TEST_F(AgentStreams, AnAbortedUploadKeepsTheOldFile) {
    std::string path = dir.path() + "/keep.txt";
    upload(path, "old content");
    {
        auto s = conn->open({{"op", "file_write"}, {"path", path}, {"user", "root"}});
        s->write(0, "new partial", AgentStream::Clock::now() + 5s);
        s->reset("cancelled", "client went away");
    }
    ASSERT_TRUE(test::waitFor(
        [&] {
            return std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator{}) == 1;
        },
        5s));
    EXPECT_EQ(download(path), "old content");
}

TEST_F(AgentStreams, FileErrorsMapToTypedErrors) {
    EXPECT_EQ(codeOf([&] { download(dir.path() + "/missing"); }), ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] { download(dir.path()); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] { download("relative/path"); }), ErrorCode::bad_request);
    EXPECT_EQ(codeOf([&] { upload(dir.path(), "x"); }), ErrorCode::conflict);
    EXPECT_EQ(codeOf([&] {
                  fsOp({{"action", "stat"}, {"path", dir.path() + "/nope"}});
              }),
              ErrorCode::not_found);
    EXPECT_EQ(codeOf([&] {
                  fsOp({{"action", "explode"}, {"path", dir.path()}});
              }),
              ErrorCode::bad_request);
    EXPECT_EQ(codeOf([&] { fsOp({{"action", "remove"}, {"path", "/"}}); }), ErrorCode::bad_request);
}

TEST_F(AgentStreams, ListStatMkdirMoveRemove) {
    fsOp({{"action", "mkdir"}, {"path", dir.path() + "/a/b"}});
    upload(dir.path() + "/a/b/f.txt", "12345");
    auto listing = fsOp({{"action", "list"}, {"path", dir.path() + "/a/b"}});
    EXPECT_EQ(listing["type"], "directory");
    ASSERT_EQ(listing["entries"].size(), 1u);
    EXPECT_EQ(listing["entries"][0]["name"], "f.txt");
    EXPECT_EQ(listing["entries"][0]["size"], 5);
    EXPECT_EQ(listing["entries"][0]["type"], "file");
    fsOp(
        {{"action", "move"}, {"path", dir.path() + "/a/b/f.txt"}, {"to", dir.path() + "/a/g.txt"}});
    EXPECT_EQ(fsOp({{"action", "stat"}, {"path", dir.path() + "/a/g.txt"}})["size"], 5);
    EXPECT_EQ(codeOf([&] {
                  fsOp({{"action", "remove"}, {"path", dir.path() + "/a"}});
              }),
              ErrorCode::conflict)
        << "a non-empty directory needs recursive";
    fsOp({{"action", "remove"}, {"path", dir.path() + "/a"}, {"recursive", true}});
    EXPECT_FALSE(fs::exists(dir.path() + "/a"));
}

TEST_F(AgentStreams, StreamedExecDeliversOutputBeforeTheEnd) {
    protocol::ExecRequest r;
    r.argv = {"/bin/sh", "-c", "echo first; sleep 1; echo second"};
    r.user = "root";
    auto s = conn->open(json::parse(protocol::toJson(r)));
    auto started = AgentStream::Clock::now();
    std::optional<AgentStream::Clock::duration> firstAt;
    std::string out;
    while (auto e = s->next(AgentStream::Clock::now() + 10s)) {
        if (e->kind == Kind::data) {
            if (!firstAt) firstAt = AgentStream::Clock::now() - started;
            out += e->payload;
        }
        if (e->kind == Kind::close) break;
    }
    auto total = AgentStream::Clock::now() - started;
    EXPECT_EQ(out, "first\nsecond\n");
    ASSERT_TRUE(firstAt);
    EXPECT_GT(total - *firstAt, 700ms)
        << "the first line must arrive before the sleep, not with the exit";
}

TEST_F(AgentStreams, StdinStreamsAndEofEndsTheCommand) {
    protocol::ExecRequest r;
    r.argv = {"wc", "-c"};
    r.user = "root";
    r.stdin_stream = true;
    auto s = conn->open(json::parse(protocol::toJson(r)));
    std::string input = randomBytes(3 * 1024 * 1024, 2);  // more than one window
    s->write(0, input, AgentStream::Clock::now() + 30s);
    s->closeWrite();
    std::string out;
    while (auto e = s->next(AgentStream::Clock::now() + 30s)) {
        if (e->kind == Kind::data) out += e->payload;
        if (e->kind == Kind::close) break;
    }
    EXPECT_EQ(std::stoul(out), input.size());
}

TEST_F(AgentStreams, TtyExecHasATerminalAndSignalsReachIt) {
    protocol::ExecRequest r;
    r.argv = {"/bin/sh", "-c", "test -t 0 && test -t 1 && echo tty-ok; stty size; sleep 30"};
    r.user = "root";
    r.tty = true;
    r.rows = 33;
    r.cols = 99;
    r.stdin_stream = true;
    auto s = conn->open(json::parse(protocol::toJson(r)));
    std::string out;
    while (out.find("33 99") == std::string::npos) {
        auto e = s->next(AgentStream::Clock::now() + 10s);
        ASSERT_TRUE(e) << out;
        if (e->kind == Kind::data) out += e->payload;
        ASSERT_NE(e->kind, Kind::close) << out;
    }
    EXPECT_NE(out.find("tty-ok"), std::string::npos);
    s->control(R"({"signal":"KILL"})");
    while (auto e = s->next(AgentStream::Clock::now() + 10s)) {
        if (e->kind == Kind::close) {
            EXPECT_EQ(json::parse(e->payload)["signal"], 9);
            return;
        }
    }
    FAIL() << "no exit after SIGKILL";
}

TEST_F(AgentStreams, BackgroundProcessLogsSignalAndExit) {
    auto started = conn->call(
        {{"op", "process_start"},
         {"argv",
          {"/bin/sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.05; done"}},
         {"user", "root"}},
        10s);
    std::string id = started["id"];
    EXPECT_EQ(started["state"], "running");
    ASSERT_TRUE(test::waitFor(
        [&] {
            return conn->call({{"op", "process_get"}, {"id", id}}, 5s)["output_bytes"] > 30;
        },
        10s));
    auto list = conn->call({{"op", "process_list"}}, 5s);
    ASSERT_EQ(list["processes"].size(), 1u);
    // A follower sees ticks as they come, then the exit after a signal.
    auto logs = conn->open({{"op", "process_logs"}, {"id", id}, {"follow", true}});
    std::string seen;
    while (seen.find("tick 5") == std::string::npos) {
        auto e = logs->next(AgentStream::Clock::now() + 10s);
        ASSERT_TRUE(e && e->kind == Kind::data);
        seen += e->payload;
    }
    conn->call({{"op", "process_signal"}, {"id", id}, {"signal", "TERM"}}, 5s);
    while (auto e = logs->next(AgentStream::Clock::now() + 10s)) {
        if (e->kind == Kind::close) {
            auto j = json::parse(e->payload);
            EXPECT_EQ(j["state"], "exited");
            EXPECT_EQ(j["signal"], SIGTERM);
            break;
        }
    }
    EXPECT_EQ(conn->call({{"op", "process_get"}, {"id", id}}, 5s)["state"], "exited");
    EXPECT_THROW(conn->call({{"op", "process_get"}, {"id", "999999"}}, 5s), Error);
}

TEST_F(AgentStreams, TunnelReachesALocalPortBothWays) {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    ::listen(listener, 1);
    std::thread server([&] {
        int c = ::accept(listener, nullptr, nullptr);
        char buf[5];
        std::size_t got = 0;
        while (got < 5)
            got += static_cast<std::size_t>(std::max<ssize_t>(0, ::read(c, buf + got, 5 - got)));
        std::string reply = "echo:" + std::string(buf, 5) + std::string(2 * 1024 * 1024, 'x');
        (void)!::write(c, reply.data(), reply.size());
        ::close(c);
    });
    auto s = conn->open({{"op", "tunnel"}, {"port", ntohs(addr.sin_port)}});
    s->write(0, "hello", AgentStream::Clock::now() + 5s);
    std::string got;
    while (auto e = s->next(AgentStream::Clock::now() + 10s)) {
        if (e->kind == Kind::data) got += e->payload;
        if (e->kind == Kind::close || e->kind == Kind::reset) break;
    }
    server.join();
    ::close(listener);
    EXPECT_EQ(got.substr(0, 10), "echo:hello");
    EXPECT_EQ(got.size(), 10u + 2 * 1024 * 1024);
}

TEST_F(AgentStreams, TunnelToAClosedPortIsRefused) {
    auto s = conn->open({{"op", "tunnel"}, {"port", 1}});
    auto e = s->next(AgentStream::Clock::now() + 5s);
    ASSERT_TRUE(e);
    ASSERT_EQ(e->kind, Kind::reset);
    EXPECT_EQ(protocol::parseResetInfo(e->payload).code, "connection_refused");
}

TEST_F(AgentStreams, HundredStreamsAtOnceAndAStalledOneBlocksNobody) {
    // One stream floods and is never read: its window fills and it stalls.
    protocol::ExecRequest flood;
    flood.argv = {"/bin/sh", "-c", "head -c 50000000 /dev/zero"};
    flood.user = "root";
    auto stalled = conn->open(json::parse(protocol::toJson(flood)));
    std::vector<std::future<std::string>> results;
    for (int i = 0; i < 100; ++i)
        results.push_back(std::async(std::launch::async, [this, i] {
            protocol::ExecRequest r;
            r.argv = {"/bin/sh", "-c", "echo s" + std::to_string(i)};
            r.user = "root";
            return conn->exec(r, 1024, 60s).stdoutData;
        }));
    for (int i = 0; i < 100; ++i) EXPECT_EQ(results[i].get(), "s" + std::to_string(i) + "\n");
}

// A reset that arrives in the same poll turn as output of the stream it
// kills: the agent must not touch the destroyed handler (ASan catches it).
// `yes` keeps the pipe readable on nearly every turn, so the race is hit.
TEST_F(AgentStreams, ResetWhileOutputIsReadableLeavesTheAgentServing) {
    protocol::ExecRequest flood;
    flood.argv = {"yes"};
    flood.user = "root";
    for (int i = 0; i < 30; ++i) {
        auto s = conn->open(json::parse(protocol::toJson(flood)));
        std::size_t seen = 0;
        while (seen < 64 * 1024) {
            auto e = s->next(AgentStream::Clock::now() + 10s);
            ASSERT_TRUE(e) << "no output from yes";
            ASSERT_TRUE(e->kind == Kind::data || e->kind == Kind::control) << e->payload;
            if (e->kind == Kind::data) seen += e->payload.size();
        }
        s->reset("cancelled", "test cancels a flooding command");
    }
    EXPECT_TRUE(conn->ping(5s));
}

// The channel bench's baseline (test::RawChannel, never in airlockd)
// against an agent with raw mode allowed.
TEST(AgentRawMode, RawBaselineModesLeaveAndReenterFraming) {
    test::InProcessAgent agent(true);
    test::RawChannel channel(agent.takeHostEnd(), 10s);
    auto sink = channel.run("sink", 3 * 1024 * 1024 + 5, 30s);
    ASSERT_EQ(sink.size(), 1u);
    auto source = channel.run("source", 3 * 1024 * 1024 + 7, 30s);
    ASSERT_EQ(source.size(), 1u);
    auto echo = channel.run("echo", 20, 30s);
    EXPECT_EQ(echo.size(), 20u);
    EXPECT_TRUE(channel.ping(5s)) << "the channel is not framed again";
}

TEST_F(AgentStreams, TheHostOpensNothingOutsideTheOpSet) {
    // The guest's refusal of such an open is AgentRobustness's (raw frames).
    EXPECT_EQ(codeOf([&] { conn->call({{"op", "format_disk"}}, 5s); }), ErrorCode::internal);
    EXPECT_EQ(codeOf([&] { conn->call({{"path", "/"}}, 5s); }), ErrorCode::internal);
    EXPECT_TRUE(conn->ping(2s));
}

// A peer that answers the hello and then talks garbage: the host drops the
// connection with an error, fails pending streams, and does not crash.
TEST(HostRobustness, GarbageAfterHandshakeFailsTheConnectionCleanly) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    UniqueFd guest(fds[1]);
    std::thread fake([&] {
        protocol::FrameDecoder d;
        char buf[4096];
        protocol::Frame f;
        while (d.next(f) != protocol::FrameDecoder::Result::frame) {
            ssize_t n = ::read(guest.get(), buf, sizeof buf);
            if (n <= 0) return;
            d.feed(std::string_view(buf, static_cast<std::size_t>(n)));
        }
        auto hello = protocol::parseHello(f.payload);
        std::string ack =
            protocol::encodeFrame(protocol::FrameType::hello_ack, 0,
                                  protocol::toJson(protocol::HelloAck{1, hello.nonce, 1, "fake"}));
        (void)!::write(guest.get(), ack.data(), ack.size());
        // Wait for the exec's open, then answer garbage.
        (void)!::read(guest.get(), buf, sizeof buf);
        std::string junk(100, '\x42');
        (void)!::write(guest.get(), junk.data(), junk.size());
    });
    auto conn = AgentConnection::fromFd(UniqueFd(fds[0]), 5s);
    protocol::ExecRequest r;
    r.argv = {"true"};
    try {
        conn->exec(r, 1024, 10s);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::agent_error);
    }
    EXPECT_FALSE(conn->alive());
    fake.join();
}

}  // namespace
}  // namespace airlock
