#pragma once
#include <chrono>
#include <optional>
#include <string>

#include "egress/AddressPolicy.hpp"

namespace airlock::workspace {

// Every connection libgit2 opens (http, and the socket under https) goes
// through this instead of libgit2's own socket: the addresses are judged by
// the egress address policy at connect time (a name that resolves to a
// public address for the check and a private one for the connection gets
// nowhere), the connect is bounded, and so is every read and write (libgit2
// 1.5 has no timeouts of its own, so a remote that stops answering would
// hold a worker forever). Call once, before any remote is used.
void installGitSocket(const egress::AddressPolicy& policy, std::chrono::seconds connectTimeout,
                      std::chrono::seconds ioTimeout);

// While one lives on a thread, the connections libgit2 opens there carry a
// credential in the clear (plain http): each address is checked at connect
// time against the ranges the operator opened, both families (a name that
// resolved to an opened address for the check and to another for the
// connection gets nowhere).
class ClearTextCredential {
  public:
    explicit ClearTextCredential(bool active);
    ~ClearTextCredential();
    ClearTextCredential(const ClearTextCredential&) = delete;
    ClearTextCredential& operator=(const ClearTextCredential&) = delete;
    static bool active();

  private:
    bool previous_;
};

// Why the git socket refuses `addr` (nullopt: it may connect): the egress
// address policy, and with a clear-text credential the operator's ranges.
std::optional<std::string> gitConnectRefusal(const boost::asio::ip::address& addr,
                                             const egress::AddressPolicy& policy,
                                             bool clearTextCredential);

}  // namespace airlock::workspace
