#pragma once
#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"
#include "core/SecretMasker.hpp"
#include "protocol/GuestCalls.hpp"
#include "protocol/GuestResults.hpp"

namespace airlock {

// The one way a guest's answer reaches a client: one call to the agent (30 s
// at most), its answer read as the op's typed result, and every text in it
// that the guest chose masked (root in the guest may echo a secret back). An
// answer of any other shape is Error(agent_error): the client gets a 502,
// never a shape the API does not describe.
protocol::FsResult askGuest(AgentConnection& agent, const protocol::FsRequest& request,
                            const SecretMasker& masker);
// process_start (request.background), or a process call (get, signal, stdin).
protocol::ProcessInfo askGuest(AgentConnection& agent, const protocol::ExecRequest& start,
                               const SecretMasker& masker);
protocol::ProcessInfo askGuest(AgentConnection& agent, const protocol::ProcessCall& call,
                               const SecretMasker& masker);
protocol::ProcessList listGuestProcesses(AgentConnection& agent, const SecretMasker& masker);

// A guest's malformed answer as the client sees it (502, agent_error).
Error guestAnswerError(const protocol::MessageError& e);

// Reads a guest's answer with `parse`; its MessageError becomes
// guestAnswerError.
template <class Parse>
auto readGuestAnswer(Parse&& parse) -> decltype(parse()) {
    try {
        return parse();
    } catch (const protocol::MessageError& e) {
        throw guestAnswerError(e);
    }
}

// The texts the guest chose, masked.
void maskGuestText(protocol::FileEntry& entry, const SecretMasker& masker);
void maskGuestText(protocol::ProcessInfo& process, const SecretMasker& masker);

}  // namespace airlock
