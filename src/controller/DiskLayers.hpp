#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace airlock {

// Disk sizes are whole GiB in the API (disk_gib).
inline constexpr std::uint64_t kGiB = 1024ull * 1024 * 1024;

// The virtual size recorded in a qcow2 header; throws if path is no qcow2.
std::uint64_t qcow2VirtualSize(const std::string& path);

// Creates a qcow2 overlay `name` in `dir` over `backing` (a template base or
// a frozen snapshot layer) without opening the backing file: a running QEMU
// may hold it locked. It is made in `stagingDir` (root's alone), handed to
// `owner` (the sandbox's QEMU uid:gid) through its fd, then renamed into
// `dir`, which QEMU may write: nothing it planted there is ever followed.
void createOverlay(const std::string& stagingDir, const std::string& dir, const std::string& name,
                   const std::string& backing, std::uint64_t virtualSize,
                   std::optional<std::pair<unsigned, unsigned>> owner);

}  // namespace airlock
