#pragma once
#include <cstdint>
#include <string>

namespace airlock {

// The virtual size recorded in a qcow2 header; throws if path is no qcow2.
std::uint64_t qcow2VirtualSize(const std::string& path);

// Creates a qcow2 overlay over `backing` (a template base or a frozen
// snapshot layer) without opening the backing file: a running QEMU may hold
// it locked. The overlay is handed to `owner` (the QEMU user) when running
// as root; the backing chain stays root's and read-only.
void createOverlay(const std::string& overlay, const std::string& backing, std::uint64_t virtualSize,
                   const std::string& owner);

}  // namespace airlock
