#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "core/SecretMasker.hpp"
#include "store/AuditStore.hpp"

namespace airlock {

// Appends audit events (masked) and counts them by type for /metrics. A
// failed append is logged, never thrown: an audit write must not undo the
// action it describes.
class AuditRecorder {
  public:
    explicit AuditRecorder(AuditStore& store) : store_(store) {}
    void record(const std::string& sandboxId, const std::string& tenant, const std::string& type,
                const nlohmann::json& data, const SecretMasker* masker = nullptr);
    // Events appended elsewhere (the egress proxy's) are counted too.
    void count(const std::string& type);
    std::map<std::string, std::uint64_t> counts() const;

  private:
    AuditStore& store_;
    mutable std::mutex mutex_;
    std::map<std::string, std::uint64_t> counts_;
};

}  // namespace airlock
