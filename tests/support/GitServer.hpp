#pragma once
#include <string>
#include <vector>

#include "support/HelperProcess.hpp"
#include "support/TestEnv.hpp"

namespace airlock::test {

// The fixture repositories (tests/fixtures/make-fixture-repos.sh: demo, lib,
// private, team/hostile, team/notes) served over smart HTTP by
// tests/fixtures/git-http-server.py on `bind`, password-protected, every
// request logged with whether it carried an Authorization header.
struct GitServer {
    struct Options {
        std::string bind = "127.0.0.1";
        std::string password;            // "" : one of its own
        std::string repos;               // "" : a fresh copy of the fixtures; else served as is
        std::vector<std::string> extra;  // more arguments (--redirect-to URL, --public REPO)
    };
    explicit GitServer(std::string bindTo = "127.0.0.1");
    explicit GitServer(Options options);

    TempDir tmp;
    std::string repos, authLog = tmp.path() + "/auth.log";
    std::string password;
    std::string bind;
    int port = 0;
    HelperProcess process;
    bool up = false;  // it answered on bind:port

    std::string base() const;      // http://host:port
    std::string url(const std::string& repo) const { return base() + "/" + repo; }
    std::string hostPort() const;  // host:port
    // The log's lines ("AUTH" or "ANON") for requests whose path starts with `prefix`.
    std::vector<std::string> requests(const std::string& prefix) const;
    // `git rev-parse` of a revision in one of the served repositories ("" when absent).
    std::string revParse(const std::string& repo, const std::string& rev) const;
};

// A TCP port free on every local address of both families.
int freeDualStackPort();

}  // namespace airlock::test
