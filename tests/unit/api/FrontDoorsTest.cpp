// Every row of the one route table, native and E2B (control plane, envd,
// guest ports): documented with its door and roles, admitted by the one
// authorization function by role and tenant, its errors in its door's shape.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "FrontDoorsFixture.hpp"
#include "store/ApiKeyStore.hpp"
#include "support/ApiSpec.hpp"
#include "support/OpenApiRoutes.hpp"

namespace airlock::api {
namespace {
using nlohmann::json;

const char* kMethods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};

class FrontDoorsTest : public FrontDoorsFixture {
  protected:
    FrontDoorsTest() {
        own[Role::agent] = keys.create("t1", Role::agent, "t1-agent");
        own[Role::approver] = keys.create("t1", Role::approver, "t1-approver");
        // An operator's admin key: its own tenant is none of the sandboxes'.
        own[Role::admin] = keys.create("ops", Role::admin, "root");
        other[Role::agent] = keys.create("t2", Role::agent, "t2-agent");
        other[Role::approver] = keys.create("t2", Role::approver, "t2-approver");
    }

    // A request for a row as its door's clients send it, with a key (none: nullptr).
    ApiRequest requestFor(const Route& row, const std::string& path, const std::string& sandbox,
                          const ApiKeyStore::Created* key) {
        ApiRequest r;
        r.method = row.method == "*" ? "GET" : row.method;
        r.path = path;
        switch (row.door) {
            case Door::native:
                if (key) r.authorization = "Bearer " + key->key;
                break;
            case Door::e2b_control:
                if (key) r.headers["x-api-key"] = "e2b_" + key->key.substr(3);
                break;
            case Door::e2b_envd:
            case Door::e2b_port:
                r.headers["e2b-sandbox-id"] = sandbox;
                r.headers["e2b-sandbox-port"] =
                    row.door == Door::e2b_envd ? std::to_string(e2b::kEnvdPort) : "8080";
                if (key) r.headers["x-access-token"] = tokens.envdToken(sandbox, key->record.id);
                break;
        }
        return r;
    }

    // What the one authorization says: nullopt when admitted, else the error's code.
    struct Verdict {
        std::optional<ErrorCode> error;
        std::string tenant;
    };
    Verdict admit(const Route& row, const ApiRequest& request) {
        auto selection = router.select(request);
        EXPECT_EQ(selection.route(), &row) << row.label() << ": " << request.path << " selects another row";
        try {
            auto a = router.admit(request, selection);
            return {std::nullopt, a.tenant};
        } catch (const Error& e) {
            return {e.code(), ""};
        }
    }

    std::map<Role, ApiKeyStore::Created> own, other;
};

// A concrete path for a row: {} segments become the ids given, a prefix row
// gets a rest.
std::string concrete(const Route& row, const std::vector<std::string>& ids) {
    std::string out;
    std::size_t next = 0;
    for (const auto& s : row.pattern) out += "/" + (s == "{}" ? (next < ids.size() ? ids[next++] : "x") : s);
    if (row.prefix) out += "/rest/of/it";
    return out.empty() ? "/" : out;
}

TEST_F(FrontDoorsTest, EveryRowOfEveryDoorIsAdmittedByRoleAndTenantAlone) {
    CreateSandboxRequest made;
    made.templateName = "minimal";
    std::string sbx = controller->create("t1", made).id;
    auto revoked = keys.create("t1", Role::admin, "gone");
    ASSERT_TRUE(keys.remove(revoked.record.id));

    std::map<Door, std::size_t> walked;
    for (const auto& row : router.table().routes()) {
        std::string path = concrete(row, {sbx, "ex-none", "9"});
        std::string what = std::string(doorName(row.door)) + " " + row.label();
        ++walked[row.door];
        if (row.roles == kPublicRoute) {
            // No credential at all: the row checks its own (a preview's
            // capability, a port's rule) or has nothing to guard (health);
            // a row that checks its capability in the head (an upload
            // link's token) refuses one without it before reading a byte.
            auto verdict = admit(row, requestFor(row, path, sbx, nullptr));
            if (row.headCheck)
                EXPECT_TRUE(verdict.error) << what << ": no token";
            else
                EXPECT_FALSE(verdict.error) << what;
            continue;
        }
        EXPECT_EQ(admit(row, requestFor(row, path, sbx, nullptr)).error, ErrorCode::unauthorized)
            << what << ": no credential";
        EXPECT_EQ(admit(row, requestFor(row, path, sbx, &revoked)).error, ErrorCode::unauthorized)
            << what << ": a revoked key";
        bool namesSandbox = row.door == Door::e2b_envd ||
                            (!row.pattern.empty() && path.find(sbx) != std::string::npos);
        for (Role role : {Role::agent, Role::approver, Role::admin}) {
            bool allowed = row.roles & (1u << static_cast<unsigned>(role));
            auto verdict = admit(row, requestFor(row, path, sbx, &own[role]));
            if (allowed) {
                EXPECT_FALSE(verdict.error) << what << " as " << roleName(role);
                // An admin acts on the named object as its owner would.
                EXPECT_EQ(verdict.tenant, role == Role::admin && !namesSandbox ? "ops" : "t1")
                    << what;
            } else {
                EXPECT_EQ(verdict.error, ErrorCode::forbidden) << what << " as " << roleName(role);
            }
            // Another tenant's key of the same role never reaches t1's
            // sandbox; a row that names none acts on the caller's own tenant.
            if (role == Role::admin || !allowed) continue;
            auto foreign = admit(row, requestFor(row, path, sbx, &other[role]));
            if (namesSandbox) {
                // envd's token is the sandbox's: another tenant's key cannot have one.
                EXPECT_EQ(foreign.error, row.door == Door::e2b_envd ? ErrorCode::unauthorized
                                                                    : ErrorCode::not_found)
                    << what << " by t2's " << roleName(role);
            } else {
                EXPECT_FALSE(foreign.error) << what << " by t2's " << roleName(role);
                EXPECT_EQ(foreign.tenant, "t2") << what << " acts on the caller's tenant";
            }
        }
    }
    EXPECT_GT(walked[Door::native], 60u);
    EXPECT_EQ(walked[Door::e2b_control], 24u);
    EXPECT_EQ(walked[Door::e2b_envd], 20u);
    EXPECT_EQ(walked[Door::e2b_port], 1u);
}

// api/openapi.yaml (native) and api/e2b.yaml (x-door) document every row of
// the table with the roles it accepts (x-roles; none for public rows), and
// nothing the table does not route.
TEST_F(FrontDoorsTest, EveryRowIsDocumentedWithItsDoorAndRolesAndNothingElse) {
    std::map<std::string, std::string> documented;  // "e2b_envd GET /files" -> "[agent, admin]"
    for (const auto* spec : {&test::ApiSpec::get(), &test::ApiSpec::e2b()})
        for (const auto& route : test::documentedRoutes(*spec)) {
            auto [it, fresh] = documented.emplace(
                route.door + " " + route.method + " " + route.normalized, route.roles);
            EXPECT_TRUE(fresh) << it->first << " is documented twice";
        }
    auto text = [](Roles roles) {
        std::string out;
        for (Role r : {Role::agent, Role::approver, Role::admin})
            if (roles & (1u << static_cast<unsigned>(r)))
                out += (out.empty() ? "" : ", ") + roleName(r);
        if (roles & kNodeRoute) out += (out.empty() ? "" : ", ") + std::string("node");
        return roles == kPublicRoute ? std::string() : "[" + out + "]";
    };
    std::map<Door, std::size_t> checked;
    for (const auto& row : router.table().routes()) {
        std::string pattern;
        for (const auto& s : row.pattern) pattern += "/" + s;
        // A prefix row is documented with its rest as one parameter.
        if (row.prefix) pattern += "/{}";
        std::vector<std::string> methods{row.method};
        if (row.method == "*") methods.assign(std::begin(kMethods), std::end(kMethods));
        for (const auto& method : methods) {
            std::string what = std::string(doorName(row.door)) + " " + method + " " + pattern;
            auto it = documented.find(what);
            ASSERT_NE(it, documented.end()) << what << " is routed but not documented";
            EXPECT_EQ(it->second, text(row.roles)) << what << ": x-roles";
            documented.erase(it);
        }
        ++checked[row.door];
    }
    EXPECT_TRUE(documented.empty()) << "documented but not routed: " << documented.begin()->first;
    EXPECT_GT(checked[Door::native], 60u);
    EXPECT_EQ(checked[Door::e2b_control] + checked[Door::e2b_envd] + checked[Door::e2b_port], 45u);
}

// One mapping, each door's shape: the same failure is the same status with
// the same message everywhere but Connect's, whose status is Connect's.
TEST_F(FrontDoorsTest, OneErrorMappingIsRenderedInEachDoorsShape) {
    ApiRequest request;
    request.method = "GET";
    request.path = "/x";
    auto status = errorStatusFor(
        std::make_exception_ptr(Error(ErrorCode::not_found, "no sandbox sbx-1")), request);
    EXPECT_EQ(status.status, 404);
    auto native = renderError(ErrorShape::native, status);
    EXPECT_EQ(native.status, 404);
    EXPECT_EQ(json::parse(native.body)["error"]["code"], "not_found");
    auto e2bShape = renderError(ErrorShape::e2b, status);
    EXPECT_EQ(e2bShape.status, 404);
    EXPECT_EQ(json::parse(e2bShape.body), (json{{"code", 404}, {"message", "no sandbox sbx-1"}}));
    auto connect = renderError(ErrorShape::connect, status);
    EXPECT_EQ(connect.status, 404);
    EXPECT_EQ(json::parse(connect.body)["code"], "not_found");
    // A sandbox the gateway cannot reach: E2B's proxy shape on its doors.
    auto gone = errorStatus(ErrorCode::sandbox_unreachable, "The sandbox is paused");
    auto gateway = renderError(ErrorShape::connect, gone, "sbx-9");
    EXPECT_EQ(gateway.status, 502);
    EXPECT_EQ(json::parse(gateway.body)["sandboxId"], "sbx-9");
    // What is not a typed error is internal, and its text never leaves.
    auto odd = errorStatusFor(std::make_exception_ptr(std::runtime_error("secret detail")), request);
    EXPECT_EQ(odd.status, 500);
    EXPECT_EQ(renderError(ErrorShape::e2b, odd).body.find("secret"), std::string::npos);
    // Each door's routes answer in its shape, unrouted paths included.
    auto notRouted = [&](ApiRequest r) { return router.handle(r); };
    ApiRequest control;
    control.method = "GET";
    control.path = "/sandboxes/sbx-1/nothing";
    control.headers["x-api-key"] = "e2b_" + own[Role::agent].key.substr(3);
    auto c = notRouted(control);
    EXPECT_EQ(c.status, 404);
    EXPECT_TRUE(json::parse(c.body)["code"].is_number()) << c.body;
    ApiRequest wrongMethod = control;
    wrongMethod.method = "PUT";
    wrongMethod.path = "/sandboxes";
    EXPECT_EQ(notRouted(wrongMethod).status, 405);
    ApiRequest rpc;
    rpc.method = "POST";
    rpc.path = "/process.Process/Nope";
    rpc.headers["e2b-sandbox-id"] = "sbx-1";
    rpc.headers["e2b-sandbox-port"] = std::to_string(e2b::kEnvdPort);
    auto r = notRouted(rpc);
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(json::parse(r.body)["code"], "not_found") << "Connect's shape";
    ApiRequest native2;
    native2.method = "GET";
    native2.path = "/v1/nothing";
    EXPECT_EQ(json::parse(notRouted(native2).body)["error"]["code"], "not_found");
}

}  // namespace
}  // namespace airlock::api
