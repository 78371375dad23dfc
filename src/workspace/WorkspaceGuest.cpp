#include "workspace/WorkspaceGuest.hpp"

#include "protocol/GuestCalls.hpp"

namespace airlock::workspace {

Scan WorkspaceGuest::scan(AgentConnection& agent, const std::string& root,
                          const std::vector<std::string>& skip, bool withIgnored) const {
    auto stream = agent.open(protocol::WorkspaceScanRequest{root, skip, withIgnored, user_});
    return parseScan(stream->readToClose(kMaxScanBytes, AgentStream::Clock::now() + wait_));
}

std::string WorkspaceGuest::readFile(AgentConnection& agent, const std::string& path,
                                     std::uint64_t limit) const {
    auto stream = agent.open(protocol::FileReadRequest{path, user_});
    return stream->readToClose(limit, AgentStream::Clock::now() + wait_);
}

void WorkspaceGuest::unpack(AgentConnection& agent, const std::string& root,
                            const std::function<void(CheckoutArchive&)>& fill) const {
    auto stream = agent.open(protocol::ArchiveUnpackRequest{root, user_});
    auto deadline = AgentStream::Clock::now() + wait_;
    CheckoutArchive archive([&](std::string_view bytes) { stream->write(0, bytes, deadline); });
    try {
        fill(archive);
        archive.flush();
    } catch (...) {
        stream->reset("cancelled", "the host stopped the archive");
        throw;
    }
    stream->closeWrite();
    stream->readToClose(0, AgentStream::Clock::now() + wait_);
}

}  // namespace airlock::workspace
