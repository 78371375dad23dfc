#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace airlock {

struct TemplateInfo {
    std::string name;
    std::string kernelPath;  // absolute
    std::string initrdPath;  // absolute
    std::string cmdline;
    unsigned vcpus = 1;
    unsigned memoryMib = 256;
    std::string digest;
    std::string kernelVersion;
    std::string diskPath;              // absolute; empty: the initramfs is the root filesystem
    std::uint64_t diskSizeBytes = 0;   // virtual size of the base image
    // TCG's code cache for this template's guests (0: the daemon's
    // --tcg-cache-mib). A JIT-heavy guest (node, npm) needs far more than an
    // idle busybox one: an npm install ran 10x slower in 16 MiB.
    unsigned tcgCacheMib = 0;
};

// The templates a server offers: every DIR/<name>/template.json under the
// templates directory (written by images/<name>/build.sh).
class TemplateCatalog {
public:
    explicit TemplateCatalog(const std::string& templatesDir);
    // For tests: a catalog from given entries.
    explicit TemplateCatalog(std::vector<TemplateInfo> templates);
    std::optional<TemplateInfo> find(const std::string& name) const;
    std::vector<TemplateInfo> list() const;

private:
    std::map<std::string, TemplateInfo> templates_;
};

}  // namespace airlock
