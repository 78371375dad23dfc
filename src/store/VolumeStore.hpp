#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

// A tenant's named volume: an ext4 image under the data dir that outlives
// the sandboxes that mount it.
struct VolumeRecord {
    std::string id;  // vol-…: its directory and the serial its disk shows the guest
    std::string tenant;
    std::string name;
    std::uint64_t sizeBytes = 0;
    std::string filesystem = "ext4";
    std::string createdAt;
};

class VolumeStore {
  public:
    explicit VolumeStore(Database& db);
    // False when the tenant has a volume of that name already.
    bool insert(const VolumeRecord& v);
    void updateSize(const std::string& id, std::uint64_t sizeBytes);
    void remove(const std::string& id);
    std::optional<VolumeRecord> find(const std::string& tenant, const std::string& name);
    std::optional<VolumeRecord> findById(const std::string& id);
    std::vector<VolumeRecord> list(const std::string& tenant);
    std::vector<VolumeRecord> all();

  private:
    Database& db_;
};

}  // namespace airlock
