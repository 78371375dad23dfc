#include "cli/CliApp.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "cli/EvidenceCommand.hpp"
#include "cli/ExecStreamClient.hpp"
#include "cli/HttpClient.hpp"
#include "cli/McpBridge.hpp"
#include "core/UrlEncode.hpp"

namespace airlock::cli {
namespace {
using nlohmann::json;

const char* kUsage =
    "usage: airlock <command> [args]\n"
    "  create [--template T]              create a sandbox, print its id\n"
    "  create --repo URL [--ref REF|--commit SHA] --branch NAME [--credential NAME] [--path DIR]\n"
    "                                     ...with a repository workspace (checked out on the "
    "host)\n"
    "  diff ID [--stat]                   the workspace's diff against its base (computed on the "
    "host)\n"
    "  commit ID -m MSG [--author 'Name <email>']   commit the workspace on the host\n"
    "  push ID [COMMIT]                   ask to push the last commit (waits for an approver)\n"
    "  ls                                 list sandboxes\n"
    "  exec [-t|--tty] [-i] ID -- CMD...   run a command, stream its output, exit with its code\n"
    "                                     (-t: terminal, raw mode; -i: forward stdin)\n"
    "  rm ID                              delete a sandbox\n"
    "  run [--template T] -- CMD...       create, exec, delete\n"
    "  pause [--hibernate|--disk-only] ID   pause, print the state (--hibernate: memory saved\n"
    "                                     to disk; --disk-only: memory dropped, the disk kept)\n"
    "  resume ID                          resume a paused sandbox, print the state\n"
    "  snapshot ID [--name NAME] [--tag TAG]   snapshot a sandbox, print the snapshot id\n"
    "  clone SNAP                         a new sandbox from a snapshot, print its id\n"
    "  timeout ID SECONDS                 expire SECONDS from now (0: never), print the expiry\n"
    "  volume create NAME SIZE_GIB | volume ls | volume rm NAME   persistent volumes\n"
    "  volume cp LOCAL NAME:/abs/path | NAME:/abs/path LOCAL   upload or download a volume's file\n"
    "                                     (LOCAL '-': stdin or stdout)\n"
    "  cp LOCAL ID:/abs/path | ID:/abs/path LOCAL   upload or download a file (streamed)\n"
    "  ps ID                              list background processes\n"
    "  start ID -- CMD...                 start a background process, print its id\n"
    "  logs [-f] ID PROC                  print (and follow) a background process's output\n"
    "  kill [-s SIG] ID PROC              signal a background process (default TERM)\n"
    "  port expose ID PORT | port ls ID | port rm ID PORT   preview ports\n"
    "  templates                          list templates\n"
    "  keys create TENANT ROLE NAME [--expires RFC3339]   mint a key (agent|approver|admin; admin "
    "key)\n"
    "  keys ls [--tenant T] | keys rm KEY_ID              list keys (no secrets) | revoke one\n"
    "  approvals ls | approvals show|patch APPROVAL_ID | approvals approve|deny APPROVAL_ID "
    "[REASON]   (approver or admin key)\n"
    "  tenants set NAME JSON | tenants get NAME | tenants ls   rules, quotas, usage (admin key)\n"
    "  evidence seal ID | ls ID | get EVD [-o FILE]   seal, list, download evidence bundles\n"
    "  evidence review EVD approve|reject [REASON]   a human's decision (approver key)\n"
    "  evidence verify FILE [--key PEM] [--repo DIR]   check a bundle offline (exit 0: it holds)\n"
    "  mcp                                MCP over stdin/stdout for clients that spawn a process\n"
    "environment: AIRLOCK_URL (default http://127.0.0.1:8080), AIRLOCK_API_KEY\n";

struct CliError {
    std::string message;
    int code = 1;
};

json expectJson(const HttpResult& r, int wanted) {
    json j = json::parse(r.body, nullptr, false);
    if (r.status != wanted) {
        std::string msg = "HTTP " + std::to_string(r.status);
        if (!j.is_discarded() && j.contains("error"))
            msg += ": " + j["error"].value("message", std::string());
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
            args.erase(args.begin() + static_cast<long>(i),
                       args.begin() + static_cast<long>(i) + 2);
            break;
        }
    }
    return t;
}

std::vector<std::string> commandAfterDashes(const std::vector<std::string>& args,
                                            std::size_t from) {
    std::vector<std::string> cmd;
    std::size_t i = from;
    if (i < args.size() && args[i] == "--") ++i;
    for (; i < args.size(); ++i) cmd.push_back(args[i]);
    if (cmd.empty()) throw CliError{"no command given (use: -- CMD [ARGS...])", 2};
    return cmd;
}

// Removes "--name VALUE" from args (before any "--"); nullopt when absent.
std::optional<std::string> takeOption(std::vector<std::string>& args, const std::string& name) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") break;
        if (args[i] == name) {
            if (i + 1 >= args.size()) throw CliError{name + " needs a value", 2};
            std::string v = args[i + 1];
            args.erase(args.begin() + static_cast<long>(i),
                       args.begin() + static_cast<long>(i) + 2);
            return v;
        }
    }
    return std::nullopt;
}

bool takeFlag(std::vector<std::string>& args, const std::string& name) {
    for (std::size_t i = 0; i < args.size(); ++i)
        if (args[i] == name) {
            args.erase(args.begin() + static_cast<long>(i));
            return true;
        }
    return false;
}

// A non-negative decimal integer (at most 18 digits), or nullopt.
std::optional<long long> parseCount(const std::string& s) {
    if (s.empty() || s.size() > 18 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    return std::stoll(s);
}

// The one sandbox id a command takes (nothing else left, not an option).
const std::string& soleId(const std::vector<std::string>& args, const char* usage) {
    if (args.size() != 1 || args[0].empty() || args[0][0] == '-') throw CliError{usage, 2};
    return args[0];
}

// "NAME:/abs/path" (a volume name: 1-64 of a-z 0-9 - _) -> {NAME, /abs/path};
// empty name when it is a local path (or '-').
std::pair<std::string, std::string> splitVolumeRemote(const std::string& arg) {
    auto colon = arg.find(':');
    if (colon == std::string::npos || colon == 0 || colon > 64 || colon + 1 >= arg.size() ||
        arg[colon + 1] != '/')
        return {"", arg};
    for (std::size_t i = 0; i < colon; ++i) {
        char c = arg[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return {"", arg};
    }
    return {arg.substr(0, colon), arg.substr(colon + 1)};
}

// Rows printed in columns two spaces apart (the last one unpadded).
void printColumns(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths;
    for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); ++i) {
            if (widths.size() <= i) widths.push_back(0);
            widths[i] = std::max(widths[i], row[i].size());
        }
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
        }
        out << line << "\n";
    }
}

std::string createSandbox(HttpClient& c, const std::string& tmpl) {
    return expectJson(c.request("POST", "/v1/sandboxes", json{{"template", tmpl}}.dump()),
                      201)["id"];
}

// "ID:/path" -> {ID, /path}; empty id when it is a local path.
std::pair<std::string, std::string> splitRemote(const std::string& arg) {
    auto colon = arg.find(':');
    if (arg.rfind("sbx-", 0) == 0 && colon != std::string::npos)
        return {arg.substr(0, colon), arg.substr(colon + 1)};
    return {"", arg};
}

int execIn(HttpClient& c, const std::string& id, const std::vector<std::string>& cmd,
           std::ostream& out, std::ostream& err) {
    json res = expectJson(
        c.request("POST", "/v1/sandboxes/" + id + "/exec", json{{"cmd", cmd}}.dump()), 200);
    out << res.value("stdout", std::string());
    err << res.value("stderr", std::string());
    out.flush();
    err.flush();
    if (res.value("truncated", false)) err << "airlock: output was truncated\n";
    return res.value("exit_code", 1);
}

// What a command runs with: its arguments (the name removed) and the rest.
struct Invocation {
    std::vector<std::string>& args;
    HttpClient& client;
    const std::string& url;
    const std::string& apiKey;
    std::ostream& out;
    std::ostream& err;
};

int cmdCreate(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    std::string tmpl = takeTemplate(args);
    auto repo = takeOption(args, "--repo");
    if (!repo) {
        out << createSandbox(client, tmpl) << "\n";
        return 0;
    }
    json ws{{"repo", *repo}};
    if (auto v = takeOption(args, "--ref")) ws["ref"] = *v;
    if (auto v = takeOption(args, "--commit")) ws["commit"] = *v;
    auto branch = takeOption(args, "--branch");
    if (!branch) throw CliError{"create --repo needs --branch NAME (the task branch)", 2};
    ws["branch"] = *branch;
    if (auto v = takeOption(args, "--credential")) ws["credential"] = *v;
    if (auto v = takeOption(args, "--path")) ws["path"] = *v;
    json res = expectJson(
        client.request("POST", "/v1/sandboxes", json{{"template", tmpl}, {"workspace", ws}}.dump()),
        201);
    out << res.value("id", "") << "\n";
    return 0;
}

int cmdDiff(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    bool stat = takeFlag(args, "--stat");
    if (args.size() != 1) throw CliError{"usage: airlock diff ID [--stat]", 2};
    std::string base = "/v1/sandboxes/" + args[0] + "/workspace/diff";
    if (!stat) {
        auto r = client.request("GET", base);
        if (r.status != 200) expectJson(r, 200);
        out << r.body;
        return 0;
    }
    json res = expectJson(client.request("GET", base + "?format=json"), 200);
    for (const auto& f : res["files"]) {
        out << " " << f.value("path", "");
        if (f.value("old_path", "") != f.value("path", ""))
            out << " (from " << f.value("old_path", "") << ")";
        out << " | " << f.value("status", "");
        if (f.value("binary", false))
            out << " binary";
        else
            out << " +" << f.value("additions", 0) << " -" << f.value("deletions", 0);
        if (!f.value("in_scope", true)) out << "  [out of scope]";
        out << "\n";
    }
    out << " " << res["files"].size() << " files changed, " << res.value("additions", 0)
        << " insertions(+), " << res.value("deletions", 0) << " deletions(-); tree "
        << res.value("tree", "") << "\n";
    return 0;
}

int cmdCommit(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    auto message = takeOption(args, "-m");
    auto author = takeOption(args, "--author");
    if (!message || args.size() != 1)
        throw CliError{"usage: airlock commit ID -m MSG [--author 'Name <email>']", 2};
    std::string name = "Airlock agent", email = "agent@airlock.invalid";
    if (author) {
        auto lt = author->find('<'), gt = author->find('>');
        if (lt == std::string::npos || gt == std::string::npos || gt < lt)
            throw CliError{"--author must look like 'Name <email>'", 2};
        name = author->substr(0, lt);
        while (!name.empty() && name.back() == ' ') name.pop_back();
        email = author->substr(lt + 1, gt - lt - 1);
    }
    json res = expectJson(
        client.request(
            "POST", "/v1/sandboxes/" + args[0] + "/workspace/commit",
            json{{"message", *message}, {"author", {{"name", name}, {"email", email}}}}.dump()),
        201);
    out << res.value("commit", "") << "\n";
    return 0;
}

int cmdPush(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.empty() || args.size() > 2) throw CliError{"usage: airlock push ID [COMMIT]", 2};
    std::string commit = args.size() == 2 ? args[1] : "";
    if (commit.empty()) {
        json ws = expectJson(client.request("GET", "/v1/sandboxes/" + args[0] + "/workspace"), 200);
        if (!ws["head"].is_string())
            throw CliError{"nothing to push: commit first (airlock commit)", 1};
        commit = ws["head"];
    }
    json res = expectJson(client.request("POST", "/v1/sandboxes/" + args[0] + "/workspace/push",
                                         json{{"commit", commit}}.dump()),
                          202);
    out << res.value("push_id", "") << "  waiting for approval " << res.value("approval_id", "")
        << " (" << res.value("repo", "") << " " << res.value("branch", "") << " at "
        << commit.substr(0, 12) << ")\n";
    return 0;
}

int cmdLs(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    json res = expectJson(client.request("GET", "/v1/sandboxes"), 200);
    out << "ID                        TEMPLATE   STATE     CREATED\n";
    for (const auto& s : res["sandboxes"])
        out << s.value("id", "") << "  " << s.value("template", "") << "    "
            << s.value("state", "") << "   " << s.value("created_at", "") << "\n";
    return 0;
}

int cmdTemplates(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    json res = expectJson(client.request("GET", "/v1/templates"), 200);
    for (const auto& t : res["templates"])
        out << t.value("name", "") << "  " << t.value("digest", "") << "\n";
    return 0;
}

int cmdExec(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    StreamExecOptions options;
    while (!args.empty() && args[0].rfind("-", 0) == 0 && args[0] != "--") {
        if (args[0] == "-t" || args[0] == "--tty")
            options.tty = true;
        else if (args[0] == "-i" || args[0] == "--interactive")
            options.interactive = true;
        else if (args[0] == "-it" || args[0] == "-ti")
            options.tty = options.interactive = true;
        else
            throw CliError{"unknown exec option " + args[0], 2};
        args.erase(args.begin());
    }
    if (args.empty()) throw CliError{"exec needs a sandbox id", 2};
    options.argv = commandAfterDashes(args, 1);
    options.output = [&out, &err](int channel, const char* d, std::size_t n) {
        std::ostream& o = channel == 2 ? err : out;
        o.write(d, static_cast<std::streamsize>(n));
        o.flush();
    };
    return runStreamExec(url, apiKey, args[0], options);
}

int cmdCp(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.size() != 2) throw CliError{"usage: airlock cp LOCAL ID:/path | ID:/path LOCAL", 2};
    auto [srcId, srcPath] = splitRemote(args[0]);
    auto [dstId, dstPath] = splitRemote(args[1]);
    if (srcId.empty() == dstId.empty())
        throw CliError{"exactly one side of cp must be ID:/path", 2};
    if (!dstId.empty()) {
        expectJson(
            client.putFile("/v1/sandboxes/" + dstId + "/files?path=" + urlEncode(dstPath), srcPath),
            201);
        return 0;
    }
    std::FILE* f = std::fopen(dstPath.c_str(), "wb");
    if (!f) throw CliError{"cannot write " + dstPath, 1};
    auto r = client.getStreaming("/v1/sandboxes/" + srcId + "/files?path=" + urlEncode(srcPath),
                                 [f](const char* d, std::size_t n) { std::fwrite(d, 1, n, f); });
    std::fclose(f);
    if (r.status != 200) {
        std::remove(dstPath.c_str());
        expectJson(r, 200);
    }
    return 0;
}

int cmdPs(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.empty()) throw CliError{"ps needs a sandbox id", 2};
    json res = expectJson(client.request("GET", "/v1/sandboxes/" + args[0] + "/processes"), 200);
    out << "ID       STATE     EXIT  COMMAND\n";
    for (const auto& p : res["processes"]) {
        std::string cmdline;
        for (const auto& a : p["cmd"])
            cmdline += (cmdline.empty() ? "" : " ") + a.get<std::string>();
        out << p.value("id", "") << "  " << p.value("state", "") << "  "
            << (p.contains("exit_code") ? std::to_string(p["exit_code"].get<int>()) : "-") << "  "
            << cmdline << "\n";
    }
    return 0;
}

int cmdStart(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.empty()) throw CliError{"start needs a sandbox id", 2};
    json res = expectJson(client.request("POST", "/v1/sandboxes/" + args[0] + "/processes",
                                         json{{"cmd", commandAfterDashes(args, 1)}}.dump()),
                          201);
    out << res.value("id", "") << "\n";
    return 0;
}

int cmdLogs(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    bool follow = !args.empty() && (args[0] == "-f" || args[0] == "--follow");
    if (follow) args.erase(args.begin());
    if (args.size() != 2) throw CliError{"usage: airlock logs [-f] ID PROC", 2};
    auto r = client.getStreaming("/v1/sandboxes/" + args[0] + "/processes/" + args[1] + "/logs" +
                                     (follow ? "?follow=1" : ""),
                                 [&out](const char* d, std::size_t n) {
                                     out.write(d, static_cast<std::streamsize>(n));
                                     out.flush();
                                 });
    if (r.status != 200) expectJson(r, 200);
    return 0;
}

int cmdKill(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    std::string sig = "TERM";
    if (args.size() >= 2 && args[0] == "-s") {
        sig = args[1];
        args.erase(args.begin(), args.begin() + 2);
    }
    if (args.size() != 2) throw CliError{"usage: airlock kill [-s SIG] ID PROC", 2};
    expectJson(
        client.request("POST", "/v1/sandboxes/" + args[0] + "/processes/" + args[1] + "/signal",
                       json{{"signal", sig}}.dump()),
        200);
    return 0;
}

int cmdPort(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.size() >= 3 && args[0] == "expose") {
        json res = expectJson(client.request("POST", "/v1/sandboxes/" + args[1] + "/ports",
                                             json{{"port", std::stoi(args[2])}}.dump()),
                              201);
        out << res.value("url", "") << "\n";
        return 0;
    }
    if (args.size() == 2 && args[0] == "ls") {
        json res = expectJson(client.request("GET", "/v1/sandboxes/" + args[1] + "/ports"), 200);
        for (const auto& p : res["ports"])
            out << p.value("port", 0) << "  " << p.value("url", "") << "\n";
        return 0;
    }
    if (args.size() == 3 && args[0] == "rm") {
        expectJson(client.request("DELETE", "/v1/sandboxes/" + args[1] + "/ports/" + args[2]), 204);
        return 0;
    }
    throw CliError{"usage: airlock port expose ID PORT | port ls ID | port rm ID PORT", 2};
}

int cmdKeys(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.size() >= 4 && args[0] == "create") {
        json body{{"tenant", args[1]}, {"role", args[2]}, {"name", args[3]}};
        if (args.size() == 6 && args[4] == "--expires")
            body["expires_at"] = args[5];
        else if (args.size() != 4)
            throw CliError{"usage: airlock keys create TENANT ROLE NAME [--expires RFC3339]", 2};
        json res = expectJson(client.request("POST", "/v1/keys", body.dump()), 201);
        out << res.value("id", "") << "  " << res.value("key", "") << "\n";
        err << "airlock: the key is shown this once\n";
        return 0;
    }
    if (!args.empty() && args[0] == "ls" &&
        (args.size() == 1 || (args.size() == 3 && args[1] == "--tenant"))) {
        json res = expectJson(
            client.request("GET",
                           args.size() == 3 ? "/v1/keys?tenant=" + urlEncode(args[2]) : "/v1/keys"),
            200);
        for (const auto& k : res["keys"])
            out << k.value("id", "") << "  " << k.value("tenant", "") << "  " << k.value("role", "")
                << "  " << k.value("name", "") << "  "
                << (k["expires_at"].is_string() ? k["expires_at"].get<std::string>() : "never")
                << "\n";
        return 0;
    }
    if (args.size() == 2 && args[0] == "rm") {
        expectJson(client.request("DELETE", "/v1/keys/" + urlEncode(args[1])), 204);
        return 0;
    }
    throw CliError{
        "usage: airlock keys create TENANT ROLE NAME [--expires T] | keys ls [--tenant T] "
        "| keys rm ID",
        2};
}

int cmdTenants(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.size() == 3 && args[0] == "set") {
        json res =
            expectJson(client.request("PUT", "/v1/tenants/" + urlEncode(args[1]), args[2]), 200);
        out << res.dump(2) << "\n";
        return 0;
    }
    if (args.size() == 2 && args[0] == "get") {
        out << expectJson(client.request("GET", "/v1/tenants/" + urlEncode(args[1])), 200).dump(2)
            << "\n";
        return 0;
    }
    if (args.size() == 1 && args[0] == "ls") {
        json res = expectJson(client.request("GET", "/v1/tenants"), 200);
        for (const auto& t : res["tenants"])
            out << t.value("name", "") << "  sandboxes " << t["usage"].value("sandboxes", 0)
                << "\n";
        return 0;
    }
    throw CliError{"usage: airlock tenants set NAME JSON | tenants get NAME | tenants ls", 2};
}

int cmdApprovals(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.size() == 1 && args[0] == "ls") {
        json res = expectJson(client.request("GET", "/v1/approvals"), 200);
        for (const auto& a : res["approvals"])
            out << a.value("id", "") << "  " << a.value("sandbox", "") << "  "
                << a.value("class", "") << "  " << a.value("command", "") << "\n";
        return 0;
    }
    // Everything that decides the run or the push, and a push's patch.
    if (args.size() == 2 && args[0] == "show") {
        out << expectJson(client.request("GET", "/v1/approvals/" + urlEncode(args[1])), 200)
                   .dump(2)
            << "\n";
        return 0;
    }
    if (args.size() == 2 && args[0] == "patch") {
        auto res = client.request("GET", "/v1/approvals/" + urlEncode(args[1]) + "/patch");
        if (res.status != 200) expectJson(res, 200);
        out << res.body;
        return 0;
    }
    if ((args.size() == 2 || args.size() == 3) && (args[0] == "approve" || args[0] == "deny")) {
        json body{{"decision", args[0]}};
        if (args.size() == 3) body["reason"] = args[2];
        json res = expectJson(
            client.request("POST", "/v1/approvals/" + urlEncode(args[1]), body.dump()), 200);
        out << res.value("exec_id", "") << "  " << res.value("state", "") << "\n";
        return 0;
    }
    throw CliError{"usage: airlock approvals ls | approvals show|patch APPROVAL_ID | approvals "
                   "approve|deny APPROVAL_ID [REASON]",
                   2};
}

int cmdEvidence(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    return runEvidence(args, client, out, err);
}

int cmdRm(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    if (args.empty()) throw CliError{"rm needs a sandbox id", 2};
    for (const auto& id : args) expectJson(client.request("DELETE", "/v1/sandboxes/" + id), 204);
    return 0;
}

int cmdRun(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    std::string tmpl = takeTemplate(args);
    auto command = commandAfterDashes(args, 0);
    std::string id = createSandbox(client, tmpl);
    int code = 1;
    try {
        code = execIn(client, id, command, out, err);  // buffered: one round trip
    } catch (...) {
        client.request("DELETE", "/v1/sandboxes/" + id);
        throw;
    }
    client.request("DELETE", "/v1/sandboxes/" + id);
    return code;
}

int cmdPause(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    const char* usage = "usage: airlock pause [--hibernate|--disk-only] ID";
    bool hibernate = takeFlag(args, "--hibernate");
    bool diskOnly = takeFlag(args, "--disk-only");
    if (hibernate && diskOnly) throw CliError{usage, 2};
    const std::string& id = soleId(args, usage);
    json body = json::object();
    if (hibernate) body["hibernate"] = true;
    if (diskOnly) body["memory"] = false;
    json res = expectJson(
        client.request("POST", "/v1/sandboxes/" + urlEncode(id) + "/pause", body.dump()), 200);
    out << res.value("state", "") << "\n";
    return 0;
}

int cmdResume(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    const std::string& id = soleId(args, "usage: airlock resume ID");
    json res =
        expectJson(client.request("POST", "/v1/sandboxes/" + urlEncode(id) + "/resume"), 200);
    out << res.value("state", "") << "\n";
    return 0;
}

int cmdSnapshot(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    const char* usage = "usage: airlock snapshot ID [--name NAME] [--tag TAG]";
    json body = json::object();
    try {
        if (auto v = takeOption(args, "--name")) body["name"] = *v;
        if (auto v = takeOption(args, "--tag")) body["tag"] = *v;
    } catch (const CliError& e) {
        throw CliError{e.message + "\n" + usage, 2};
    }
    const std::string& id = soleId(args, usage);
    json res = expectJson(
        client.request("POST", "/v1/sandboxes/" + urlEncode(id) + "/snapshots", body.dump()), 201);
    out << res.value("id", "") << "\n";
    return 0;
}

int cmdClone(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    const std::string& snap = soleId(args, "usage: airlock clone SNAP");
    json res =
        expectJson(client.request("POST", "/v1/sandboxes", json{{"snapshot", snap}}.dump()), 201);
    out << res.value("id", "") << "\n";
    return 0;
}

int cmdTimeout(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    const char* usage = "usage: airlock timeout ID SECONDS (a whole number; 0: no timeout)";
    if (args.size() != 2 || args[0].empty() || args[0][0] == '-') throw CliError{usage, 2};
    auto seconds = parseCount(args[1]);
    if (!seconds) throw CliError{usage, 2};
    json res = expectJson(client.request("POST", "/v1/sandboxes/" + urlEncode(args[0]) + "/timeout",
                                         json{{"timeout_s", *seconds}}.dump()),
                          200);
    if (res.is_object() && res.contains("expires_at") && res["expires_at"].is_string())
        out << res["expires_at"].get<std::string>() << "\n";
    return 0;
}

// Downloads a volume's file to `local` ('-': out). A directory (its listing
// comes back as JSON) is refused; nothing local is touched unless the
// answer is 200 with the file's bytes.
void downloadVolumeFile(HttpClient& client, const std::string& target, const std::string& remote,
                        const std::string& local, std::ostream& out) {
    const bool toStdout = local == "-";
    int status = 0;
    bool listing = false;
    std::string errorBody;
    std::FILE* f = nullptr;
    auto openLocal = [&] {
        if (f || toStdout) return;
        f = std::fopen(local.c_str(), "wb");
        if (!f) throw CliError{"cannot write " + local, 1};
    };
    HttpClient::Headers headers;
    if (!client.apiKey().empty()) headers["authorization"] = "Bearer " + client.apiKey();
    try {
        client.exchange(
            "GET", target, "", headers,
            [&](int s, const HttpClient::Headers& got) {
                status = s;
                auto type = got.find("content-type");
                listing = type != got.end() && type->second.find("json") != std::string::npos;
            },
            [&](const char* d, std::size_t n) {
                if (status != 200 || listing) {
                    if (errorBody.size() < 65536) errorBody.append(d, n);
                    return;
                }
                if (toStdout) {
                    out.write(d, static_cast<std::streamsize>(n));
                    if (!out) throw CliError{"writing to stdout failed", 1};
                    return;
                }
                openLocal();
                if (std::fwrite(d, 1, n, f) != n) throw CliError{"cannot write " + local, 1};
            },
            std::chrono::hours(24));
        if (status == 200 && !listing) openLocal();  // an empty file
    } catch (...) {
        if (f) {
            std::fclose(f);
            std::remove(local.c_str());
        }
        throw;
    }
    if (f && std::fclose(f) != 0) {
        std::remove(local.c_str());
        throw CliError{"cannot write " + local, 1};
    }
    if (toStdout) out.flush();
    if (status != 200) expectJson(HttpResult{status, errorBody}, 200);
    if (listing) throw CliError{remote + " is a directory", 1};
}

int cmdVolume(Invocation& in) {
    auto& [args, client, url, apiKey, out, err] = in;
    const std::string sub = args.empty() ? "" : args[0];
    if (sub == "create" && args.size() == 3) {
        auto size = parseCount(args[2]);
        if (!size) throw CliError{"usage: airlock volume create NAME SIZE_GIB (a whole number)", 2};
        json res = expectJson(client.request("POST", "/v1/volumes",
                                             json{{"name", args[1]}, {"size_gib", *size}}.dump()),
                              201);
        out << res.value("name", args[1]) << "\n";
        return 0;
    }
    if (sub == "ls" && args.size() == 1) {
        json res = expectJson(client.request("GET", "/v1/volumes"), 200);
        std::vector<std::vector<std::string>> rows{{"NAME", "SIZE_GIB", "USED", "ATTACHED"}};
        for (const auto& v : res.value("volumes", json::array())) {
            std::string attached;
            for (const auto& a : v.value("attachments", json::array())) {
                if (!attached.empty()) attached += ",";
                attached += a.value("sandbox", "");
                if (a.value("read_only", false)) attached += ":ro";
            }
            rows.push_back({v.value("name", ""), std::to_string(v.value("size_gib", 0LL)),
                            std::to_string(v.value("used_bytes", 0LL)),
                            attached.empty() ? "-" : attached});
        }
        printColumns(out, rows);
        return 0;
    }
    if (sub == "rm" && args.size() == 2) {
        expectJson(client.request("DELETE", "/v1/volumes/" + urlEncode(args[1])), 204);
        return 0;
    }
    if (sub == "cp" && args.size() == 3) {
        auto [srcName, srcPath] = splitVolumeRemote(args[1]);
        auto [dstName, dstPath] = splitVolumeRemote(args[2]);
        if (srcName.empty() == dstName.empty())
            throw CliError{
                "usage: airlock volume cp LOCAL NAME:/abs/path | NAME:/abs/path LOCAL "
                "(exactly one side NAME:/abs/path)",
                2};
        const std::string& name = dstName.empty() ? srcName : dstName;
        const std::string& remotePath = dstName.empty() ? srcPath : dstPath;
        std::string target =
            "/v1/volumes/" + urlEncode(name) + "/files?path=" + urlEncode(remotePath);
        if (dstName.empty()) {
            downloadVolumeFile(client, target, args[1], dstPath, out);
            return 0;
        }
        if (srcPath == "-") {  // stdin, whole
            std::string body((std::istreambuf_iterator<char>(std::cin)),
                             std::istreambuf_iterator<char>());
            expectJson(client.request("PUT", target, body, "application/octet-stream"), 201);
            return 0;
        }
        std::error_code ec;
        if (std::filesystem::is_directory(srcPath, ec))
            throw CliError{srcPath + " is a directory (volume cp copies one file)", 1};
        expectJson(client.putFile(target, srcPath), 201);
        return 0;
    }
    throw CliError{
        "usage: airlock volume create NAME SIZE_GIB | volume ls | volume rm NAME | "
        "volume cp LOCAL NAME:/abs/path | volume cp NAME:/abs/path LOCAL",
        2};
}

// airlock mcp: MCP over stdio, forwarded to the daemon's /mcp.
int cmdMcp(Invocation& in) {
    if (!in.args.empty()) throw CliError{"usage: airlock mcp (MCP over stdin/stdout)", 2};
    // Lives until exit: its threads may outlast this call.
    auto* bridge = new McpBridge(HttpClient(in.url, in.apiKey), std::cin, in.out, in.err);
    return bridge->run();
}

// The commands, as `airlock <name> ...` names them.
struct Command {
    const char* name;
    int (*run)(Invocation& in);
};
constexpr Command kCommands[] = {
    {"create", &cmdCreate},
    {"diff", &cmdDiff},
    {"commit", &cmdCommit},
    {"push", &cmdPush},
    {"ls", &cmdLs},
    {"templates", &cmdTemplates},
    {"exec", &cmdExec},
    {"cp", &cmdCp},
    {"ps", &cmdPs},
    {"start", &cmdStart},
    {"logs", &cmdLogs},
    {"kill", &cmdKill},
    {"port", &cmdPort},
    {"keys", &cmdKeys},
    {"tenants", &cmdTenants},
    {"approvals", &cmdApprovals},
    {"evidence", &cmdEvidence},
    {"rm", &cmdRm},
    {"run", &cmdRun},
    {"pause", &cmdPause},
    {"resume", &cmdResume},
    {"snapshot", &cmdSnapshot},
    {"clone", &cmdClone},
    {"timeout", &cmdTimeout},
    {"volume", &cmdVolume},
    {"mcp", &cmdMcp},
};

}  // namespace

int runCli(const std::vector<std::string>& argsIn, const std::string& url,
           const std::string& apiKey, std::ostream& out, std::ostream& err) {
    std::vector<std::string> args = argsIn;
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        (args.empty() ? err : out) << kUsage;
        return args.empty() ? 2 : 0;
    }
    try {
        HttpClient client(url, apiKey);
        const std::string cmd = args[0];
        args.erase(args.begin());
        Invocation invocation{args, client, url, apiKey, out, err};
        for (const auto& c : kCommands)
            if (cmd == c.name) return c.run(invocation);
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
