#pragma once
#include <string>
#include <vector>

#include "store/PortStore.hpp"

namespace airlock {

// A sandbox's exposed preview ports, each with its own secret token (the
// preview URL's credential; no API key reaches a preview). Ownership of the
// sandbox is the caller's check.
class PreviewPorts {
  public:
    explicit PreviewPorts(PortStore& store) : store_(store) {}
    // Idempotent: an exposed port keeps its token. Error(bad_request)
    // outside 1-65535.
    ExposedPort expose(const std::string& sandboxId, unsigned port);
    std::vector<ExposedPort> list(const std::string& sandboxId);
    // Error(not_found) when the port is not exposed.
    void close(const std::string& sandboxId, unsigned port);
    // The token opens this port of this sandbox, compared in constant time.
    // A wrong sandbox, an unexposed port and a wrong token look the same.
    bool admits(const std::string& sandboxId, unsigned port, const std::string& token);

  private:
    PortStore& store_;
};

}  // namespace airlock
