#pragma once
#include <atomic>
#include <iosfwd>
#include <mutex>
#include <set>
#include <string>

#include "cli/HttpClient.hpp"

namespace airlock::cli {

// `airlock mcp`: MCP over stdio for clients that spawn a process, forwarded
// to the daemon's /mcp (AIRLOCK_URL, AIRLOCK_API_KEY). One JSON-RPC message
// per line each way; stdout carries nothing else (diagnostics go to
// stderr). Each message is posted on a thread of its own, so a cancel
// passes while a tool runs; answers (JSON or Server-Sent Events) become
// lines as they arrive. An expired session is opened again with the
// client's own initialize, and a request whose answer never came gets a
// JSON-RPC error rather than silence.
class McpBridge {
  public:
    McpBridge(HttpClient client, std::istream& in, std::ostream& out, std::ostream& err);
    // Until stdin ends; the exit code.
    int run();

  private:
    struct Posted {
        int status = 0;
        std::string sessionId;
        bool answered = false;  // a response to the message's id was written
    };
    void handle(const std::string& line);
    Posted post(const std::string& line, const std::string& id, bool withSession);
    void reopen();
    void writeLine(const std::string& json);

    HttpClient client_;
    std::istream& in_;
    std::ostream& out_;
    std::ostream& err_;
    std::mutex outMutex_, stateMutex_;
    std::string sessionId_, version_, initializeLine_;
    std::set<std::string> cancelled_;
    std::atomic<int> inFlight_{0};
};

}  // namespace airlock::cli
