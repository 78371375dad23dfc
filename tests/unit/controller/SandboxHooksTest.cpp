// The hooks other services hang on a sandbox's life: a refusal of the
// write guard is the answer, a failing delete hook never stops a delete,
// and a hook is copied out under the lock (it may replace itself).
#include "controller/SandboxHooks.hpp"

#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using test::codeOf;

TEST(SandboxHooks, AGuardsRefusalIsTheAnswerAndNoGuardAllowsEverything) {
    SandboxHooks hooks;
    SandboxRecord r;
    r.id = "sbx-1";
    EXPECT_NO_THROW(hooks.checkWrite(r, "/anything"));
    std::vector<std::string> seen;
    hooks.setWriteGuard([&](const SandboxRecord& s, const std::string& path) {
        seen.push_back(s.id + ":" + path);
        if (path != "/work/ok") throw Error(ErrorCode::forbidden, "outside the write scope");
    });
    EXPECT_NO_THROW(hooks.checkWrite(r, "/work/ok"));
    EXPECT_EQ(codeOf([&] { hooks.checkWrite(r, "/etc/passwd"); }), ErrorCode::forbidden);
    EXPECT_EQ(seen, (std::vector<std::string>{"sbx-1:/work/ok", "sbx-1:/etc/passwd"}));
    hooks.setWriteGuard(nullptr);
    EXPECT_NO_THROW(hooks.checkWrite(r, "/etc/passwd"));
}

TEST(SandboxHooks, DeleteHooksThatFailAreLoggedNotThrown) {
    SandboxHooks hooks;
    SandboxRecord r;
    r.id = "sbx-2";
    EXPECT_NO_THROW(hooks.beforeDelete(r));
    EXPECT_NO_THROW(hooks.afterDelete(r.id));
    std::vector<std::string> calls;
    hooks.setDeleteHooks(
        [&](const SandboxRecord& s) {
            calls.push_back("before " + s.id);
            throw Error(ErrorCode::internal, "the bundle could not be sealed");
        },
        [&](const std::string& id) {
            calls.push_back("after " + id);
            throw std::runtime_error("clean-up failed");
        });
    EXPECT_NO_THROW(hooks.beforeDelete(r));
    EXPECT_NO_THROW(hooks.afterDelete(r.id));
    EXPECT_EQ(calls, (std::vector<std::string>{"before sbx-2", "after sbx-2"}));
}

TEST(SandboxHooks, AHookMayClearTheHooksWhileItRuns) {
    SandboxHooks hooks;
    int runs = 0;
    hooks.setDeleteHooks(
        [&](const SandboxRecord&) {
            ++runs;
            hooks.setDeleteHooks(nullptr, nullptr);  // would deadlock if called under the lock
        },
        nullptr);
    hooks.beforeDelete(SandboxRecord{});
    hooks.beforeDelete(SandboxRecord{});
    EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace airlock
