#include "workspace/WorkspaceService.hpp"

#include "workspace/GitSocket.hpp"
#include "workspace/GitSupport.hpp"

namespace airlock::workspace {

WorkspaceService::WorkspaceService(WorkspaceConfig config, WorkspaceSandboxes& sandboxes,
                                   Credentials& credentials, WorkspaceStore& workspaces)
    : config_(std::move(config)),
      sandboxes_(sandboxes),
      credentials_(credentials, config_.cipher, config_.addressPolicy,
                   [&sandboxes](const std::string& tenant, const std::string& type,
                                const nlohmann::json& data) {
                       sandboxes.recordEvent(sandboxRef("", tenant), type, data);
                   }),
      mirrors_(config_,
               [&sandboxes](const std::string& what, std::uint64_t needBytes) {
                   sandboxes.requireFreeSpace(what, needBytes);
               }),
      records_(workspaces, sandboxes, mirrors_),
      guest_(config_.guestUser),
      checkouts_(config_, sandboxes, credentials_, mirrors_, records_, guest_),
      changes_(config_, sandboxes, mirrors_, records_, guest_),
      pushes_(config_, sandboxes, credentials_, mirrors_, records_),
      moves_(config_, credentials_, mirrors_, records_) {
    initGit();
    installGitSocket(config_.addressPolicy, std::chrono::seconds(30), std::chrono::seconds(120));
    sandboxes_.setWorkspaceHooks(
        [this](const SandboxRecord& r, const std::string& path) { records_.checkWrite(r, path); },
        [this](const GatedExec& g, bool approved) { pushes_.decided(g, approved); });
    sandboxes_.setExtraSecrets(
        [this](const SandboxRecord& r) { return credentials_.secretsOf(r.tenant); });
    sandboxes_.setWorkspaceTravel(
        [this](const SandboxRecord& r, const std::string& pack) {
            return moves_.packOut(r.tenant, r.id, pack);
        },
        [this](const SandboxRecord& r, const std::string& record, const std::string& pack) {
            moves_.arrive(r.tenant, r.id, record, pack);
        });
}

WorkspaceService::~WorkspaceService() {
    sandboxes_.setWorkspaceHooks(nullptr, nullptr);
    sandboxes_.setExtraSecrets(nullptr);
    sandboxes_.setWorkspaceTravel(nullptr, nullptr);
}

}  // namespace airlock::workspace
