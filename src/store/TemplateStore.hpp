#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "store/Database.hpp"

namespace airlock {

// A template a tenant built: a ready snapshot (its start command running,
// or idle) and what every sandbox made from it gets.
struct UserTemplateRecord {
    std::string tenant;
    std::string name;
    std::string tag = "latest";
    std::string snapshotId;
    std::string buildId;
    std::string evidenceId;
    std::string digest;  // over its disk layers and memory state
    std::string from;
    nlohmann::json env = nlohmann::json::object();  // name -> value
    std::string startCmd;
    std::string user;     // the build's last USER ("": root)
    std::string workdir;  // the build's last WORKDIR
    unsigned vcpus = 1;
    unsigned memoryMib = 256;
    nlohmann::json labels = nlohmann::json::object();
    std::vector<unsigned> exposedPorts;
    std::string createdAt;
};

enum class BuildState { queued, building, ready, failed };
std::string buildStateName(BuildState s);

struct TemplateBuildRecord {
    std::string id;
    std::string tenant;
    std::string name;
    std::string tag = "latest";
    BuildState state = BuildState::queued;
    nlohmann::json spec = nlohmann::json::object();  // what was asked, as parsed
    std::string sandboxId;                           // the build sandbox while it runs
    // A failed build: the failing step (its index and text), the exit code
    // when a command failed, and why.
    std::optional<std::size_t> failedStep;
    std::string failedCommand;
    std::optional<int> exitCode;
    std::string error;
    std::size_t stepsCached = 0;
    std::string evidenceId;
    std::string createdAt;
    std::string finishedAt;
};

// A cached step result: the snapshot holding the disk (and memory) after it.
struct TemplateLayerRecord {
    std::string tenant;
    std::string key;
    std::string snapshotId;
    std::int64_t sizeBytes = 0;
    std::int64_t lastUsed = 0;  // unix seconds
};

class TemplateStore {
  public:
    explicit TemplateStore(Database& db) : db_(db) {}

    void putTemplate(const UserTemplateRecord& t);
    std::optional<UserTemplateRecord> findTemplate(const std::string& tenant,
                                                   const std::string& name,
                                                   const std::string& tag);
    std::vector<UserTemplateRecord> listTemplates(const std::string& tenant);
    // Every tenant's (the layer cache keeps what they read).
    std::vector<UserTemplateRecord> allTemplates();
    bool removeTemplate(const std::string& tenant, const std::string& name, const std::string& tag);

    void putBuild(const TemplateBuildRecord& b);
    std::optional<TemplateBuildRecord> findBuild(const std::string& id);
    std::vector<TemplateBuildRecord> listBuilds(const std::string& tenant, const std::string& name);
    std::vector<TemplateBuildRecord> unfinishedBuilds();
    // A tenant's finished builds past its newest `keep` (by last write), oldest first.
    std::vector<std::string> buildsPast(const std::string& tenant, std::size_t keep);
    void removeBuild(const std::string& id);

    void putLayer(const TemplateLayerRecord& l);
    std::optional<TemplateLayerRecord> findLayer(const std::string& tenant, const std::string& key);
    // Oldest use first.
    std::vector<TemplateLayerRecord> listLayers();
    void removeLayer(const std::string& tenant, const std::string& key);

  private:
    Database& db_;
};

}  // namespace airlock
