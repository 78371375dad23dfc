#include "controller/GuestAnswers.hpp"

namespace airlock {
namespace {

constexpr auto kGuestAnswerTimeout = std::chrono::seconds(30);

// A start or a call on one process: both answer its description.
protocol::ProcessInfo askProcess(AgentConnection& agent, const protocol::GuestRequest& request,
                                 const SecretMasker& masker) {
    auto answer = agent.call(request, kGuestAnswerTimeout);
    auto process = readGuestAnswer([&] { return protocol::parseProcessInfo(answer); });
    maskGuestText(process, masker);
    return process;
}

}  // namespace

Error guestAnswerError(const protocol::MessageError& e) {
    return Error(ErrorCode::agent_error,
                 std::string("the agent sent a malformed answer (") + e.what() + ")");
}

void maskGuestText(protocol::FileEntry& entry, const SecretMasker& masker) {
    entry.name = masker.mask(std::move(entry.name));
    entry.path = masker.mask(std::move(entry.path));
    if (entry.target) entry.target = masker.mask(std::move(*entry.target));
    protocol::FileMetadata masked;
    for (auto& [key, value] : entry.metadata) masked.emplace(masker.mask(key), masker.mask(value));
    entry.metadata = std::move(masked);
}

void maskGuestText(protocol::ProcessInfo& process, const SecretMasker& masker) {
    for (auto& arg : process.cmd) arg = masker.mask(std::move(arg));
}

protocol::FsResult askGuest(AgentConnection& agent, const protocol::FsRequest& request,
                            const SecretMasker& masker) {
    auto answer = agent.call(request, kGuestAnswerTimeout);
    auto result = readGuestAnswer([&] { return protocol::parseFsResult(request.action, answer); });
    if (masker.empty()) return result;
    if (result.entry) maskGuestText(*result.entry, masker);
    if (result.entries)
        for (auto& e : *result.entries) maskGuestText(e, masker);
    if (result.removed) result.removed = masker.mask(std::move(*result.removed));
    return result;
}

protocol::ProcessInfo askGuest(AgentConnection& agent, const protocol::ExecRequest& start,
                               const SecretMasker& masker) {
    return askProcess(agent, start, masker);
}

protocol::ProcessInfo askGuest(AgentConnection& agent, const protocol::ProcessCall& call,
                               const SecretMasker& masker) {
    return askProcess(agent, call, masker);
}

protocol::ProcessList listGuestProcesses(AgentConnection& agent, const SecretMasker& masker) {
    auto answer =
        agent.call(protocol::ProcessCall{protocol::Op::process_list, {}, "TERM", {}, false},
                   kGuestAnswerTimeout);
    auto list = readGuestAnswer([&] { return protocol::parseProcessList(answer); });
    for (auto& p : list.processes) maskGuestText(p, masker);
    return list;
}

}  // namespace airlock
