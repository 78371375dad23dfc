#include "store/TaskSpec.hpp"

#include "store/SandboxRecord.hpp"

namespace airlock {

namespace {
std::vector<std::string> maskedList(const std::vector<std::string>& in, const SecretMasker& m) {
    std::vector<std::string> out;
    out.reserve(in.size());
    for (const auto& s : in) out.push_back(m.mask(s));
    return out;
}

std::vector<std::string> stringsOf(const nlohmann::json& j, const char* key) {
    std::vector<std::string> out;
    auto it = j.find(key);
    if (it == j.end() || !it->is_array()) return out;
    for (const auto& s : *it)
        if (s.is_string()) out.push_back(s.get<std::string>());
    return out;
}

std::optional<std::string> stringOf(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}
}  // namespace

TaskSpec TaskSpec::masked(const SecretMasker& masker) const {
    TaskSpec out;
    if (id) out.id = masker.mask(*id);
    if (prompt) out.prompt = masker.mask(*prompt);
    if (requestedBy) out.requestedBy = masker.mask(*requestedBy);
    out.testCommands = maskedList(testCommands, masker);
    out.sensitivePaths = maskedList(sensitivePaths, masker);
    return out;
}

nlohmann::json TaskSpec::toJson() const {
    nlohmann::json j = nlohmann::json::object();
    if (id) j["id"] = *id;
    if (prompt) j["prompt"] = *prompt;
    if (requestedBy) j["requested_by"] = *requestedBy;
    j["test_commands"] = testCommands;
    j["sensitive_paths"] = sensitivePaths;
    return j;
}

std::optional<TaskSpec> taskOf(const SandboxRecord& r) {
    if (r.taskJson.empty()) return std::nullopt;
    auto j = nlohmann::json::parse(r.taskJson, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    TaskSpec t;
    t.id = stringOf(j, "id");
    t.prompt = stringOf(j, "prompt");
    t.requestedBy = stringOf(j, "requested_by");
    t.testCommands = stringsOf(j, "test_commands");
    t.sensitivePaths = stringsOf(j, "sensitive_paths");
    return t;
}

}  // namespace airlock
