#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/Database.hpp"
#include "store/TenantScope.hpp"

namespace airlock {

enum class SnapshotState { creating, ready, deleted };
std::string snapshotStateName(SnapshotState s);

// A tenant's own name for its snapshots (E2B's snapshot names): an alias and
// a tag, both [a-z0-9_-] (the tag may hold dots too). A name means the
// newest ready snapshot that carries it.
struct SnapshotName {
    std::string alias;  // "": unnamed
    std::string tag;
};
// A name's parts as every door takes them: an alias is 1 to 64 of a-z,
// 0-9, '-' and '_'; a tag the same and '.'.
// Inline: the E2B wire code (and its fuzz target) use them without the store.
inline bool isValidSnapshotNamePart(std::string_view s, std::string_view extra) {
    if (s.empty() || s.size() > 64) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              extra.find(c) != std::string_view::npos))
            return false;
    return true;
}
inline bool isValidSnapshotAlias(std::string_view s) { return isValidSnapshotNamePart(s, ""); }
inline bool isValidSnapshotTag(std::string_view s) { return isValidSnapshotNamePart(s, "."); }

// A saved sandbox: memory + device state, and (for sandboxes with a disk) the
// overlay frozen as a read-only layer. A deleted snapshot whose layer still
// backs a sandbox or another snapshot stays as a row (state deleted, hidden
// from the API) until the last user is gone.
struct SnapshotRecord {
    std::string id;
    std::string tenant;
    std::string kind = "user";  // user | warm (a template's ready snapshot)
    std::string sourceSandbox;
    std::string templateName;
    std::string templateDigest;
    SnapshotState state = SnapshotState::creating;
    unsigned vcpus = 1;
    unsigned memoryMib = 256;
    bool hasDisk = false;
    std::vector<std::string>
        layers;  // snapshot ids of every frozen layer in its disk chain, itself last
    std::string createdAt;
    std::int64_t sizeBytes = 0;
    std::string manifestJson = "{}";
    SnapshotName name;
    // The volumes its sandbox had attached (SandboxRecord::volumesJson):
    // a clone attaches them again.
    std::string volumesJson;
};

class SnapshotStore {
  public:
    explicit SnapshotStore(Database& db);
    void insert(const SnapshotRecord& r);
    void markReady(const std::string& id, std::int64_t sizeBytes, const std::string& manifestJson);
    void updateState(const std::string& id, SnapshotState state);
    void remove(const std::string& id);
    std::optional<SnapshotRecord> find(const std::string& id);
    std::vector<SnapshotRecord> list(const TenantScope& scope);

  private:
    Database& db_;
};

}  // namespace airlock
