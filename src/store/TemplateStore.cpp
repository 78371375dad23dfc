#include "store/TemplateStore.hpp"

namespace airlock {
using nlohmann::json;

std::string buildStateName(BuildState s) {
    switch (s) {
        case BuildState::queued: return "queued";
        case BuildState::building: return "building";
        case BuildState::ready: return "ready";
        case BuildState::failed: return "failed";
    }
    return "failed";
}

namespace {

BuildState buildStateFrom(const std::string& s) {
    if (s == "queued") return BuildState::queued;
    if (s == "building") return BuildState::building;
    if (s == "ready") return BuildState::ready;
    return BuildState::failed;
}

std::string templateJson(const UserTemplateRecord& t) {
    return json{{"tenant", t.tenant},         {"name", t.name},
                {"tag", t.tag},               {"snapshot", t.snapshotId},
                {"build", t.buildId},         {"evidence", t.evidenceId},
                {"digest", t.digest},         {"from", t.from},
                {"env", t.env},               {"start_cmd", t.startCmd},
                {"user", t.user},             {"workdir", t.workdir},
                {"vcpus", t.vcpus},           {"memory_mib", t.memoryMib},
                {"labels", t.labels},         {"exposed_ports", t.exposedPorts},
                {"created_at", t.createdAt}}
        .dump();
}

std::optional<UserTemplateRecord> templateRow(const Database::Statement& st) {
    auto j = json::parse(st.text(0), nullptr, false);
    if (!j.is_object()) return std::nullopt;
    try {
        UserTemplateRecord t;
        t.tenant = j.at("tenant");
        t.name = j.at("name");
        t.tag = j.at("tag");
        t.snapshotId = j.at("snapshot");
        t.buildId = j.value("build", "");
        t.evidenceId = j.value("evidence", "");
        t.digest = j.value("digest", "");
        t.from = j.value("from", "");
        t.env = j.value("env", json::object());
        t.startCmd = j.value("start_cmd", "");
        t.user = j.value("user", "");
        t.workdir = j.value("workdir", "");
        t.vcpus = j.value("vcpus", 1u);
        t.memoryMib = j.value("memory_mib", 256u);
        t.labels = j.value("labels", json::object());
        t.exposedPorts = j.value("exposed_ports", std::vector<unsigned>{});
        t.createdAt = j.value("created_at", "");
        return t;
    } catch (const json::exception&) {
        return std::nullopt;
    }
}

std::string buildJson(const TemplateBuildRecord& b) {
    json j{{"id", b.id},
           {"tenant", b.tenant},
           {"name", b.name},
           {"tag", b.tag},
           {"state", buildStateName(b.state)},
           {"spec", b.spec},
           {"sandbox", b.sandboxId},
           {"failed_command", b.failedCommand},
           {"error", b.error},
           {"steps_cached", b.stepsCached},
           {"evidence", b.evidenceId},
           {"created_at", b.createdAt},
           {"finished_at", b.finishedAt}};
    if (b.failedStep) j["failed_step"] = *b.failedStep;
    if (b.exitCode) j["exit_code"] = *b.exitCode;
    return j.dump();
}

std::optional<TemplateBuildRecord> buildRow(const Database::Statement& st) {
    auto j = json::parse(st.text(0), nullptr, false);
    if (!j.is_object()) return std::nullopt;
    try {
        TemplateBuildRecord b;
        b.id = j.at("id");
        b.tenant = j.at("tenant");
        b.name = j.at("name");
        b.tag = j.value("tag", "latest");
        b.state = buildStateFrom(j.value("state", "failed"));
        b.spec = j.value("spec", json::object());
        b.sandboxId = j.value("sandbox", "");
        if (j.contains("failed_step")) b.failedStep = j["failed_step"].get<std::size_t>();
        b.failedCommand = j.value("failed_command", "");
        if (j.contains("exit_code")) b.exitCode = j["exit_code"].get<int>();
        b.error = j.value("error", "");
        b.stepsCached = j.value("steps_cached", std::size_t{0});
        b.evidenceId = j.value("evidence", "");
        b.createdAt = j.value("created_at", "");
        b.finishedAt = j.value("finished_at", "");
        return b;
    } catch (const json::exception&) {
        return std::nullopt;
    }
}

std::optional<TemplateLayerRecord> layerRow(const Database::Statement& st) {
    auto j = json::parse(st.text(0), nullptr, false);
    if (!j.is_object()) return std::nullopt;
    try {
        return TemplateLayerRecord{j.at("tenant"), j.at("key"), j.at("snapshot"),
                                   j.value("size_bytes", std::int64_t{0}), st.integer(1)};
    } catch (const json::exception&) {
        return std::nullopt;
    }
}

template <typename T>
std::vector<T> present(std::vector<std::optional<T>> rows) {
    std::vector<T> out;
    for (auto& r : rows)
        if (r) out.push_back(std::move(*r));
    return out;
}

}  // namespace

void TemplateStore::putTemplate(const UserTemplateRecord& t) {
    db_.run("INSERT OR REPLACE INTO user_templates (tenant, name, tag, json) VALUES (?,?,?,?)",
            t.tenant, t.name, t.tag, templateJson(t));
}

std::optional<UserTemplateRecord> TemplateStore::findTemplate(const std::string& tenant,
                                                              const std::string& name,
                                                              const std::string& tag) {
    auto row = db_.one("SELECT json FROM user_templates WHERE tenant = ? AND name = ? AND tag = ?",
                       templateRow, tenant, name, tag);
    return row ? *row : std::nullopt;
}

std::vector<UserTemplateRecord> TemplateStore::listTemplates(const std::string& tenant) {
    return present(db_.all("SELECT json FROM user_templates WHERE tenant = ? ORDER BY name, tag",
                           templateRow, tenant));
}

std::vector<UserTemplateRecord> TemplateStore::allTemplates() {
    return present(db_.all("SELECT json FROM user_templates", templateRow));
}

bool TemplateStore::removeTemplate(const std::string& tenant, const std::string& name,
                                   const std::string& tag) {
    return db_.run("DELETE FROM user_templates WHERE tenant = ? AND name = ? AND tag = ?", tenant,
                   name, tag) > 0;
}

void TemplateStore::putBuild(const TemplateBuildRecord& b) {
    db_.run("INSERT OR REPLACE INTO template_builds (id, tenant, name, json) VALUES (?,?,?,?)",
            b.id, b.tenant, b.name, buildJson(b));
}

std::optional<TemplateBuildRecord> TemplateStore::findBuild(const std::string& id) {
    auto row = db_.one("SELECT json FROM template_builds WHERE id = ?", buildRow, id);
    return row ? *row : std::nullopt;
}

std::vector<TemplateBuildRecord> TemplateStore::listBuilds(const std::string& tenant,
                                                           const std::string& name) {
    return present(db_.all("SELECT json FROM template_builds WHERE tenant = ? AND name = ?",
                           buildRow, tenant, name));
}

std::vector<TemplateBuildRecord> TemplateStore::unfinishedBuilds() {
    auto all = present(db_.all("SELECT json FROM template_builds", buildRow));
    std::erase_if(all, [](const TemplateBuildRecord& b) {
        return b.state == BuildState::ready || b.state == BuildState::failed;
    });
    return all;
}

std::vector<std::string> TemplateStore::buildsPast(const std::string& tenant, std::size_t keep) {
    return db_.all(
        "SELECT id FROM template_builds WHERE tenant = ? AND rowid NOT IN (SELECT rowid FROM "
        "template_builds WHERE tenant = ? ORDER BY rowid DESC LIMIT ?) ORDER BY rowid",
        textColumn, tenant, tenant, static_cast<std::int64_t>(keep));
}

void TemplateStore::removeBuild(const std::string& id) {
    db_.run("DELETE FROM template_builds WHERE id = ?", id);
}

void TemplateStore::putLayer(const TemplateLayerRecord& l) {
    db_.run(
        "INSERT OR REPLACE INTO template_layers (tenant, key, json, last_used) VALUES (?,?,?,?)",
        l.tenant, l.key,
        json{{"tenant", l.tenant}, {"key", l.key}, {"snapshot", l.snapshotId},
             {"size_bytes", l.sizeBytes}}
            .dump(),
        l.lastUsed);
}

std::optional<TemplateLayerRecord> TemplateStore::findLayer(const std::string& tenant,
                                                            const std::string& key) {
    auto row = db_.one("SELECT json, last_used FROM template_layers WHERE tenant = ? AND key = ?",
                       layerRow, tenant, key);
    return row ? *row : std::nullopt;
}

std::vector<TemplateLayerRecord> TemplateStore::listLayers() {
    return present(
        db_.all("SELECT json, last_used FROM template_layers ORDER BY last_used", layerRow));
}

void TemplateStore::removeLayer(const std::string& tenant, const std::string& key) {
    db_.run("DELETE FROM template_layers WHERE tenant = ? AND key = ?", tenant, key);
}

}  // namespace airlock
