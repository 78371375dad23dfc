#pragma once
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "store/CredentialStore.hpp"
#include "store/Database.hpp"
#include "store/WorkspaceStore.hpp"
#include "support/FakeWorkspaceSandboxes.hpp"
#include "support/GitServer.hpp"
#include "support/TestEnv.hpp"
#include "workspace/GitSocket.hpp"
#include "workspace/WorkspaceChanges.hpp"
#include "workspace/WorkspaceCheckouts.hpp"
#include "workspace/WorkspacePushes.hpp"
#include "workspace/WorkspaceRecords.hpp"

namespace airlock::test {

// The workspace service's parts, each built by hand over the fake
// sandboxes (the real agent in this process, working trees in a temp
// directory) and the fixture git server with tenant t1's credential "fx".
class WorkspaceFixture : public ::testing::Test {
  protected:
    WorkspaceFixture() {
        workspace::installGitSocket(config.addressPolicy, std::chrono::seconds(30),
                                    std::chrono::seconds(120));
        credentials.add("t1", {"fx", "https-basic", server.hostPort(), "git", server.password, "",
                               {}});
        sandboxes.setWorkspaceHooks(
            [this](const SandboxRecord& r, const std::string& path) { records.checkWrite(r, path); },
            [this](const GatedExec& g, bool approved) { pushes.decided(g, approved); });
    }

    static workspace::WorkspaceConfig makeConfig(const std::string& dataDir) {
        workspace::WorkspaceConfig c;
        c.dataDir = dataDir;
        c.addressPolicy = egress::AddressPolicy({egress::CidrRange::parse("127.0.0.1/32")});
        std::array<unsigned char, 32> key{};
        key.fill(3);
        c.cipher = std::make_shared<const SecretCipher>(key);
        c.guestUser = "root";  // the in-process agent's trees are this host's
        return c;
    }

    // A workspace of demo.git on branch `branch`, checked out in `tree`.
    CreateSandboxRequest request(const std::string& ref = "main",
                                 const std::string& branch = "agent/t") const {
        CreateSandboxRequest r;
        r.templateName = "minimal";
        WorkspaceSpec w;
        w.repo = server.base() + "/demo.git";
        w.ref = ref;
        w.branch = branch;
        w.credential = "fx";
        w.path = tree;
        r.workspace = w;
        return r;
    }
    std::string checkout(CreateSandboxRequest r) { return checkouts.createSandbox("t1", r).id; }
    std::string checkout() { return checkout(request()); }

    std::string read(const std::string& rel) const {
        std::ifstream in(tree + "/" + rel, std::ios::binary);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    void write(const std::string& rel, const std::string& bytes) const {
        std::filesystem::create_directories(std::filesystem::path(tree + "/" + rel).parent_path());
        std::ofstream(tree + "/" + rel, std::ios::binary) << bytes;
    }

    TempDir dir;
    GitServer server;
    std::string tree = dir.path() + "/tree";
    FakeWorkspaceSandboxes sandboxes;
    Database db{dir.path() + "/workspaces.db"};
    CredentialStore credentialStore{db};
    WorkspaceStore store{db};
    workspace::WorkspaceConfig config = makeConfig(dir.path() + "/data");
    workspace::WorkspaceCredentials credentials{credentialStore, config.cipher,
                                                config.addressPolicy,
                                                [](const std::string&, const std::string&,
                                                   const nlohmann::json&) {}};
    workspace::GitMirrors mirrors{config, nullptr};
    workspace::WorkspaceRecords records{store, sandboxes, mirrors};
    workspace::WorkspaceGuest guest{config.guestUser};
    workspace::WorkspaceCheckouts checkouts{config, sandboxes, credentials, mirrors, records, guest};
    workspace::WorkspaceChanges changes{config, sandboxes, mirrors, records, guest};
    workspace::WorkspacePushes pushes{config, sandboxes, credentials, mirrors, records};
};

}  // namespace airlock::test
