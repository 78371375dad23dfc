#pragma once
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <memory>
#include <optional>

#include "agentclient/AgentPipe.hpp"
#include "api/StreamContext.hpp"
#include "controller/TerminalLines.hpp"
#include "protocol/ControlFrames.hpp"

namespace airlock::api {

// GET /v1/sandboxes/{id}/exec/ws, after authentication (a bad key never gets
// a 101). Message schema: api/websocket.md. Output frames queue on the strand
// (bounded by the agent window: credit is returned only once a frame reached
// the client); the command's process group dies when the client disconnects.
// A command that needs approval is announced ({"type":"pending_approval"})
// and started once a human approves it (stdin sent meanwhile is kept, up to
// 1 MiB); a denial or expiry ends the session with an error message.
class WsExecSession : public std::enable_shared_from_this<WsExecSession> {
  public:
    WsExecSession(boost::beast::tcp_stream&& stream,
                  boost::beast::http::request<boost::beast::http::empty_body>&& upgrade,
                  StreamContext context);
    void start();

  private:
    void onAccepted(boost::beast::error_code ec);
    void onStartMessage(boost::beast::error_code ec);
    void readClient();
    void onClientMessage(boost::beast::error_code ec);
    void onAgentEvent(AgentStream::Event&& event);
    void onDecision(const GatedExec& decision);
    // Connects the agent stream of a command that runs now.
    void attachStream(std::shared_ptr<AgentStream> agent);
    AgentStream::Handler agentHandler();
    void queue(bool text, std::string data, std::size_t credit = 0);
    // Closes once everything queued went out.
    void closeAfterQueued();
    void sendErrorAndClose(const std::string& code, const std::string& message);
    void finish();
    void releaseExec();
    void flushHeld();
    // A judged terminal's lines (TerminalLines) once its stream runs.
    void judgeLines();

    // Where the session is; every transition is on the strand.
    enum class Phase {
        accepting,         // the upgrade, then the start message
        opening,           // the start message is being judged and opened (a worker)
        awaitingDecision,  // parked for a human; stdin is held
        startingApproved,  // approved: its stream is being opened (a worker)
        running,           // the command's stream is attached
        closing,           // a final message is queued: close after it
        ended,             // the socket is closed or closing; nothing more is sent
    };
    bool over() const { return phase_ == Phase::closing || phase_ == Phase::ended; }

    boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
    boost::beast::http::request<boost::beast::http::empty_body> upgrade_;
    StreamContext ctx_;
    boost::beast::flat_buffer in_;
    AgentPipe pipe_;
    Phase phase_ = Phase::accepting;
    // Approval gate: the request as submitted, and the stdin that waits with it.
    ExecOptions options_;
    TerminalOptions terminal_;
    std::string execId_;           // set while gated or for an approved run
    bool streamAttached_ = false;  // the command's stream was opened (it ran)
    bool execRecorded_ = false;    // a gated exec's end is recorded (or withdrawn)
    std::string heldStdin_;
    bool heldEof_ = false;
    bool flushingHeld_ = false;  // held stdin is being written: new stdin queues behind it
    std::optional<GatedExec> earlyDecision_;  // a decision that arrived before the pending answer
    bool startedSent_ = false;
    std::string commandExecId_;  // the running command's exec id (a terminal's lines name it)
    std::shared_ptr<TerminalLines> lines_;  // an interactive bash's, judged line by line
};

}  // namespace airlock::api
