#include "agentclient/GuestListener.hpp"

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "protocol/Messages.hpp"
#include "protocol/ControlFrames.hpp"

namespace airlock {

GuestListener GuestListener::open(AgentConnection& agent, unsigned port, const std::string& what,
                                  OnAccepted onAccepted, OnEnded onEnded,
                                  std::chrono::seconds wait) {
    // Shared with the handler, which may outlive this call (a late answer).
    struct Listening {
        std::mutex mutex;
        std::condition_variable cv;
        bool done = false;
        unsigned port = 0;
        std::string error;
    };
    auto listening = std::make_shared<Listening>();
    using Kind = AgentStream::Event::Kind;
    auto handler = [listening, what, onAccepted = std::move(onAccepted),
                    onEnded = std::move(onEnded)](AgentStream::Event&& e) {
        try {
            auto settle = [&](unsigned p, std::string error) {
                std::lock_guard lock(listening->mutex);
                if (listening->done) return;
                listening->done = true;
                listening->port = p;
                listening->error = std::move(error);
                listening->cv.notify_all();
            };
            if (e.kind == Kind::reset || e.kind == Kind::close) {
                std::string why =
                    e.kind == Kind::reset ? protocol::parseResetInfo(e.payload).message : "closed";
                settle(0, why);
                if (onEnded) onEnded(why);
                return;
            }
            if (e.kind != Kind::control) return;
            auto frame = protocol::parseControl(e.payload);
            if (auto* ready = std::get_if<protocol::ListenerReady>(&frame))
                return settle(ready->port, "");
            if (auto* accepted = std::get_if<protocol::ListenerAccepted>(&frame))
                onAccepted(accepted->connections);
        } catch (...) {
            logWarn("agent", "ignored a malformed event from a guest's " + what);
        }
    };
    GuestListener out;
    out.stream = agent.open(protocol::PortRequest{protocol::Op::egress_listen, port}, handler);
    std::unique_lock lock(listening->mutex);
    if (!listening->cv.wait_for(lock, wait, [&] { return listening->done; }))
        throw Error(ErrorCode::agent_timeout, "the guest did not open its " + what);
    if (listening->port == 0)
        throw Error(ErrorCode::agent_error,
                    "the guest could not open its " + what + ": " + listening->error);
    out.port = listening->port;
    return out;
}

}  // namespace airlock
