#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Messages.hpp"

namespace airlock::protocol {
namespace {
using json = nlohmann::json;
using Action = FsRequest::Action;

FileEntry anEntry(const std::string& path = "/w/a.txt",
                  FileEntry::Type type = FileEntry::Type::file) {
    return {path.substr(path.rfind('/') + 1), path, type, 9, "0644",
            "2026-01-02T03:04:05Z",           1000, 1000};
}

// What the guest sends, as the host reads it back (through text, as on the wire).
json wire(const json& j) { return json::parse(j.dump()); }

const std::string kWhen = "2026-01-02T03:04:05Z";

std::string failureOf(const std::function<void()>& parse) {
    try {
        parse();
    } catch (const MessageError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(GuestResults, EveryResultRoundTripsBetweenGuestAndHost) {
    FsResult listing{
        anEntry("/w", FileEntry::Type::directory),
        std::vector<FileEntry>{anEntry("/w/a.txt"), anEntry("/w/b", FileEntry::Type::symlink)},
        true,
        {}};
    auto back = parseFsResult(Action::list, wire(toJsonValue(listing)));
    ASSERT_TRUE(back.entry && back.entries);
    EXPECT_EQ(back.entry->type, FileEntry::Type::directory);
    ASSERT_EQ(back.entries->size(), 2u);
    EXPECT_EQ((*back.entries)[1].type, FileEntry::Type::symlink);
    EXPECT_EQ((*back.entries)[0].mtime, "2026-01-02T03:04:05Z");
    EXPECT_TRUE(back.truncated);
    EXPECT_EQ(toJsonValue(back), toJsonValue(listing));

    auto stat = parseFsResult(Action::stat, wire(toJsonValue(FsResult{anEntry(), {}, false, {}})));
    EXPECT_EQ(stat.entry->size, 9u);
    EXPECT_EQ(stat.entry->uid, 1000u);
    EXPECT_FALSE(stat.entries);
    EXPECT_EQ(
        parseFsResult(Action::remove, wire(toJsonValue(FsResult{{}, {}, false, "/w/x"}))).removed,
        "/w/x");

    auto written = parseWrittenFile(toJsonValue(WrittenFile{"/w/a.txt", 9, anEntry()}).dump());
    ASSERT_TRUE(written.entry);
    EXPECT_EQ(written.path, "/w/a.txt");
    auto bare = parseWrittenFile(toJsonValue(WrittenFile{"/w/a.txt", 12, {}}).dump());
    EXPECT_FALSE(bare.entry);
    EXPECT_EQ(bare.size, 12u);

    EXPECT_EQ(parseFileSize(toJsonValue(FileSize{1ull << 40}).dump()).size, 1ull << 40);
    EXPECT_EQ(parseExecStarted(toJsonValue(ExecStarted{4242}).dump()).pid, 4242u);

    ProcessInfo exited{77, {"/bin/sh", "-c", "exit 3"}, false, "2026-01-02T03:04:05Z", 5, 3, 9};
    auto p = parseProcessInfo(wire(toJsonValue(exited)));
    EXPECT_EQ(p.pid, 77u);
    EXPECT_EQ(p.cmd, exited.cmd);
    EXPECT_FALSE(p.running);
    EXPECT_EQ(p.exitCode, 3);
    EXPECT_EQ(p.signal, 9);
    EXPECT_EQ(toJsonValue(p)["id"], "77");
    auto list = parseProcessList(
        wire(toJsonValue(ProcessList{{exited, ProcessInfo{78, {"x"}, true, kWhen, 0, {}, {}}}})));
    ASSERT_EQ(list.processes.size(), 2u);
    EXPECT_TRUE(list.processes[1].running);
    EXPECT_FALSE(list.processes[1].exitCode);
}

TEST(GuestResults, FieldsTheHostDoesNotKnowAreDropped) {
    json j = toJsonValue(anEntry());
    j["note"] = "from the guest";
    j["entries"] = json::array();  // not a list: entries are no stat's
    EXPECT_EQ(toJsonValue(parseFsResult(Action::stat, wire(j))),
              toJsonValue(FsResult{anEntry(), {}, false, {}}));
    json p = toJsonValue(ProcessInfo{5, {"x"}, true, kWhen, 0, {}, {}});
    p["exit_code"] = 0;  // a running process has none: not passed on
    EXPECT_FALSE(parseProcessInfo(wire(p)).exitCode);
}

// Root in the guest writes these: each is refused with MessageError, so the
// host answers 502 and never passes the shape on.
TEST(GuestResults, HostileEntriesAreRefused) {
    auto entryWith = [](const char* key, json value) {
        json j = toJsonValue(anEntry());
        if (value.is_discarded())
            j.erase(key);
        else
            j[key] = std::move(value);
        return j;
    };
    const json missing = json(json::value_t::discarded);
    std::vector<std::pair<std::string, json>> cases = {
        {"a string size", entryWith("size", "9")},
        {"a negative size", entryWith("size", -1)},
        {"no size", entryWith("size", missing)},
        {"a relative path", entryWith("path", "w/a.txt")},
        {"an empty name", entryWith("name", "")},
        {"a name past 255 bytes", entryWith("name", std::string(256, 'n'))},
        {"a path past 4096 bytes", entryWith("path", "/" + std::string(4096, 'p'))},
        {"an unknown type", entryWith("type", "fifo")},
        {"a type of the wrong kind", entryWith("type", 1)},
        {"a mode of five digits", entryWith("mode", "10644")},
        {"a mode with an 8", entryWith("mode", "0648")},
        {"a numeric mode", entryWith("mode", 420)},
        {"a long mtime", entryWith("mtime", std::string(33, '1'))},
        {"text for an mtime", entryWith("mtime", "s3cr3t-Value-0000000")},
        {"an mtime without its Z", entryWith("mtime", "2026-01-02T03:04:05+")},
        {"an mtime one short", entryWith("mtime", "2026-01-02T03:04:5Z")},
        {"a numeric mtime", entryWith("mtime", 1700000000)},
        {"a uid past 32 bits", entryWith("uid", 1ull << 32)},
        {"an object for a gid", entryWith("gid", json::object())},
        {"not an object", json::array({1, 2})},
    };
    for (const auto& [name, j] : cases) {
        EXPECT_NE(failureOf([&] { parseFsResult(Action::stat, wire(j)); }), "") << name;
        EXPECT_NE(failureOf([&] { parseFileEntry(wire(j)); }), "") << name;
    }
    // A list's entries: bounded, each an entry, and only under a directory.
    json dir = toJsonValue(anEntry("/w", FileEntry::Type::directory));
    json tooMany = dir;
    tooMany["entries"] = json::array();
    for (std::size_t i = 0; i <= kMaxListEntries; ++i)
        tooMany["entries"].push_back(toJsonValue(anEntry()));
    EXPECT_NE(failureOf([&] { parseFsResult(Action::list, tooMany); }), "");
    json badChild = dir;
    badChild["entries"] = json::array({toJsonValue(anEntry()), json{{"name", "x"}}});
    EXPECT_NE(failureOf([&] { parseFsResult(Action::list, wire(badChild)); }), "");
    json fileWithEntries = toJsonValue(anEntry());
    fileWithEntries["entries"] = json::array();
    EXPECT_NE(failureOf([&] { parseFsResult(Action::list, wire(fileWithEntries)); }), "");
    json truncatedText = dir;
    truncatedText["truncated"] = "yes";
    EXPECT_NE(failureOf([&] { parseFsResult(Action::list, wire(truncatedText)); }), "");
    // A remove answers its path, nothing else.
    EXPECT_NE(failureOf([&] { parseFsResult(Action::remove, wire(toJsonValue(anEntry()))); }), "");
    EXPECT_NE(failureOf([&] { parseFsResult(Action::remove, json{{"removed", 1}}); }), "");
    // The message names the field.
    EXPECT_NE(failureOf([&] { parseFileEntry(wire(entryWith("size", "9"))); }).find("'size'"),
              std::string::npos);
}

TEST(GuestResults, HostileProcessesAndStreamAnswersAreRefused) {
    auto processWith = [](const char* key, json value) {
        json j = toJsonValue(ProcessInfo{5, {"x"}, false, kWhen, 0, 0, {}});
        j[key] = std::move(value);
        return j;
    };
    std::vector<std::pair<std::string, json>> cases = {
        {"an id that is not its pid", processWith("id", "6")},
        {"pid 0", processWith("pid", 0)},
        {"a pid past Linux's limit", processWith("pid", 1u << 23)},
        {"a pid at Linux's limit", processWith("pid", 1u << 22)},
        {"text for a start time", processWith("started_at", "s3cr3t-Value-0000000")},
        {"an unknown state", processWith("state", "zombie")},
        {"a command of numbers", processWith("cmd", json::array({1}))},
        {"a command string", processWith("cmd", "sh")},
        {"an exit code past int", processWith("exit_code", 1ll << 40)},
        {"signal 0", processWith("signal", 0)},
        {"a long start time", processWith("started_at", std::string(64, '2'))},
        {"negative output", processWith("output_bytes", -5)},
    };
    for (const auto& [name, j] : cases)
        EXPECT_NE(failureOf([&] { parseProcessInfo(wire(j)); }), "") << name;
    // The highest pid Linux gives still reads.
    auto highest = toJsonValue(ProcessInfo{(1u << 22) - 1, {"x"}, true, kWhen, 0, {}, {}});
    EXPECT_EQ(parseProcessInfo(wire(highest)).pid, (1u << 22) - 1);
    EXPECT_EQ(parseExecStarted(R"({"pid":4194303})").pid, 4194303u);
    EXPECT_NE(failureOf([&] { parseProcessList(json::object()); }), "");
    EXPECT_NE(failureOf([&] { parseProcessList(json{{"processes", json::array({1})}}); }), "");
    json many{{"processes", json::array()}};
    for (std::size_t i = 0; i <= kMaxGuestProcesses; ++i)
        many["processes"].push_back(toJsonValue(ProcessInfo{5, {"x"}, true, kWhen, 0, {}, {}}));
    EXPECT_NE(failureOf([&] { parseProcessList(many); }), "");

    for (const char* payload : {"", "[]", R"({"size":"1"})", R"({"size":-1})", R"({})"})
        EXPECT_NE(failureOf([&] { parseFileSize(payload); }), "") << payload;
    for (const char* payload : {R"({"pid":0})", R"({"pid":"7"})", R"({"pid":4194304})", "nope"})
        EXPECT_NE(failureOf([&] { parseExecStarted(payload); }), "") << payload;
    for (const char* payload : {R"({"path":"/a"})", R"({"size":1})", R"({"path":3,"size":1})",
                                R"({"path":"/a","size":1,"type":"file"})"})
        EXPECT_NE(failureOf([&] { parseWrittenFile(payload); }), "") << payload;
}

}  // namespace airlock::protocol

namespace airlock::protocol {
namespace {
FileActivityReport anActivityReport() {
    FileActivityReport r;
    r.watching = true;
    r.root = "/workspace";
    r.mechanism = "fanotify";
    r.nowMs = 1'780'000'000'000;
    r.dropped = 2;
    r.overflow = true;
    r.paths = {PathActivity{"src/out.txt", 1, 2, 10, 20, 11, 19, {"ex-1", "ex-2"}, "ex-2"},
               PathActivity{"README.md", 3, 0, 5, 6, 0, 0, {}, ""}};
    return r;
}
}  // namespace

TEST(GuestResults, FileActivityRoundTripsAndANotWatchingAgentSaysOnlyThat) {
    auto sent = anActivityReport();
    auto back = parseFileActivity(wire(toJsonValue(sent)));
    EXPECT_EQ(toJsonValue(back), toJsonValue(sent));
    ASSERT_EQ(back.paths.size(), 2u);
    EXPECT_EQ(back.paths[0].lastWriteMs, 19);
    EXPECT_EQ(back.paths[0].execs, (std::vector<std::string>{"ex-1", "ex-2"}));
    EXPECT_EQ(back.paths[0].lastWriter, "ex-2") << "whose write came last travels with the path";
    EXPECT_EQ(back.paths[1].firstWriteMs, 0) << "an unwritten path has no write times";
    EXPECT_EQ(back.nowMs, sent.nowMs);
    EXPECT_EQ(toJsonValue(FileActivityReport{}), json({{"watching", false}}));
    EXPECT_FALSE(parseFileActivity(json{{"watching", false}, {"paths", 7}}).watching)
        << "nothing else is read from an agent that is not watching";
}

TEST(GuestResults, OnlyASymlinkHasATargetAndItIsAbsoluteAndResolved) {
    auto link = anEntry("/w/l", FileEntry::Type::symlink);
    link.target = "/w/a.txt";
    link.targetType = FileEntry::Type::file;
    link.targetMode = "0600";
    auto back = parseFileEntry(wire(toJsonValue(link)));
    EXPECT_EQ(back.target, "/w/a.txt");
    EXPECT_EQ(back.targetType, FileEntry::Type::file);
    EXPECT_EQ(back.targetMode, "0600");
    auto bent = [&](const char* field, json value) {
        auto j = toJsonValue(link);
        j[field] = std::move(value);
        return failureOf([&] { parseFileEntry(wire(j)); });
    };
    EXPECT_NE(bent("target", "relative"), "");
    EXPECT_NE(bent("target_type", "symlink"), "") << "a resolved target is never a link";
    EXPECT_NE(bent("target_type", "socket"), "");
    EXPECT_NE(bent("target_mode", "rwx"), "");
    EXPECT_NE(bent("type", "file"), "") << "only a symlink has a target";
    EXPECT_NE(bent("target", std::string(5000, 'a')), "");
}

// A file's user metadata (E2B's): what the guest reads back is printable
// ASCII within the set's bound, or the entry is refused; the upload's own set
// is bounded the same way on the way in.
TEST(GuestResults, FileMetadataRoundTripsAndBentSetsAreRefused) {
    auto entry = anEntry();
    entry.metadata = {{"owner", "team-a"}, {"empty", ""}};
    auto back = parseFileEntry(wire(toJsonValue(entry)));
    EXPECT_EQ(back.metadata, entry.metadata);
    EXPECT_FALSE(toJsonValue(anEntry()).contains("metadata")) << "none: no field";
    auto bent = [&](json metadata) {
        auto j = toJsonValue(anEntry());
        j["metadata"] = std::move(metadata);
        return failureOf([&] { parseFileEntry(wire(j)); });
    };
    EXPECT_NE(bent(json{{"k", "line\nbreak"}}), "") << "printable ASCII only";
    EXPECT_NE(bent(json{{"", "v"}}), "");
    EXPECT_NE(bent(json{{"k", 7}}), "");
    EXPECT_NE(bent(json::array()), "");
    EXPECT_NE(bent(json{{"k", std::string(kMaxFileMetadataBytes, 'v')}}), "") << "over the set's bound";
    EXPECT_NE(bent(json{{std::string(kMaxFileMetadataKey + 1, 'k'), "v"}}), "");
    json many = json::object();
    for (int i = 0; i < 500; ++i) many["k" + std::to_string(i)] = "";
    EXPECT_NE(bent(many), "") << "too many pairs";
    EXPECT_EQ(bent(json{{std::string(kMaxFileMetadataKey, 'k'), "v"}}), "") << "the longest key";

    FileWriteRequest upload{"/w/a.txt", std::nullopt, "user", {{"a", "1"}, {"b", "2"}}};
    EXPECT_EQ(parseFileWrite(toJson(upload)).metadata, upload.metadata);
    EXPECT_FALSE(parseFileWrite(toJson(upload)).asRoot);
    upload.asRoot = true;
    EXPECT_TRUE(parseFileWrite(toJson(upload)).asRoot);
    EXPECT_EQ(fileMetadataProblem({{"k", std::string(kMaxFileMetadataBytes - 10, 'v')}}), "");
    EXPECT_NE(fileMetadataProblem({{"k", std::string(kMaxFileMetadataBytes - 9, 'v')}}), "")
        << "prefix + key + value per pair";
    auto refusedUpload = json::parse(toJson(upload));
    refusedUpload["metadata"]["c"] = "\x7f";
    EXPECT_NE(failureOf([&] { parseFileWrite(refusedUpload.dump()); }), "");
}

TEST(GuestResults, WatchRecordsRoundTripAndHostileOnesAreRefused) {
    WatchRecord created{WatchRecord::Kind::create, "dir/a.txt", anEntry("/w/dir/a.txt")};
    auto back = parseWatchRecord(toJsonValue(created).dump());
    EXPECT_EQ(back.kind, WatchRecord::Kind::create);
    EXPECT_EQ(back.name, "dir/a.txt");
    ASSERT_TRUE(back.entry);
    EXPECT_EQ(back.entry->size, 9u);
    EXPECT_EQ(parseWatchRecord(R"({"kind":"started"})").kind, WatchRecord::Kind::started);
    auto refused = [](const std::string& line) {
        return failureOf([&] { parseWatchRecord(line); });
    };
    EXPECT_NE(refused("not json"), "");
    EXPECT_NE(refused(R"({"kind":"explode","name":"a"})"), "");
    EXPECT_NE(refused(R"({"kind":"create"})"), "") << "a change names its path";
    EXPECT_NE(refused(R"({"kind":"create","name":"/etc/passwd"})"), "") << "relative only";
    auto removed = toJsonValue(created);
    removed["kind"] = "remove";
    EXPECT_NE(refused(removed.dump()), "") << "a removed path has no entry";
    EXPECT_NE(refused(R"({"kind":"write","name":"a","entry":{"name":"a"}})"), "");
    EXPECT_NE(refused(std::string(kMaxWatchLine + 1, ' ')), "");
}

TEST(GuestResults, HostileFileActivityIsRefusedAndABadPathOnlyCostsItsEntry) {
    auto with = [](const std::function<void(json&)>& change) {
        json j = toJsonValue(anActivityReport());
        change(j);
        return j;
    };
    std::vector<std::pair<std::string, json>> refused = {
        {"no paths", with([](json& j) { j.erase("paths"); })},
        {"paths not an array", with([](json& j) { j["paths"] = "x"; })},
        {"a path entry that is no object", with([](json& j) { j["paths"][0] = 1; })},
        {"an unknown mechanism", with([](json& j) { j["mechanism"] = "s3cr3t"; })},
        {"a relative root", with([](json& j) { j["root"] = "w"; })},
        {"a negative now", with([](json& j) { j["now_ms"] = -1; })},
        {"dropped as text", with([](json& j) { j["dropped"] = "2"; })},
    };
    for (const auto& [name, j] : refused)
        EXPECT_NE(failureOf([&] { parseFileActivity(wire(j)); }), "") << name;

    // One bad entry is skipped and counted; the others stay.
    std::vector<std::pair<std::string, std::function<void(json&)>>> badEntries = {
        {"an absolute path", [](json& p) { p["path"] = "/etc/passwd"; }},
        {"an empty path", [](json& p) { p["path"] = ""; }},
        {"a NUL in a path", [](json& p) { p["path"] = std::string("a\0b", 3); }},
        {"a path longer than Linux's",
         [](json& p) { p["path"] = std::string(kMaxGuestPath + 1, 'a'); }},
        {"reads as text", [](json& p) { p["reads"] = "1"; }},
        {"negative writes", [](json& p) { p["writes"] = -1; }},
        {"writes without write times", [](json& p) { p.erase("first_write_ms"); }},
        {"too many traces",
         [](json& p) {
             p["execs"] = json::array();
             for (std::size_t i = 0; i <= kMaxActivityExecs; ++i) p["execs"].push_back("ex");
         }},
        {"a long trace",
         [](json& p) { p["execs"] = json::array({std::string(kMaxTraceBytes + 1, 'x')}); }},
        {"a trace of numbers", [](json& p) { p["execs"] = json::array({1}); }},
    };
    for (const auto& [name, change] : badEntries) {
        json j = toJsonValue(anActivityReport());
        change(j["paths"][0]);
        auto r = parseFileActivity(wire(j));
        ASSERT_EQ(r.paths.size(), 1u) << name;
        EXPECT_EQ(r.paths[0].path, "README.md") << name;
        EXPECT_EQ(r.dropped, anActivityReport().dropped + 1) << name;
    }

    json many = toJsonValue(anActivityReport());
    many["paths"] = json::array();
    for (std::size_t i = 0; i <= kMaxActivityPaths; ++i)
        many["paths"].push_back(toJsonValue(anActivityReport())["paths"][1]);
    EXPECT_NE(failureOf([&] { parseFileActivity(wire(many)); }), "")
        << "more paths than the agent keeps";
    many["paths"].erase(many["paths"].size() - 1);
    EXPECT_EQ(parseFileActivity(wire(many)).paths.size(), kMaxActivityPaths);
}

}  // namespace airlock::protocol

namespace airlock::protocol {

TEST(GuestResults, RecordIntegrityANameThatIsNotUtf8RoundTripsByteForByte) {
    // Linux allows any bytes but '/' and NUL in a name; JSON text holds UTF-8.
    const std::string name = "bad\xff\xfeutf8 \"<q>\\.txt", path = "/w/reports/" + name;
    FsResult listing{anEntry("/w/reports", FileEntry::Type::directory),
                     std::vector<FileEntry>{anEntry(path)}, false, {}};
    auto text = jsonText(toJsonValue(listing));  // as the agent sends it
    auto back = parseFsResult(Action::list, json::parse(text));
    ASSERT_TRUE(back.entries && back.entries->size() == 1);
    EXPECT_EQ((*back.entries)[0].name, name);
    EXPECT_EQ((*back.entries)[0].path, path);
    // The host asks for it back under the same bytes.
    EXPECT_EQ(parseFileRead(toJson(FileReadRequest{path, "user"})).path, path);
    EXPECT_EQ(parseFileRead(toJson(FileReadRequest{"/w/plain.txt", ""})).path, "/w/plain.txt");
    // A hostile hex form is refused, and still cannot smuggle a '/' into a name.
    json bad = toJsonValue(listing);
    bad["entries"][0]["name_hex"] = "zz";
    EXPECT_THROW(parseFsResult(Action::list, bad), MessageError);
    bad["entries"][0]["name_hex"] = "612f62";  // "a/b"
    auto slash = parseFsResult(Action::list, bad);
    EXPECT_EQ((*slash.entries)[0].name, "a/b") << "read as sent; the host's walker refuses it";
    bad["entries"][0]["name_hex"] = std::string(2 * 256, 'a');
    EXPECT_THROW(parseFsResult(Action::list, bad), MessageError) << "over 255 bytes";
}

}  // namespace airlock::protocol

namespace airlock::protocol {
namespace {

TEST(GuestUsage, RoundTripsAndRefusesFiguresThatCannotBe) {
    GuestUsage u{2, 1000, 400, 512u << 20, 300u << 20, 100u << 20, 6ull << 30, 5ull << 30, 42};
    auto back = parseGuestUsage(toJsonValue(u));
    EXPECT_EQ(back.cpuCount, 2u);
    EXPECT_EQ(back.idleTicks, 400u);
    EXPECT_EQ(back.memAvailable, 300u << 20);
    EXPECT_EQ(back.diskAvailable, 5ull << 30);
    EXPECT_EQ(back.nowMs, 42);
    auto bent = [&](const char* field, nlohmann::json value) {
        auto j = toJsonValue(u);
        j[field] = std::move(value);
        return j;
    };
    // A guest's root can send anything: each of these is refused whole.
    for (const auto& j : {bent("cpu_count", 0), bent("idle_ticks", 1001),
                          bent("mem_available", 513u << 20), bent("mem_cached", 513u << 20),
                          bent("disk_available", 7ull << 30), bent("cpu_ticks", -1),
                          bent("mem_total", "lots"), bent("cpu_count", 5000)})
        EXPECT_THROW(parseGuestUsage(j), MessageError) << j;
    auto missing = toJsonValue(u);
    missing.erase("disk_total");
    EXPECT_THROW(parseGuestUsage(missing), MessageError);
}

}  // namespace
}  // namespace airlock::protocol
