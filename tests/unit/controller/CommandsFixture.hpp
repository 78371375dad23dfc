#pragma once
// SandboxCommands on its own: a fake sandbox (FakeSandboxAccess, the real
// agent in this process), real policy, gates, secrets and stores. For the
// commands' tests and the approval router's.
#include <gtest/gtest.h>

#include <array>
#include <memory>

#include "controller/ApprovalGates.hpp"
#include "controller/CommandJudge.hpp"
#include "controller/SandboxCommands.hpp"
#include "controller/TenantLimits.hpp"
#include "store/AuditStore.hpp"
#include "store/Database.hpp"
#include "store/SnapshotStore.hpp"
#include "support/FakeSandboxAccess.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {

inline constexpr const char* kScopedToken = "tok-0123456789abcdef";

inline std::shared_ptr<const SecretCipher> commandsTestCipher() {
    std::array<unsigned char, 32> key{};
    key.fill(9);
    return std::make_shared<const SecretCipher>(key);
}

inline ExecOptions asRootShell(const std::string& script) {
    ExecOptions o;
    o.shell = script;
    o.user = "root";  // the in-process agent runs on the host
    return o;
}

class CommandsFixture : public ::testing::Test {
  protected:
    CommandsFixture() {
        auto& s = access.sandbox;
        s.envJson = R"({"FROM_SANDBOX":"s","BOTH":"sandbox"})";
        s.policyJson = R"({"deny":["echo forbidden*"],"approve":["touch *"]})";
        s.secretsSealed = secrets.seal({{"API_TOKEN", SecretSpec{kScopedToken, {"echo *"}}}}, s.id);
        access.secrets = {kScopedToken};  // the audit's masker (guestOutputMasker)
        commands = std::make_unique<SandboxCommands>(SandboxCommands::Parts{
            access, judge, gates, secrets, tenants, *timers,
            [](const SandboxRecord& r) {
                auto env =
                    nlohmann::json::parse(r.envJson).get<std::map<std::string, std::string>>();
                env["FROM_BASE"] = "b";
                return env;
            },
            4096});
    }
    // As in the controller: the agent's session ends first (a command still
    // running completes into live objects), then the timer queue stops.
    void TearDown() override {
        access.agentFor(access.sandbox.id)->closeAndWait();
        timers.reset();
    }

    const std::string& id() const { return access.sandbox.id; }

    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    GatedExecStore gatedStore{db};
    AuditStore auditStore{db};
    AuditRecorder audit{auditStore};
    SandboxStore sandboxStore{db};
    SnapshotStore snapshotStore{db};
    SandboxSecrets secrets{commandsTestCipher()};
    policy::PolicyRules operatorRules;
    CommandJudge judge{operatorRules, [](const std::string&) { return std::nullopt; }};
    TenantLimits tenants{nullptr, operatorRules, sandboxStore, snapshotStore};
    test::FakeSandboxAccess access;
    std::unique_ptr<TimerQueue> timers = std::make_unique<TimerQueue>();
    ApprovalGates gates{gatedStore, audit, secrets, *timers, 900};
    std::unique_ptr<SandboxCommands> commands;
};

}  // namespace airlock::test
