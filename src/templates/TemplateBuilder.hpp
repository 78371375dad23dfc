#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <set>
#include <thread>
#include <vector>

#include "controller/CreateSandboxRequest.hpp"
#include "controller/GuestFiles.hpp"
#include "controller/GuestProcesses.hpp"
#include "controller/SandboxAccess.hpp"
#include "controller/SandboxCommands.hpp"
#include "controller/SandboxSnapshots.hpp"
#include "controller/Sandboxes.hpp"
#include "controller/SnapshotLibrary.hpp"
#include "controller/TemplateCatalog.hpp"
#include "evidence/EvidenceService.hpp"
#include "store/SnapshotStore.hpp"
#include "store/TemplateStore.hpp"
#include "templates/BuildLog.hpp"
#include "templates/TemplateSpec.hpp"

namespace airlock::templates {

struct TemplateBuilderConfig {
    std::string dataDir;                    // DATA/template-builds
    std::uint64_t layerCacheBytes = 20ull << 30;  // cached layers past this go, oldest use first
    unsigned workers = 2;                   // builds at once
};

// Builds the templates tenants ask for: each build in a sandbox of its own
// (counted in the tenant's quota, under the build's policy), every step that
// changes the disk kept as a cached layer (a snapshot keyed by its parent
// and its content), the start command started and waited for, the result a
// ready snapshot its sandboxes clone, the build sealed into an evidence
// bundle. Builds of one name run one at a time.
class TemplateBuilder {
  public:
    struct Parts {
        Sandboxes& sandboxes;
        SandboxSnapshots& snapshotting;
        SnapshotStore& snapshotRecords;
        SandboxAccess& access;
        SandboxCommands& commands;
        GuestFiles& files;
        GuestProcesses& processes;
        EvidenceService& evidence;
        TemplateStore& store;
        const TemplateCatalog& catalog;
        // The build sandbox's policy, packages and network, as a create
        // takes them (the front door's parser).
        std::function<void(const nlohmann::json& settings, CreateSandboxRequest& into)> sandboxSettings;
    };
    TemplateBuilder(Parts parts, TemplateBuilderConfig config);
    ~TemplateBuilder();

    // Queues a build (Error(not_found) for a `from` that names nothing,
    // Error(bad_request) for a copy without a context). `contextTar`: a file
    // the builder takes over (moved), "" for none.
    // `buildId`: one the caller handed out already (E2B's), "" for a new one.
    TemplateBuildRecord submit(const std::string& tenant, TemplateSpec spec,
                               const std::string& contextTar, const std::string& buildId = "");
    TemplateBuildRecord build(const std::string& tenant, const std::string& name,
                              const std::string& buildId);
    std::vector<BuildLog::Line> logLines(const std::string& tenant, const std::string& name,
                                         const std::string& buildId, std::size_t from = 0);
    // Every line so far, each new one, then the end; 0 when it ended already.
    std::uint64_t followLog(const std::string& tenant, const std::string& name,
                            const std::string& buildId, BuildLog::Follower follower);
    void unfollowLog(const std::string& buildId, std::uint64_t handle);

    std::vector<UserTemplateRecord> list(const std::string& tenant);
    UserTemplateRecord get(const std::string& tenant, const std::string& ref);
    // Sandboxes running on it keep working; creates from it answer 404.
    void remove(const std::string& tenant, const std::string& ref);
    // What the controller's creates clone (SandboxController::setUserTemplates).
    std::optional<UserTemplateRecord> lookup(const std::string& tenant, const std::string& ref);
    // The templates a build of the tenant may start from, for messages:
    // "debian, minimal, web, web:v2".
    std::string usableTemplates(const std::string& tenant);

    // At start-up: builds a restart interrupted fail, their sandboxes go.
    void recover();
    void shutdown();

  private:
    struct Job {
        TemplateBuildRecord record;
        TemplateSpec spec;
        std::string contextTar;
        std::shared_ptr<BuildLog> log;
    };
    struct Failure {
        std::optional<std::size_t> step;
        std::string command;
        std::optional<int> exitCode;
        std::string message;
    };
    void work();
    void run(Job& job);
    // A command run to its end with its output logged as it comes.
    protocol::ExecResult runStreamed(const std::string& tenant, const std::string& sandbox,
                                     const ExecOptions& options, const std::shared_ptr<BuildLog>& log,
                                     std::chrono::steady_clock::time_point deadline);
    void evictLayers();
    // The layers a template's chain or a live sandbox's disk reads.
    std::set<std::string> layersInUse();
    std::string logPath(const std::string& buildId) const;
    std::shared_ptr<BuildLog> activeLog(const std::string& buildId);
    TemplateBuildRecord owned(const std::string& tenant, const std::string& name,
                              const std::string& buildId);

    Parts p_;
    TemplateBuilderConfig config_;
    std::set<std::string> busyNames_;                 // tenant/name with a build running
    std::map<std::string, std::size_t> running_;      // builds running per tenant
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Job>> queue_;
    static constexpr std::size_t kMaxBuildsPerTenant = 16;  // queued or running
    static constexpr std::size_t kKeptBuilds = 100;         // finished builds kept per tenant
    std::map<std::string, std::shared_ptr<BuildLog>> active_;  // by build id
    std::map<std::string, std::string> owners_;                // build id -> tenant, while queued or running
    std::map<std::string, std::pair<std::string, std::string>> sandboxes_;  // build id -> tenant, sandbox
    bool stopping_ = false;
    std::mutex evictMutex_;
    std::vector<std::thread> threads_;
};

}  // namespace airlock::templates
