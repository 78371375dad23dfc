#pragma once
#include <chrono>
#include <cstdint>
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
    // Where it may be sent: the workspace's own repository (its path exactly
    // as given), and paths under a prefix of the credential's scope.
    std::string ownPath;
    std::vector<std::string> scope = {};

    // Same host and port as recorded, same scheme family, and the
    // workspace's own repository or a path inside the scope.
    bool covers(const RemoteUrl& target) const;
};

// Talks to one remote for the host, with libgit2: no proxy from the
// environment, no redirect, TLS verified, the credential handed out only
// to the scheme, host and port it was recorded for and only once per
// connection (a wrong secret fails at once instead of looping), ssh host
// keys checked against the credential's known_hosts. Every failure is
// Error(unprocessable) carrying git's message.
class GitRemoteAccess {
  public:
    // Error(forbidden) when the credential does not cover `url` (another
    // repository than the one it was opened for, outside its scope).
    GitRemoteAccess(RemoteUrl url, std::optional<BrokeredCredential> credential,
                    std::chrono::seconds timeout = std::chrono::seconds(300));
    // A fetch stops once it has received more than `maxBytes` and fails
    // with Error(code, message) (0: no limit but the time).
    void limitBytes(std::uint64_t maxBytes, ErrorCode code, std::string message);
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
    // The credential would cross the wire unencrypted (http).
    bool clearText() const { return url_.scheme == "http" && credential_.has_value(); }
    RemoteUrl url_;
    std::optional<BrokeredCredential> credential_;
    std::chrono::seconds timeout_;
    std::uint64_t maxBytes_ = 0;
    ErrorCode limitCode_ = ErrorCode::payload_too_large;
    std::string limitMessage_;
};

// The server refused a pushed reference (non-fast-forward, a hook, a
// protected branch): a push that did not happen, whatever libgit2 returned.
struct PushRejected : Error {
    explicit PushRejected(const std::string& why) : Error(ErrorCode::conflict, why) {}
};

}  // namespace airlock::workspace
