#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "workspace/GitSupport.hpp"
#include "workspace/RemoteUrl.hpp"

namespace airlock::workspace {

// A credential opened for one use (never stored or logged in the clear).
struct BrokeredCredential {
    std::string kind;  // https-token | https-basic | ssh-key
    std::string host;  // what it is for: RemoteUrl::credentialHost()
    std::string username;
    std::string secret;
    std::string knownHosts;
};

// Talks to one remote for the host, with libgit2: no proxy from the
// environment, no redirect, TLS verified, the credential handed out only
// to the scheme, host and port it was recorded for and only once per
// connection (a wrong secret fails at once instead of looping), ssh host
// keys checked against the credential's known_hosts. Every failure is
// Error(unprocessable) carrying git's message.
class GitRemoteAccess {
  public:
    GitRemoteAccess(RemoteUrl url, std::optional<BrokeredCredential> credential,
                    std::chrono::seconds timeout = std::chrono::seconds(300));
    // Fetches every branch and tag into `mirror` (a bare repository),
    // pruning what the remote deleted.
    void fetchInto(git_repository* mirror);
    // The remote's refs/heads/<branch> ("" when it has none).
    std::string branchValue(git_repository* repo, const std::string& branch);
    // Pushes `localRef` to refs/heads/<branch>, never forced. Throws
    // PushRejected when the server refuses the update.
    void push(git_repository* repo, const std::string& localRef, const std::string& branch);

    struct State;  // what the callbacks share

  private:
    State newState() const;
    RemoteUrl url_;
    std::optional<BrokeredCredential> credential_;
    std::chrono::seconds timeout_;
};

// The server refused a pushed reference (non-fast-forward, a hook, a
// protected branch): a push that did not happen, whatever libgit2 returned.
struct PushRejected : Error {
    explicit PushRejected(const std::string& why) : Error(ErrorCode::conflict, why) {}
};

}  // namespace airlock::workspace
