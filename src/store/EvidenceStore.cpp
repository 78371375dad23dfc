#include "store/EvidenceStore.hpp"

namespace airlock {
namespace {

constexpr const char* kEvidenceColumns =
    "id, sandbox, tenant, created_at, kind, sha256, size, summary, expires_at, review";

EvidenceRecord readEvidenceRow(const Database::Statement& st) {
    EvidenceRecord r;
    r.id = st.text(0);
    r.sandboxId = st.text(1);
    r.tenant = st.text(2);
    r.createdAt = st.text(3);
    r.kind = st.text(4);
    r.sha256 = st.text(5);
    r.size = static_cast<std::uint64_t>(st.integer(6));
    r.summaryJson = st.text(7);
    r.expiresAt = st.integer(8);
    r.reviewJson = st.text(9);
    return r;
}

}  // namespace

EvidenceStore::EvidenceStore(Database& db) : db_(db) {}

void EvidenceStore::insert(const EvidenceRecord& r) {
    db_.run(
        std::string("INSERT INTO evidence (") + kEvidenceColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?)",
        r.id, r.sandboxId, r.tenant, r.createdAt, r.kind, r.sha256, r.size, r.summaryJson,
        r.expiresAt, r.reviewJson);
}

std::optional<EvidenceRecord> EvidenceStore::find(const std::string& id) {
    return db_.one(std::string("SELECT ") + kEvidenceColumns + " FROM evidence WHERE id = ?",
                   readEvidenceRow, id);
}

std::vector<EvidenceRecord> EvidenceStore::listForSandbox(const std::string& sandboxId,
                                                          const TenantScope& scope) {
    return db_.all(std::string("SELECT ") + kEvidenceColumns + " FROM evidence WHERE sandbox = ?" +
                       scope.whereTenant(" AND") + " ORDER BY created_at, id",
                   readEvidenceRow, sandboxId, scope.tenantParam());
}

void EvidenceStore::setExpiry(const std::string& sandboxId, std::int64_t expiresAt) {
    db_.run("UPDATE evidence SET expires_at = ? WHERE sandbox = ? AND expires_at = 0", expiresAt,
            sandboxId);
}

void EvidenceStore::setReview(const std::string& id, const std::string& reviewJson) {
    db_.run("UPDATE evidence SET review = ? WHERE id = ?", reviewJson, id);
}

std::vector<EvidenceRecord> EvidenceStore::expired(std::int64_t now) {
    return db_.all(std::string("SELECT ") + kEvidenceColumns +
                       " FROM evidence WHERE expires_at > 0 AND expires_at <= ?",
                   readEvidenceRow, now);
}

void EvidenceStore::remove(const std::string& id) {
    db_.run("DELETE FROM evidence WHERE id = ?", id);
}

}  // namespace airlock
