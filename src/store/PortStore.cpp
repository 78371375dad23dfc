#include "store/PortStore.hpp"

namespace airlock {
namespace {
ExposedPort readPort(const Database::Statement& st) {
    return ExposedPort{st.text(0), static_cast<unsigned>(st.integer(1)), st.text(2), st.text(3)};
}
}  // namespace

PortStore::PortStore(Database& db) : db_(db) {}

void PortStore::upsert(const ExposedPort& p) {
    db_.run("INSERT OR REPLACE INTO ports (sandbox_id, port, token, created_at) VALUES (?,?,?,?)",
            p.sandboxId, p.port, p.token, p.createdAt);
}

void PortStore::remove(const std::string& sandboxId, unsigned port) {
    db_.run("DELETE FROM ports WHERE sandbox_id = ? AND port = ?", sandboxId, port);
}

void PortStore::removeAll(const std::string& sandboxId) {
    db_.run("DELETE FROM ports WHERE sandbox_id = ?", sandboxId);
}

std::optional<ExposedPort> PortStore::find(const std::string& sandboxId, unsigned port) {
    return db_.one(
        "SELECT sandbox_id, port, token, created_at FROM ports WHERE sandbox_id = ? AND "
        "port = ?",
        readPort, sandboxId, port);
}

std::vector<ExposedPort> PortStore::list(const std::string& sandboxId) {
    return db_.all(
        "SELECT sandbox_id, port, token, created_at FROM ports WHERE sandbox_id = ? ORDER BY port",
        readPort, sandboxId);
}

}  // namespace airlock
