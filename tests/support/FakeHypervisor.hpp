#pragma once
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "hypervisor/Hypervisor.hpp"

namespace airlock::test {

// Records domains in memory; can be told to fail the next start.
class FakeHypervisor : public Hypervisor {
  public:
    Accel accel() const override { return Accel::tcg; }
    void startDomain(const DomainSpec& spec) override;
    void destroyDomain(const std::string& name) override;
    DomainState domainState(const std::string& name) override;
    std::vector<std::string> listDomains() override;
    void suspendDomain(const std::string& name) override;
    void resumeDomain(const std::string& name) override;
    // The "state" is a file naming the domain it came from.
    void saveState(const std::string& name, const std::string& statePath,
                   const std::string& scratchDir) override;
    void loadState(const std::string& name, const std::string& statePath,
                   const std::string& scratchDir) override;
    void switchDiskOverlay(const std::string& name, const std::string& newOverlay) override;
    void failNextSave(bool fail = true) { failNextSave_ = fail; }

    void failNextStart(bool fail = true) { failNextStart_ = fail; }
    void addOrphan(const std::string& name) { domains_[name] = DomainSpec{}; }
    void vanish(const std::string& name) { domains_.erase(name); }
    std::size_t count() const { return domains_.size(); }
    const DomainSpec& spec(const std::string& name) const { return domains_.at(name); }
    // Every start takes this long (a spare VM on its way, say).
    std::atomic<int> startDelayMs{0};
    std::atomic<int> starts{0};          // startDomain calls
    std::atomic<int> startsInFlight{0};  // startDomain calls not yet returned
    // The thread that started a domain: the spare worker's, or a caller's.
    std::thread::id startedBy(const std::string& name);
    // The state file a domain was loaded from ("" when none); a domain
    // takes state once, as QEMU does.
    std::string loadedFrom(const std::string& name);
    std::atomic<int> loads{0};  // loadState calls that loaded
    std::thread::id loadedBy(const std::string& name);

  private:
    std::mutex mutex_;
    std::map<std::string, DomainSpec> domains_;
    std::map<std::string, bool> paused_;
    std::map<std::string, std::thread::id> startedBy_;
    std::map<std::string, std::string> loadedFrom_;
    std::map<std::string, std::thread::id> loadedBy_;
    bool failNextSave_ = false;
    bool failNextStart_ = false;
};

}  // namespace airlock::test
