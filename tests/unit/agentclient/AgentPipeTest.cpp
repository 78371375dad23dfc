// AgentPipe over the real agent loop (in process, behind a socketpair): the
// start, the error path, the window that goes back only for written bytes,
// and finish.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fstream>
#include <future>
#include <thread>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentPipe.hpp"
#include "core/Error.hpp"
#include "protocol/Frame.hpp"
#include "support/InProcessAgent.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using Kind = AgentStream::Event::Kind;

class AgentPipeTest : public ::testing::Test {
  protected:
    test::TempDir dir;
    test::InProcessAgent agent;
    std::shared_ptr<AgentConnection> conn = agent.connect();
    asio::io_context ioc;
    asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);
    asio::strand<asio::io_context::executor_type> strand = asio::make_strand(ioc);
    asio::thread_pool workers{2};
    std::thread io{[this] { ioc.run(); }};
    // Stands in for the session that owns the pipe.
    std::shared_ptr<int> owner = std::make_shared<int>(0);

    ~AgentPipeTest() override {
        conn->closeAndWait();  // its last events reach a running io_context
        work.reset();
        ioc.stop();
        io.join();
        workers.join();
    }

    // Runs `f` on the strand and waits for it.
    template <typename F>
    void onStrand(F f) {
        std::promise<void> done;
        asio::post(strand, [&] {
            f();
            done.set_value();
        });
        done.get_future().wait();
    }

    AgentPipe::Opener fileReader(const std::string& path) {
        return [this, path](AgentStream::Handler h) {
            return conn->open({{"op", "file_read"}, {"path", path}, {"user", "root"}}, h);
        };
    }
};

TEST_F(AgentPipeTest, AFailedOpenReachesTheSessionAsItsError) {
    AgentPipe pipe(strand, workers);
    std::promise<ErrorCode> code;
    pipe.open(
        owner,
        [](AgentStream::Handler) -> std::shared_ptr<AgentStream> {
            throw Error(ErrorCode::not_found, "no such sandbox");
        },
        [&](std::exception_ptr error) {
            try {
                std::rethrow_exception(error);
            } catch (const Error& e) {
                code.set_value(e.code());
            } catch (...) {
                code.set_value(ErrorCode::internal);
            }
        });
    auto f = code.get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(f.get(), ErrorCode::not_found);
    onStrand([&] { pipe.finish(); });
}

TEST_F(AgentPipeTest, TheWindowGoesBackOnlyForBytesTheClientTook) {
    const std::size_t size = 4 * protocol::kInitialWindow;
    {
        std::ofstream out(dir.path() + "/big", std::ios::binary);
        out << std::string(size, 'x');
    }
    AgentPipe pipe(strand, workers);
    std::atomic<std::size_t> received{0}, written{0};
    std::atomic<bool> ended{false}, holding{true};
    std::function<void(bool)> held;  // a write the "client" has not finished
    pipe.onEvent([&](AgentStream::Event&& e) {
        if (e.kind == Kind::control) return;
        if (e.kind == Kind::data) received += e.payload.size();
        AgentPipe::Chunk c;
        c.end = e.kind != Kind::data;
        c.credit = e.payload.size();
        c.bytes = std::move(e.payload);
        pipe.send(owner, std::move(c));
    });
    pipe.setWriter([&](const AgentPipe::Chunk& c, std::function<void(bool)> done) {
        written += c.bytes.size();
        if (holding) return void(held = std::move(done));
        asio::post(strand, [done = std::move(done)] { done(true); });
    });
    pipe.onEnd([&] { ended = true; });
    std::promise<void> opened;
    pipe.open(owner, fileReader(dir.path() + "/big"), [&](std::exception_ptr error) {
        EXPECT_FALSE(error);
        opened.set_value();
    });
    ASSERT_EQ(opened.get_future().wait_for(10s), std::future_status::ready);
    // The client takes nothing: the guest stops at its window.
    ASSERT_TRUE(test::waitFor([&] { return received.load() >= protocol::kInitialWindow; }, 10s));
    // Nothing more may come, however long we wait: a bound, not a hope.
    std::this_thread::sleep_for(300ms);
    EXPECT_LE(received.load(), protocol::kInitialWindow);
    // The client takes everything: the rest follows, in order, to the end.
    onStrand([&] {
        holding = false;
        if (held) std::exchange(held, nullptr)(true);
    });
    ASSERT_TRUE(test::waitFor([&] { return ended.load(); }, std::chrono::seconds(10)));
    EXPECT_EQ(received.load(), size);
    EXPECT_EQ(written.load(), size);
    onStrand([&] { pipe.finish(); });
}

TEST_F(AgentPipeTest, AStreamOpenedAfterFinishIsCancelledAndDeliversNothing) {
    {
        std::ofstream out(dir.path() + "/small");
        out << "hello";
    }
    // Owned as a session owns its pipe: what open() posts keeps it alive.
    auto held = std::make_shared<AgentPipe>(strand, workers);
    AgentPipe& pipe = *held;
    std::atomic<int> events{0}, openedCalls{0};
    pipe.onEvent([&](AgentStream::Event&&) { ++events; });
    std::promise<void> opening, release;
    auto gate = release.get_future().share();
    std::promise<std::shared_ptr<AgentStream>> opened;  // the test's own handle on it
    pipe.open(
        held,
        [&, gate](AgentStream::Handler h) {
            opening.set_value();
            gate.wait();  // the client leaves while the stream is being opened
            auto stream = conn->open(
                {{"op", "file_read"}, {"path", dir.path() + "/small"}, {"user", "root"}}, h);
            opened.set_value(stream);
            return stream;
        },
        [&](std::exception_ptr) { ++openedCalls; });
    opening.get_future().wait();
    onStrand([&] { pipe.finish(); });
    release.set_value();
    // The stream is opened, finds the pipe finished and is cancelled.
    auto stream = opened.get_future().get();
    ASSERT_TRUE(test::waitFor([&] { return stream->finished(); }, std::chrono::seconds(10)));
    onStrand([] {});
    EXPECT_EQ(openedCalls.load(), 0);
    EXPECT_EQ(events.load(), 0);
    EXPECT_TRUE(pipe.finished());
    EXPECT_EQ(pipe.stream(), nullptr);
    // The stream may end (its file read whole) before open()'s last step
    // left the strand: the pipe goes once nothing holds it (the stream's
    // handler holds it too, until the stream goes).
    stream.reset();
    EXPECT_TRUE(test::waitFor([&] { return held.use_count() == 1; }, std::chrono::seconds(10)));
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

// A queue whose socket is not ready yet (egress before its destination
// answers): chunks wait for the writer and flush(), the bridge's own bytes
// go first, unwritten ones can be dropped, the chunk being written is never
// touched, and the end runs after everything before it.
TEST_F(AgentPipeTest, ChunksWaitForTheWriterAndKeepTheirOrder) {
    AgentPipe pipe(strand, workers);
    std::vector<std::string> written;
    const AgentPipe::Chunk* inFlight = nullptr;
    std::function<void(bool)> pending;  // the write in flight, completed by the test
    bool ended = false;
    auto chunk = [](std::string bytes) {
        AgentPipe::Chunk c;
        c.credit = bytes.size();
        c.bytes = std::move(bytes);
        return c;
    };
    auto complete = [&] { std::exchange(pending, nullptr)(true); };
    onStrand([&] {
        pipe.send(owner, chunk("body-1"));
        pipe.send(owner, chunk("body-2"));
        AgentPipe::Chunk head;
        head.bytes = "HEAD";
        pipe.sendFirst(owner, std::move(head));
        EXPECT_FALSE(pipe.writing()) << "no writer yet: nothing is written";
        pipe.setWriter([&](const AgentPipe::Chunk& c, std::function<void(bool)> done) {
            written.push_back(c.bytes);
            inFlight = &c;
            pending = std::move(done);
        });
        pipe.onEnd([&] { ended = true; });
        EXPECT_TRUE(written.empty()) << "a writer alone starts nothing";
        pipe.flush(owner);
        ASSERT_EQ(written, std::vector<std::string>{"HEAD"});

        // While one is written, first chunks go right after it, and the one
        // being written stays as it was however many are queued around it.
        for (int i = 0; i < 6; ++i) pipe.send(owner, chunk("tail-" + std::to_string(i)));
        pipe.sendFirst(owner, chunk("next"));
        for (int i = 0; i < 4; ++i) pipe.sendFirst(owner, chunk("first-" + std::to_string(i)));
        ASSERT_NE(inFlight, nullptr);
        EXPECT_EQ(inFlight->bytes, "HEAD");
        complete();
        EXPECT_EQ(written.back(), "first-3");
        complete();
        EXPECT_EQ(written.back(), "first-2");

        // The one in flight goes on; everything queued is dropped, the end
        // marker behind them too.
        AgentPipe::Chunk end;
        end.end = true;
        pipe.send(owner, std::move(end));
        pipe.discardQueued();
        EXPECT_TRUE(pipe.writing()) << "the write in flight goes on";
        EXPECT_EQ(inFlight->bytes, "first-2");
        complete();
        EXPECT_FALSE(pipe.queued());
        EXPECT_FALSE(pipe.writing());
        EXPECT_FALSE(ended);

        // An end marker runs once what was queued before it is written.
        pipe.send(owner, chunk("last"));
        AgentPipe::Chunk end2;
        end2.end = true;
        pipe.send(owner, std::move(end2));
        EXPECT_FALSE(ended);
        complete();
        EXPECT_TRUE(ended);
        EXPECT_EQ(written, (std::vector<std::string>{"HEAD", "first-3", "first-2", "last"}));
        pipe.finish();
    });
}

TEST_F(AgentPipeTest, SilenceEndsTheBridgeAndActivityPutsItOff) {
    AgentPipe pipe(strand, workers);
    std::atomic<int> idled{0};
    auto since = std::chrono::steady_clock::now();
    std::atomic<std::int64_t> idledAfterMs{0};
    onStrand([&] {
        pipe.idleAfter(owner, 1000ms, [&] {
            idledAfterMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - since)
                               .count();
            ++idled;
            pipe.finish();
        });
    });
    // Activity every 200 ms for two seconds: never a second of silence.
    for (int i = 0; i < 10; ++i) {
        std::this_thread::sleep_for(200ms);
        onStrand([&] { pipe.touch(); });
    }
    EXPECT_EQ(idled.load(), 0) << "it ended while things moved";
    ASSERT_TRUE(test::waitFor([&] { return idled.load() == 1; }, 5s)) << "silence never ended it";
    EXPECT_GE(idledAfterMs.load(), 2000 + 1000 - 100) << "not timed from the last activity";
    EXPECT_TRUE(test::waitFor([&] { return owner.use_count() == 1; }, 2s))
        << "a finished pipe's timer still holds its session";
}

TEST_F(AgentPipeTest, AFinishedPipeNeverCallsItsIdleHandler) {
    AgentPipe pipe(strand, workers);
    std::atomic<int> idled{0};
    onStrand([&] {
        pipe.idleAfter(owner, 30s, [&] { ++idled; });
        pipe.finish();
    });
    EXPECT_TRUE(test::waitFor([&] { return owner.use_count() == 1; }, 2s))
        << "finish() left the timer holding its session";
    EXPECT_EQ(idled.load(), 0);
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

// What a chunk holds for another stream (an E2B process's window) is let
// go once the chunk was written, or dropped unwritten, never before.
TEST_F(AgentPipeTest, AChunksHoldIsReleasedOnceWrittenOrDropped) {
    AgentPipe pipe(strand, workers);
    std::function<void(bool)> pending;
    std::weak_ptr<void> first, second, third;
    onStrand([&] {
        pipe.setWriter([&](const AgentPipe::Chunk&, std::function<void(bool)> done) {
            pending = std::move(done);
        });
        auto held = [](std::weak_ptr<void>& watch) {
            AgentPipe::Chunk c;
            c.bytes = "output";
            c.hold = std::make_shared<int>(1);
            watch = c.hold;
            return c;
        };
        pipe.send(owner, held(first));
        pipe.send(owner, held(second));
        pipe.send(owner, held(third));
        EXPECT_FALSE(first.expired()) << "being written";
        EXPECT_FALSE(second.expired()) << "queued";
        std::exchange(pending, nullptr)(true);
        EXPECT_TRUE(first.expired()) << "written: its hold goes";
        EXPECT_FALSE(second.expired()) << "now being written";
        pipe.discardQueued();
        EXPECT_TRUE(third.expired()) << "dropped unwritten: its hold goes too";
        EXPECT_FALSE(second.expired()) << "the write in flight still reads its chunk";
        pipe.finish();
        EXPECT_FALSE(second.expired()) << "finished, but the write is still in flight";
        std::exchange(pending, nullptr)(false);
        EXPECT_TRUE(second.expired()) << "a failed write lets go of its hold at once";
    });
}

}  // namespace
}  // namespace airlock
