// libFuzzer target: what one node of a fleet reads that another node (or
// whoever holds etcd) wrote: node records, sandbox placements, and a moving
// sandbox's record. Bad input may only be refused with Error (or read as
// none); what parses must survive its own round trip.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "controller/MovedSandbox.hpp"
#include "core/Error.hpp"
#include "fleet/NodeRecord.hpp"
#include "fleet/SandboxDirectory.hpp"

using namespace airlock;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string input(reinterpret_cast<const char*>(data), size);
    try {
        auto node = fleet::NodeRecord::fromJson(input);
        auto again = fleet::NodeRecord::fromJson(node.toJson());
        if (again.name != node.name || again.url != node.url) std::abort();
    } catch (const Error&) {
    }
    try {
        auto placed = fleet::SandboxPlacement::fromJson("sbx-fuzz", input);
        auto again = fleet::SandboxPlacement::fromJson("sbx-fuzz", placed.toJson());
        if (again.node != placed.node || again.tenant != placed.tenant) std::abort();
    } catch (const Error&) {
    }
    auto j = nlohmann::json::parse(input, nullptr, false);
    if (!j.is_discarded()) {
        try {
            auto moved = MovedSandbox::fromJson(j);
            auto again = MovedSandbox::fromJson(moved.toJson());
            if (again.record.id != moved.record.id || again.record.disk != moved.record.disk ||
                again.audit.size() != moved.audit.size())
                std::abort();
            // Never a path: the disk is one plain name in the sandbox's directory.
            if (moved.record.disk.find('/') != std::string::npos) std::abort();
        } catch (const Error&) {
        }
    }
    return 0;
}
