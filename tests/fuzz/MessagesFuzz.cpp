// libFuzzer target: every message parser on arbitrary payloads. Malformed
// input may only ever raise MessageError; what parses must round-trip.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "protocol/ControlFrames.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/Messages.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/WorkspaceManifest.hpp"
#include "evidence/BundlePath.hpp"

namespace {
// A guest-chosen name as an evidence bundle carries it: a relative path with
// no empty, "." or ".." part and none of the bytes tar sums or HTML escape.
void checkBundlePath(const std::string& name) {
    std::string p = airlock::bundleSafePath(name);
    if (p.empty() || p[0] == '/') std::abort();
    std::size_t at = 0;
    while (true) {
        auto end = p.find('/', at);
        std::string part = p.substr(at, end == std::string::npos ? end : end - at);
        if (part.empty() || part == "." || part == "..") std::abort();
        if (end == std::string::npos) break;
        at = end + 1;
    }
    for (char c : p)
        if (c == '\\' || c == '\n' || c == '"' || c == '<' || c == '>' || c == '&' || c == '\0')
            std::abort();
}
}  // namespace

using namespace airlock::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string payload(reinterpret_cast<const char*>(data), size);
    try {
        auto r = parseExecRequest(payload);
        auto again = parseExecRequest(toJson(r));
        if (again.argv != r.argv || again.env != r.env || again.timeout_ms != r.timeout_ms)
            std::abort();
    } catch (const MessageError&) {
    }
    try {
        parseHello(payload);
    } catch (const MessageError&) {
    }
    // A control frame that parses is written back to the same frame.
    try {
        auto frame = parseControl(payload);
        if (parseControl(controlPayload(frame)).index() != frame.index()) std::abort();
        if (controlPayload(parseControl(controlPayload(frame))) != controlPayload(frame))
            std::abort();
    } catch (const MessageError&) {
    }
    try {
        parseHelloAck(payload);
    } catch (const MessageError&) {
    }
    try {
        parseExecResult(payload);
    } catch (const MessageError&) {
    }
    try {
        parseResetInfo(payload);
    } catch (const MessageError&) {
    }
    openOp(payload);
    // The guest's readers of every other open: MessageError or a request
    // that reads back the same.
    auto roundTrips = [&](auto parse) {
        try {
            auto r = parse(payload);
            auto again = parse(toJson(r));
            if (toJson(again) != toJson(r)) std::abort();
        } catch (const MessageError&) {
        }
    };
    roundTrips([](const std::string& p) { return parseFileWrite(p); });
    roundTrips([](const std::string& p) { return parseFileRead(p); });
    roundTrips([](const std::string& p) { return parseWorkspaceScan(p); });
    roundTrips([](const std::string& p) { return parseArchiveUnpack(p); });
    roundTrips([](const std::string& p) { return parsePortRequest(Op::tunnel, p); });
    roundTrips([](const std::string& p) { return parseEgressAttach(p); });
    roundTrips([](const std::string& p) { return parseProcessLogs(p); });
    roundTrips([](const std::string& p) { return parseFileWatch(Op::file_watch, p); });
    roundTrips([](const std::string& p) { return parseReseed(p); });
    roundTrips([](const std::string& p) { return parseFsRequest(p); });
    roundTrips([](const std::string& p) { return parseProcessCall(Op::process_stdin, p); });
    roundTrips([](const std::string& p) { return parseProcessCall(Op::process_signal, p); });
    // The host's readers of the guest's answers: MessageError or a result
    // that reads back the same.
    auto answerRoundTrips = [&](auto parse) {
        try {
            auto r = parse(payload);
            // As the agent writes it: names that are not UTF-8 go as hex.
            auto again = parse(airlock::jsonText(toJsonValue(r)));
            if (toJsonValue(again) != toJsonValue(r)) std::abort();
        } catch (const MessageError&) {
        }
    };
    auto asJson = [](const std::string& p) { return nlohmann::json::parse(p, nullptr, false); };
    answerRoundTrips(
        [&](const std::string& p) { return parseFsResult(FsRequest::Action::list, asJson(p)); });
    answerRoundTrips(
        [&](const std::string& p) { return parseFsResult(FsRequest::Action::remove, asJson(p)); });
    try {
        auto listing = parseFsResult(FsRequest::Action::list, asJson(payload));
        if (listing.entries)
            for (const auto& e : *listing.entries) {
                checkBundlePath(e.name);
                checkBundlePath(e.path);
            }
    } catch (const MessageError&) {
    }
    checkBundlePath(payload);
    answerRoundTrips([&](const std::string& p) { return parseProcessInfo(asJson(p)); });
    answerRoundTrips([&](const std::string& p) { return parseProcessList(asJson(p)); });
    answerRoundTrips([](const std::string& p) { return parseWrittenFile(p); });
    answerRoundTrips([](const std::string& p) { return parseFileSize(p); });
    answerRoundTrips([](const std::string& p) { return parseExecStarted(p); });
    answerRoundTrips([&](const std::string& p) { return parseFileActivity(asJson(p)); });
    // A workspace scan's records: MessageError, or what writes back the same.
    try {
        auto m = parseWorkspaceManifest(payload);
        std::string again;
        for (const auto& f : m.files) appendManifestFile(again, f);
        for (const auto& i : m.ignored) appendManifestIgnored(again, i, false);
        auto back = parseWorkspaceManifest(again);
        if (back.ignored != m.ignored || back.files.size() != m.files.size()) std::abort();
        for (std::size_t i = 0; i < m.files.size(); ++i)
            if (back.files[i].path != m.files[i].path || back.files[i].id != m.files[i].id ||
                back.files[i].mode != m.files[i].mode ||
                back.files[i].linkTarget != m.files[i].linkTarget)
                std::abort();
    } catch (const MessageError&) {
    }
    return 0;
}
