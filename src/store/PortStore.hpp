#pragma once
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

struct ExposedPort {
    std::string sandboxId;
    unsigned port = 0;
    std::string token;  // the preview URL's own access token
    std::string createdAt;
};

// Preview ports a sandbox exposes. Each carries an unguessable token that
// opens it in a browser without the API key; the token is a capability for
// that one port only.
class PortStore {
  public:
    explicit PortStore(Database& db);
    void upsert(const ExposedPort& p);
    void remove(const std::string& sandboxId, unsigned port);
    void removeAll(const std::string& sandboxId);
    std::optional<ExposedPort> find(const std::string& sandboxId, unsigned port);
    std::vector<ExposedPort> list(const std::string& sandboxId);

  private:
    Database& db_;
};

}  // namespace airlock
