#include "store/VolumeStore.hpp"

#include <nlohmann/json.hpp>

namespace airlock {
using nlohmann::json;

namespace {

std::string volumeJson(const VolumeRecord& v) {
    return json{{"id", v.id},
                {"tenant", v.tenant},
                {"name", v.name},
                {"size_bytes", v.sizeBytes},
                {"filesystem", v.filesystem},
                {"created_at", v.createdAt}}
        .dump();
}

std::optional<VolumeRecord> volumeRow(const Database::Statement& st) {
    auto j = json::parse(st.text(0), nullptr, false);
    if (!j.is_object()) return std::nullopt;
    try {
        VolumeRecord v;
        v.id = j.at("id");
        v.tenant = j.at("tenant");
        v.name = j.at("name");
        v.sizeBytes = j.at("size_bytes");
        v.filesystem = j.value("filesystem", "ext4");
        v.createdAt = j.value("created_at", "");
        return v;
    } catch (const json::exception&) {
        return std::nullopt;
    }
}

std::vector<VolumeRecord> present(std::vector<std::optional<VolumeRecord>> rows) {
    std::vector<VolumeRecord> out;
    for (auto& r : rows)
        if (r) out.push_back(std::move(*r));
    return out;
}

}  // namespace

VolumeStore::VolumeStore(Database& db) : db_(db) {}

bool VolumeStore::insert(const VolumeRecord& v) {
    return db_.run("INSERT OR IGNORE INTO volumes (id, tenant, name, json) VALUES (?,?,?,?)", v.id,
                   v.tenant, v.name, volumeJson(v)) > 0;
}

void VolumeStore::updateSize(const std::string& id, std::uint64_t sizeBytes) {
    auto v = findById(id);
    if (!v) return;
    v->sizeBytes = sizeBytes;
    db_.run("UPDATE volumes SET json = ? WHERE id = ?", volumeJson(*v), id);
}

void VolumeStore::remove(const std::string& id) { db_.run("DELETE FROM volumes WHERE id = ?", id); }

std::optional<VolumeRecord> VolumeStore::find(const std::string& tenant, const std::string& name) {
    auto row =
        db_.one("SELECT json FROM volumes WHERE tenant = ? AND name = ?", volumeRow, tenant, name);
    return row ? *row : std::nullopt;
}

std::optional<VolumeRecord> VolumeStore::findById(const std::string& id) {
    auto row = db_.one("SELECT json FROM volumes WHERE id = ?", volumeRow, id);
    return row ? *row : std::nullopt;
}

std::vector<VolumeRecord> VolumeStore::list(const std::string& tenant) {
    return present(db_.all("SELECT json FROM volumes WHERE tenant = ? ORDER BY name", volumeRow,
                           tenant));
}

std::vector<VolumeRecord> VolumeStore::all() {
    return present(db_.all("SELECT json FROM volumes", volumeRow));
}

}  // namespace airlock
