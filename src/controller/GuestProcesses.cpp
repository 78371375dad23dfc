#include "controller/GuestProcesses.hpp"

#include "controller/GuestAnswers.hpp"
#include "controller/MaskedOutput.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "protocol/Ops.hpp"

namespace airlock {

protocol::ProcessInfo GuestProcesses::start(const std::string& tenant, const std::string& id,
                                            const ExecOptions& options, bool stdinOpen) {
    // A missing or stopped sandbox answers before the request is judged.
    auto sandbox = sandboxes_.requireRunning(tenant, id);
    // What a client may set of a background process; the rest are exec's defaults.
    ExecOptions o;
    o.argv = options.argv;
    o.cwd = options.cwd;
    o.user = options.user;
    o.env = options.env;
    o.trace = newId("ex-");
    auto command = sandboxes_.prepareCommand(sandbox, o, "processes");
    command.request.background = true;  // op process_start
    command.request.timeout_ms = 0;
    command.request.stdin_stream = stdinOpen;
    return askGuest(*sandboxes_.agentFor(sandbox.id), command.request, command.masker);
}

protocol::ProcessList GuestProcesses::list(const std::string& tenant, const std::string& id) {
    auto sandbox = sandboxes_.requireRunning(tenant, id);
    return listGuestProcesses(*sandboxes_.agentFor(sandbox.id),
                              sandboxes_.guestOutputMasker(sandbox));
}

protocol::ProcessInfo GuestProcesses::call(const std::string& tenant, const std::string& id,
                                           const protocol::ProcessCall& call) {
    if (!protocol::isProcessCall(call.op) || call.op == protocol::Op::process_start ||
        call.op == protocol::Op::process_list)
        throw Error(ErrorCode::bad_request, "not a process operation");
    auto sandbox = sandboxes_.requireRunning(tenant, id);
    return askGuest(*sandboxes_.agentFor(sandbox.id), call, sandboxes_.guestOutputMasker(sandbox));
}

std::shared_ptr<AgentStream> GuestProcesses::openLogs(const std::string& tenant,
                                                      const std::string& id,
                                                      const std::string& processId, bool follow,
                                                      AgentStream::Handler handler) {
    auto sandbox = sandboxes_.requireRunning(tenant, id);
    return MaskedOutput::open(
        *sandboxes_.agentFor(sandbox.id), protocol::ProcessLogsRequest{processId, follow},
        // The process's own command is not known here: the unscoped secrets.
        std::make_shared<const SecretMasker>(sandboxes_.streamMasker(sandbox, "")),
        std::move(handler));
}

}  // namespace airlock
