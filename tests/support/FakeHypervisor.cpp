#include "support/FakeHypervisor.hpp"

#include "core/Error.hpp"

namespace airlock::test {

void FakeHypervisor::startDomain(const DomainSpec& spec) {
    std::lock_guard lock(mutex_);
    if (failNextStart_) {
        failNextStart_ = false;
        throw Error(ErrorCode::hypervisor_error, "fake start failure");
    }
    if (domains_.count(spec.name)) throw Error(ErrorCode::hypervisor_error, "domain exists");
    domains_[spec.name] = spec;
}

void FakeHypervisor::destroyDomain(const std::string& name) {
    std::lock_guard lock(mutex_);
    domains_.erase(name);
}

DomainState FakeHypervisor::domainState(const std::string& name) {
    std::lock_guard lock(mutex_);
    return domains_.count(name) ? DomainState::running : DomainState::missing;
}

std::vector<std::string> FakeHypervisor::listDomains() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [n, s] : domains_) out.push_back(n);
    return out;
}

}  // namespace airlock::test
