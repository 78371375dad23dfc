// The signature a node puts on a caller it forwards.
#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "fleet/NodeCredential.hpp"
#include "support/TestEnv.hpp"

using namespace airlock;
using namespace airlock::fleet;

namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef-fleet";
const ForwardedCaller kCaller{"key-1", "bot", "acme", "agent"};

TEST(NodeCredential, ASignedCallerIsTakenForTheCallItWasSignedFor) {
    NodeCredential c(kToken);
    auto headers = c.sign("node2", "node1", "POST", "/v1/sandboxes/sbx-a/exec?x=1", kCaller, 1000);
    auto caller = c.verify(headers, "node1", "POST", "/v1/sandboxes/sbx-a/exec?x=1", 1030);
    EXPECT_EQ(caller.keyId, "key-1");
    EXPECT_EQ(caller.keyName, "bot");
    EXPECT_EQ(caller.tenant, "acme");
    EXPECT_EQ(caller.role, "agent");
}

TEST(NodeCredential, AnotherCallAnotherTokenAnAlteredCallerOrAStaleTimeIsRefused) {
    NodeCredential c(kToken);
    auto headers = c.sign("node2", "node1", "GET", "/v1/sandboxes/sbx-a", kCaller, 1000);
    EXPECT_EQ(test::codeOf([&] { c.verify(headers, "node1", "DELETE", "/v1/sandboxes/sbx-a", 1000); }),
              ErrorCode::unauthorized);
    EXPECT_EQ(test::codeOf([&] { c.verify(headers, "node1", "GET", "/v1/sandboxes/sbx-b", 1000); }),
              ErrorCode::unauthorized);
    EXPECT_EQ(test::codeOf([&] { c.verify(headers, "node1", "GET", "/v1/sandboxes/sbx-a", 1061); }),
              ErrorCode::unauthorized);
    EXPECT_EQ(test::codeOf([&] { c.verify(headers, "node1", "GET", "/v1/sandboxes/sbx-a", 939); }),
              ErrorCode::unauthorized);
    NodeCredential other("another-token-0123456789abcdef0123456");
    EXPECT_EQ(test::codeOf([&] { other.verify(headers, "node1", "GET", "/v1/sandboxes/sbx-a", 1000); }),
              ErrorCode::unauthorized);
    // The caller swapped for an admin under the same MAC.
    auto admin = c.sign("node2", "node1", "GET", "/v1/sandboxes/sbx-a",
                        ForwardedCaller{"key-1", "bot", "acme", "admin"}, 1000);
    auto mixed = headers;
    mixed[NodeCredential::kCaller] = admin[NodeCredential::kCaller];
    EXPECT_EQ(test::codeOf([&] { c.verify(mixed, "node1", "GET", "/v1/sandboxes/sbx-a", 1000); }),
              ErrorCode::unauthorized);
    auto renamed = headers;
    renamed[NodeCredential::kFrom] = "node3";
    EXPECT_EQ(test::codeOf([&] { c.verify(renamed, "node1", "GET", "/v1/sandboxes/sbx-a", 1000); }),
              ErrorCode::unauthorized);
}

TEST(NodeCredential, MissingOrMalformedHeadersAreRefused) {
    NodeCredential c(kToken);
    auto headers = c.sign("node2", "node1", "GET", "/x", kCaller, 1000);
    for (const char* name :
         {NodeCredential::kFrom, NodeCredential::kCaller, NodeCredential::kAuth}) {
        auto without = headers;
        without.erase(name);
        EXPECT_EQ(test::codeOf([&] { c.verify(without, "node1", "GET", "/x", 1000); }),
                  ErrorCode::unauthorized)
            << name;
    }
    for (const char* auth :
         {"v1:", "v1:abc:00", "v2:1000:00", "v1:1000", "", "v1:99999999999999999999:0",
          "v2:1000:0123456789abcdef0123456789abcdef", "v2:1000x:0123456789abcdef0123456789abcdef:00",
          "v2:1000:ZZ23456789abcdef0123456789abcdef:00"}) {
        auto bad = headers;
        bad[NodeCredential::kAuth] = auth;
        EXPECT_EQ(test::codeOf([&] { c.verify(bad, "node1", "GET", "/x", 1000); }), ErrorCode::unauthorized)
            << auth;
    }
    EXPECT_THROW(NodeCredential("short"), Error);
}

TEST(NodeCredential, ACallIsTakenOnceAndOnlyByTheNodeItWasSignedFor) {
    NodeCredential c(kToken);
    auto headers = c.sign("node2", "node1", "GET", "/v1/sandboxes/sbx-a", kCaller, 1000);
    EXPECT_EQ(test::codeOf([&] { c.verify(headers, "node3", "GET", "/v1/sandboxes/sbx-a", 1000); }),
              ErrorCode::unauthorized)
        << "signed for node1";
    EXPECT_NO_THROW(c.verify(headers, "node1", "GET", "/v1/sandboxes/sbx-a", 1000));
    EXPECT_EQ(test::codeOf([&] { c.verify(headers, "node1", "GET", "/v1/sandboxes/sbx-a", 1001); }),
              ErrorCode::unauthorized)
        << "a replay within the window";
    // Each signature has its own nonce: the same call signed again passes.
    auto again = c.sign("node2", "node1", "GET", "/v1/sandboxes/sbx-a", kCaller, 1000);
    EXPECT_NE(again[NodeCredential::kAuth], headers[NodeCredential::kAuth]);
    EXPECT_NO_THROW(c.verify(again, "node1", "GET", "/v1/sandboxes/sbx-a", 1002));
}

}  // namespace
