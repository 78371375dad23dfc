#pragma once
#include <string>
#include <vector>

namespace airlock {

// A list of strings as a column keeps it (a JSON array), read and written in
// the store only: records carry the list itself. A damaged column reads as
// the strings it still holds.
std::string stringListColumn(const std::vector<std::string>& list);
std::vector<std::string> stringListFromColumn(const std::string& column);

}  // namespace airlock
