#include "mcp/ToolArguments.hpp"

#include "mcp/JsonRpc.hpp"

namespace airlock::mcp {
using nlohmann::json;

namespace {

std::string typeName(const json& v) {
    if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "null";
}

bool hasType(const json& v, const std::string& type) {
    if (type == "string") return v.is_string();
    if (type == "integer") return v.is_number_integer() || v.is_number_unsigned();
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_boolean();
    if (type == "array") return v.is_array();
    if (type == "object") return v.is_object();
    return false;
}

std::string shown(const json& v) {
    std::string s = JsonRpc::dump(v);
    return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

[[noreturn]] void refuse(const std::string& message) {
    throw RpcError(rpc::kInvalidParams, message);
}

}  // namespace

void ToolArguments::check(const json& schema, const json& arguments) {
    if (!arguments.is_object()) refuse("arguments must be an object, got " + typeName(arguments));
    checkValue(schema, arguments, "", 0);
}

void ToolArguments::checkValue(const json& schema, const json& value, const std::string& name,
                               int depth) {
    const std::string what = name.empty() ? "arguments" : name;
    if (depth > 16) refuse(what + " nests too deeply");
    if (schema.contains("type")) {
        std::string type = schema["type"].get<std::string>();
        if (!hasType(value, type))
            refuse(what + " must be " + (type == "integer" || type == "object" || type == "array" ? "an " : "a ") +
                   type + ", got " + typeName(value) + " " + shown(value));
    }
    if (schema.contains("enum")) {
        bool found = false;
        for (const auto& e : schema["enum"]) found = found || e == value;
        if (!found) refuse(what + " must be one of " + JsonRpc::dump(schema["enum"]) + ", got " + shown(value));
    }
    if (value.is_string() && schema.contains("maxLength") &&
        value.get_ref<const std::string&>().size() > schema["maxLength"].get<std::size_t>())
        refuse(what + " is longer than " + std::to_string(schema["maxLength"].get<std::size_t>()) +
               " bytes");
    if (value.is_number() && schema.contains("minimum") &&
        value.get<double>() < schema["minimum"].get<double>())
        refuse(what + " must be at least " + JsonRpc::dump(schema["minimum"]));
    if (value.is_number() && schema.contains("maximum") &&
        value.get<double>() > schema["maximum"].get<double>())
        refuse(what + " must be at most " + JsonRpc::dump(schema["maximum"]));
    if (value.is_array()) {
        if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<std::size_t>())
            refuse(what + " has more than " + std::to_string(schema["maxItems"].get<std::size_t>()) +
                   " items");
        if (schema.contains("minItems") && value.size() < schema["minItems"].get<std::size_t>())
            refuse(what + " needs at least " + std::to_string(schema["minItems"].get<std::size_t>()) +
                   " items");
        if (schema.contains("items"))
            for (std::size_t i = 0; i < value.size(); ++i)
                checkValue(schema["items"], value[i], what + "[" + std::to_string(i) + "]", depth + 1);
    }
    if (value.is_object()) {
        const json props = schema.value("properties", json::object());
        if (schema.contains("required"))
            for (const auto& r : schema["required"])
                if (!value.contains(r.get<std::string>()))
                    refuse((name.empty() ? "" : name + ".") + r.get<std::string>() + " is required");
        bool closed = schema.contains("additionalProperties") &&
                      schema["additionalProperties"].is_boolean() &&
                      !schema["additionalProperties"].get<bool>();
        for (const auto& [k, v] : value.items()) {
            std::string field = name.empty() ? k : name + "." + k;
            if (props.contains(k))
                checkValue(props[k], v, field, depth + 1);
            else if (closed)
                refuse("unknown argument " + field.substr(0, 64) +
                       (props.empty() ? "" : "; known: " + [&] {
                           std::string known;
                           for (const auto& [p, s] : props.items()) known += (known.empty() ? "" : ", ") + p;
                           return known;
                       }()));
        }
    }
}

}  // namespace airlock::mcp
