#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/SecretCipher.hpp"
#include "egress/AddressPolicy.hpp"

namespace airlock::workspace {

struct WorkspaceConfig {
    std::string dataDir;  // mirrors and scratch live under dataDir + "/git"
    egress::AddressPolicy addressPolicy;
    std::shared_ptr<const SecretCipher> cipher;
    std::string guestUser = "user";                  // who owns the working tree in the guest
    std::string pushBranchPrefix = "agent/";         // pushes go only to branches under it
    std::uint64_t maxFileBytes = 100ull << 20;       // one file read back from the guest
    std::uint64_t maxTransferBytes = 1024ull << 20;  // all files read back for one diff
    std::chrono::seconds gitTimeout{300};
    std::uint64_t maxFetchBytes = 2ull << 30;      // what one fetch may receive
    std::uint64_t tenantQuotaBytes = 20ull << 30;  // a tenant's mirrors and work store (0: none)
    std::uint64_t minFreeDiskBytes = 0;            // a fetch stops short of this floor
    std::chrono::seconds mirrorRetention{std::chrono::hours(168)};  // unused mirrors (0: kept)
};

}  // namespace airlock::workspace
