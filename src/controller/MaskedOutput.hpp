#pragma once
#include <map>
#include <memory>
#include <mutex>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentStream.hpp"
#include "core/StreamingMasker.hpp"

namespace airlock {

// Masks the secrets of a sandbox in a streamed output (WebSocket exec,
// process logs) on its way to the consumer: every data event is passed
// through a StreamingMasker per channel, the held tails are flushed before
// the stream's end, and the stream's window stays exact (bytes the masking
// swallowed or holds back are granted here; the consumer grants what it got).
class MaskedOutput {
  public:
    // Opens the stream with `handler` behind the masking (straight, when
    // there is nothing to mask).
    static std::shared_ptr<AgentStream> open(AgentConnection& agent,
                                             const protocol::GuestRequest& request,
                                             std::shared_ptr<const SecretMasker> masker,
                                             AgentStream::Handler handler);

  private:
    void attach(const std::shared_ptr<AgentStream>& stream);
    explicit MaskedOutput(std::shared_ptr<const SecretMasker> masker, AgentStream::Handler inner)
        : masker_(std::move(masker)), inner_(std::move(inner)) {}
    void onEvent(AgentStream::Event&& event);
    void grant(long long bytes);

    std::shared_ptr<const SecretMasker> masker_;
    AgentStream::Handler inner_;
    std::map<std::uint8_t, StreamingMasker> channels_;  // reader thread only
    std::mutex mutex_;                                  // guards stream_ and owed_
    std::weak_ptr<AgentStream> stream_;
    long long owed_ = 0;  // >0: window to return; <0: the consumer returned more than it got
};

}  // namespace airlock
