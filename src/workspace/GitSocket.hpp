#pragma once
#include <chrono>

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

}  // namespace airlock::workspace
