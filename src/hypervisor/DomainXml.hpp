#pragma once
#include <optional>
#include <string>

#include "hypervisor/Hypervisor.hpp"

namespace airlock {

// Renders the libvirt domain XML for a sandbox: q35 (libvirt refuses the
// microvm machine), direct kernel boot, no USB/balloon/graphics, serial
// console to a file, the agent's virtio-serial channel and a virtio-rng.
std::string buildDomainXml(const DomainSpec& spec);

// The address libvirt assigned in <vsock><cid auto='yes' address='N'/>.
std::optional<unsigned> parseVsockCid(const std::string& liveXml);

// Escapes text for XML attribute and element content.
std::string xmlEscape(const std::string& text);

}  // namespace airlock
