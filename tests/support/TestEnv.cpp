#include "support/TestEnv.hpp"
#include "support/BuildPaths.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

namespace airlock::test {

int freePort() {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(s);
    return ntohs(a.sin_port);
}


TempDir::TempDir() {
    char tmpl[] = "/tmp/airlock-test.XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
    ::chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

bool waitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
             std::chrono::milliseconds interval) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (condition()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(interval);
    }
}

int countQemuProcesses(const std::string& needle) {
    int count = 0;
    DIR* proc = ::opendir("/proc");
    if (!proc) return 0;
    while (dirent* e = ::readdir(proc)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
        std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (cmd.rfind("/usr/bin/qemu-system", 0) == 0 || cmd.find("qemu-system-x86_64") == 0)
            if (cmd.find(needle) != std::string::npos) ++count;
    }
    ::closedir(proc);
    return count;
}

ErrorCode codeOf(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.code();
    }
    ADD_FAILURE() << "no error thrown";
    return ErrorCode::internal;
}

bool templatesBuilt() {
    return std::filesystem::exists(test::templatesDir() + "/minimal/template.json");
}

std::string commandOutput(const std::string& command) {
    std::string out;
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
    if (!pipe) return out;
    std::array<char, 4096> buf{};
    while (std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe.get()))
        out.append(buf.data(), n);
    return out;
}

std::string commandLine(const std::string& command) {
    std::string out = commandOutput(command);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

namespace {

const std::filesystem::path kCapabilities = "libvirt/cache/qemu/capabilities";

std::filesystem::path sharedCapabilities() {
    return std::filesystem::path(test::binDir()).parent_path() / "test-cache" / "libvirt-capabilities";
}

// Each file is copied through a temporary name: two test lanes may copy at once.
void copyNewer(const std::filesystem::path& from, const std::filesystem::path& to) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(from, ec)) return;
    fs::create_directories(to, ec);
    for (const auto& entry : fs::directory_iterator(from, ec)) {
        if (!entry.is_regular_file() || entry.path().extension() != ".xml") continue;
        fs::path target = to / entry.path().filename();
        if (fs::exists(target) && fs::last_write_time(target, ec) >= entry.last_write_time()) continue;
        fs::path partial = target;
        partial += "." + std::to_string(::getpid()) + ".part";
        if (fs::copy_file(entry.path(), partial, fs::copy_options::overwrite_existing, ec))
            fs::rename(partial, target, ec);
        if (ec) fs::remove(partial, ec);
    }
}

}  // namespace

void seedHypervisorCache(const std::string& dataDir) {
    copyNewer(sharedCapabilities(), std::filesystem::path(dataDir) / kCapabilities);
}

void keepHypervisorCache(const std::string& dataDir) {
    copyNewer(std::filesystem::path(dataDir) / kCapabilities, sharedCapabilities());
}

bool loopbackPortOpen(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

std::string hostNpmUpstream() {
    std::string all = commandOutput(sourceDir() + "/scripts/package-upstreams");
    for (std::size_t at = 0; at < all.size();) {
        auto nl = all.find('\n', at);
        auto line = all.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
        at = nl == std::string::npos ? all.size() : nl + 1;
        if (line.rfind("npm=", 0) == 0) return line;
    }
    return "";
}

}  // namespace airlock::test
