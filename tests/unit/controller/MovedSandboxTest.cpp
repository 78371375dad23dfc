#include "controller/MovedSandbox.hpp"

#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "support/TestEnv.hpp"

namespace airlock {
namespace {
using nlohmann::json;

MovedSandbox movedSample() {
    MovedSandbox m;
    m.record.id = "sbx-abcdefghijklmnopqrst";
    m.record.tenant = "acme";
    m.record.templateName = "minimal";
    m.record.vcpus = 2;
    m.record.memoryMib = 512;
    m.record.createdAt = "2026-12-05T00:00:00Z";
    m.record.envJson = R"({"A":"1"})";
    m.record.disk = "disk-3.qcow2";
    m.record.diskBytes = 4ull << 30;
    m.record.network = {"example.org"};
    m.record.secretNames = {"TOKEN"};
    m.record.secretsSealed = "v2:sealed";
    m.record.timeoutS = 600;
    m.record.expiresAt = 1800000000;
    m.record.layers = {"snap-x"};  // never travels: the disk arrives flattened
    m.record.qemuUid = 123456;     // the receiving host's own
    m.templateDigest = "sha256:abc";
    m.paused = true;
    AuditEvent e;
    e.at = "2026-12-05T00:00:01Z";
    e.type = "sandbox.created";
    e.dataJson = R"({"boot":"cold"})";
    m.audit.push_back(e);
    ExposedPort p;
    p.port = 8080;
    p.token = "tok";
    p.createdAt = "2026-12-05T00:00:02Z";
    m.ports.push_back(p);
    return m;
}

TEST(MovedSandbox, RoundTripsWhatTravelsAndNothingHostBound) {
    auto back = MovedSandbox::fromJson(json::parse(movedSample().toJson().dump()));
    EXPECT_EQ(back.record.id, "sbx-abcdefghijklmnopqrst");
    EXPECT_EQ(back.record.tenant, "acme");
    EXPECT_EQ(back.record.vcpus, 2u);
    EXPECT_EQ(back.record.disk, "disk-3.qcow2");
    EXPECT_EQ(back.record.diskBytes, 4ull << 30);
    EXPECT_EQ(back.record.envJson, R"({"A":"1"})");
    EXPECT_EQ(back.record.secretsSealed, "v2:sealed");
    EXPECT_EQ(back.record.expiresAt, 1800000000);
    EXPECT_TRUE(back.record.layers.empty());
    EXPECT_EQ(back.record.qemuUid, 0);
    EXPECT_TRUE(back.paused);
    EXPECT_EQ(back.templateDigest, "sha256:abc");
    ASSERT_EQ(back.audit.size(), 1u);
    EXPECT_EQ(back.audit[0].sandboxId, back.record.id);
    EXPECT_EQ(back.audit[0].tenant, "acme");
    ASSERT_EQ(back.ports.size(), 1u);
    EXPECT_EQ(back.ports[0].sandboxId, back.record.id);
    EXPECT_EQ(back.ports[0].port, 8080u);
    EXPECT_TRUE(back.workspace.empty());
    EXPECT_FALSE(movedSample().toJson().contains("workspace")) << "none: not sent";
}

TEST(MovedSandbox, AWorkspaceRecordTravelsAsTheHostKeepsIt) {
    auto m = movedSample();
    m.workspace = R"({"repo":"https://git.example/demo.git","head":""})";
    EXPECT_EQ(MovedSandbox::fromJson(json::parse(m.toJson().dump())).workspace, m.workspace);
    auto j = m.toJson();
    j["workspace"] = "{not json";
    EXPECT_EQ(test::codeOf([&] { MovedSandbox::fromJson(j); }), ErrorCode::bad_request);
    j["workspace"] = json::object();
    EXPECT_EQ(test::codeOf([&] { MovedSandbox::fromJson(j); }), ErrorCode::bad_request);
}

TEST(MovedSandbox, RefusesUnknownFieldsAndValuesAHostWouldTrust) {
    auto j = movedSample().toJson();
    auto refused = [](json bad) {
        return test::codeOf([&] { MovedSandbox::fromJson(bad); });
    };
    auto extra = j;
    extra["record"]["qemu_uid"] = 0;
    EXPECT_EQ(refused(extra), ErrorCode::bad_request);
    auto path = j;
    path["record"]["disk"] = "../../etc/passwd";
    EXPECT_EQ(refused(path), ErrorCode::bad_request);
    auto trailing = j;
    trailing["record"]["disk"] = "disk-3.qcow2/x";
    EXPECT_EQ(refused(trailing), ErrorCode::bad_request);
    auto internal = j;
    internal["record"]["tenant"] = "_spare";
    EXPECT_EQ(refused(internal), ErrorCode::bad_request);
    auto id = j;
    id["record"]["id"] = "snap-abcdefghijklmnopqrst";
    EXPECT_EQ(refused(id), ErrorCode::bad_request);
    auto type = j;
    type["record"]["vcpus"] = "2";
    EXPECT_EQ(refused(type), ErrorCode::bad_request);
    auto port = j;
    port["ports"][0]["port"] = 70000;
    EXPECT_EQ(refused(port), ErrorCode::bad_request);
    auto data = j;
    data["audit"][0]["data"] = "{not json";
    EXPECT_EQ(refused(data), ErrorCode::bad_request);
    EXPECT_EQ(refused(json::array()), ErrorCode::bad_request);
}

}  // namespace
}  // namespace airlock
