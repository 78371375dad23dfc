#include "store/StringList.hpp"

#include <nlohmann/json.hpp>

namespace airlock {

std::string stringListColumn(const std::vector<std::string>& list) {
    return nlohmann::json(list).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<std::string> stringListFromColumn(const std::string& column) {
    auto j = nlohmann::json::parse(column, nullptr, false);
    std::vector<std::string> out;
    if (j.is_array())
        for (const auto& e : j)
            if (e.is_string()) out.push_back(e.get<std::string>());
    return out;
}

}  // namespace airlock
