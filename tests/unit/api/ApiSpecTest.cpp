// The check every e2e response goes through (test support, ApiSpec): a
// checker that let a wrong body through would make that whole net useless.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/ApiSpec.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

ApiSpec tinySpec() {
    return ApiSpec(json::parse(R"({
      "paths": {
        "/v1/things": {"get": {"responses": {
            "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/List"}}}},
            "4XX": {"$ref": "#/components/responses/Error"}}}},
        "/v1/things/{id}": {"get": {"responses": {
            "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}},
                            "delete": {"responses": {"204": {"description": "gone"}}}},
        "/v1/things/special": {"get": {"responses": {"200": {"description": "raw bytes"},
                                                     "409": {"description": "busy"}}}},
        "/v1/relay/{path}": {"get": {"responses": {"200": {"description": "passed through"},
                                                   "default": {"description": "anything"}}}}
      },
      "components": {
        "responses": {"Error": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
        "schemas": {
          "Error": {"type": "object", "additionalProperties": false, "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["code", "message"],
                                             "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
          "Thing": {"type": "object", "additionalProperties": false, "required": ["id", "size"],
                    "properties": {"id": {"type": "string"}, "size": {"type": "integer"},
                                   "ratio": {"type": "number"}, "owner": {"type": "string", "nullable": true},
                                   "state": {"type": "string", "enum": ["on", "off"]},
                                   "tags": {"type": "object", "additionalProperties": {"type": "string"}}}},
          "Choice": {"oneOf": [{"type": "integer"}, {"type": "number"}], "description": "1 matches both"},
          "List": {"type": "object", "required": ["things"],
                   "properties": {"things": {"type": "array", "items": {"$ref": "#/components/schemas/Thing"}}}}
        }
      }
    })"));
}

TEST(ApiSpec, AcceptsWhatTheSpecSays) {
    auto spec = tinySpec();
    EXPECT_EQ(
        spec.check("GET", "/v1/things/t1?x=1", 200,
                   R"({"id":"t1","size":3,"ratio":1,"owner":null,"state":"on","tags":{"a":"b"}})"),
        "");
    EXPECT_EQ(spec.check("GET", "/v1/things", 200, R"({"things":[{"id":"a","size":1}]})"), "");
    EXPECT_EQ(spec.check("DELETE", "/v1/things/t1", 204, ""), "");
    // The literal path wins over the parameter; it has no JSON schema.
    EXPECT_EQ(spec.check("GET", "/v1/things/special", 200, "\x01 raw"), "");
    // Any error status has the one error shape.
    EXPECT_EQ(spec.check("GET", "/v1/things/t1", 503,
                         R"({"error":{"code":"unavailable","message":"later"}})"),
              "");
    EXPECT_EQ(spec.check("GET", "/v1/nothing/here", 404,
                         R"({"error":{"code":"not_found","message":"no route"}})"),
              "");
}

TEST(ApiSpec, NamesEveryWayABodyCanBeWrong) {
    auto spec = tinySpec();
    auto wrong = [&](const std::string& body, const std::string& expected) {
        auto why = spec.check("GET", "/v1/things/t1", 200, body);
        EXPECT_NE(why.find(expected), std::string::npos) << body << " -> " << why;
    };
    wrong(R"({"id":"t1"})", "lacks required field \"size\"");
    wrong(R"({"id":"t1","size":"3"})", "body.size: is string, the spec says integer");
    wrong(R"({"id":"t1","size":1.5})", "is number, the spec says integer");
    wrong(R"({"id":"t1","size":1,"extra":true})", "has \"extra\", which the spec does not list");
    wrong(R"({"id":"t1","size":1,"state":"maybe"})", "is not one of");
    wrong(R"({"id":"t1","size":1,"tags":{"a":1}})", "body.tags.a: is integer");
    wrong(R"({"id":null,"size":1})", "body.id: is null");
    wrong("not json", "not the JSON the spec says");
    EXPECT_NE(spec.check("GET", "/v1/things", 200, R"({"things":[{"id":"a","size":1},{"id":"b"}]})")
                  .find("body.things[1]"),
              std::string::npos);
}

TEST(ApiSpec, RefusesStatusesAndRoutesTheSpecDoesNotHave) {
    auto spec = tinySpec();
    EXPECT_NE(spec.check("GET", "/v1/things/t1", 201, "{}").find("201 is not among the responses"),
              std::string::npos);
    EXPECT_NE(spec.check("POST", "/v1/things/t1", 200, "{}").find("has no POST"),
              std::string::npos);
    EXPECT_NE(spec.check("GET", "/v1/elsewhere", 200, "{}").find("no operation"),
              std::string::npos);
    EXPECT_NE(spec.check("GET", "/v1/things/t1", 500, R"({"oops":1})").find("lacks required field"),
              std::string::npos);
    // An error listed for its meaning alone still has the one shape.
    EXPECT_NE(spec.check("GET", "/v1/things/special", 409, "busy!").find("not JSON"),
              std::string::npos);
    EXPECT_EQ(spec.check("GET", "/v1/things/special", 409,
                         R"({"error":{"code":"conflict","message":"busy"}})"),
              "");
    // A passthrough's other answers are whatever its server sent.
    EXPECT_EQ(spec.check("GET", "/v1/relay/a/b", 404, "<html>not here</html>"), "");
    // oneOf means exactly one.
    EXPECT_NE(spec.validate(json{{"$ref", "#/components/schemas/Choice"}}, json(1), "v")
                  .find("2 of oneOf"),
              std::string::npos);
    EXPECT_EQ(spec.validate(json{{"$ref", "#/components/schemas/Choice"}}, json(1.5), "v"), "");
    EXPECT_EQ(spec.responsesWithoutSchema(),
              (std::vector<std::string>{"get /v1/relay/{path} 200", "get /v1/things/special 200",
                                        "delete /v1/things/{id} 204"}));
}

// The real document loads, and every success it documents has a schema the
// checker holds responses to, but for bodies that are not JSON.
TEST(ApiSpec, EveryJsonAnswerOfTheProjectsSpecHasASchema) {
    const auto& spec = ApiSpec::get();
    EXPECT_EQ(spec.check("GET", "/v1/sandboxes/sbx-x", 404,
                         R"({"error":{"code":"not_found","message":"no sandbox"}})"),
              "");
    // The preview's {path} is the rest of the path: empty, or several segments.
    for (const char* target : {"/preview/sbx-a/8000/tok/", "/preview/sbx-a/8000/tok/a/b.js?x=1"})
        EXPECT_EQ(spec.check("GET", target, 200, "<html>"), "") << target;
    const std::vector<std::string> notJson = {
        "get /metrics 200",                                 // Prometheus text
        "get /v1/evidence/{id} 200",                        // the bundle (gzip)
        "get /v1/sandboxes/{id}/files 200",                 // the file's bytes
        "get /v1/sandboxes/{id}/processes/{pid}/logs 200",  // a text stream
        "post /mcp 202",                                    // accepted, no body
        "get /console/{path} 308",                          // a redirect to /console/
    };
    for (const auto& response : spec.responsesWithoutSchema()) {
        bool noBody = response.size() > 4 && response.compare(response.size() - 4, 4, " 204") == 0;
        bool passedThrough = response.find(" /preview/") != std::string::npos;
        bool listed = std::find(notJson.begin(), notJson.end(), response) != notJson.end();
        EXPECT_TRUE(noBody || passedThrough || listed) << response << " has no JSON schema";
    }
}

}  // namespace
}  // namespace airlock::test
