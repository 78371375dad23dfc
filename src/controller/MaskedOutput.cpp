#include "controller/MaskedOutput.hpp"
#include "protocol/ControlFrames.hpp"

namespace airlock {

std::shared_ptr<AgentStream> MaskedOutput::open(AgentConnection& agent,
                                                const protocol::GuestRequest& request,
                                                std::shared_ptr<const SecretMasker> masker,
                                                AgentStream::Handler handler) {
    if (!masker || masker->empty()) return agent.open(request, std::move(handler));
    std::shared_ptr<MaskedOutput> self(new MaskedOutput(std::move(masker), std::move(handler)));
    auto stream =
        agent.open(request, [self](AgentStream::Event&& e) { self->onEvent(std::move(e)); });
    self->attach(stream);
    return stream;
}

void MaskedOutput::attach(const std::shared_ptr<AgentStream>& stream) {
    long long owed;
    {
        std::lock_guard lock(mutex_);
        stream_ = stream;
        owed = owed_;
        if (owed > 0) owed_ = 0;
    }
    if (owed > 0) stream->grant(static_cast<std::size_t>(owed));
}

void MaskedOutput::grant(long long bytes) {
    std::shared_ptr<AgentStream> stream;
    long long give = 0;
    {
        std::lock_guard lock(mutex_);
        owed_ += bytes;
        stream = stream_.lock();
        if (stream && owed_ > 0) give = std::exchange(owed_, 0);
    }
    if (give > 0) stream->grant(static_cast<std::size_t>(give));
}

void MaskedOutput::onEvent(AgentStream::Event&& event) {
    using Kind = AgentStream::Event::Kind;
    if (event.kind == Kind::data) {
        auto [it, fresh] = channels_.try_emplace(event.channel, masker_);
        std::size_t raw = event.payload.size();
        std::string shown = it->second.feed(event.payload);
        grant(static_cast<long long>(raw) - static_cast<long long>(shown.size()));
        if (shown.empty()) return;
        event.payload = std::move(shown);
        return inner_(std::move(event));
    }
    if (event.kind == Kind::control) {
        // OutputSkipped: the agent's output ring overran and the bytes that
        // follow may begin in the middle of a secret.
        std::optional<protocol::OutputSkipped> skipped;
        try {
            auto frame = protocol::parseControl(event.payload);
            if (auto* s = std::get_if<protocol::OutputSkipped>(&frame)) skipped = *s;
        } catch (const protocol::MessageError&) {
        }
        if (skipped) {
            auto c = skipped->channel;
            auto [it, fresh] = channels_.try_emplace(c, masker_);
            std::string shown = it->second.gap();
            if (!shown.empty()) {
                grant(-static_cast<long long>(shown.size()));  // held bytes were granted when held
                inner_(AgentStream::Event{Kind::data, c, std::move(shown)});
            }
        }
    }
    if (event.kind == Kind::close || event.kind == Kind::reset) {
        for (auto& [channel, m] : channels_) {
            std::string rest = m.flush();
            if (!rest.empty()) inner_(AgentStream::Event{Kind::data, channel, std::move(rest)});
        }
        event.payload = masker_->mask(std::move(event.payload));  // an exec's error text
    }
    inner_(std::move(event));
}

}  // namespace airlock
