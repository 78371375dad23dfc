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

// Refuses (Error bad_request) an image another host sent unless it is a
// plain qcow2 v3 this build reads as data only: no incompatible feature
// (an external data file would name a host file), no raw-data-file bit, no
// data-file extension, a virtual size within maxVirtualBytes. qemu-img and
// libvirt open what the header names, as root, before any guest runs.
void requirePlainQcow2(const std::string& path, std::uint64_t maxVirtualBytes);

// Creates a qcow2 overlay `name` in `dir` over `backing` (a template base or
// a frozen snapshot layer) without opening the backing file: a running QEMU
// may hold it locked. It is made in `stagingDir` (root's alone), handed to
// `owner` (the sandbox's QEMU uid:gid) through its fd, then renamed into
// `dir`, which QEMU may write: nothing it planted there is ever followed.
void createOverlay(const std::string& stagingDir, const std::string& dir, const std::string& name,
                   const std::string& backing, std::uint64_t virtualSize,
                   std::optional<std::pair<unsigned, unsigned>> owner);

// Moves `stagedName` from stagingDir (root's alone) into dir as `name`,
// handed to `owner` first: the last step of createOverlay, and of a disk
// that came from another host. The staged file goes on failure.
void installDisk(const std::string& stagingDir, const std::string& stagedName,
                 const std::string& dir, const std::string& name,
                 std::optional<std::pair<unsigned, unsigned>> owner);

// A disk leaving for another host: `image` (a copy of an overlay) is made to
// read `base` (the template's image) alone, the data of every layer between
// copied into it (qemu-img's safe rebase).
void flattenOnto(const std::string& image, const std::string& base);
// The header alone names a new backing file (the same template's image at
// this host's path); nothing is read or copied.
void rebaseInPlace(const std::string& image, const std::string& base);

}  // namespace airlock
