#include "policy/CommandPolicy.hpp"

#include <algorithm>
#include <set>

#include "core/Wildcard.hpp"
#include "policy/ShellSplitter.hpp"

namespace airlock::policy {

std::string className(CommandClass c) {
    switch (c) {
        case CommandClass::inspection:
            return "inspection";
        case CommandClass::verification:
            return "verification";
        case CommandClass::build:
            return "build";
        case CommandClass::other:
            return "other";
        case CommandClass::code_execution:
            return "code_execution";
        case CommandClass::network:
            return "network";
        case CommandClass::dependency_change:
            return "dependency_change";
        case CommandClass::secret_access:
            return "secret_access";
        case CommandClass::destructive:
            return "destructive";
    }
    return "other";
}

std::string decisionName(Decision d) {
    switch (d) {
        case Decision::allow:
            return "allow";
        case Decision::approve:
            return "approve";
        case Decision::deny:
            return "deny";
    }
    return "deny";
}

Decision CommandPolicy::defaultDecision(CommandClass c) {
    switch (c) {
        case CommandClass::dependency_change:
            return Decision::approve;
        case CommandClass::secret_access:
        case CommandClass::destructive:
            return Decision::deny;
        default:
            return Decision::allow;
    }
}

bool CommandPolicy::globMatch(const std::string& pattern, const std::string& text) {
    return wildcardMatch(pattern, text);
}

namespace {

using Words = std::vector<std::string>;

struct Part {
    Words words;
    CommandClass cls;
    Decision defaultDecision;
    std::string why;
};

std::string base(const std::string& w) {
    std::string b =
        w.substr(w.find_last_of('/') == std::string::npos ? 0 : w.find_last_of('/') + 1);
    while (!b.empty() && b.front() == '\\') b.erase(b.begin());  // \rm bypasses aliases, not us
    return b;
}

std::string join(const Words& w, std::size_t from = 0) {
    std::string out;
    for (std::size_t i = from; i < w.size(); ++i) {
        if (!out.empty()) out += ' ';
        out += w[i];
    }
    return out;
}

bool isAssignment(const std::string& w) {
    auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0) return false;
    for (std::size_t i = 0; i < eq; ++i) {
        char c = w[i];
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    }
    return !std::isdigit(static_cast<unsigned char>(w[0]));
}

bool isOption(const std::string& w) { return w.size() > 1 && w[0] == '-'; }

// Short-option cluster or long option naming a flag: -rf has r, --recursive.
bool hasFlag(const Words& args, char shortFlag, const std::string& longFlag) {
    for (const auto& a : args) {
        if (a == "--") break;
        if (a == longFlag) return true;
        if (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find(shortFlag) != std::string::npos)
            return true;
    }
    return false;
}

std::string normalizePath(std::string p) {
    while (p.size() > 1 &&
           (p.back() == '/' || (p.size() > 2 && p.compare(p.size() - 2, 2, "/.") == 0))) {
        if (p.back() == '/')
            p.pop_back();
        else
            p.resize(p.size() - 2);
    }
    if (p.size() >= 2 && p.compare(p.size() - 2, 2, "/*") == 0) p.resize(p.size() - 2);
    if (p.empty()) p = "/";
    return p;
}

bool isRootTarget(const std::string& raw) {
    static const std::set<std::string> roots = {
        "/",          "/bin",     "/boot",      "/dev",     "/etc", "/home", "/lib",
        "/lib32",     "/lib64",   "/libx32",    "/media",   "/mnt", "/opt",  "/proc",
        "/root",      "/run",     "/sbin",      "/srv",     "/sys", "/usr",  "/var",
        "/usr/bin",   "/usr/lib", "/usr/local", "/var/lib", "~",    "$HOME", "${HOME}",
        "/home/user", "~user",    "/*",         "~/*"};
    std::string p = normalizePath(raw);
    if (roots.count(raw) || roots.count(p)) return true;
    // ~/ and $HOME/ themselves (not paths below them).
    return p == "~/" || p == "$HOME/" || p == "/home/user/";
}

bool isSecretPath(const std::string& w) {
    std::string b = base(w);
    static const std::set<std::string> harmless = {".env.example", ".env.sample", ".env.template",
                                                   ".env.dist"};
    if (b == ".env" || (b.rfind(".env.", 0) == 0 && !harmless.count(b)) ||
        (b.size() > 4 && b.compare(b.size() - 4, 4, ".env") == 0))
        return true;
    static const std::string environ = "/environ";
    if (w.find("/proc/") != std::string::npos && w.size() >= environ.size() &&
        w.compare(w.size() - environ.size(), environ.size(), environ) == 0)
        return true;
    static const char* stores[] = {".aws/credentials",
                                   ".ssh/id_",
                                   ".netrc",
                                   ".git-credentials",
                                   ".docker/config.json",
                                   ".pgpass",
                                   ".kube/config",
                                   ".config/gh/hosts.yml",
                                   "/etc/shadow",
                                   ".gnupg/",
                                   ".password-store",
                                   ".npmrc",
                                   ".pypirc"};
    for (const char* s : stores)
        if (w.find(s) != std::string::npos) return true;
    return false;
}

bool isDeviceTarget(const std::string& w) {
    if (w.rfind("/dev/", 0) != 0) return false;
    static const char* harmless[] = {"/dev/null",   "/dev/zero",   "/dev/stdout", "/dev/stderr",
                                     "/dev/tty",    "/dev/fd/",    "/dev/shm/",   "/dev/pts/",
                                     "/dev/random", "/dev/urandom"};
    for (const char* h : harmless)
        if (w.rfind(h, 0) == 0) return false;
    return true;
}

bool in(const std::string& s, std::initializer_list<const char*> list) {
    for (const char* x : list)
        if (s == x) return true;
    return false;
}

// The first non-option word after index `from`, with options that take a
// value skipped.
std::size_t firstOperand(const Words& w, std::size_t from,
                         std::initializer_list<const char*> withValue = {}) {
    for (std::size_t i = from; i < w.size(); ++i) {
        if (w[i] == "--") return i + 1 < w.size() ? i + 1 : w.size();
        if (!isOption(w[i])) return i;
        if (in(w[i], withValue)) ++i;
    }
    return w.size();
}

class Judge {
  public:
    std::vector<Part> parts;
    std::vector<std::string> code;

    void script(const std::string& s, int depth) {
        if (depth > 8)
            return add({s}, CommandClass::destructive, "shell nesting too deep to judge");
        for (const auto& sc : ShellSplitter::split(s)) {
            for (const auto& r : sc.redirects)
                if (isDeviceTarget(r))
                    add(sc.words, CommandClass::destructive, "writes to the device " + r);
            for (const auto& r : sc.redirects)
                if (isSecretPath(r))
                    add(sc.words, CommandClass::secret_access, "writes a secret store: " + r);
            for (const auto& i : sc.inputs)
                if (isSecretPath(i))
                    add(sc.words, CommandClass::secret_access, "reads a secret store: " + i);
            if (!sc.words.empty()) argv(sc.words, depth);
        }
    }

    void argv(Words w, int depth) {
        if (depth > 8)
            return add(w, CommandClass::destructive, "command nesting too deep to judge");
        while (!w.empty() && isAssignment(w.front())) w.erase(w.begin());
        // Wrappers that run another command: unwrap them until the real one.
        while (!w.empty()) {
            std::string b = base(w[0]);
            if (b == "sudo" || b == "doas") {
                w.erase(w.begin());
                while (!w.empty() && isOption(w[0])) {
                    bool takesValue =
                        in(w[0], {"-u", "-g", "-C", "-h", "-p", "-U", "-r", "-t", "-D"});
                    w.erase(w.begin(), w.begin() + (takesValue && w.size() > 1 ? 2 : 1));
                }
            } else if (b == "env") {
                w.erase(w.begin());
                while (!w.empty() && (isOption(w[0]) || isAssignment(w[0]))) {
                    if (in(w[0], {"-S", "--split-string"}) && w.size() > 1)
                        return script(join(w, 1), depth + 1);
                    bool takesValue = in(w[0], {"-u", "-C", "--unset", "--chdir"});
                    w.erase(w.begin(), w.begin() + (takesValue && w.size() > 1 ? 2 : 1));
                }
                if (w.empty())
                    return add({"env"}, CommandClass::inspection, "prints the environment");
            } else if (in(b, {"nohup",    "time",      "command", "builtin", "exec",     "setsid",
                              "unbuffer", "stdbuf",    "ionice",  "nice",    "timeout",  "chrt",
                              "taskset",  "watch",     "busybox", "xargs",   "parallel", "strace",
                              "ltrace",   "catchsegv", "flock"})) {
                std::size_t next;
                if (b == "timeout") {
                    next = firstOperand(w, 1, {"-s", "--signal", "-k", "--kill-after"});
                    if (next < w.size()) ++next;  // the duration
                } else if (b == "xargs") {
                    next =
                        firstOperand(w, 1,
                                     {"-n", "-L", "-P", "-I", "-d", "-E", "-s", "-a", "--max-args",
                                      "--max-procs", "--delimiter", "--arg-file", "-i"});
                    if (next >= w.size())
                        return add({"xargs", "echo"}, CommandClass::inspection, "xargs echo");
                } else if (b == "nice" || b == "watch") {
                    next = firstOperand(w, 1, {"-n", "--adjustment", "--interval"});
                } else if (b == "taskset" || b == "chrt" || b == "flock") {
                    next = firstOperand(w, 1, {"-p", "-c", "-w"});
                    if (next < w.size()) ++next;  // the mask / priority / lock file
                } else if (b == "strace" || b == "ltrace") {
                    next = firstOperand(w, 1, {"-o", "-e", "-p", "-s", "-u"});
                } else {
                    next = firstOperand(w, 1);
                }
                if (next >= w.size()) return add(w, CommandClass::other, b + " without a command");
                w.erase(w.begin(), w.begin() + static_cast<long>(next));
                while (!w.empty() && isAssignment(w.front())) w.erase(w.begin());
            } else {
                break;
            }
        }
        if (w.empty()) return;
        std::string b = base(w[0]);

        // Shells: the code they are given is judged like the request itself.
        if (in(b, {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "fish"})) {
            for (std::size_t i = 1; i < w.size(); ++i) {
                if (w[i] == "--") break;
                if (isOption(w[i]) && w[i][1] != '-' && w[i].find('c') != std::string::npos) {
                    std::size_t s = firstOperand(w, i + 1, {"-o", "-O", "+o", "+O"});
                    if (s < w.size()) return script(w[s], depth + 1);
                    return add(w, CommandClass::code_execution, b + " -c without a script");
                }
            }
            std::size_t file = firstOperand(w, 1, {"-o", "-O"});
            if (file < w.size())
                return add(w, CommandClass::other, "runs the script file " + w[file]);
            return add(w, CommandClass::code_execution, b + " reading commands from its input");
        }
        if (b == "eval" || b == "source" || b == ".") {
            if (b == "eval") return script(join(w, 1), depth + 1);
            return add(w, CommandClass::other, "sources " + join(w, 1));
        }
        if (b == "find") return find(w, depth);

        // Arguments that name files; echo and friends only print theirs.
        if (!in(b, {"echo", "printf", "test", "[", "true", "false", "basename", "dirname", "expr",
                    "seq", "sleep", "yes"}))
            for (std::size_t i = 1; i < w.size(); ++i)
                if (isSecretPath(w[i]))
                    add(w, CommandClass::secret_access, "touches a secret store: " + w[i]);
        classify(w);
    }

  private:
    void add(const Words& w, CommandClass c, const std::string& why) {
        parts.push_back(Part{w, c, CommandPolicy::defaultDecision(c), why});
    }
    void addWith(const Words& w, CommandClass c, Decision d, const std::string& why) {
        parts.push_back(Part{w, c, d, why});
    }

    void find(const Words& w, int depth) {
        bool acted = false;
        for (std::size_t i = 1; i < w.size(); ++i) {
            if (in(w[i], {"-exec", "-execdir", "-ok", "-okdir"})) {
                Words sub;
                for (++i; i < w.size() && w[i] != ";" && w[i] != "+"; ++i) sub.push_back(w[i]);
                if (!sub.empty()) argv(sub, depth + 1);
                acted = true;
            } else if (w[i] == "-delete") {
                bool rootish = false;
                for (std::size_t j = 1; j < w.size() && !isOption(w[j]); ++j)
                    rootish = rootish || isRootTarget(w[j]);
                add(w, rootish ? CommandClass::destructive : CommandClass::other,
                    rootish ? "find -delete under a system or home root" : "find -delete");
                acted = true;
            }
        }
        if (!acted) add(w, CommandClass::inspection, "find");
    }

    // A command family: the names (or name prefixes) it answers to and the
    // member that judges its arguments.
    using FamilyJudge = void (Judge::*)(const Words& w, const std::string& b);
    struct Family {
        std::initializer_list<const char*> names;
        std::initializer_list<const char*> prefixes;
        FamilyJudge judge;
    };
    // Commands whose class follows from the name alone.
    struct NamedClass {
        CommandClass cls;
        const char* why;  // after the name; "" for the name alone
        std::initializer_list<const char*> names;
    };

    void classify(const Words& w) {
        static const Family families[] = {
            // Destructive forms.
            {{"rm"}, {}, &Judge::rm},
            {{"chmod", "chown", "chgrp"}, {}, &Judge::chmodFamily},
            {{"dd"}, {}, &Judge::dd},
            {{"mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "parted", "sgdisk", "blkdiscard",
              "cfdisk"},
             {"mkfs"},
             &Judge::blockDevice},
            {{"shred"}, {}, &Judge::shred},
            {{"git"}, {}, &Judge::git},
            // Interpreters given inline code.
            {{}, {"python", "pypy"}, &Judge::python},
            {{"node", "nodejs", "bun", "deno", "perl", "ruby", "php", "lua", "Rscript", "osascript",
              "tclsh"},
             {},
             &Judge::interpreter},
            // Package managers.
            {{"pip", "pip3", "pipx"}, {"pip3."}, &Judge::pipCommand},
            {{"npm", "yarn", "pnpm"}, {}, &Judge::node},
            {{"npx", "pnpx", "bunx"}, {}, &Judge::packageRunner},
            {{"cargo"}, {}, &Judge::cargo},
            {{"go"}, {}, &Judge::go},
            {{"gem", "bundle", "bundler", "apt", "apt-get", "aptitude", "apk", "dnf", "yum",
              "zypper", "brew", "poetry", "uv", "pipenv", "conda", "mamba", "composer", "dotnet"},
             {},
             &Judge::manager},
            {{"dpkg"}, {}, &Judge::dpkg},
            {{"pip-compile", "pip-sync"}, {}, &Judge::dependencyTool},
            {{"rsync"}, {}, &Judge::rsync},
            {{"make", "gmake"}, {}, &Judge::make},
            {{"tsc"}, {}, &Judge::tsc},
            {{"sed"}, {}, &Judge::sed},
        };
        static const NamedClass named[] = {
            {CommandClass::network,
             " reaches the network",
             {"curl",   "wget",  "ssh",      "scp",  "sftp", "nc",          "ncat",
              "netcat", "socat", "telnet",   "ftp",  "http", "https",       "aria2c",
              "ping",   "dig",   "nslookup", "host", "lftp", "ssh-keyscan", "mosh"}},
            {CommandClass::verification,
             "",
             {"pytest",   "py.test", "tox",        "nox",           "jest",      "vitest",
              "mocha",    "ava",     "eslint",     "prettier",      "flake8",    "pylint",
              "mypy",     "pyright", "ruff",       "black",         "isort",     "shellcheck",
              "rspec",    "phpunit", "ctest",      "golangci-lint", "stylelint", "hadolint",
              "yamllint", "bats",    "clang-tidy", "cppcheck"}},
            {CommandClass::build,
             "",
             {"cmake",   "ninja",   "meson",  "gcc",   "g++",  "cc",     "c++",     "clang",
              "clang++", "ld",      "rustc",  "javac", "mvn",  "gradle", "gradlew", "configure",
              "ant",     "zig",     "scons",  "bazel", "as",   "ar",     "strip",   "webpack",
              "vite",    "esbuild", "rollup", "swc",   "babel"}},
            {CommandClass::inspection,
             "",
             {"ls",       "cat",    "head",     "tail",      "less",     "more",     "grep",
              "egrep",    "fgrep",  "rg",       "ag",        "pwd",      "echo",     "printf",
              "wc",       "stat",   "file",     "which",     "whereis",  "type",     "du",
              "df",       "ps",     "top",      "id",        "whoami",   "uname",    "date",
              "hostname", "tree",   "sort",     "uniq",      "cut",      "tr",       "diff",
              "cmp",      "md5sum", "sha1sum",  "sha256sum", "printenv", "true",     "false",
              "test",     "[",      "basename", "dirname",   "realpath", "readlink", "jq",
              "uptime",   "free",   "lscpu",    "sleep",     "seq",      "yes",      "nproc",
              "locale",   "column", "nl",       "od",        "xxd",      "hexdump",  "strings",
              "awk",      "tac",    "rev",      "fold",      "expr",     "bc",       "history",
              "alias",    "cd",     "ldd",      "lsof",      "pgrep",    "tee",      "mkdir",
              "touch",    "cp",     "mv",       "ln"}},
        };
        const std::string b = base(w[0]);
        for (const auto& f : families) {
            bool named = in(b, f.names);
            for (const char* prefix : f.prefixes) named = named || b.rfind(prefix, 0) == 0;
            if (named) return (this->*f.judge)(w, b);
        }
        for (const auto& n : named)
            if (in(b, n.names)) return add(w, n.cls, b + n.why);
        add(w, CommandClass::other, "not a recognised command: " + b);
    }

    static Words argsOf(const Words& w) { return Words(w.begin() + 1, w.end()); }
    // The subcommand: the first operand, options with a value skipped.
    static std::string subcommand(const Words& w,
                                  std::initializer_list<const char*> withValue = {}) {
        std::size_t i = firstOperand(w, 1, withValue);
        return i < w.size() ? w[i] : std::string();
    }

    void rm(const Words& w, const std::string&) {
        Words args = argsOf(w);
        if (std::find(args.begin(), args.end(), "--no-preserve-root") != args.end())
            return add(w, CommandClass::destructive, "rm --no-preserve-root");
        bool recursive = hasFlag(args, 'r', "--recursive") || hasFlag(args, 'R', "--recursive");
        for (const auto& a : args)
            if (!isOption(a) && recursive && isRootTarget(a))
                return add(w, CommandClass::destructive, "rm -r of " + a);
        add(w, CommandClass::other, "rm");
    }

    void chmodFamily(const Words& w, const std::string& b) {
        Words args = argsOf(w);
        bool recursive = hasFlag(args, 'R', "--recursive");
        for (const auto& a : args)
            if (!isOption(a) && recursive && isRootTarget(a))
                return add(w, CommandClass::destructive, b + " -R of " + a);
        add(w, CommandClass::other, b);
    }

    void dd(const Words& w, const std::string&) {
        for (const auto& a : argsOf(w))
            if (a.rfind("of=", 0) == 0 && isDeviceTarget(a.substr(3)))
                return add(w, CommandClass::destructive, "dd to the device " + a.substr(3));
        add(w, CommandClass::other, "dd");
    }

    void blockDevice(const Words& w, const std::string& b) {
        add(w, CommandClass::destructive, b + " rewrites a block device");
    }

    void shred(const Words& w, const std::string&) {
        for (const auto& a : argsOf(w))
            if (isDeviceTarget(a))
                return add(w, CommandClass::destructive, "shred of the device " + a);
        add(w, CommandClass::other, "shred");
    }

    void python(const Words& w, const std::string& b) {
        for (std::size_t i = 1; i < w.size(); ++i) {
            if (w[i] == "-c" && i + 1 < w.size()) return inlineCode(w, w[i + 1], b + " -c");
            if (w[i] == "-m" && i + 1 < w.size()) return pythonModule(w, i + 1);
            if (!isOption(w[i])) {
                if (base(w[i]) == "setup.py") {
                    bool install = std::find(w.begin(), w.end(), "install") != w.end() ||
                                   std::find(w.begin(), w.end(), "develop") != w.end();
                    return add(w, install ? CommandClass::dependency_change : CommandClass::build,
                               "setup.py");
                }
                if (w[i] == "-")
                    return add(w, CommandClass::code_execution, b + " reading code from its input");
                return add(w, CommandClass::other, "runs " + w[i]);
            }
        }
        add(w, CommandClass::code_execution, b + " reading code from its input");
    }

    void interpreter(const Words& w, const std::string& b) {
        for (std::size_t i = 1; i < w.size(); ++i) {
            // php -r is code; node -r is --require.
            bool codeFlag =
                in(w[i], {"-e", "-E", "--eval", "-p", "--print"}) || (b == "php" && w[i] == "-r");
            if (codeFlag && i + 1 < w.size()) return inlineCode(w, w[i + 1], b + " " + w[i]);
            if (b == "deno" && w[i] == "eval" && i + 1 < w.size())
                return inlineCode(w, w[i + 1], "deno eval");
        }
        if (b == "bun" || b == "deno") {
            std::string s = subcommand(w);
            if (in(s, {"install", "add", "i", "remove", "update"}))
                return add(w, CommandClass::dependency_change, b + " " + s);
            if (s == "test") return add(w, CommandClass::verification, b + " test");
        }
        std::size_t file = firstOperand(w, 1);
        if (file >= w.size())
            return add(w, CommandClass::code_execution, b + " reading code from its input");
        add(w, CommandClass::other, "runs " + w[file]);
    }

    void pipCommand(const Words& w, const std::string&) { pip(w, 0); }

    void packageRunner(const Words& w, const std::string& b) {
        add(w, CommandClass::dependency_change, b + " runs a package it may fetch");
    }

    void cargo(const Words& w, const std::string&) {
        std::string s = subcommand(w, {"--manifest-path", "-Z"});
        if (in(s, {"add", "install", "update", "remove", "rm", "fetch", "generate-lockfile"}))
            return add(w, CommandClass::dependency_change, "cargo " + s);
        if (in(s, {"test", "check", "clippy", "fmt", "bench", "nextest"}))
            return add(w, CommandClass::verification, "cargo " + s);
        if (in(s, {"build", "run", "doc", "rustc"}))
            return add(w, CommandClass::build, "cargo " + s);
        add(w, CommandClass::other, "cargo " + s);
    }

    void go(const Words& w, const std::string&) {
        std::string s = subcommand(w);
        if (in(s, {"get", "install"})) return add(w, CommandClass::dependency_change, "go " + s);
        if (s == "mod") {
            std::size_t i = firstOperand(w, 1);
            std::string m = i + 1 < w.size() ? w[i + 1] : "";
            if (in(m, {"tidy", "download", "get", "vendor"}))
                return add(w, CommandClass::dependency_change, "go mod " + m);
            return add(w, CommandClass::inspection, "go mod " + m);
        }
        if (in(s, {"test", "vet"})) return add(w, CommandClass::verification, "go " + s);
        if (in(s, {"build", "run", "generate"})) return add(w, CommandClass::build, "go " + s);
        add(w, CommandClass::other, "go " + s);
    }

    // System and language package managers: the subcommands that change
    // what is installed; every other one only looks.
    void manager(const Words& w, const std::string& b) {
        struct Manager {
            const char* name;
            std::initializer_list<const char*> changing;
        };
        static const Manager managers[] = {
            {"gem", {"install", "update", "uninstall"}},
            {"bundle", {"install", "update", "add", "lock"}},
            {"bundler", {"install", "update", "add", "lock"}},
            {"apt",
             {"install", "remove", "purge", "upgrade", "full-upgrade", "dist-upgrade", "update",
              "autoremove", "reinstall"}},
            {"apt-get",
             {"install", "remove", "purge", "upgrade", "dist-upgrade", "update", "autoremove",
              "build-dep", "source"}},
            {"aptitude", {"install", "remove", "purge", "upgrade", "update"}},
            {"apk", {"add", "del", "upgrade", "update", "fix"}},
            {"dnf", {"install", "remove", "upgrade", "update", "erase"}},
            {"yum", {"install", "remove", "upgrade", "update", "erase"}},
            {"zypper", {"install", "in", "remove", "rm", "update", "up"}},
            {"brew", {"install", "uninstall", "upgrade", "update", "tap"}},
            {"poetry", {"add", "install", "update", "remove", "lock"}},
            {"uv", {"add", "remove", "sync", "lock", "pip", "tool"}},
            {"pipenv", {"install", "uninstall", "update", "lock", "sync"}},
            {"conda", {"install", "update", "remove", "create", "upgrade"}},
            {"mamba", {"install", "update", "remove", "create"}},
            {"composer", {"install", "require", "update", "remove"}},
            {"dotnet", {"add", "restore"}},
        };
        std::string s = subcommand(w, {"-o", "-c", "-C", "--directory", "-q"});
        for (const auto& m : managers)
            if (b == m.name && in(s, m.changing))
                return add(w, CommandClass::dependency_change, b + " " + s);
        add(w, CommandClass::inspection, b + " " + s);
    }

    void dpkg(const Words& w, const std::string& b) {
        Words args = argsOf(w);
        if (hasFlag(args, 'i', "--install") || hasFlag(args, 'r', "--remove") ||
            hasFlag(args, 'P', "--purge"))
            return add(w, CommandClass::dependency_change, "dpkg install/remove");
        add(w, CommandClass::other, "not a recognised command: " + b);
    }

    void dependencyTool(const Words& w, const std::string& b) {
        add(w, CommandClass::dependency_change, b);
    }

    void rsync(const Words& w, const std::string&) {
        for (const auto& a : argsOf(w))
            if (!isOption(a) && (a.find("::") != std::string::npos || a.rfind("rsync://", 0) == 0 ||
                                 (a.find(':') != std::string::npos && a[0] != '/')))
                return add(w, CommandClass::network, "rsync to or from " + a);
        add(w, CommandClass::other, "rsync (local)");
    }

    void make(const Words& w, const std::string&) {
        for (const auto& a : argsOf(w))
            if (in(a, {"test", "check", "lint", "tests", "verify"}))
                return add(w, CommandClass::verification, "make " + a);
        add(w, CommandClass::build, "make");
    }

    void tsc(const Words& w, const std::string&) {
        bool noEmit = std::find(w.begin() + 1, w.end(), "--noEmit") != w.end();
        add(w, noEmit ? CommandClass::verification : CommandClass::build, "tsc");
    }

    void sed(const Words& w, const std::string&) {
        add(w,
            hasFlag(argsOf(w), 'i', "--in-place") ? CommandClass::other : CommandClass::inspection,
            "sed");
    }

    void inlineCode(const Words& w, const std::string& code, const std::string& how) {
        this->code.push_back(code);
        add(w, CommandClass::code_execution, how + " runs inline code");
    }

    void pythonModule(const Words& w, std::size_t i) {
        const std::string& m = w[i];
        if (m == "pip") return pip(w, i);
        if (in(m, {"pytest", "unittest", "mypy", "flake8", "pylint", "black", "ruff", "tox",
                   "doctest"}))
            return add(w, CommandClass::verification, "python -m " + m);
        if (in(m, {"build", "compileall", "py_compile"}))
            return add(w, CommandClass::build, "python -m " + m);
        if (in(m, {"ensurepip"})) return add(w, CommandClass::dependency_change, "python -m " + m);
        add(w, CommandClass::other, "python -m " + m);
    }

    // w[at] is pip (or the `pip` of `python -m pip`).
    void pip(const Words& w, std::size_t at) {
        std::size_t i = firstOperand(
            w, at + 1, {"-r", "--requirement", "-c", "--constraint", "--index-url", "-i"});
        std::string s = i < w.size() ? w[i] : "";
        if (s == "install") {
            // Every requirement pinned to a digest (-r FILE --require-hashes,
            // nothing named on the command line) changes nothing a reviewer
            // has not seen: the file is the change, and the package proxy
            // still judges each download.
            bool hashes = false, fromFile = false, named = false;
            for (std::size_t k = i + 1; k < w.size(); ++k) {
                const std::string& a = w[k];
                if (a == "--require-hashes")
                    hashes = true;
                else if (a == "-r" || a == "--requirement")
                    fromFile = (++k < w.size()) || fromFile;
                else if (a.rfind("--requirement=", 0) == 0)
                    fromFile = true;
                else if (a.empty() || a[0] != '-')
                    named = true;
            }
            if (hashes && fromFile && !named)
                return add(w, CommandClass::build, "pip install -r (hash-pinned requirements)");
        }
        if (in(s, {"install", "uninstall", "download", "wheel", "sync"}))
            return add(w, CommandClass::dependency_change, "pip " + s);
        add(w, CommandClass::inspection, "pip " + s);
    }

    void node(const Words& w, const std::string& b) {
        std::size_t i = firstOperand(
            w, 1, {"--prefix", "-C", "--cwd", "--dir", "--filter", "-w", "--workspace"});
        std::string s = i < w.size() ? w[i] : "";
        if (s.empty() && b == "yarn")
            return add(w, CommandClass::dependency_change, "yarn (install)");
        // Exactly the committed lockfile (integrity-pinned; it fails rather
        // than change it): a build step, not a dependency change.
        if (s == "ci" && b == "npm")
            return add(w, CommandClass::build, "npm ci (the lockfile, exactly)");
        if (in(s, {"install",   "i",      "ci",   "add", "update", "up",     "upgrade",
                   "uninstall", "remove", "rm",   "un",  "r",      "link",   "dedupe",
                   "prune",     "dlx",    "exec", "x",   "import", "rebuild"}))
            return add(w, CommandClass::dependency_change, b + " " + s);
        if (in(s, {"publish", "login", "adduser", "unpublish", "deprecate"}))
            return add(w, CommandClass::network, b + " " + s);
        if (in(s, {"test", "t", "tst", "lint"}))
            return add(w, CommandClass::verification, b + " " + s);
        if (s == "build") return add(w, CommandClass::build, b + " build");
        if (s == "run" || s == "run-script") {
            std::string script = i + 1 < w.size() ? w[i + 1] : "";
            if (script.find("test") != std::string::npos ||
                script.find("lint") != std::string::npos ||
                script.find("check") != std::string::npos ||
                script.find("typecheck") != std::string::npos)
                return add(w, CommandClass::verification, b + " run " + script);
            if (script.find("build") != std::string::npos ||
                script.find("compile") != std::string::npos)
                return add(w, CommandClass::build, b + " run " + script);
            return add(w, CommandClass::other, b + " run " + script);
        }
        if (in(s, {"ls", "list", "outdated", "view", "info", "why", "explain", "config", "version",
                   "--version", "-v", "audit", "help"}))
            return add(w, CommandClass::inspection, b + " " + s);
        add(w, CommandClass::other, b + " " + s);
    }

    void git(const Words& w, const std::string&) {
        std::size_t i = firstOperand(
            w, 1, {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"});
        std::string s = i < w.size() ? w[i] : "";
        Words rest(i < w.size() ? w.begin() + static_cast<long>(i) + 1 : w.end(), w.end());
        if (s == "reset" && std::find(rest.begin(), rest.end(), "--hard") != rest.end())
            return add(w, CommandClass::destructive, "git reset --hard");
        if (s == "push") {
            for (const auto& a : rest) {
                if (in(a, {"--force", "-f", "--mirror", "--delete", "-d", "--prune"}) ||
                    a.rfind("--force-with-lease", 0) == 0 ||
                    a.rfind("--force-if-includes", 0) == 0 ||
                    (!a.empty() && (a[0] == '+' || (a[0] == ':' && a.size() > 1))) ||
                    (a.size() > 1 && a[0] == '-' && a[1] != '-' &&
                     a.find('f') != std::string::npos))
                    return add(w, CommandClass::destructive,
                               "git push that rewrites or deletes remote history (" + a + ")");
            }
            return addWith(w, CommandClass::network, Decision::approve,
                           "git push publishes the work");
        }
        if (s == "clean" && hasFlag(rest, 'f', "--force") && hasFlag(rest, 'x', "-x"))
            return add(w, CommandClass::other, "git clean -fx");
        if (in(s, {"clone", "fetch", "pull", "ls-remote", "submodule", "remote", "archive"})) {
            if (s == "remote" && (rest.empty() || in(rest[0], {"-v", "show", "get-url"})))
                return add(w, CommandClass::inspection, "git remote");
            return add(w, CommandClass::network, "git " + s);
        }
        if (in(s, {"status", "log", "diff", "show", "branch", "blame", "rev-parse", "ls-files",
                   "describe", "shortlog", "grep", "tag", "config", "rev-list", "cat-file",
                   "reflog", "whatchanged", "--version", "help"}))
            return add(w, CommandClass::inspection, "git " + s);
        add(w, CommandClass::other, "git " + s);
    }
};

}  // namespace

CommandPolicy::CommandPolicy(PolicyRules operatorRules)
    : operatorRules_(std::move(operatorRules)) {}

namespace {

Verdict decide(const Judge& judge, const PolicyRules& operatorRules,
               const PolicyRules& sandboxRules) {
    Verdict best;
    bool any = false;
    for (const auto& part : judge.parts) {
        std::string text = join(part.words);
        Decision d = part.defaultDecision;
        std::string reason = className(part.cls) + ": " + part.why;
        auto matches = [&](const std::vector<std::string>& globs, std::string& which) {
            for (const auto& g : globs)
                if (CommandPolicy::globMatch(g, text)) {
                    which = g;
                    return true;
                }
            return false;
        };
        std::string rule;
        if (matches(operatorRules.deny, rule) || matches(sandboxRules.deny, rule)) {
            d = Decision::deny;
            reason = "matches the deny rule \"" + rule + "\" (" + className(part.cls) + ")";
        } else if (matches(operatorRules.approve, rule) || matches(sandboxRules.approve, rule)) {
            d = Decision::approve;
            reason = "matches the approve rule \"" + rule + "\" (" + className(part.cls) + ")";
        } else if (matches(operatorRules.allow, rule) || matches(sandboxRules.allow, rule)) {
            d = Decision::allow;
            reason = "matches the allow rule \"" + rule + "\" (" + className(part.cls) + ")";
        }
        bool stricter =
            !any || d > best.decision || (d == best.decision && part.cls > best.commandClass);
        if (stricter) {
            best.decision = d;
            best.commandClass = part.cls;
            best.part = text;
            best.reason = reason;
            any = true;
        }
    }
    best.inlineCode = judge.code;
    return best;
}

}  // namespace

Verdict CommandPolicy::judgeArgv(const std::vector<std::string>& argv,
                                 const PolicyRules& sandboxRules) const {
    Judge judge;
    if (!argv.empty()) judge.argv(argv, 0);
    return decide(judge, operatorRules_, sandboxRules);
}

Verdict CommandPolicy::judgeShell(const std::string& script,
                                  const PolicyRules& sandboxRules) const {
    Judge judge;
    judge.script(script, 0);
    return decide(judge, operatorRules_, sandboxRules);
}

}  // namespace airlock::policy
