#include "protocol/ControlFrames.hpp"

#include "protocol/FieldReader.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Messages.hpp"

namespace airlock::protocol {
namespace {
using nlohmann::json;

template <class... Ts>
struct Overloaded : Ts... {
    using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

json controlJson(const ControlFrame& frame) {
    return std::visit(
        Overloaded{
            [](const ExecStarted& f) { return toJsonValue(f); },
            [](const FileSize& f) { return toJsonValue(f); },
            [](const OutputSkipped& f) {
                return json{{"skipped", f.bytes}, {"channel", f.channel}};
            },
            [](const ManifestSize& f) { return json{{"bytes", f.bytes}}; },
            [](const ListenerReady& f) { return json{{"listening", f.port}}; },
            [](const ListenerAccepted& f) { return json{{"accepted", f.connections}}; },
            [](const TunnelConnected&) { return json{{"connected", true}}; },
            [](const TunnelEof&) { return json{{"eof", true}}; },
            [](const SignalRequest& f) { return json{{"signal", f.signal}}; },
            [](const ResizeRequest& f) {
                return json{{"resize", {{"rows", f.rows}, {"cols", f.cols}}}};
            },
            [](const LineToJudge& f) { return json{{"judge", {{"id", f.id}, {"line", f.line}}}}; },
            [](const LineVerdict& f) {
                return json{
                    {"verdict", {{"id", f.id}, {"state", f.state}, {"message", f.message}}}};
            },
        },
        frame);
}
}  // namespace

std::string controlPayload(const ControlFrame& frame) { return jsonText(controlJson(frame)); }

ControlFrame parseControl(const std::string& payload) {
    auto f = FieldReader::parse(payload, "control frame");
    auto j = json::parse(payload, nullptr, false);  // valid: FieldReader parsed it
    auto only = [&](std::size_t keys) {
        if (j.size() != keys) f.fail("a control frame has exactly its own fields");
    };
    auto yes = [&](const char* key) {
        if (!f.boolean(key)) f.fail(std::string("'") + key + "' must be true");
    };
    if (f.has("pid")) {
        only(1);
        return parseExecStarted(payload);
    }
    if (f.has("size")) {
        only(1);
        return parseFileSize(payload);
    }
    if (f.has("skipped")) {
        only(2);
        return OutputSkipped{f.requiredNumber("skipped", INT64_MAX),
                             static_cast<std::uint8_t>(f.requiredNumber("channel", 255))};
    }
    if (f.has("bytes")) {
        only(1);
        return ManifestSize{f.requiredNumber("bytes", INT64_MAX)};
    }
    if (f.has("listening")) {
        only(1);
        auto port = f.requiredNumber("listening", 65535);
        if (port == 0) f.fail("'listening' must be a port");
        return ListenerReady{static_cast<std::uint16_t>(port)};
    }
    if (f.has("accepted")) {
        only(1);
        return ListenerAccepted{f.requiredNumber("accepted", INT64_MAX)};
    }
    if (f.has("connected")) {
        only(1);
        yes("connected");
        return TunnelConnected{};
    }
    if (f.has("eof")) {
        only(1);
        yes("eof");
        return TunnelEof{};
    }
    if (f.has("signal")) {
        only(1);
        auto name = f.string("signal", true, kMaxSignalName);
        if (name.empty()) f.fail("'signal' names no signal");
        return SignalRequest{name};
    }
    if (f.has("resize")) {
        only(1);
        const json& size = j["resize"];
        FieldReader r(size, "resize");
        if (size.size() != 2) r.fail("a resize has rows and cols");
        auto rows = r.requiredNumber("rows", kMaxPtySide), cols = r.requiredNumber("cols", kMaxPtySide);
        if (rows == 0 || cols == 0) r.fail("rows and cols must be at least 1");
        return ResizeRequest{static_cast<unsigned>(rows), static_cast<unsigned>(cols)};
    }
    if (f.has("judge")) {
        only(1);
        const json& body = j["judge"];
        FieldReader r(body, "judge");
        if (body.size() != 2) r.fail("a line to judge has id and line");
        auto id = r.requiredNumber("id", UINT32_MAX);
        return LineToJudge{static_cast<std::uint32_t>(id), r.string("line", true, kMaxJudgedLine)};
    }
    if (f.has("verdict")) {
        only(1);
        const json& body = j["verdict"];
        FieldReader r(body, "verdict");
        if (body.size() != 3) r.fail("a verdict has id, state and message");
        auto id = r.requiredNumber("id", UINT32_MAX);
        auto state = r.string("state", true, 16);
        if (state != "allow" && state != "deny" && state != "pending")
            r.fail("'state' is allow, deny or pending");
        return LineVerdict{static_cast<std::uint32_t>(id), state,
                           r.string("message", true, kMaxVerdictMessage)};
    }
    f.fail("not a control frame this protocol has");
}

}  // namespace airlock::protocol
