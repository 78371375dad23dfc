#include "support/FakeWorkspaceSandboxes.hpp"

#include <array>

#include "core/Error.hpp"
#include "core/Ids.hpp"

namespace airlock::test {

namespace {
std::shared_ptr<const SecretCipher> fakeCipher() {
    std::array<unsigned char, 32> key{};
    key.fill(5);
    return std::make_shared<const SecretCipher>(key);
}
}  // namespace

FakeWorkspaceSandboxes::FakeWorkspaceSandboxes()
    : secrets_(fakeCipher()),
      gates_(gatedStore_, audit_, secrets_, *timers_, 900),
      agent_(guest_.connect()) {}

FakeWorkspaceSandboxes::~FakeWorkspaceSandboxes() {
    agent_->closeAndWait();
    timers_.reset();
}

std::vector<FakeWorkspaceSandboxes::Event> FakeWorkspaceSandboxes::events(
    const std::string& type) {
    std::lock_guard lock(mutex_);
    std::vector<Event> out;
    for (const auto& e : events_)
        if (e.type == type) out.push_back(e);
    return out;
}

std::vector<std::string> FakeWorkspaceSandboxes::created() {
    std::lock_guard lock(mutex_);
    return created_;
}

std::vector<std::string> FakeWorkspaceSandboxes::destroyed() {
    std::lock_guard lock(mutex_);
    return destroyed_;
}

std::vector<std::string> FakeWorkspaceSandboxes::watched() {
    std::lock_guard lock(mutex_);
    return watched_;
}

GatedExec FakeWorkspaceSandboxes::decide(const std::string& tenant, const std::string& approvalId,
                                         bool approve) {
    auto decision = gates_.decide(tenant, approvalId, approve, approve ? "" : "not this one",
                                  "reviewer");
    PublishHandler publish;
    {
        std::lock_guard lock(mutex_);
        publish = publish_;
    }
    if (publish) publish(decision.exec, approve);
    return decision.exec;
}

WorkspaceSandboxes::WriteGuard FakeWorkspaceSandboxes::writeGuard() {
    std::lock_guard lock(mutex_);
    return guard_;
}

SandboxRecord FakeWorkspaceSandboxes::create(const std::string& tenant,
                                             const CreateSandboxRequest& request) {
    SandboxRecord r;
    r.id = newId("sb-");
    r.tenant = tenant;
    r.templateName = request.templateName;
    r.state = SandboxState::running;
    std::lock_guard lock(mutex_);
    sandboxes_[r.id] = r;
    created_.push_back(r.id);
    return r;
}

void FakeWorkspaceSandboxes::destroy(const std::string& tenant, const std::string& id,
                                     const std::string&) {
    get(tenant, id);
    std::lock_guard lock(mutex_);
    sandboxes_.erase(id);
    destroyed_.push_back(id);
}

SandboxRecord FakeWorkspaceSandboxes::get(const std::string& tenant, const std::string& id) {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end() || it->second.tenant != tenant)
        throw Error(ErrorCode::not_found, "no sandbox " + id);
    return it->second;
}

std::shared_ptr<AgentConnection> FakeWorkspaceSandboxes::runningAgent(const std::string& tenant,
                                                                      const std::string& id) {
    if (get(tenant, id).state != SandboxState::running)
        throw Error(ErrorCode::conflict, "sandbox " + id + " is not running");
    return agent_;
}

void FakeWorkspaceSandboxes::recordEvent(const SandboxRecord& r, const std::string& type,
                                         const nlohmann::json& data) {
    std::lock_guard lock(mutex_);
    events_.push_back({r.id, r.tenant, type, data});
}

bool FakeWorkspaceSandboxes::watchFiles(const std::string& tenant, const std::string& id,
                                        const std::string& path) {
    get(tenant, id);
    std::lock_guard lock(mutex_);
    watched_.push_back(path);
    return true;
}

void FakeWorkspaceSandboxes::setWorkspaceHooks(WriteGuard guard, PublishHandler publish) {
    std::lock_guard lock(mutex_);
    guard_ = std::move(guard);
    publish_ = std::move(publish);
}

void FakeWorkspaceSandboxes::pause(const std::string& id) {
    std::lock_guard lock(mutex_);
    sandboxes_.at(id).state = SandboxState::paused;
}

}  // namespace airlock::test
