#include "api/ErrorMapping.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace airlock::api {
namespace {

TEST(ErrorMapping, EveryCodeHasItsStatus) {
    EXPECT_EQ(httpStatusFor(ErrorCode::bad_request), 400);
    EXPECT_EQ(httpStatusFor(ErrorCode::unauthorized), 401);
    EXPECT_EQ(httpStatusFor(ErrorCode::forbidden), 403);
    EXPECT_EQ(httpStatusFor(ErrorCode::not_found), 404);
    EXPECT_EQ(httpStatusFor(ErrorCode::conflict), 409);
    EXPECT_EQ(httpStatusFor(ErrorCode::payload_too_large), 413);
    EXPECT_EQ(httpStatusFor(ErrorCode::agent_timeout), 504);
    EXPECT_EQ(httpStatusFor(ErrorCode::agent_error), 502);
    EXPECT_EQ(httpStatusFor(ErrorCode::unavailable), 503);
    EXPECT_EQ(httpStatusFor(ErrorCode::internal), 500);
}

TEST(ErrorMapping, BodyCarriesCodeAndMessage) {
    auto r = errorResponse(ErrorCode::not_found, "no sandbox x");
    EXPECT_EQ(r.status, 404);
    auto j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["error"]["code"], "not_found");
    EXPECT_EQ(j["error"]["message"], "no sandbox x");
}

TEST(ErrorMapping, InvalidUtf8InMessagesDoesNotThrow) {
    auto r = errorResponse(ErrorCode::bad_request, std::string("bad \xff byte"));
    EXPECT_NO_THROW(nlohmann::json::parse(r.body));
}

}  // namespace
}  // namespace airlock::api
