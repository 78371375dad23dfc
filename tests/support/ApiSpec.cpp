#include "support/ApiSpec.hpp"
#include "support/BuildPaths.hpp"

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

namespace airlock::test {

namespace {

nlohmann::json loadYaml(const std::string& path) {
    std::string command =
        "python3 -c 'import json,sys,yaml; json.dump(yaml.safe_load(open(sys.argv[1])), "
        "sys.stdout)' '" +
        path + "'";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
    if (!pipe) throw std::runtime_error("cannot run python3 to read " + path);
    std::string text;
    char buf[65536];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe.get())) text.append(buf, n);
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_object() || !doc.contains("paths"))
        throw std::runtime_error("cannot read " + path + " as YAML (is python3-yaml installed?)");
    return doc;
}

std::vector<std::string> segments(const std::string& path) {
    std::vector<std::string> out;
    std::size_t at = 1;
    while (at <= path.size()) {
        auto end = path.find('/', at);
        if (end == std::string::npos) end = path.size();
        out.push_back(path.substr(at, end - at));
        at = end + 1;
    }
    return out;
}

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string typeOf(const nlohmann::json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "boolean";
    if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
    if (v.is_number()) return "number";
    if (v.is_string()) return "string";
    if (v.is_array()) return "array";
    return "object";
}

}  // namespace

ApiSpec::ApiSpec(nlohmann::json document) : doc_(std::move(document)) {}

const ApiSpec& ApiSpec::get() {
    static const ApiSpec spec(loadYaml(test::sourceDir() + "/api/openapi.yaml"));
    return spec;
}

const ApiSpec& ApiSpec::e2b() {
    static const ApiSpec spec(loadYaml(test::sourceDir() + "/api/e2b.yaml"));
    return spec;
}

const nlohmann::json& ApiSpec::resolve(const nlohmann::json& schema) const {
    const nlohmann::json* s = &schema;
    for (int depth = 0; depth < 16 && s->is_object() && s->contains("$ref"); ++depth) {
        std::string ref = (*s)["$ref"].get<std::string>();
        if (ref.rfind("#/", 0) != 0) throw std::runtime_error("unsupported $ref " + ref);
        s = &doc_.at(nlohmann::json::json_pointer(ref.substr(1)));
    }
    return *s;
}

std::string ApiSpec::validate(const nlohmann::json& rawSchema, const nlohmann::json& value,
                              const std::string& where) const {
    const auto& schema = resolve(rawSchema);
    if (!schema.is_object()) return "";
    if (value.is_null() && schema.value("nullable", false)) return "";
    for (const char* combinator : {"oneOf", "anyOf"}) {
        if (!schema.contains(combinator)) continue;
        std::string why;
        int matched = 0;
        for (const auto& option : schema[combinator]) {
            auto e = validate(option, value, where);
            if (e.empty())
                ++matched;
            else
                why += (why.empty() ? "" : "; ") + e;
        }
        if (matched == 0) return where + ": matches none of " + combinator + " (" + why + ")";
        if (matched > 1 && std::string(combinator) == "oneOf")
            return where + ": matches " + std::to_string(matched) + " of oneOf, not one";
    }
    if (schema.contains("allOf"))
        for (const auto& part : schema["allOf"])
            if (auto e = validate(part, value, where); !e.empty()) return e;
    if (schema.contains("type")) {
        std::string want = schema["type"], got = typeOf(value);
        bool ok = want == got || (want == "number" && got == "integer");
        if (!ok) return where + ": is " + got + ", the spec says " + want;
    }
    if (schema.contains("enum")) {
        bool found = false;
        for (const auto& e : schema["enum"]) found = found || e == value;
        if (!found) return where + ": " + value.dump() + " is not one of " + schema["enum"].dump();
    }
    if (value.is_object()) {
        const auto properties = schema.value("properties", nlohmann::json::object());
        for (const auto& name : schema.value("required", nlohmann::json::array()))
            if (!value.contains(name.get<std::string>()))
                return where + ": lacks required field \"" + name.get<std::string>() + "\"";
        for (const auto& [name, field] : value.items()) {
            if (properties.contains(name)) {
                if (auto e = validate(properties[name], field, where + "." + name); !e.empty())
                    return e;
                continue;
            }
            if (!schema.contains("additionalProperties")) continue;
            const auto& extra = schema["additionalProperties"];
            if (extra.is_boolean()) {
                if (!extra.get<bool>())
                    return where + ": has \"" + name + "\", which the spec does not list";
                continue;
            }
            if (auto e = validate(extra, field, where + "." + name); !e.empty()) return e;
        }
    }
    if (value.is_array() && schema.contains("items"))
        for (std::size_t i = 0; i < value.size(); ++i)
            if (auto e = validate(schema["items"], value[i], where + "[" + std::to_string(i) + "]");
                !e.empty())
                return e;
    return "";
}

std::string ApiSpec::pathFor(const std::string& path) const {
    auto want = segments(path);
    std::string best;
    int bestLiterals = -1;
    for (const auto& [specPath, item] : doc_["paths"].items()) {
        auto have = segments(specPath);
        // A last {path} takes the rest, empty or several segments (the
        // preview proxy's path in the guest).
        bool rest = !have.empty() && have.back() == "{path}";
        if (rest ? want.size() < have.size() - 1 : have.size() != want.size()) continue;
        if (rest) have.pop_back();
        int literals = 0;
        bool match = true;
        for (std::size_t i = 0; i < have.size() && match; ++i) {
            if (!have[i].empty() && have[i].front() == '{')
                match = !want[i].empty();
            else if ((match = have[i] == want[i]))
                ++literals;
        }
        if (match && literals > bestLiterals) {
            best = specPath;
            bestLiterals = literals;
        }
    }
    return best;
}

std::string ApiSpec::check(const std::string& method, const std::string& target, int status,
                           const std::string& body) const {
    std::string path = target.substr(0, target.find('?'));
    std::string what = method + " " + path + " answered " + std::to_string(status);
    auto asError = [&]() -> std::string {
        auto j = nlohmann::json::parse(body, nullptr, false);
        if (j.is_discarded()) return what + ": the error body is not JSON";
        auto e = validate(doc_["components"]["schemas"]["Error"], j, "body");
        return e.empty() ? "" : what + ": " + e;
    };
    std::string specPath = pathFor(path);
    if (specPath.empty()) {
        // No such route: the router's 404 (or a test's deliberate probe).
        if (status == 404 || status == 405) return asError();
        return what + ": no operation in api/openapi.yaml serves this path";
    }
    const auto& item = doc_["paths"][specPath];
    std::string m = lower(method);
    if (!item.contains(m)) {
        if (status == 405 || status == 404) return asError();
        return what + ": api/openapi.yaml has no " + method + " on " + specPath;
    }
    const auto& responses = item[m]["responses"];
    std::string code = std::to_string(status);
    std::string family = code.substr(0, 1) + "XX";
    const nlohmann::json* response = nullptr;
    if (responses.contains(code))
        response = &responses[code];
    else if (responses.contains(family))
        response = &responses[family];
    else if (responses.contains("default"))
        response = &responses["default"];  // a passthrough (the preview proxy)
    else if (status >= 400)
        return asError();  // every error has the one shape (info.description)
    else
        return what + ": " + code + " is not among the responses of " + method + " " + specPath;
    const auto& resolved = resolve(*response);
    if (!resolved.contains("content") || !resolved["content"].contains("application/json")) {
        // An error listed for its meaning alone still has the one shape,
        // unless the operation passes other servers' answers through.
        if (status >= 400 && !responses.contains("default")) return asError();
        return "";
    }
    const auto& media = resolved["content"]["application/json"];
    if (!media.contains("schema")) return "";
    auto j = nlohmann::json::parse(body, nullptr, false);
    // A route that answers in several types (a diff as a patch or as JSON):
    // a body that is not JSON is one of the others.
    if (j.is_discarded() && resolved["content"].size() > 1) return "";
    if (j.is_discarded()) return what + ": the body is not the JSON the spec says";
    auto e = validate(media["schema"], j, "body");
    return e.empty() ? "" : what + " (" + specPath + "): " + e;
}

std::vector<std::string> ApiSpec::responsesWithoutSchema() const {
    std::vector<std::string> out;
    for (const auto& [path, item] : doc_["paths"].items())
        for (const auto& [method, op] : item.items()) {
            if (!op.is_object() || !op.contains("responses")) continue;
            for (const auto& [code, response] : op["responses"].items()) {
                if (code.empty() || (code[0] != '2' && code[0] != '3')) continue;
                const auto& r = resolve(response);
                bool schema = false;
                if (r.contains("content"))
                    for (const auto& [type, media] : r["content"].items())
                        schema = schema || media.contains("schema");
                if (!schema) out.push_back(method + " " + path + " " + code);
            }
        }
    return out;
}

}  // namespace airlock::test
