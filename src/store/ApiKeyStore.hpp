#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/ApiKeys.hpp"
#include "store/Database.hpp"

namespace airlock {

// A host's own keys in SQLite, stored as SHA-256 hashes only; a leaked
// state.db does not leak keys.
class ApiKeyStore final : public ApiKeys {
  public:
    explicit ApiKeyStore(Database& db);
    using ApiKeys::create;
    Created create(const std::string& tenant, Role role, const std::string& name,
                   std::int64_t expiresAt) override;
    std::optional<Created> createFirstAdmin() override;
    std::optional<ApiKeyRecord> findValid(const std::string& key, std::int64_t now) override;
    std::optional<ApiKeyRecord> find(const std::string& id) override;
    std::vector<ApiKeyRecord> list(const std::optional<std::string>& tenant) override;
    bool remove(const std::string& id) override;
    std::vector<ApiKeyRecord> drivers(const std::string& tenant, std::int64_t now) override;
    std::size_t liveAdmins(std::int64_t now) override;
    bool empty() override;

  private:
    Database& db_;
};

}  // namespace airlock
