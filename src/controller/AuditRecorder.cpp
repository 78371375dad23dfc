#include "controller/AuditRecorder.hpp"

#include "core/Clock.hpp"
#include "core/Log.hpp"
#include "protocol/JsonText.hpp"

namespace airlock {

void AuditRecorder::record(const std::string& sandboxId, const std::string& tenant,
                           const std::string& type, const nlohmann::json& data,
                           const SecretMasker* masker) {
    try {
        std::string text = jsonText(data);
        // A secret never reaches the audit log, not even typed into a command.
        if (masker) text = masker->mask(std::move(text));
        store_.append(AuditEvent{0, sandboxId, tenant, nowTimestamp(), type, text});
        count(type);
    } catch (const std::exception& e) {
        logError("audit", "cannot record " + type + " of " + sandboxId + ": " + e.what());
    }
}

void AuditRecorder::count(const std::string& type) {
    std::lock_guard lock(mutex_);
    ++counts_[type];
}

std::map<std::string, std::uint64_t> AuditRecorder::counts() const {
    std::lock_guard lock(mutex_);
    return counts_;
}

}  // namespace airlock
