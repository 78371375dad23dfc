// etcd's JSON gateway from C++, against real etcd members on loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "core/Error.hpp"
#include "fleet/EtcdClient.hpp"
#include "support/EtcdCluster.hpp"
#include "support/HttpsClient.hpp"
#include "support/TestEnv.hpp"
#include "support/TlsTestServer.hpp"

using namespace airlock;
using namespace airlock::fleet;
using namespace std::chrono_literals;

namespace {

class EtcdClientTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (test::EtcdCluster::available()) cluster_ = std::make_unique<test::EtcdCluster>(1);
    }
    static void TearDownTestSuite() { cluster_.reset(); }
    void SetUp() override {
        if (!cluster_) GTEST_SKIP() << "etcd is not installed (scripts/setup installs it)";
        client_ = std::make_unique<EtcdClient>(cluster_->clientUrls());
        prefix_ = "/test/" +
                  std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
                  "/";
    }
    static std::unique_ptr<test::EtcdCluster> cluster_;
    std::unique_ptr<EtcdClient> client_;
    std::string prefix_;
};
std::unique_ptr<test::EtcdCluster> EtcdClientTest::cluster_;

TEST_F(EtcdClientTest, PutsGetsListsAndRemovesKeysWithAnyBytes) {
    std::string binary("a\0b\xff\n\"", 6);
    auto r1 = client_->put(prefix_ + "b", binary);
    auto r2 = client_->put(prefix_ + "a", "first");
    EXPECT_GT(r2, r1);
    client_->put(prefix_ + "a", "second");
    client_->put(prefix_.substr(0, prefix_.size() - 1) + "0", "outside the prefix");
    auto got = client_->get(prefix_ + "b");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->value, binary);
    EXPECT_EQ(got->version, 1);
    auto a = client_->get(prefix_ + "a");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->value, "second");
    EXPECT_EQ(a->version, 2);
    EXPECT_LT(a->createRevision, a->modRevision);
    EXPECT_FALSE(client_->get(prefix_ + "missing"));
    auto all = client_->list(prefix_);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].key, prefix_ + "a");
    EXPECT_EQ(all[1].key, prefix_ + "b");
    EXPECT_TRUE(client_->remove(prefix_ + "a"));
    EXPECT_FALSE(client_->remove(prefix_ + "a"));
    EXPECT_EQ(client_->list(prefix_).size(), 1u);
}

TEST_F(EtcdClientTest, ListsMoreKeysThanOnePageHolds) {
    for (int batch = 0; batch < 20; ++batch) {
        std::vector<KeyOp> puts;
        for (int i = 0; i < 120; ++i) {
            char key[16];
            std::snprintf(key, sizeof key, "%05d", batch * 120 + i);
            puts.push_back(KeyOp::put(prefix_ + key, "v"));
        }
        ASSERT_TRUE(client_->txn({}, puts, {}).succeeded);
    }
    auto all = client_->list(prefix_);
    ASSERT_EQ(all.size(), 2400u);
    for (std::size_t i = 1; i < all.size(); ++i) ASSERT_LT(all[i - 1].key, all[i].key);
}

TEST_F(EtcdClientTest, TransactionsCreateOnlyWhatIsAbsentAndSwapOnlyWhatIsUnchanged) {
    std::string key = prefix_ + "claim";
    auto first = client_->txn({KeyCompare::absent(key)}, {KeyOp::put(key, "mine"), KeyOp::get(key)},
                              {KeyOp::get(key)});
    EXPECT_TRUE(first.succeeded);
    ASSERT_EQ(first.reads.size(), 1u);
    ASSERT_TRUE(first.reads[0]);
    auto second = client_->txn({KeyCompare::absent(key)}, {KeyOp::put(key, "theirs")},
                               {KeyOp::get(key), KeyOp::get(prefix_ + "none")});
    EXPECT_FALSE(second.succeeded);
    ASSERT_EQ(second.reads.size(), 2u);
    ASSERT_TRUE(second.reads[0]);
    EXPECT_EQ(second.reads[0]->value, "mine");  // the failure branch read what is there
    EXPECT_FALSE(second.reads[1]);
    std::int64_t rev = second.reads[0]->modRevision;
    client_->put(key, "changed");
    EXPECT_FALSE(client_->txn({KeyCompare::modRevision(key, rev)}, {KeyOp::put(key, "stale")}, {})
                     .succeeded);
    auto now = client_->get(key);
    ASSERT_TRUE(now);
    EXPECT_EQ(now->value, "changed");
    EXPECT_TRUE(
        client_->txn({KeyCompare::modRevision(key, now->modRevision)}, {KeyOp::remove(key)}, {})
            .succeeded);
    EXPECT_FALSE(client_->get(key));
}

TEST_F(EtcdClientTest, KeysUnderALeaseGoWhenItIsRevokedOrRunsOut) {
    auto lease = client_->grantLease(2s);
    client_->put(prefix_ + "revoked", "x", lease);
    auto held = client_->get(prefix_ + "revoked");
    ASSERT_TRUE(held);
    EXPECT_EQ(held->lease, lease);
    EXPECT_GT(client_->keepAlive(lease), 0);
    client_->revokeLease(lease);
    EXPECT_FALSE(client_->get(prefix_ + "revoked"));
    EXPECT_EQ(client_->keepAlive(lease), 0);
    EXPECT_NO_THROW(client_->revokeLease(lease));  // gone already

    auto shortLease = client_->grantLease(2s);
    client_->put(prefix_ + "expires", "x", shortLease);
    EXPECT_TRUE(test::waitFor([&] { return !client_->get(prefix_ + "expires"); }, 8s, 200ms));
    EXPECT_EQ(client_->keepAlive(shortLease), 0);
    // A put under a lease that ran out is refused, not written.
    EXPECT_THROW(client_->put(prefix_ + "late", "x", shortLease), Error);
    EXPECT_FALSE(client_->get(prefix_ + "late"));
}

TEST_F(EtcdClientTest, AMemberThatDoesNotAnswerIsSkippedForTheNext) {
    std::string dead = "http://127.0.0.1:" + std::to_string(test::freePort());
    EtcdClient client({dead, cluster_->clientUrl(0)}, {}, 2000ms);
    client.put(prefix_ + "k", "v");
    auto got = client.get(prefix_ + "k");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->value, "v");
    EXPECT_TRUE(client.healthy());
}

TEST(EtcdClientAlone, NoMemberAnsweringIsUnavailableNotAbsent) {
    EtcdClient client({"http://127.0.0.1:" + std::to_string(test::freePort())}, {}, 1000ms);
    try {
        client.get("/airlock/x");
        FAIL() << "a read with no member answering returned";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::unavailable);
    }
    EXPECT_FALSE(client.healthy());
}

TEST(EtcdClientAlone, URLsThatAreNotHttpHostPortAreRefused) {
    for (const char* url :
         {"ftp://127.0.0.1:2379", "http://127.0.0.1", "127.0.0.1:2379",
          "http://user@127.0.0.1:2379", "http://127.0.0.1:2379/v3", "http://:2379"}) {
        try {
            EtcdClient client({url});
            ADD_FAILURE() << url << " was taken";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::bad_request) << url;
        }
    }
    EXPECT_THROW(EtcdClient(std::vector<std::string>{}), Error);
    EXPECT_NO_THROW(EtcdClient({"http://[::1]:2379", "https://etcd.internal:2379/"}));
}

TEST(EtcdClientAlone, PrefixEndIsThePrefixWithItsLastByteIncremented) {
    EXPECT_EQ(prefixEnd("/airlock/nodes/"), "/airlock/nodes0");
    EXPECT_EQ(prefixEnd(std::string("a\xff", 2)), "b");
    EXPECT_EQ(prefixEnd(""), std::string(1, '\0'));
}

// The fail-fast second after an outage must not outlast the outage: the
// first call once a member answers again goes through. The member is a
// stand-in that answers etcd's "no leader" until told otherwise.
TEST(EtcdClientAlone, AMemberBackIsUsedAtOnceNotAfterTheFailFastSecond) {
    test::TempDir dir;
    ASSERT_TRUE(test::makeTestCertificates(dir.path()));
    std::atomic<bool> leader{false};
    test::TlsTestServer member(
        dir.path() + "/server.pem", dir.path() + "/server.key",
        [&](const std::string&) -> std::pair<std::string, std::string> {
            if (!leader)
                return {"503 Service Unavailable", R"({"message":"etcdserver: no leader"})"};
            return {"200 OK", R"({"header":{"revision":"7"},"kvs":[]})"};
        });
    EtcdClient client({"https://127.0.0.1:" + std::to_string(member.port())},
                      EtcdTls{dir.path() + "/ca.pem", "", ""}, 2000ms);
    try {
        client.get("/airlock/x");
        FAIL() << "a read without a leader returned";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::unavailable);
        EXPECT_NE(std::string(e.what()).find("no leader"), std::string::npos) << e.what();
    }
    leader = true;
    EXPECT_FALSE(client.get("/airlock/x")) << "the member answered; nothing is stored";
}

TEST(EtcdClientCluster, OneStoppedMemberOfThreeChangesNothing) {
    if (!test::EtcdCluster::available()) GTEST_SKIP() << "etcd is not installed";
    test::EtcdCluster cluster(3);
    EtcdClient client(cluster.clientUrls(), {}, 3000ms);
    client.put("/cluster/before", "1");
    cluster.stop(0);
    // The first URL no longer answers; a new leader may be elected meanwhile.
    EXPECT_TRUE(test::waitFor(
        [&] {
            try {
                client.put("/cluster/after", "2");
                return true;
            } catch (const Error&) {
                return false;
            }
        },
        10s, 200ms));
    auto before = client.get("/cluster/before");
    ASSERT_TRUE(before);
    EXPECT_EQ(before->value, "1");
    auto lease = client.grantLease(5s);
    EXPECT_GT(client.keepAlive(lease), 0);
    cluster.stop(1);  // no quorum: writes are refused as unavailable, promptly
    try {
        client.put("/cluster/no-quorum", "3");
        ADD_FAILURE() << "a write without quorum returned";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
    }
}

}  // namespace
