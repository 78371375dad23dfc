#include "support/FakeHypervisor.hpp"

#include <fstream>

#include "core/Error.hpp"

namespace airlock::test {

void FakeHypervisor::startDomain(const DomainSpec& spec) {
    ++starts;
    ++startsInFlight;
    struct InFlight {
        std::atomic<int>& n;
        ~InFlight() { --n; }
    } inFlight{startsInFlight};
    if (int ms = startDelayMs.load()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::lock_guard lock(mutex_);
    if (failNextStart_) {
        failNextStart_ = false;
        throw Error(ErrorCode::hypervisor_error, "fake start failure");
    }
    if (domains_.count(spec.name)) throw Error(ErrorCode::hypervisor_error, "domain exists");
    domains_[spec.name] = spec;
    paused_[spec.name] = spec.incoming;
    startedBy_[spec.name] = std::this_thread::get_id();
}

std::thread::id FakeHypervisor::startedBy(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = startedBy_.find(name);
    return it == startedBy_.end() ? std::thread::id{} : it->second;
}

void FakeHypervisor::destroyDomain(const std::string& name) {
    std::lock_guard lock(mutex_);
    domains_.erase(name);
    paused_.erase(name);
}

void FakeHypervisor::suspendDomain(const std::string& name) {
    std::lock_guard lock(mutex_);
    if (!domains_.count(name)) throw Error(ErrorCode::hypervisor_error, "no domain " + name);
    paused_[name] = true;
}

void FakeHypervisor::resumeDomain(const std::string& name) {
    std::lock_guard lock(mutex_);
    if (!domains_.count(name)) throw Error(ErrorCode::hypervisor_error, "no domain " + name);
    paused_[name] = false;
}

void FakeHypervisor::saveState(const std::string& name, const std::string& statePath,
                               const std::string&) {
    std::lock_guard lock(mutex_);
    if (!domains_.count(name) || !paused_[name])
        throw Error(ErrorCode::hypervisor_error, "save needs a paused domain");
    if (failNextSave_) {
        failNextSave_ = false;
        throw Error(ErrorCode::hypervisor_error, "fake save failure");
    }
    std::ofstream(statePath) << "state of " << name << "\n";
}

void FakeHypervisor::loadState(const std::string& name, const std::string& statePath,
                               const std::string&) {
    std::lock_guard lock(mutex_);
    if (!domains_.count(name) || !domains_[name].incoming)
        throw Error(ErrorCode::hypervisor_error, "not waiting for state");
    if (loadedFrom_.count(name)) throw Error(ErrorCode::hypervisor_error, "state loaded already");
    std::ifstream in(statePath);
    if (!in) throw Error(ErrorCode::hypervisor_error, "no state file " + statePath);
    loadedFrom_[name] = statePath;
    loadedBy_[name] = std::this_thread::get_id();
    ++loads;
}

std::string FakeHypervisor::loadedFrom(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = loadedFrom_.find(name);
    return it == loadedFrom_.end() ? "" : it->second;
}

std::thread::id FakeHypervisor::loadedBy(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = loadedBy_.find(name);
    return it == loadedBy_.end() ? std::thread::id{} : it->second;
}

void FakeHypervisor::switchDiskOverlay(const std::string& name, const std::string& newOverlay) {
    std::lock_guard lock(mutex_);
    if (!domains_.count(name)) throw Error(ErrorCode::hypervisor_error, "no domain " + name);
    domains_[name].diskPath = newOverlay;
}

DomainState FakeHypervisor::domainState(const std::string& name) {
    std::lock_guard lock(mutex_);
    if (!domains_.count(name)) return DomainState::missing;
    return paused_[name] ? DomainState::paused : DomainState::running;
}

std::vector<std::string> FakeHypervisor::listDomains() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [n, s] : domains_) out.push_back(n);
    return out;
}

}  // namespace airlock::test
