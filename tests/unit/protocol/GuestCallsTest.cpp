#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/GuestCalls.hpp"

namespace airlock::protocol {

// What the host sends is what the guest reads, field for field.
TEST(GuestCalls, EveryOpenRoundTripsBetweenHostAndGuest) {
    auto fw = parseFileWrite(toJson(FileWriteRequest{"/w/a.txt", 0600u, "root"}));
    EXPECT_EQ(fw.path, "/w/a.txt");
    EXPECT_EQ(fw.mode, 0600u);
    EXPECT_EQ(fw.user, "root");
    EXPECT_FALSE(parseFileWrite(toJson(FileWriteRequest{"/w/b", std::nullopt, ""})).mode);

    auto fr = parseFileRead(toJson(FileReadRequest{"/w/a.txt", ""}));
    EXPECT_EQ(fr.path, "/w/a.txt");
    EXPECT_EQ(fr.user, "");

    auto scan =
        parseWorkspaceScan(toJson(WorkspaceScanRequest{"/w", {"sub/a", "b"}, true, "user"}));
    EXPECT_EQ(scan.skip, (std::vector<std::string>{"sub/a", "b"}));
    EXPECT_TRUE(scan.ignored);

    EXPECT_EQ(parseArchiveUnpack(toJson(ArchiveUnpackRequest{"/w", "user"})).path, "/w");
    EXPECT_EQ(parsePortRequest(Op::tunnel, toJson(PortRequest{Op::tunnel, 8080})).port, 8080u);
    EXPECT_EQ(parsePortRequest(Op::egress_listen, toJson(PortRequest{Op::egress_listen, 0})).port,
              0u);
    EXPECT_EQ(parseEgressAttach(toJson(EgressAttachRequest{1ull << 40})).connection, 1ull << 40);

    auto logs = parseProcessLogs(toJson(ProcessLogsRequest{"1234", true}));
    EXPECT_EQ(logs.id, "1234");
    EXPECT_TRUE(logs.follow);

    auto watch =
        parseFileWatch(Op::file_watch, toJson(FileWatchRequest{Op::file_watch, "/w", "inotify"}));
    EXPECT_EQ(watch.path, "/w");
    EXPECT_EQ(watch.mechanism, "inotify");
    EXPECT_EQ(
        parseFileWatch(Op::file_activity, toJson(FileWatchRequest{Op::file_activity, {}, {}})).op,
        Op::file_activity);

    auto reseed = parseReseed(toJson(ReseedRequest{std::string(64, 'a'), 42}));
    EXPECT_EQ(reseed.timeNs, 42u);

    FsRequest move{FsRequest::Action::move, "/w/a", "/w/b", false, "root"};
    auto fs = parseFsRequest(toJson(move));
    EXPECT_EQ(fs.action, FsRequest::Action::move);
    EXPECT_EQ(fs.to, "/w/b");
    EXPECT_EQ(fs.user, "root");

    ProcessCall stdinCall{Op::process_stdin, "77", "TERM", std::string("hi\n"), true};
    auto call = parseProcessCall(Op::process_stdin, toJson(stdinCall));
    EXPECT_EQ(call.id, "77");
    EXPECT_EQ(call.data, "hi\n");
    EXPECT_TRUE(call.eof);
    EXPECT_EQ(parseProcessCall(Op::process_signal,
                               toJson(ProcessCall{Op::process_signal, "77", "KILL", {}, false}))
                  .signal,
              "KILL");
}

TEST(GuestCalls, TheVariantCarriesEachRequestsOwnOp) {
    for (const auto& [request, op] : std::vector<std::pair<GuestRequest, std::string>>{
             {FileReadRequest{"/a", ""}, "file_read"},
             {PortRequest{Op::egress_listen, 1}, "egress_listen"},
             {FsRequest{}, "fs"},
             {ProcessCall{Op::process_get, "1", "TERM", {}, false}, "process_get"},
             {ReseedRequest{"ab", {}}, "reseed"}}) {
        auto j = nlohmann::json::parse(toJson(request));
        EXPECT_EQ(j.at("op"), op);
    }
}

// A field of the wrong type, or a required one missing, is a MessageError
// (the guest resets that stream), never a crash or a silent default.
TEST(GuestCalls, MalformedOpensAreRefused) {
    for (const char* bad :
         {"[]", "not json", R"({"op":"file_read"})", R"({"op":"file_read","path":7})",
          R"({"op":"file_read","path":"/a","user":["root"]})"})
        EXPECT_THROW(parseFileRead(bad), MessageError) << bad;
    EXPECT_THROW(parseFileWrite(R"({"path":"/a","mode":-1})"), MessageError);
    EXPECT_THROW(parseFileWrite(R"({"path":"/a","mode":4096})"), MessageError);
    EXPECT_THROW(parseFileWrite(R"({"path":"/a","mode":"0644"})"), MessageError);
    EXPECT_THROW(parseWorkspaceScan(R"({"path":"/w","skip":[1]})"), MessageError);
    EXPECT_THROW(parseWorkspaceScan(R"({"path":"/w","ignored":"yes"})"), MessageError);
    EXPECT_THROW(parsePortRequest(Op::tunnel, R"({"port":70000})"), MessageError);
    EXPECT_THROW(parsePortRequest(Op::tunnel, R"({})"), MessageError);
    EXPECT_THROW(parseEgressAttach(R"({"connection":"1"})"), MessageError);
    EXPECT_THROW(parseProcessLogs(R"({"follow":true})"), MessageError);
    EXPECT_THROW(parseFileWatch(Op::file_watch, R"({"path":null})"), MessageError);
    EXPECT_THROW(parseReseed(R"({"entropy":"ab","time_ns":-5})"), MessageError);
    EXPECT_THROW(parseFsRequest(R"({"action":"chmod","path":"/a"})"), MessageError);
    EXPECT_THROW(parseFsRequest(R"({"action":"move","path":"/a"})"), MessageError);
    EXPECT_THROW(parseProcessCall(Op::process_get, R"({})"), MessageError);
    EXPECT_THROW(parseProcessCall(Op::exec, R"({"id":"1"})"), MessageError);
    // What the host leaves to the handler: an empty signal (refused there)
    // and empty stdin data (which still reports a closed stdin).
    EXPECT_EQ(parseProcessCall(Op::process_signal, R"({"id":"1","signal":""})").signal, "");
    EXPECT_EQ(parseProcessCall(Op::process_signal, R"({"id":"1"})").signal, "TERM");
    EXPECT_EQ(parseProcessCall(Op::process_stdin, R"({"id":"1","data":""})").data, "");
    EXPECT_FALSE(parseProcessCall(Op::process_stdin, R"({"id":"1"})").data);
}

}  // namespace airlock::protocol
