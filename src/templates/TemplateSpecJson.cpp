#include "templates/TemplateSpecJson.hpp"

#include "core/Error.hpp"
#include "core/JsonFields.hpp"
#include "store/SnapshotStore.hpp"

#include <cctype>

namespace airlock::templates {
using nlohmann::json;
namespace {

constexpr std::size_t kMaxSteps = 500;
constexpr std::size_t kMaxFieldText = 64 * 1024;

Error bad(const std::string& m) { return Error(ErrorCode::bad_request, m); }

std::string text(const json& j, const char* key, const std::string& where, bool allowEmpty = false) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string())
        throw bad(where + ": '" + key + "' must be a string");
    auto s = it->get<std::string>();
    if (!allowEmpty && s.empty()) throw bad(where + ": '" + key + "' must not be empty");
    if (s.size() > kMaxFieldText) throw bad(where + ": '" + key + "' is longer than 64 KiB");
    if (s.find('\0') != std::string::npos) throw bad(where + ": '" + key + "' holds a NUL byte");
    return s;
}

std::optional<std::string> optText(const json& j, const char* key, const std::string& where) {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    return text(j, key, where);
}

bool validEnvName(const std::string& k) {
    if (k.empty() || k.size() > 256 || (k[0] >= '0' && k[0] <= '9')) return false;
    for (char c : k)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    return true;
}

std::vector<std::pair<std::string, std::string>> envPairs(const json& j, const std::string& where) {
    if (!j.is_object()) throw bad(where + " must be an object of strings");
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [k, v] : j.items()) {
        if (!validEnvName(k)) throw bad(where + ": '" + k + "' is not a variable name");
        if (!v.is_string()) throw bad(where + ": '" + k + "' must be a string");
        out.emplace_back(k, v.get<std::string>());
    }
    return out;
}

std::vector<std::string> packageList(const json& j, const std::string& where) {
    std::vector<std::string> out;
    auto add = [&](const json& v) {
        if (!v.is_string() || v.get<std::string>().empty())
            throw bad(where + ": every package must be a non-empty string");
        auto s = v.get<std::string>();
        if (!isPackageName(s)) throw bad(where + ": '" + s + "' is not a package name");
        out.push_back(s);
    };
    if (j.is_string()) {
        add(j);
    } else if (j.is_array() && !j.empty() && j.size() <= 500) {
        for (const auto& v : j) add(v);
    } else {
        throw bad(where + " must be a package name or a list of 1 to 500");
    }
    return out;
}

Step parseStep(const json& j, std::size_t i) {
    std::string where = "steps[" + std::to_string(i) + "]";
    if (!j.is_object()) throw bad(where + " must be an object");
    static const char* kinds[] = {"run", "copy", "env", "workdir", "user", "apt", "npm", "pip", "git"};
    std::string kind = j.contains("run") ? "run" : "";
    for (const char* k : kinds)
        if (kind != "run" && j.contains(k)) {
            if (!kind.empty()) throw bad(where + " names both '" + kind + "' and '" + k + "'");
            kind = k;
        }
    if (kind.empty())
        throw bad(where + " must be one of run, copy, env, workdir, user, apt, npm, pip, git");
    if (kind == "run") {
        rejectUnknownFields(j, {"run", "user", "cwd", "env"}, where);
        RunStep s;
        s.shell = text(j, "run", where);
        s.user = optText(j, "user", where);
        s.cwd = optText(j, "cwd", where);
        if (j.contains("env")) s.env = envPairs(j["env"], where + ".env");
        return s;
    }
    if (kind == "copy") {
        rejectUnknownFields(j, {"copy"}, where);
        const auto& c = j["copy"];
        if (!c.is_object()) throw bad(where + ".copy must be an object");
        rejectUnknownFields(c, {"src", "dest", "mode", "owner"}, where + ".copy");
        CopyStep s;
        s.src = text(c, "src", where + ".copy");
        s.dest = text(c, "dest", where + ".copy");
        s.mode = optText(c, "mode", where + ".copy");
        if (s.mode && (s.mode->size() > 5 || s.mode->find_first_not_of("01234567") != std::string::npos))
            throw bad(where + ".copy: 'mode' must be octal, e.g. \"0644\"");
        s.owner = optText(c, "owner", where + ".copy");
        return s;
    }
    if (kind == "env") {
        rejectUnknownFields(j, {"env"}, where);
        return EnvStep{envPairs(j["env"], where + ".env")};
    }
    if (kind == "workdir") {
        rejectUnknownFields(j, {"workdir"}, where);
        return WorkdirStep{text(j, "workdir", where)};
    }
    if (kind == "user") {
        rejectUnknownFields(j, {"user"}, where);
        return UserStep{text(j, "user", where)};
    }
    if (kind == "git") {
        rejectUnknownFields(j, {"git"}, where);
        const auto& g = j["git"];
        if (!g.is_object()) throw bad(where + ".git must be an object");
        rejectUnknownFields(g, {"repo", "ref", "dest", "credential"}, where + ".git");
        GitStep s;
        s.repo = text(g, "repo", where + ".git");
        s.ref = g.contains("ref") ? text(g, "ref", where + ".git") : "HEAD";
        s.dest = text(g, "dest", where + ".git");
        s.credential = g.contains("credential") ? text(g, "credential", where + ".git") : "";
        return s;
    }
    rejectUnknownFields(j, {kind}, where);
    PackagesStep s;
    s.manager = kind == "apt" ? PackageManager::apt : kind == "npm" ? PackageManager::npm : PackageManager::pip;
    s.packages = packageList(j[kind], where + "." + kind);
    return s;
}

std::optional<unsigned> optUnsigned(const json& j, const char* key, unsigned lo, unsigned hi) {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    const auto& v = j[key];
    if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > hi)
        throw bad(std::string("'") + key + "' must be an integer from " + std::to_string(lo) +
                  " to " + std::to_string(hi));
    return v.get<unsigned>();
}

}  // namespace

// The same characters and bounds as a snapshot's name and tag.
bool isValidTemplateName(const std::string& name) { return isValidSnapshotAlias(name); }
bool isValidTemplateTag(const std::string& tag) { return isValidSnapshotTag(tag); }

TemplateRef parseTemplateRef(const std::string& ref) {
    TemplateRef r;
    auto colon = ref.find(':');
    r.name = ref.substr(0, colon);
    if (colon != std::string::npos) r.tag = ref.substr(colon + 1);
    if (!isValidTemplateName(r.name))
        throw bad("a template name is 1 to 64 of a-z, 0-9, '-' and '_' (got '" + ref.substr(0, 80) + "')");
    if (!isValidTemplateTag(r.tag))
        throw bad("a template tag is 1 to 64 of a-z, 0-9, '-', '_' and '.'");
    return r;
}

bool isPackageName(std::string_view s) {
    if (s.empty() || s[0] == '-') return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) ||
              std::string_view("@/._-=:+~<>^").find(c) != std::string_view::npos))
            return false;
    return true;
}

ReadyCheck parseReadyCheck(const json& j) {
    ReadyCheck r;
    if (j.is_null()) return r;
    if (!j.is_object()) throw bad("start.ready must be an object");
    rejectUnknownFields(j, {"command", "port", "file", "log", "delay_s", "timeout_s"}, "start.ready");
    int kinds = 0;
    if (j.contains("command")) { r.kind = ReadyCheck::Kind::command; r.command = text(j, "command", "start.ready"); ++kinds; }
    if (j.contains("port")) {
        r.kind = ReadyCheck::Kind::port;
        auto p = optUnsigned(j, "port", 1, 65535);
        r.port = *p;
        ++kinds;
    }
    if (j.contains("file")) { r.kind = ReadyCheck::Kind::file; r.path = text(j, "file", "start.ready"); ++kinds; }
    if (j.contains("log")) { r.kind = ReadyCheck::Kind::log; r.pattern = text(j, "log", "start.ready"); ++kinds; }
    if (j.contains("delay_s")) {
        if (!j["delay_s"].is_number() || j["delay_s"].get<double>() < 0 || j["delay_s"].get<double>() > 600)
            throw bad("start.ready.delay_s must be a number of seconds from 0 to 600");
        r.kind = ReadyCheck::Kind::delay;
        r.delayS = j["delay_s"].get<double>();
        ++kinds;
    }
    if (kinds > 1) throw bad("start.ready takes one of command, port, file, log and delay_s");
    if (auto t = optUnsigned(j, "timeout_s", 1, 3600)) r.timeoutS = *t;
    return r;
}

namespace {
void parseCommon(const json& j, TemplateSpec& s) {
    auto ref = parseTemplateRef(text(j, "name", "template"));
    if (ref.name != text(j, "name", "template")) throw bad("'name' takes no tag: give it as 'tag'");
    s.name = ref.name;
    if (j.contains("tag")) {
        s.tag = text(j, "tag", "template");
        if (!isValidTemplateTag(s.tag)) throw bad("a template tag is 1 to 64 of a-z, 0-9, '-', '_' and '.'");
    }
    s.vcpus = optUnsigned(j, "vcpus", 1, 64);
    s.memoryMib = optUnsigned(j, "memory_mib", 64, 1 << 20);
    s.diskGib = optUnsigned(j, "disk_gib", 1, 4096);
    if (auto t = optUnsigned(j, "timeout_s", 10, 24 * 3600)) s.timeoutS = *t;
    if (j.contains("no_cache")) {
        if (!j["no_cache"].is_boolean()) throw bad("'no_cache' must be a boolean");
        s.noCache = j["no_cache"].get<bool>();
    }
    for (const char* k : {"policy", "packages", "network"})
        if (j.contains(k) && !j[k].is_null()) s.sandbox[k] = j[k];
}
}  // namespace

void requireDockerfileCompanion(const json& j) {
    if (!j.is_object()) throw bad("the spec must be a JSON object");
    rejectUnknownFields(j, {"name", "tag", "vcpus", "memory_mib", "disk_gib", "timeout_s", "no_cache", "policy",
                            "packages", "network", "ready"},
                        "a spec beside a Dockerfile (the Dockerfile gives from, steps and start)");
}

TemplateSpec parseTemplateSpec(const json& j) {
    if (!j.is_object()) throw bad("the spec must be a JSON object");
    rejectUnknownFields(j, {"name", "tag", "from", "steps", "start", "vcpus", "memory_mib", "disk_gib",
                            "timeout_s", "no_cache", "policy", "packages", "network"},
                        "template spec");
    TemplateSpec s;
    parseCommon(j, s);
    s.from = text(j, "from", "template");
    if (j.contains("steps") && !j["steps"].is_null()) {
        const auto& steps = j["steps"];
        if (!steps.is_array()) throw bad("'steps' must be an array");
        if (steps.size() > kMaxSteps) throw bad("a template has at most 500 steps");
        for (std::size_t i = 0; i < steps.size(); ++i) s.steps.push_back(parseStep(steps[i], i));
    }
    if (j.contains("start") && !j["start"].is_null()) {
        const auto& st = j["start"];
        if (!st.is_object()) throw bad("'start' must be an object");
        rejectUnknownFields(st, {"cmd", "ready"}, "start");
        StartSpec start;
        start.cmd = text(st, "cmd", "start");
        if (st.contains("ready")) start.ready = parseReadyCheck(st["ready"]);
        s.start = start;
    }
    return s;
}

json stepJson(const Step& step) {
    return std::visit(
        [](const auto& s) -> json {
            using T = std::decay_t<decltype(s)>;
            auto pairs = [](const std::vector<std::pair<std::string, std::string>>& v) {
                json a = json::array();
                for (const auto& [k, x] : v) a.push_back({k, x});
                return a;
            };
            if constexpr (std::is_same_v<T, RunStep>) {
                json j{{"run", s.shell}};
                if (s.user) j["user"] = *s.user;
                if (s.cwd) j["cwd"] = *s.cwd;
                if (!s.env.empty()) j["env"] = pairs(s.env);
                return j;
            } else if constexpr (std::is_same_v<T, CopyStep>) {
                json c{{"src", s.src}, {"dest", s.dest}};
                if (s.mode) c["mode"] = *s.mode;
                if (s.owner) c["owner"] = *s.owner;
                return {{"copy", c}};
            } else if constexpr (std::is_same_v<T, EnvStep>) {
                return {{"env", pairs(s.vars)}};
            } else if constexpr (std::is_same_v<T, WorkdirStep>) {
                return {{"workdir", s.path}};
            } else if constexpr (std::is_same_v<T, UserStep>) {
                return {{"user", s.user}};
            } else if constexpr (std::is_same_v<T, PackagesStep>) {
                const char* m = s.manager == PackageManager::apt ? "apt" : s.manager == PackageManager::npm ? "npm" : "pip";
                return {{m, s.packages}};
            } else {
                return {{"git", {{"repo", s.repo}, {"ref", s.ref}, {"dest", s.dest}, {"credential", s.credential}}}};
            }
        },
        step);
}

json specJson(const TemplateSpec& s) {
    json steps = json::array();
    for (const auto& st : s.steps) steps.push_back(stepJson(st));
    json j{{"name", s.name}, {"tag", s.tag}, {"from", s.from}, {"steps", steps}, {"timeout_s", s.timeoutS}};
    if (s.noCache) j["no_cache"] = true;
    if (s.start) j["start"] = {{"cmd", s.start->cmd}};
    if (s.vcpus) j["vcpus"] = *s.vcpus;
    if (s.memoryMib) j["memory_mib"] = *s.memoryMib;
    if (s.diskGib) j["disk_gib"] = *s.diskGib;
    if (!s.sandbox.empty()) j["sandbox"] = s.sandbox;
    if (!s.labels.empty()) j["labels"] = s.labels;
    if (!s.exposedPorts.empty()) j["exposed_ports"] = s.exposedPorts;
    return j;
}

std::string stepText(const Step& step) {
    return std::visit(
        [](const auto& s) -> std::string {
            using T = std::decay_t<decltype(s)>;
            auto join = [](const auto& v) {
                std::string out;
                for (const auto& x : v) out += (out.empty() ? "" : " ") + x;
                return out;
            };
            if constexpr (std::is_same_v<T, RunStep>) {
                return "RUN " + s.shell;
            } else if constexpr (std::is_same_v<T, CopyStep>) {
                return "COPY " + s.src + " " + s.dest;
            } else if constexpr (std::is_same_v<T, EnvStep>) {
                std::string out = "ENV";
                for (const auto& [k, v] : s.vars) out += " " + k + "=" + v;
                return out;
            } else if constexpr (std::is_same_v<T, WorkdirStep>) {
                return "WORKDIR " + s.path;
            } else if constexpr (std::is_same_v<T, UserStep>) {
                return "USER " + s.user;
            } else if constexpr (std::is_same_v<T, PackagesStep>) {
                const char* m = s.manager == PackageManager::apt ? "APT " : s.manager == PackageManager::npm ? "NPM " : "PIP ";
                return m + join(s.packages);
            } else {
                return "GIT " + s.repo + " " + s.ref + " " + s.dest;
            }
        },
        step);
}

bool changesDisk(const Step& s) {
    return !std::holds_alternative<EnvStep>(s) && !std::holds_alternative<WorkdirStep>(s) &&
           !std::holds_alternative<UserStep>(s);
}

}  // namespace airlock::templates
