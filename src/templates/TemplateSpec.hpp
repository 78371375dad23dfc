#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace airlock::templates {

// What a template build does, as the recipe (JSON) and Dockerfile doors
// parse it. Steps run in order in a build sandbox; each step that changes
// the disk becomes a cached layer.

// A shell command, as root unless `user` says otherwise (as in a Dockerfile).
struct RunStep {
    std::string shell;
    std::optional<std::string> user;  // overrides the build's current user
    std::optional<std::string> cwd;   // overrides the build's current workdir
    std::vector<std::pair<std::string, std::string>> env;  // added to the build's env
};
// Files from the build context: `src` relative to the context's root (a
// directory ending in '/' copies its contents), `dest` absolute in the guest
// (relative ones resolve against the current workdir).
struct CopyStep {
    std::string src;
    std::string dest;
    std::optional<std::string> mode;   // octal, e.g. "0644"
    std::optional<std::string> owner;  // user[:group]
};
// Environment for every later step, the start command and the template's sandboxes.
struct EnvStep {
    std::vector<std::pair<std::string, std::string>> vars;
};
struct WorkdirStep {
    std::string path;
};
struct UserStep {
    std::string user;
};
enum class PackageManager { apt, npm, pip };
// Packages through the package proxy, under the build's package rules.
struct PackagesStep {
    PackageManager manager = PackageManager::apt;
    std::vector<std::string> packages;
};
// A repository at a ref, through the brokered-credential path.
struct GitStep {
    std::string repo;
    std::string ref;
    std::string dest;
    std::string credential;  // the tenant's credential name; "" for none
};
using Step = std::variant<RunStep, CopyStep, EnvStep, WorkdirStep, UserStep, PackagesStep, GitStep>;

// How the builder knows the start command is ready before it snapshots.
struct ReadyCheck {
    enum class Kind { none, command, port, file, log, delay };
    Kind kind = Kind::none;
    std::string command;   // command: exits 0
    unsigned port = 0;     // port: a TCP listener on it
    std::string path;      // file: exists
    std::string pattern;   // log: a line of the start command's output contains it
    double delayS = 0;     // delay: seconds after the start
    unsigned timeoutS = 60;
};
struct StartSpec {
    std::string cmd;  // a shell command, run with the build's final env, user and workdir
    ReadyCheck ready;
};

struct TemplateSpec {
    std::string name;
    std::string tag = "latest";
    std::string from;  // an existing template (name[:tag]) or a snapshot id
    std::vector<Step> steps;
    std::optional<StartSpec> start;
    std::optional<unsigned> vcpus;
    std::optional<unsigned> memoryMib;
    std::optional<unsigned> diskGib;
    // The build sandbox's policy, packages and network, as a sandbox create takes them.
    nlohmann::json sandbox = nlohmann::json::object();
    std::map<std::string, std::string> labels;  // Dockerfile LABEL
    std::vector<unsigned> exposedPorts;         // Dockerfile EXPOSE (recorded)
    unsigned timeoutS = 1800;                   // the whole build
    bool noCache = false;                       // every step runs (its layers replace the cached ones)
};

}  // namespace airlock::templates
