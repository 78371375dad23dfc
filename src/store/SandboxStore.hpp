#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"
#include "store/SandboxRecord.hpp"
#include "store/TenantScope.hpp"

namespace airlock {

class SandboxStore {
  public:
    explicit SandboxStore(Database& db);
    void insert(const SandboxRecord& r);
    // Overwrites the row with r's id in one statement (a spare VM's row
    // becoming a client's sandbox).
    void replace(const SandboxRecord& r);
    void updateState(const std::string& id, SandboxState state, const std::string& error = {});
    // The state and whether the pause dropped the memory, in one write.
    // A pause's or resume's state with how it keeps the sandbox (without its
    // memory, hibernated) and why it was paused ("" when it runs).
    void updatePaused(const std::string& id, SandboxState state, bool withoutMemory,
                      bool hibernated = false, const std::string& reason = {});
    void remove(const std::string& id);
    void updateDisk(const std::string& id, const std::string& disk,
                    const std::vector<std::string>& layers);
    void updateNetwork(const std::string& id, const std::vector<std::string>& network);
    void updateSecrets(const std::string& id, const std::string& sealed,
                       const std::vector<std::string>& names);
    void updateTimeout(const std::string& id, std::int64_t timeoutS, std::int64_t expiresAt);
    std::optional<SandboxRecord> find(const std::string& id);
    std::vector<SandboxRecord> list(const TenantScope& scope);

  private:
    void write(const SandboxRecord& r, bool replace);
    Database& db_;
};

}  // namespace airlock
