#pragma once
#include <cstddef>
#include <map>
#include <string>

namespace airlock::protocol {

// A file's user metadata (E2B's, envd 0.6.2): string pairs kept by the guest
// as extended attributes "user.e2b.<key>". Keys and values are printable
// ASCII; a key is at most kMaxFileMetadataKey bytes (the kernel's 255 for a
// whole attribute name, less the prefix) and a set at most
// kMaxFileMetadataBytes, counted as prefix + key + value per pair (ext4
// keeps an inode's attributes in one 4 KiB block).
using FileMetadata = std::map<std::string, std::string>;
inline constexpr const char* kFileMetadataXattrPrefix = "user.e2b.";
inline constexpr std::size_t kMaxFileMetadataKey = 255 - 9;
inline constexpr std::size_t kMaxFileMetadataBytes = 4096;

// What is wrong with a set, in words for an error; "" when nothing is.
std::string fileMetadataProblem(const FileMetadata& metadata);
// Whether one more pair fits a set of `used` bytes (the agent, reading a
// file's attributes back, leaves out what would not).
std::size_t fileMetadataCost(const std::string& key, const std::string& value);

}  // namespace airlock::protocol
