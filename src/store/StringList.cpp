#include "store/StringList.hpp"

#include <nlohmann/json.hpp>

#include "protocol/JsonText.hpp"

namespace airlock {

std::string stringListColumn(const std::vector<std::string>& list) {
    return jsonText(nlohmann::json(list));
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
