#include "cli/CliApp.hpp"

#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/HttpClient.hpp"

namespace airlock::cli {
namespace {
using nlohmann::json;

const char* kUsage =
    "usage: airlock <command> [args]\n"
    "  create [--template T]          create a sandbox, print its id\n"
    "  ls                             list sandboxes\n"
    "  exec ID -- CMD [ARGS...]       run a command, print its output, exit with its code\n"
    "  rm ID                          delete a sandbox\n"
    "  run [--template T] -- CMD...   create, exec, delete\n"
    "  templates                      list templates\n"
    "environment: AIRLOCK_URL (default http://127.0.0.1:8080), AIRLOCK_API_KEY\n";

struct CliError {
    std::string message;
    int code = 1;
};

json expectJson(const HttpResult& r, int wanted) {
    json j = json::parse(r.body, nullptr, false);
    if (r.status != wanted) {
        std::string msg = "HTTP " + std::to_string(r.status);
        if (!j.is_discarded() && j.contains("error")) msg += ": " + j["error"].value("message", std::string());
        throw CliError{msg, 1};
    }
    return j;
}

std::string takeTemplate(std::vector<std::string>& args) {
    std::string t = "minimal";
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") break;
        if (args[i] == "--template" && i + 1 < args.size()) {
            t = args[i + 1];
            args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
            break;
        }
    }
    return t;
}

std::vector<std::string> commandAfterDashes(const std::vector<std::string>& args, std::size_t from) {
    std::vector<std::string> cmd;
    std::size_t i = from;
    if (i < args.size() && args[i] == "--") ++i;
    for (; i < args.size(); ++i) cmd.push_back(args[i]);
    if (cmd.empty()) throw CliError{"no command given (use: -- CMD [ARGS...])", 2};
    return cmd;
}

std::string createSandbox(HttpClient& c, const std::string& tmpl) {
    return expectJson(c.request("POST", "/v1/sandboxes", json{{"template", tmpl}}.dump()), 201)["id"];
}

int execIn(HttpClient& c, const std::string& id, const std::vector<std::string>& cmd, std::ostream& out,
           std::ostream& err) {
    json res = expectJson(c.request("POST", "/v1/sandboxes/" + id + "/exec", json{{"cmd", cmd}}.dump()), 200);
    out << res.value("stdout", std::string());
    err << res.value("stderr", std::string());
    out.flush();
    err.flush();
    if (res.value("truncated", false)) err << "airlock: output was truncated\n";
    return res.value("exit_code", 1);
}
}  // namespace

int runCli(const std::vector<std::string>& argsIn, const std::string& url, const std::string& apiKey,
           std::ostream& out, std::ostream& err) {
    std::vector<std::string> args = argsIn;
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        (args.empty() ? err : out) << kUsage;
        return args.empty() ? 2 : 0;
    }
    try {
        HttpClient client(url, apiKey);
        const std::string cmd = args[0];
        args.erase(args.begin());
        if (cmd == "create") {
            out << createSandbox(client, takeTemplate(args)) << "\n";
            return 0;
        }
        if (cmd == "ls") {
            json res = expectJson(client.request("GET", "/v1/sandboxes"), 200);
            out << "ID                        TEMPLATE   STATE     CREATED\n";
            for (const auto& s : res["sandboxes"])
                out << s.value("id", "") << "  " << s.value("template", "") << "    " << s.value("state", "") << "   "
                    << s.value("created_at", "") << "\n";
            return 0;
        }
        if (cmd == "templates") {
            json res = expectJson(client.request("GET", "/v1/templates"), 200);
            for (const auto& t : res["templates"]) out << t.value("name", "") << "  " << t.value("digest", "") << "\n";
            return 0;
        }
        if (cmd == "exec") {
            if (args.empty()) throw CliError{"exec needs a sandbox id", 2};
            return execIn(client, args[0], commandAfterDashes(args, 1), out, err);
        }
        if (cmd == "rm") {
            if (args.empty()) throw CliError{"rm needs a sandbox id", 2};
            for (const auto& id : args) expectJson(client.request("DELETE", "/v1/sandboxes/" + id), 204);
            return 0;
        }
        if (cmd == "run") {
            std::string tmpl = takeTemplate(args);
            auto command = commandAfterDashes(args, 0);
            std::string id = createSandbox(client, tmpl);
            int code = 1;
            try {
                code = execIn(client, id, command, out, err);
            } catch (...) {
                client.request("DELETE", "/v1/sandboxes/" + id);
                throw;
            }
            client.request("DELETE", "/v1/sandboxes/" + id);
            return code;
        }
        throw CliError{"unknown command '" + cmd + "'\n" + kUsage, 2};
    } catch (const CliError& e) {
        err << "airlock: " << e.message << "\n";
        return e.code;
    } catch (const std::exception& e) {
        err << "airlock: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace airlock::cli
