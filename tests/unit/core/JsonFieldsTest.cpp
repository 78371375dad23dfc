#include "core/JsonFields.hpp"

#include <gtest/gtest.h>

#include "support/TestEnv.hpp"

#include "core/Error.hpp"

namespace airlock {
namespace {

using test::codeOf;

TEST(JsonFields, UnknownFieldIsBadRequest) {
    auto j = nlohmann::json::parse(R"({"a":1,"b":2})");
    EXPECT_NO_THROW(rejectUnknownFields(j, {"a", "b"}, "x"));
    EXPECT_EQ(codeOf([&] { rejectUnknownFields(j, {"a"}, "x"); }), ErrorCode::bad_request);
}

TEST(JsonFields, MalformedBodyIsBadRequest) {
    EXPECT_EQ(codeOf([] { parseJsonBody("{\"a\":"); }), ErrorCode::bad_request);
    EXPECT_EQ(codeOf([] { parseJsonBody(""); }), ErrorCode::bad_request);
    EXPECT_EQ(codeOf([] { rejectUnknownFields(parseJsonBody("[1]"), {}, "x"); }), ErrorCode::bad_request);
}

}  // namespace
}  // namespace airlock
