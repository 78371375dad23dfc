#include "workspace/WorkspaceCredentials.hpp"

#include <gtest/gtest.h>

#include "store/Database.hpp"
#include "support/TestEnv.hpp"

namespace airlock::workspace {
namespace {
using test::codeOf;

struct Recorded {
    std::string tenant, type;
    nlohmann::json data;
};

class WorkspaceCredentialsTest : public ::testing::Test {
  protected:
    static std::shared_ptr<const SecretCipher> cipher() {
        std::array<unsigned char, 32> key{};
        key.fill(7);
        return std::make_shared<const SecretCipher>(key);
    }
    static egress::AddressPolicy opened(const std::string& cidr) {
        return egress::AddressPolicy({egress::CidrRange::parse(cidr)});
    }
    WorkspaceCredentials make(std::shared_ptr<const SecretCipher> c = cipher(),
                              egress::AddressPolicy policy = egress::AddressPolicy()) {
        return WorkspaceCredentials(store, std::move(c), std::move(policy),
                                    [this](const std::string& tenant, const std::string& type,
                                           const nlohmann::json& data) {
                                        recorded.push_back({tenant, type, data});
                                    });
    }
    static CredentialSpec token(const std::string& name, const std::string& host,
                                std::vector<std::string> scope = {}) {
        return {name, "https-token", host, "git", "s3cret-" + name, "", std::move(scope)};
    }

    test::TempDir dir;
    Database db{dir.path() + "/state.db"};
    CredentialStore store{db};
    std::vector<Recorded> recorded;
};

TEST_F(WorkspaceCredentialsTest, TheSecretIsSealedAtRestAndNeverReturned) {
    auto creds = make();
    auto added = creds.add("t1", token("gh", "git.example"));
    EXPECT_EQ(added.name, "gh");
    EXPECT_TRUE(added.secretSealed.empty());
    auto row = store.find("t1", "gh");
    ASSERT_TRUE(row);
    EXPECT_FALSE(row->secretSealed.empty());
    EXPECT_EQ(row->secretSealed.find("s3cret-gh"), std::string::npos) << "sealed, not stored";
    for (const auto& c : creds.list("t1")) EXPECT_TRUE(c.secretSealed.empty());
    ASSERT_EQ(recorded.size(), 1u);
    EXPECT_EQ(recorded[0].tenant, "t1");
    EXPECT_EQ(recorded[0].type, "credential.created");
    EXPECT_EQ(recorded[0].data.dump().find("s3cret"), std::string::npos)
        << "the audit names the credential, never its secret";
}

TEST_F(WorkspaceCredentialsTest, NamesAreTheTenantsOwnAndBounded) {
    auto creds = make();
    creds.add("t1", token("gh", "git.example"));
    EXPECT_EQ(codeOf([&] { creds.add("t1", token("gh", "other.example")); }),
              ErrorCode::conflict);
    creds.add("t2", token("gh", "git.example"));  // another tenant's namespace
    EXPECT_EQ(creds.list("t1").size(), 1u);
    for (std::size_t i = 1; i < WorkspaceCredentials::kMaxPerTenant; ++i)
        creds.add("t1", token("c" + std::to_string(i), "git.example"));
    EXPECT_EQ(codeOf([&] { creds.add("t1", token("one-more", "git.example")); }),
              ErrorCode::quota_exceeded);
    EXPECT_EQ(codeOf([&] { creds.remove("t1", "nope"); }), ErrorCode::not_found);
    creds.remove("t1", "gh");
    EXPECT_FALSE(store.find("t1", "gh"));
    EXPECT_TRUE(store.find("t2", "gh")) << "only the caller's own goes";
}

TEST_F(WorkspaceCredentialsTest, WithoutAKeyNothingIsStoredOrOpened) {
    auto creds = make(nullptr);
    EXPECT_EQ(codeOf([&] { creds.add("t1", token("gh", "git.example")); }),
              ErrorCode::unavailable);
    EXPECT_TRUE(creds.secretsOf("t1").empty());
}

TEST_F(WorkspaceCredentialsTest, OpensOnlyForItsHostKindAndScope) {
    auto creds = make();
    creds.add("t1", token("gh", "git.example"));
    creds.add("t1", token("wide", "git.example", {"/org/", "/shared/lib.git"}));
    auto url = RemoteUrl::parse("https://git.example/org/app.git");

    EXPECT_FALSE(creds.open("t1", "", url)) << "no name: an anonymous fetch";
    auto opened = creds.open("t1", "gh", url);
    ASSERT_TRUE(opened);
    EXPECT_EQ(opened->secret, "s3cret-gh");
    EXPECT_EQ(opened->ownPath, "/org/app.git");
    EXPECT_EQ(opened->scope, std::vector<std::string>{"/org/"})
        << "without a scope: the repositories beside the workspace's own";

    EXPECT_EQ(codeOf([&] { creds.open("t2", "gh", url); }), ErrorCode::not_found)
        << "another tenant's credential does not exist for it";
    EXPECT_EQ(codeOf([&] { creds.open("t1", "gh", RemoteUrl::parse("https://evil.example/org/app.git")); }),
              ErrorCode::forbidden);
    EXPECT_EQ(codeOf([&] { creds.open("t1", "gh", RemoteUrl::parse("https://git.example:8443/org/app.git")); }),
              ErrorCode::forbidden)
        << "another port is another host";
    EXPECT_EQ(codeOf([&] { creds.open("t1", "gh", RemoteUrl::parse("ssh://git@git.example/org/app.git")); }),
              ErrorCode::bad_request)
        << "a token is not an ssh key";

    EXPECT_TRUE(creds.open("t1", "wide", RemoteUrl::parse("https://git.example/shared/lib.git")));
    EXPECT_EQ(codeOf([&] { creds.open("t1", "wide", RemoteUrl::parse("https://git.example/shared/other.git")); }),
              ErrorCode::forbidden)
        << "a scoped credential goes only where its scope says";
}

TEST_F(WorkspaceCredentialsTest, PlainHttpOnlyToRangesTheOperatorOpened) {
    auto closed = make();
    closed.add("t1", token("local", "127.0.0.1:8080"));
    auto url = RemoteUrl::parse("http://127.0.0.1:8080/org/app.git");
    EXPECT_EQ(codeOf([&] { closed.open("t1", "local", url); }), ErrorCode::forbidden);
    auto open = make(cipher(), opened("127.0.0.1/32"));
    auto c = open.open("t1", "local", url);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->secret, "s3cret-local");
}

TEST_F(WorkspaceCredentialsTest, ASealedSecretMovedToAnotherNameOrTenantDoesNotOpen) {
    auto creds = make();
    creds.add("t1", token("gh", "git.example"));
    auto row = *store.find("t1", "gh");
    row.tenant = "t2";
    ASSERT_TRUE(store.insert(row));
    EXPECT_EQ(codeOf([&] { creds.open("t2", "gh", RemoteUrl::parse("https://git.example/org/app.git")); }),
              ErrorCode::internal);
}

TEST_F(WorkspaceCredentialsTest, SecretsOfATenantAreWhatItsSandboxesAreMaskedOf) {
    auto creds = make();
    creds.add("t1", token("a", "git.example"));
    creds.add("t1", token("b", "git.example"));
    creds.add("t2", token("c", "git.example"));
    auto secrets = creds.secretsOf("t1");
    std::sort(secrets.begin(), secrets.end());
    EXPECT_EQ(secrets, (std::vector<std::string>{"s3cret-a", "s3cret-b"}));
}

}  // namespace
}  // namespace airlock::workspace
