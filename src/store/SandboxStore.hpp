#pragma once
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"
#include "store/SandboxRecord.hpp"

namespace airlock {

class SandboxStore {
public:
    explicit SandboxStore(Database& db);
    void insert(const SandboxRecord& r);
    void updateState(const std::string& id, SandboxState state, const std::string& error = {});
    void remove(const std::string& id);
    std::optional<SandboxRecord> find(const std::string& id);
    std::vector<SandboxRecord> list(const std::string& tenant);  // empty tenant: all
private:
    Database& db_;
};

}  // namespace airlock
