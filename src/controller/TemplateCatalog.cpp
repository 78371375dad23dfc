#include "controller/TemplateCatalog.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "controller/DiskLayers.hpp"
#include "core/Log.hpp"

namespace airlock {
namespace fs = std::filesystem;

TemplateCatalog::TemplateCatalog(const std::string& templatesDir) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(templatesDir, ec)) {
        fs::path manifest = entry.path() / "template.json";
        if (!fs::exists(manifest)) continue;
        try {
            std::ifstream in(manifest);
            auto j = nlohmann::json::parse(in);
            TemplateInfo t;
            t.name = j.at("name").get<std::string>();
            t.kernelPath = fs::absolute(entry.path() / j.at("kernel").get<std::string>()).string();
            t.initrdPath = fs::absolute(entry.path() / j.at("initrd").get<std::string>()).string();
            t.cmdline = j.value("cmdline", "console=ttyS0 panic=-1 quiet");
            t.vcpus = j.value("vcpus", 1u);
            t.memoryMib = j.value("memory_mib", 256u);
            t.digest = j.value("digest", "");
            t.kernelVersion = j.value("kernel_version", "");
            t.tcgCacheMib = j.value("tcg_cache_mib", 0u);
            if (t.tcgCacheMib != 0 && (t.tcgCacheMib < 8 || t.tcgCacheMib > 4096))
                throw std::runtime_error("tcg_cache_mib must be 0 or 8..4096");
            if (j.contains("disk")) {
                t.diskPath = fs::absolute(entry.path() / j.at("disk").get<std::string>()).string();
                t.diskSizeBytes = qcow2VirtualSize(t.diskPath);
            }
            if (!fs::exists(t.kernelPath) || !fs::exists(t.initrdPath)) {
                logWarn("templates", "skipping " + t.name + ": kernel or initrd missing");
                continue;
            }
            templates_[t.name] = t;
            logInfo("templates", "template " + t.name + " " + t.digest);
        } catch (const std::exception& e) {
            logWarn("templates", "skipping " + manifest.string() + ": " + e.what());
        }
    }
    if (ec) logWarn("templates", "cannot read templates dir " + templatesDir + ": " + ec.message());
}

TemplateCatalog::TemplateCatalog(std::vector<TemplateInfo> templates) {
    for (auto& t : templates) templates_[t.name] = std::move(t);
}

std::optional<TemplateInfo> TemplateCatalog::find(const std::string& name) const {
    auto it = templates_.find(name);
    if (it == templates_.end()) return std::nullopt;
    return it->second;
}

std::vector<TemplateInfo> TemplateCatalog::list() const {
    std::vector<TemplateInfo> out;
    for (const auto& [name, t] : templates_) out.push_back(t);
    return out;
}

}  // namespace airlock
