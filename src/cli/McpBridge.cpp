#include "cli/McpBridge.hpp"

#include <chrono>
#include <cstdlib>
#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>
#include <thread>

namespace airlock::cli {
using nlohmann::json;

namespace {
// Tool calls may wait for a human: the server's keepalives hold the line.
constexpr std::chrono::hours kCallTimeout{24};

std::string errorLine(const json& id, int code, const std::string& message) {
    json j{{"jsonrpc", "2.0"}, {"error", {{"code", code}, {"message", message}}}};
    if (!id.is_null()) j["id"] = id;
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}
}  // namespace

McpBridge::McpBridge(HttpClient client, std::istream& in, std::ostream& out, std::ostream& err)
    : client_(std::move(client)), in_(in), out_(out), err_(err) {}

void McpBridge::writeLine(const std::string& message) {
    std::lock_guard lock(outMutex_);
    out_ << message << "\n";
    out_.flush();
}

McpBridge::Posted McpBridge::post(const std::string& line, const std::string& id, bool withSession) {
    HttpClient::Headers headers{{"content-type", "application/json"},
                                {"accept", "application/json, text/event-stream"},
                                {"authorization", "Bearer " + client_.apiKey()}};
    {
        std::lock_guard lock(stateMutex_);
        if (withSession && !sessionId_.empty()) headers["mcp-session-id"] = sessionId_;
        if (withSession && !version_.empty()) headers["mcp-protocol-version"] = version_;
    }
    Posted posted;
    bool events = false;
    std::string body, pending;
    auto emit = [&](const std::string& message) {
        auto j = json::parse(message, nullptr, false);
        if (j.is_object() && j.contains("id") && !j.contains("method") && j["id"].dump() == id)
            posted.answered = true;
        writeLine(message);
    };
    client_.exchange(
        "POST", "/mcp", line, headers,
        [&](int status, const HttpClient::Headers& got) {
            posted.status = status;
            if (auto it = got.find("mcp-session-id"); it != got.end()) posted.sessionId = it->second;
            auto type = got.find("content-type");
            events = type != got.end() && type->second.find("text/event-stream") != std::string::npos;
        },
        [&](const char* data, std::size_t n) {
            if (!events) {
                if (body.size() < (64u << 20)) body.append(data, n);
                return;
            }
            // Server-Sent Events: each event's data lines are one message.
            pending.append(data, n);
            if (pending.size() > (16u << 20))
                throw std::runtime_error("an event of the answer is larger than 16 MiB");
            for (std::size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
                std::string event = pending.substr(0, end);
                pending.erase(0, end + 2);
                std::string message;
                std::size_t at = 0;
                while (at <= event.size()) {
                    auto nl = event.find('\n', at);
                    std::string l = event.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
                    if (!l.empty() && l.back() == '\r') l.pop_back();
                    if (l.rfind("data:", 0) == 0)
                        message += l.substr(l.size() > 5 && l[5] == ' ' ? 6 : 5);
                    if (nl == std::string::npos) break;
                    at = nl + 1;
                }
                if (!message.empty()) emit(message);
            }
        },
        std::chrono::duration_cast<std::chrono::seconds>(kCallTimeout));
    if (!events && !body.empty() && posted.status != 404) {
        while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
        if (json::accept(body)) emit(body);
    }
    return posted;
}

void McpBridge::reopen() {
    std::string init;
    {
        std::lock_guard lock(stateMutex_);
        init = initializeLine_;
        sessionId_.clear();
    }
    if (init.empty()) return;
    // The client's own initialize again; its answer is not the client's.
    HttpClient::Headers headers{{"content-type", "application/json"},
                                {"accept", "application/json, text/event-stream"},
                                {"authorization", "Bearer " + client_.apiKey()}};
    std::string session;
    client_.exchange(
        "POST", "/mcp", init, headers,
        [&](int, const HttpClient::Headers& got) {
            if (auto it = got.find("mcp-session-id"); it != got.end()) session = it->second;
        },
        [](const char*, std::size_t) {}, std::chrono::seconds(30));
    if (session.empty()) return;
    headers["mcp-session-id"] = session;
    client_.exchange("POST", "/mcp", R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                     headers, [](int, const HttpClient::Headers&) {},
                     [](const char*, std::size_t) {}, std::chrono::seconds(30));
    std::lock_guard lock(stateMutex_);
    sessionId_ = session;
}

void McpBridge::handle(const std::string& line) {
    auto j = json::parse(line, nullptr, false);
    bool request = j.is_object() && j.contains("id") && j.contains("method");
    json id = request ? j["id"] : json();
    std::string idText = request ? id.dump() : "";
    std::string method = j.is_object() && j.contains("method") && j["method"].is_string()
                             ? j["method"].get<std::string>()
                             : "";
    bool initialize = method == "initialize";
    if (initialize) {
        std::lock_guard lock(stateMutex_);
        initializeLine_ = line;
    }
    if (method == "notifications/cancelled" && j.contains("params") && j["params"].is_object() &&
        j["params"].contains("requestId")) {
        std::lock_guard lock(stateMutex_);
        if (cancelled_.size() > 1024) cancelled_.clear();
        cancelled_.insert(j["params"]["requestId"].dump());
    }
    try {
        auto posted = post(line, idText, !initialize);
        if (posted.status == 404 && !initialize) {
            err_ << "airlock mcp: the session had ended; opening a new one\n";
            reopen();
            posted = post(line, idText, true);
        }
        if (initialize && !posted.sessionId.empty()) {
            std::lock_guard lock(stateMutex_);
            sessionId_ = posted.sessionId;
            version_ = j.contains("params") ? j["params"].value("protocolVersion", "") : "";
        }
        if (request && !posted.answered) {
            std::lock_guard lock(stateMutex_);
            if (cancelled_.count(idText)) return;  // the client gave up on it: no answer
            writeLine(errorLine(id, -32603,
                                "airlockd answered HTTP " + std::to_string(posted.status) +
                                    " without a JSON-RPC response"));
        }
    } catch (const std::exception& e) {
        err_ << "airlock mcp: " << e.what() << "\n";
        if (request) {
            std::lock_guard lock(stateMutex_);
            if (!cancelled_.count(idText))
                writeLine(errorLine(id, -32603, std::string("airlockd did not answer: ") + e.what()));
        }
    }
}

int McpBridge::run() {
    if (client_.apiKey().empty())
        err_ << "airlock mcp: AIRLOCK_API_KEY is not set; every call will be refused\n";
    std::string line;
    while (std::getline(in_, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        ++inFlight_;
        std::thread([this, line] {
            handle(line);
            --inFlight_;
        }).detach();
    }
    // stdin closed: the client is done. The session ends; calls still
    // running are the server's to stop with it.
    std::string session;
    {
        std::lock_guard lock(stateMutex_);
        session = sessionId_;
    }
    if (!session.empty()) {
        try {
            client_.exchange("DELETE", "/mcp", "",
                             {{"authorization", "Bearer " + client_.apiKey()}, {"mcp-session-id", session}},
                             [](int, const HttpClient::Headers&) {}, [](const char*, std::size_t) {},
                             std::chrono::seconds(2));
        } catch (const std::exception&) {
        }
    }
    // The session's end stops its calls: their threads finish at once.
    for (int i = 0; i < 40 && inFlight_.load() > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (inFlight_.load() > 0) {
        std::lock_guard lock(outMutex_);
        out_.flush();
        std::_Exit(0);  // threads still blocked on the network: nothing of theirs is needed
    }
    return 0;
}

}  // namespace airlock::cli
