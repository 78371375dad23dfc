#include "controller/AuditRecorder.hpp"

#include "core/Clock.hpp"
#include "core/Log.hpp"
#include "core/SecretMasker.hpp"
#include "protocol/JsonText.hpp"

namespace airlock {

void AuditRecorder::record(const std::string& sandboxId, const std::string& tenant,
                           const std::string& type, const nlohmann::json& data,
                           const SecretMasker* masker) {
    try {
        // A secret never reaches the audit log, not even typed into a command.
        // The record's values are masked, not its text: a secret shaped like
        // a piece of JSON ("exit_code":) cannot edit or break the record.
        std::string text = jsonText(masker ? maskRecord(data, *masker) : data);
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
