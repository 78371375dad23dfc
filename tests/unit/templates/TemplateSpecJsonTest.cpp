#include "templates/TemplateSpecJson.hpp"

#include <gtest/gtest.h>

#include "core/Error.hpp"

namespace airlock::templates {
namespace {
using nlohmann::json;

ErrorCode codeOf(const json& j) {
    try {
        parseTemplateSpec(j);
    } catch (const Error& e) {
        return e.code();
    }
    return ErrorCode::internal;
}

std::string messageOf(const json& j) {
    try {
        parseTemplateSpec(j);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(TemplateSpecJson, ARecipeWithEveryKindOfStepParsesInOrder) {
    auto spec = parseTemplateSpec(json::parse(R"({
      "name": "webapp", "tag": "v1", "from": "debian", "vcpus": 2, "memory_mib": 1024,
      "steps": [{"run": "echo hi", "user": "user", "cwd": "/srv", "env": {"A": "1"}},
                {"copy": {"src": "app/", "dest": "/srv/app", "mode": "0644", "owner": "user:user"}},
                {"env": {"GREETING": "hello"}}, {"workdir": "/srv"}, {"user": "user"},
                {"apt": ["curl"]}, {"npm": "left-pad"}, {"pip": ["requests==2.31.0"]},
                {"git": {"repo": "https://example.invalid/r.git", "ref": "main", "dest": "/src"}}],
      "start": {"cmd": "python3 -m http.server 8000", "ready": {"port": 8000, "timeout_s": 30}}})"));
    EXPECT_EQ(spec.name, "webapp");
    EXPECT_EQ(spec.tag, "v1");
    EXPECT_EQ(spec.from, "debian");
    EXPECT_EQ(spec.vcpus, 2u);
    ASSERT_EQ(spec.steps.size(), 9u);
    const auto& run = std::get<RunStep>(spec.steps[0]);
    EXPECT_EQ(run.shell, "echo hi");
    EXPECT_EQ(run.user, "user");
    EXPECT_EQ(run.env.at(0).second, "1");
    EXPECT_EQ(std::get<CopyStep>(spec.steps[1]).mode, "0644");
    EXPECT_EQ(std::get<PackagesStep>(spec.steps[6]).manager, PackageManager::npm);
    EXPECT_EQ(std::get<GitStep>(spec.steps[8]).ref, "main");
    ASSERT_TRUE(spec.start);
    EXPECT_EQ(spec.start->ready.kind, ReadyCheck::Kind::port);
    EXPECT_EQ(spec.start->ready.port, 8000u);
    EXPECT_EQ(spec.start->ready.timeoutS, 30u);
    EXPECT_FALSE(changesDisk(spec.steps[2]));
    EXPECT_TRUE(changesDisk(spec.steps[1]));
}

TEST(TemplateSpecJson, UnknownFieldsAndMalformedStepsAreRefusedNamingThem) {
    EXPECT_NE(messageOf({{"name", "a"}, {"from", "debian"}, {"stepz", json::array()}}).find("stepz"),
              std::string::npos);
    EXPECT_NE(messageOf({{"name", "a"}, {"from", "debian"}, {"steps", {{{"run", 3}}}}}).find("steps[0]"),
              std::string::npos);
    EXPECT_EQ(codeOf({{"name", "a"}, {"from", "debian"}, {"steps", {{{"run", "x"}, {"copy", {}}}}}}),
              ErrorCode::bad_request);
    EXPECT_EQ(codeOf({{"name", "Bad Name"}, {"from", "debian"}}), ErrorCode::bad_request);
    EXPECT_EQ(codeOf({{"name", "a:b"}, {"from", "debian"}}), ErrorCode::bad_request);
    EXPECT_EQ(codeOf({{"name", "a"}}), ErrorCode::bad_request);  // no from
    // A package is a name, never an option or a shell word.
    EXPECT_EQ(codeOf({{"name", "a"}, {"from", "debian"}, {"steps", {{{"apt", "--allow-unauthenticated"}}}}}),
              ErrorCode::bad_request);
    EXPECT_EQ(codeOf({{"name", "a"}, {"from", "debian"}, {"steps", {{{"apt", "curl; rm -rf /"}}}}}),
              ErrorCode::bad_request);
    EXPECT_EQ(codeOf({{"name", "a"}, {"from", "debian"}, {"start", {{"cmd", "x"}, {"ready", {{"port", 0}}}}}}),
              ErrorCode::bad_request);
    EXPECT_EQ(codeOf({{"name", "a"}, {"from", "debian"},
                      {"start", {{"cmd", "x"}, {"ready", {{"port", 80}, {"file", "/x"}}}}}}),
              ErrorCode::bad_request);
    EXPECT_EQ(codeOf({{"name", "a"}, {"from", "debian"}, {"steps", {{{"copy", {{"src", "a"}, {"dest", "/b"}, {"mode", "rwx"}}}}}}}),
              ErrorCode::bad_request);
}

TEST(TemplateSpecJson, AStepsKeyChangesWithItsContentOnly) {
    auto a = parseTemplateSpec(json::parse(R"({"name":"a","from":"debian","steps":[{"run":"echo 1"}]})"));
    auto b = parseTemplateSpec(json::parse(R"({"name":"b","from":"debian","steps":[{"run":"echo 1"}]})"));
    auto c = parseTemplateSpec(json::parse(R"({"name":"a","from":"debian","steps":[{"run":"echo 2"}]})"));
    EXPECT_EQ(stepJson(a.steps[0]).dump(), stepJson(b.steps[0]).dump());
    EXPECT_NE(stepJson(a.steps[0]).dump(), stepJson(c.steps[0]).dump());
    EXPECT_EQ(stepText(c.steps[0]), "RUN echo 2");
}

TEST(TemplateSpecJson, ARefIsANameAndATagLatestByDefault) {
    auto r = parseTemplateRef("webapp");
    EXPECT_EQ(r.name, "webapp");
    EXPECT_EQ(r.tag, "latest");
    r = parseTemplateRef("webapp:v1.2");
    EXPECT_EQ(r.tag, "v1.2");
    EXPECT_THROW(parseTemplateRef("web/app"), Error);
    EXPECT_THROW(parseTemplateRef("webapp:"), Error);
    EXPECT_THROW(parseTemplateRef(""), Error);
}

TEST(TemplateSpecJson, BesideADockerfileTheSpecGivesNeitherStepsNorFrom) {
    EXPECT_NO_THROW(requireDockerfileCompanion({{"name", "a"}, {"ready", {{"port", 80}}}}));
    EXPECT_THROW(requireDockerfileCompanion({{"name", "a"}, {"steps", json::array()}}), Error);
    EXPECT_THROW(requireDockerfileCompanion({{"name", "a"}, {"from", "debian"}}), Error);
}

}  // namespace
}  // namespace airlock::templates
