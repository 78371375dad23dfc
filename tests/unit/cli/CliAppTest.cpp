#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/CliApp.hpp"

namespace airlock::cli {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

// An HTTP server on 127.0.0.1 that answers each request with the next
// queued answer (one request per connection) and keeps what it was sent.
class FakeApi {
  public:
    struct Seen {
        std::string method, target, body, contentType, authorization;
    };
    struct Answer {
        int status;
        std::string body;
        std::string contentType = "application/json";
    };

    FakeApi()
        : acceptor_(ioc_, {asio::ip::make_address("127.0.0.1"), 0}),
          port_(acceptor_.local_endpoint().port()) {
        thread_ = std::thread([this] { serve(); });
    }
    ~FakeApi() {
        stopping_ = true;
        beast::error_code ec;
        asio::ip::tcp::socket wake(ioc_);
        wake.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
        thread_.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    void answer(int status, std::string body, std::string contentType = "application/json") {
        std::lock_guard lock(mutex_);
        answers_.push_back({status, std::move(body), std::move(contentType)});
    }
    std::vector<Seen> seen() {
        std::lock_guard lock(mutex_);
        return seen_;
    }

  private:
    void serve() {
        for (;;) {
            asio::ip::tcp::socket socket(ioc_);
            beast::error_code ec;
            acceptor_.accept(socket, ec);
            if (stopping_) return;
            if (ec) continue;
            beast::flat_buffer buffer;
            http::request_parser<http::string_body> parser;
            parser.body_limit(64u << 20);
            http::read(socket, buffer, parser, ec);
            if (ec) continue;
            const auto& req = parser.get();
            Answer a{500, R"({"error":{"code":"internal","message":"nothing queued"}})"};
            {
                std::lock_guard lock(mutex_);
                seen_.push_back({std::string(req.method_string()), std::string(req.target()),
                                 req.body(), std::string(req[http::field::content_type]),
                                 std::string(req[http::field::authorization])});
                if (!answers_.empty()) {
                    a = answers_.front();
                    answers_.pop_front();
                }
            }
            http::response<http::string_body> res(static_cast<http::status>(a.status), 11);
            if (!a.body.empty()) res.set(http::field::content_type, a.contentType);
            res.body() = a.body;
            res.keep_alive(false);
            res.prepare_payload();
            http::write(socket, res, ec);
            socket.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
        }
    }

    asio::io_context ioc_;
    asio::ip::tcp::acceptor acceptor_;
    unsigned short port_;
    std::atomic<bool> stopping_{false};
    std::mutex mutex_;
    std::deque<Answer> answers_;
    std::vector<Seen> seen_;
    std::thread thread_;
};

struct Ran {
    int code;
    std::string out, err;
};

Ran run(FakeApi& api, const std::vector<std::string>& args) {
    std::ostringstream out, err;
    int code = runCli(args, api.url(), "test-key", out, err);
    return {code, out.str(), err.str()};
}

// A scratch directory, removed at the end of the test.
struct ScratchDir {
    std::filesystem::path path;
    ScratchDir() {
        path = std::filesystem::temp_directory_path() /
               ("airlock-cli-test-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~ScratchDir() { std::filesystem::remove_all(path); }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string readAll(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

void writeAll(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary) << data;
}

TEST(CliLifecycle, PauseSendsTheChosenModeAndPrintsTheState) {
    FakeApi api;
    api.answer(200, R"({"id":"sbx-1","state":"paused"})");
    api.answer(200, R"({"id":"sbx-1","state":"hibernated"})");
    api.answer(200, R"({"id":"sbx-1","state":"paused"})");
    auto plain = run(api, {"pause", "sbx-1"});
    auto hibernated = run(api, {"pause", "--hibernate", "sbx-1"});
    auto diskOnly = run(api, {"pause", "sbx-1", "--disk-only"});
    EXPECT_EQ(plain.code, 0) << plain.err;
    EXPECT_EQ(plain.out, "paused\n");
    EXPECT_EQ(hibernated.out, "hibernated\n");
    EXPECT_EQ(diskOnly.out, "paused\n");
    auto seen = api.seen();
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0].method, "POST");
    EXPECT_EQ(seen[0].target, "/v1/sandboxes/sbx-1/pause");
    EXPECT_EQ(seen[0].authorization, "Bearer test-key");
    EXPECT_EQ(json::parse(seen[0].body), json::object());
    EXPECT_EQ(json::parse(seen[1].body), (json{{"hibernate", true}}));
    EXPECT_EQ(json::parse(seen[2].body), (json{{"memory", false}}));
}

TEST(CliLifecycle, WrongUsageExitsTwoWithoutARequest) {
    FakeApi api;
    for (const std::vector<std::string>& args : {std::vector<std::string>{"pause"},
                                                 {"pause", "--hibernate", "--disk-only", "sbx-1"},
                                                 {"pause", "--hiber", "sbx-1"},
                                                 {"resume"},
                                                 {"resume", "sbx-1", "sbx-2"},
                                                 {"snapshot"},
                                                 {"snapshot", "sbx-1", "--name"},
                                                 {"clone"},
                                                 {"timeout", "sbx-1"},
                                                 {"timeout", "sbx-1", "-5"},
                                                 {"timeout", "sbx-1", "1.5"},
                                                 {"timeout", "sbx-1", "abc"},
                                                 {"timeout", "sbx-1", ""},
                                                 {"timeout", "sbx-1", "99999999999999999999"},
                                                 {"volume"},
                                                 {"volume", "create", "cache"},
                                                 {"volume", "create", "cache", "big"},
                                                 {"volume", "ls", "x"},
                                                 {"volume", "rm"},
                                                 {"volume", "cp", "a", "b"},
                                                 {"volume", "cp", "cache:/a", "other:/b"},
                                                 {"volume", "cp", "a", "cache:relative"}}) {
        auto r = run(api, args);
        std::string joined;
        for (const auto& a : args) joined += " " + a;
        EXPECT_EQ(r.code, 2) << joined << ": " << r.err;
        EXPECT_NE(r.err.find("usage: airlock"), std::string::npos) << joined << ": " << r.err;
        EXPECT_EQ(r.out, "") << joined;
    }
    EXPECT_TRUE(api.seen().empty());
}

TEST(CliLifecycle, ResumeSnapshotAndClonePrintWhatTheyMade) {
    FakeApi api;
    api.answer(200, R"({"id":"sbx-1","state":"running"})");
    api.answer(201, R"({"id":"snap-0123","name":"base","tag":"v1","sandbox":"sbx-1"})");
    api.answer(201, R"({"id":"snap-0124"})");
    api.answer(201, R"({"id":"sbx-2","state":"running","snapshot":"snap-0123"})");
    auto resumed = run(api, {"resume", "sbx-1"});
    auto snap = run(api, {"snapshot", "sbx-1", "--name", "base", "--tag", "v1"});
    auto bare = run(api, {"snapshot", "sbx-1"});
    auto clone = run(api, {"clone", "snap-0123"});
    EXPECT_EQ(resumed.out, "running\n");
    EXPECT_EQ(snap.code, 0) << snap.err;
    EXPECT_EQ(snap.out, "snap-0123\n");
    EXPECT_EQ(bare.out, "snap-0124\n");
    EXPECT_EQ(clone.code, 0) << clone.err;
    EXPECT_EQ(clone.out, "sbx-2\n");
    auto seen = api.seen();
    ASSERT_EQ(seen.size(), 4u);
    EXPECT_EQ(seen[0].target, "/v1/sandboxes/sbx-1/resume");
    EXPECT_EQ(seen[1].target, "/v1/sandboxes/sbx-1/snapshots");
    EXPECT_EQ(json::parse(seen[1].body), (json{{"name", "base"}, {"tag", "v1"}}));
    EXPECT_EQ(json::parse(seen[2].body), json::object());
    EXPECT_EQ(seen[3].method, "POST");
    EXPECT_EQ(seen[3].target, "/v1/sandboxes");
    EXPECT_EQ(json::parse(seen[3].body), (json{{"snapshot", "snap-0123"}}));
}

TEST(CliLifecycle, TimeoutSendsTheSecondsAndPrintsTheExpiryWhenThereIsOne) {
    FakeApi api;
    api.answer(200, R"({"id":"sbx-1","timeout_s":600,"expires_at":"2030-01-01T00:10:00Z"})");
    api.answer(200, R"({"id":"sbx-1","timeout_s":0,"expires_at":null})");
    auto set = run(api, {"timeout", "sbx-1", "600"});
    auto cleared = run(api, {"timeout", "sbx-1", "0"});
    EXPECT_EQ(set.code, 0) << set.err;
    EXPECT_EQ(set.out, "2030-01-01T00:10:00Z\n");
    EXPECT_EQ(cleared.code, 0) << cleared.err;
    EXPECT_EQ(cleared.out, "");
    auto seen = api.seen();
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].target, "/v1/sandboxes/sbx-1/timeout");
    EXPECT_EQ(json::parse(seen[0].body), (json{{"timeout_s", 600}}));
    EXPECT_EQ(json::parse(seen[1].body), (json{{"timeout_s", 0}}));
}

TEST(CliLifecycle, AnErrorAnswerExitsOneWithTheServersMessage) {
    FakeApi api;
    api.answer(409, R"({"error":{"code":"conflict","message":"sandbox sbx-1 is not running"}})");
    api.answer(201, R"({"id":"sbx-1"})");  // resume wants 200: any other status is an error
    auto paused = run(api, {"pause", "sbx-1"});
    EXPECT_EQ(paused.code, 1);
    EXPECT_EQ(paused.err, "airlock: HTTP 409: sandbox sbx-1 is not running\n");
    EXPECT_EQ(paused.out, "");
    auto resumed = run(api, {"resume", "sbx-1"});
    EXPECT_EQ(resumed.code, 1);
    EXPECT_EQ(resumed.err, "airlock: HTTP 201\n");
}

TEST(CliVolume, CreateLsAndRm) {
    FakeApi api;
    api.answer(201, R"({"name":"cache","size_gib":2,"filesystem":"ext4","used_bytes":0,
                        "attachments":[]})");
    api.answer(200, R"({"volumes":[
        {"name":"cache","size_gib":2,"used_bytes":4096,"attachments":[
            {"sandbox":"sbx-1","path":"/mnt/cache","read_only":false},
            {"sandbox":"sbx-22","path":"/mnt/c","read_only":true}]},
        {"name":"datasets-big","size_gib":100,"used_bytes":123456789,"attachments":[]}]})");
    api.answer(204, "");
    auto created = run(api, {"volume", "create", "cache", "2"});
    auto listed = run(api, {"volume", "ls"});
    auto removed = run(api, {"volume", "rm", "cache"});
    EXPECT_EQ(created.code, 0) << created.err;
    EXPECT_EQ(created.out, "cache\n");
    EXPECT_EQ(listed.code, 0) << listed.err;
    EXPECT_EQ(listed.out,
              "NAME          SIZE_GIB  USED       ATTACHED\n"
              "cache         2         4096       sbx-1,sbx-22:ro\n"
              "datasets-big  100       123456789  -\n");
    EXPECT_EQ(removed.code, 0) << removed.err;
    EXPECT_EQ(removed.out, "");
    auto seen = api.seen();
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0].method, "POST");
    EXPECT_EQ(seen[0].target, "/v1/volumes");
    EXPECT_EQ(json::parse(seen[0].body), (json{{"name", "cache"}, {"size_gib", 2}}));
    EXPECT_EQ(seen[1].method, "GET");
    EXPECT_EQ(seen[1].target, "/v1/volumes");
    EXPECT_EQ(seen[2].method, "DELETE");
    EXPECT_EQ(seen[2].target, "/v1/volumes/cache");
}

TEST(CliVolume, RmWhileAttachedIsAnError) {
    FakeApi api;
    api.answer(409, R"({"error":{"code":"conflict","message":"volume cache is attached"}})");
    auto r = run(api, {"volume", "rm", "cache"});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "airlock: HTTP 409: volume cache is attached\n");
}

TEST(CliVolume, CpUploadsAndDownloadsTheBytes) {
    ScratchDir dir;
    std::string bytes("line one\n\0binary\xff", 17);
    writeAll(dir.file("in.bin"), bytes);
    FakeApi api;
    api.answer(201, R"({"path":"/data/a b.bin","size":17})");
    api.answer(200, bytes, "application/octet-stream");
    api.answer(200, bytes, "application/octet-stream");
    api.answer(200, "", "application/octet-stream");
    auto up = run(api, {"volume", "cp", dir.file("in.bin"), "cache:/data/a b.bin"});
    auto down = run(api, {"volume", "cp", "cache:/data/a b.bin", dir.file("out.bin")});
    auto toStdout = run(api, {"volume", "cp", "cache:/data/a b.bin", "-"});
    auto empty = run(api, {"volume", "cp", "my_vol-2:/empty", dir.file("empty")});
    EXPECT_EQ(up.code, 0) << up.err;
    EXPECT_EQ(up.out, "");
    EXPECT_EQ(down.code, 0) << down.err;
    EXPECT_EQ(readAll(dir.file("out.bin")), bytes);
    EXPECT_EQ(toStdout.code, 0) << toStdout.err;
    EXPECT_EQ(toStdout.out, bytes);
    EXPECT_EQ(empty.code, 0) << empty.err;
    EXPECT_TRUE(std::filesystem::exists(dir.file("empty")));
    EXPECT_EQ(readAll(dir.file("empty")), "");
    auto seen = api.seen();
    ASSERT_EQ(seen.size(), 4u);
    EXPECT_EQ(seen[0].method, "PUT");
    EXPECT_EQ(seen[0].target, "/v1/volumes/cache/files?path=/data/a%20b.bin");
    EXPECT_EQ(seen[0].body, bytes);
    EXPECT_EQ(seen[0].contentType, "application/octet-stream");
    EXPECT_EQ(seen[0].authorization, "Bearer test-key");
    EXPECT_EQ(seen[1].method, "GET");
    EXPECT_EQ(seen[1].target, "/v1/volumes/cache/files?path=/data/a%20b.bin");
    EXPECT_EQ(seen[1].authorization, "Bearer test-key");
    EXPECT_EQ(seen[3].target, "/v1/volumes/my_vol-2/files?path=/empty");
}

TEST(CliVolume, CpUploadsStdinForADash) {
    FakeApi api;
    api.answer(201, R"({"path":"/notes.txt","size":6})");
    std::istringstream in("hello\n");
    auto* saved = std::cin.rdbuf(in.rdbuf());
    auto r = run(api, {"volume", "cp", "-", "cache:/notes.txt"});
    std::cin.rdbuf(saved);
    EXPECT_EQ(r.code, 0) << r.err;
    auto seen = api.seen();
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].method, "PUT");
    EXPECT_EQ(seen[0].target, "/v1/volumes/cache/files?path=/notes.txt");
    EXPECT_EQ(seen[0].body, "hello\n");
}

TEST(CliVolume, CpDownloadOfAMissingFileOrADirectoryLeavesTheLocalFileAlone) {
    ScratchDir dir;
    writeAll(dir.file("keep"), "precious");
    FakeApi api;
    api.answer(404, R"({"error":{"code":"not_found","message":"no such file: /nope"}})");
    api.answer(200, R"({"path":"/d","entries":[{"name":"a","type":"file","size":1,"mode":420}]})");
    auto missing = run(api, {"volume", "cp", "cache:/nope", dir.file("keep")});
    auto directory = run(api, {"volume", "cp", "cache:/d", dir.file("keep")});
    EXPECT_EQ(missing.code, 1);
    EXPECT_EQ(missing.err, "airlock: HTTP 404: no such file: /nope\n");
    EXPECT_EQ(directory.code, 1);
    EXPECT_EQ(directory.err, "airlock: cache:/d is a directory\n");
    EXPECT_EQ(readAll(dir.file("keep")), "precious");
}

TEST(CliVolume, CpOfALocalDirectoryIsRefusedBeforeAnyRequest) {
    ScratchDir dir;
    FakeApi api;
    auto r = run(api, {"volume", "cp", dir.path.string(), "cache:/x"});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
    EXPECT_TRUE(api.seen().empty());
}

}  // namespace
}  // namespace airlock::cli
