#include "store/EvidenceStore.hpp"

#include <sqlite3.h>

namespace airlock {
namespace {

constexpr const char* kColumns =
    "id, sandbox, tenant, created_at, kind, sha256, size, summary, expires_at, review";

EvidenceRecord readRow(Database::Statement& st) {
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

EvidenceStore::EvidenceStore(Database& db) : db_(db) {
    db_.exec(
        "CREATE TABLE IF NOT EXISTS evidence (id TEXT PRIMARY KEY, sandbox TEXT NOT NULL, tenant "
        "TEXT NOT NULL,"
        " created_at TEXT NOT NULL, kind TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT "
        "NULL,"
        " summary TEXT NOT NULL, expires_at INTEGER NOT NULL DEFAULT 0, review TEXT NOT NULL "
        "DEFAULT '')");
    db_.exec("CREATE INDEX IF NOT EXISTS evidence_sandbox ON evidence (sandbox)");
}

void EvidenceStore::insert(const EvidenceRecord& r) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, std::string("INSERT INTO evidence (") + kColumns +
                                       ") VALUES (?,?,?,?,?,?,?,?,?,?)");
        st.bind(1, r.id)
            .bind(2, r.sandboxId)
            .bind(3, r.tenant)
            .bind(4, r.createdAt)
            .bind(5, r.kind);
        st.bind(6, r.sha256).bind(7, static_cast<std::int64_t>(r.size)).bind(8, r.summaryJson);
        st.bind(9, r.expiresAt).bind(10, r.reviewJson);
        st.step();
    });
}

std::optional<EvidenceRecord> EvidenceStore::find(const std::string& id) {
    return db_.locked([&](sqlite3* db) -> std::optional<EvidenceRecord> {
        Database::Statement st(db,
                               std::string("SELECT ") + kColumns + " FROM evidence WHERE id = ?");
        st.bind(1, id);
        if (!st.step()) return std::nullopt;
        return readRow(st);
    });
}

std::vector<EvidenceRecord> EvidenceStore::listForSandbox(const std::string& sandboxId,
                                                          const TenantScope& scope) {
    return db_.locked([&](sqlite3* db) {
        std::vector<EvidenceRecord> out;
        Database::Statement st(db, std::string("SELECT ") + kColumns +
                                       " FROM evidence WHERE sandbox = ? ORDER BY created_at, id");
        st.bind(1, sandboxId);
        while (st.step()) {
            auto r = readRow(st);
            if (scope.isAll() || scope.tenant() == r.tenant) out.push_back(std::move(r));
        }
        return out;
    });
}

void EvidenceStore::setExpiry(const std::string& sandboxId, std::int64_t expiresAt) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(
            db, "UPDATE evidence SET expires_at = ? WHERE sandbox = ? AND expires_at = 0");
        st.bind(1, expiresAt).bind(2, sandboxId);
        st.step();
    });
}

void EvidenceStore::setReview(const std::string& id, const std::string& reviewJson) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "UPDATE evidence SET review = ? WHERE id = ?");
        st.bind(1, reviewJson).bind(2, id);
        st.step();
    });
}

std::vector<EvidenceRecord> EvidenceStore::expired(std::int64_t now) {
    return db_.locked([&](sqlite3* db) {
        std::vector<EvidenceRecord> out;
        Database::Statement st(db, std::string("SELECT ") + kColumns +
                                       " FROM evidence WHERE expires_at > 0 AND expires_at <= ?");
        st.bind(1, now);
        while (st.step()) out.push_back(readRow(st));
        return out;
    });
}

void EvidenceStore::remove(const std::string& id) {
    db_.locked([&](sqlite3* db) {
        Database::Statement st(db, "DELETE FROM evidence WHERE id = ?");
        st.bind(1, id);
        st.step();
    });
}

}  // namespace airlock
