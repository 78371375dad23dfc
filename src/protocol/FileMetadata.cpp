#include "protocol/FileMetadata.hpp"

#include <cstring>

namespace airlock::protocol {

namespace {
// The position of the first byte outside 0x20-0x7e, or npos.
std::size_t unprintable(const std::string& s) {
    for (std::size_t i = 0; i < s.size(); ++i)
        if (static_cast<unsigned char>(s[i]) < 0x20 || static_cast<unsigned char>(s[i]) > 0x7e)
            return i;
    return std::string::npos;
}
}  // namespace

std::size_t fileMetadataCost(const std::string& key, const std::string& value) {
    return std::strlen(kFileMetadataXattrPrefix) + key.size() + value.size();
}

std::string fileMetadataProblem(const FileMetadata& metadata) {
    std::size_t total = 0;
    for (const auto& [key, value] : metadata) {
        if (key.empty()) return "a metadata key must not be empty";
        if (key.size() > kMaxFileMetadataKey)
            return "metadata key '" + key.substr(0, 32) + "...' is over " +
                   std::to_string(kMaxFileMetadataKey) + " bytes";
        if (unprintable(key) != std::string::npos)
            return "a metadata key holds a byte that is not printable ASCII";
        if (unprintable(value) != std::string::npos)
            return "the value for metadata key '" + key + "' holds a byte that is not printable ASCII";
        total += fileMetadataCost(key, value);
    }
    if (total > kMaxFileMetadataBytes)
        return "the metadata takes " + std::to_string(total) + " bytes, over " +
               std::to_string(kMaxFileMetadataBytes);
    return "";
}

}  // namespace airlock::protocol
