#include "agent/ProcessTable.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "agent/GuestFs.hpp"

namespace airlock::guest {

void OutputRing::append(std::string_view bytes) {
    if (bytes.size() >= capacity_) {
        data_.assign(bytes.substr(bytes.size() - capacity_));
    } else {
        data_.append(bytes);
        if (data_.size() > capacity_) data_.erase(0, data_.size() - capacity_);
    }
    end_ += bytes.size();
}

std::string OutputRing::read(std::uint64_t from, std::size_t max) const {
    if (from < begin()) from = begin();
    if (from >= end_) return {};
    std::size_t offset = static_cast<std::size_t>(from - begin());
    return data_.substr(offset, max);
}

BackgroundProcess::BackgroundProcess(const protocol::ExecRequest& request, Spawned spawned)
    : spawned_(std::move(spawned)),
      argv_(request.argv),
      startedAt_(utcTime(std::time(nullptr))),
      output_(kRingBytes),
      trace_(request.trace) {
    if (!request.stdin_stream) {
        if (!request.stdin_data.empty()) writeStdin(request.stdin_data);
        spawned_.stdinFd.reset();
    }
}

BackgroundProcess::~BackgroundProcess() {
    if (!exited_ && spawned_.pid > 0) {
        ::kill(-spawned_.pid, SIGKILL);
        ::waitpid(spawned_.pid, nullptr, 0);
    }
}

void BackgroundProcess::collectFds(std::vector<pollfd>& fds,
                                   std::vector<BackgroundProcess*>& owners) {
    for (int fd : {spawned_.stdoutFd.get(), spawned_.stderrFd.get()}) {
        if (fd < 0) continue;
        fds.push_back({fd, POLLIN, 0});
        owners.push_back(this);
    }
}

void BackgroundProcess::onFdReady(int fd) {
    char buf[64 * 1024];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
        output_.append(std::string_view(buf, static_cast<std::size_t>(n)));
        return;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (fd == spawned_.stdoutFd.get()) spawned_.stdoutFd.reset();
        if (fd == spawned_.stderrFd.get()) spawned_.stderrFd.reset();
    }
}

void BackgroundProcess::reap() {
    if (exited_ || spawned_.pid <= 0) return;
    int status = 0;
    if (::waitpid(spawned_.pid, &status, WNOHANG) != spawned_.pid) return;
    exited_ = true;
    // What the process wrote before it exited is already in its pipes: take it now, so a
    // follower that sees "exited" has every byte (bounded: a child left behind may keep writing).
    for (int fd : {spawned_.stdoutFd.get(), spawned_.stderrFd.get()}) {
        char buf[64 * 1024];
        for (std::size_t taken = 0; fd >= 0 && taken < kDrainOnExitBytes;) {
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            output_.append(std::string_view(buf, static_cast<std::size_t>(n)));
            taken += static_cast<std::size_t>(n);
        }
    }
    if (WIFEXITED(status)) exitCode_ = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        signal_ = WTERMSIG(status);
        exitCode_ = 128 + signal_;
    }
    spawned_.stdinFd.reset();
}

void BackgroundProcess::signal(int sig) {
    if (!exited_ && spawned_.pid > 0) ::kill(-spawned_.pid, sig);
}

bool BackgroundProcess::writeStdin(std::string_view bytes) {
    while (spawned_.stdinFd && !bytes.empty()) {
        ssize_t n = ::write(spawned_.stdinFd.get(), bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN)
                return true;  // a full pipe drops the rest: the process is not reading
            spawned_.stdinFd.reset();
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return spawned_.stdinFd.valid();
}

protocol::ProcessInfo BackgroundProcess::describe() const {
    protocol::ProcessInfo info;
    info.pid = static_cast<std::uint32_t>(spawned_.pid);
    info.cmd = argv_;
    info.running = !exited_;
    info.startedAt = startedAt_;
    info.outputBytes = output_.end();
    if (exited_) {
        info.exitCode = exitCode_;
        if (signal_) info.signal = signal_;
    }
    return info;
}

std::optional<protocol::ProcessInfo> ProcessTable::start(const protocol::ExecRequest& request,
                                                         std::string& errorCode,
                                                         std::string& error) {
    if (processes_.size() >= kMaxProcesses) {
        // Forget the oldest exited process to make room; never a running one.
        for (auto it = processes_.begin(); it != processes_.end(); ++it)
            if (!it->second->running()) {
                processes_.erase(it);
                break;
            }
        if (processes_.size() >= kMaxProcesses) {
            errorCode = "busy";
            error = "too many background processes";
            return {};
        }
    }
    Spawned spawned = spawnProcess(request);
    if (spawned.pid < 0) {
        errorCode = "spawn_failed";
        error = spawned.error;
        return {};
    }
    pid_t pid = spawned.pid;
    auto proc = std::make_unique<BackgroundProcess>(request, std::move(spawned));
    auto info = proc->describe();
    processes_[pid] = std::move(proc);
    return info;
}

BackgroundProcess* ProcessTable::find(pid_t pid) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? nullptr : it->second.get();
}

std::size_t ProcessTable::runningCount() const {
    std::size_t n = 0;
    for (const auto& [pid, p] : processes_) n += p->running() ? 1 : 0;
    return n;
}

BackgroundProcess* ProcessTable::onlyRunning() const {
    BackgroundProcess* found = nullptr;
    for (const auto& [pid, p] : processes_) {
        if (!p->running()) continue;
        if (found) return nullptr;
        found = p.get();
    }
    return found;
}

protocol::ProcessList ProcessTable::list() const {
    protocol::ProcessList list;
    for (const auto& [pid, p] : processes_) list.processes.push_back(p->describe());
    return list;
}

void ProcessTable::collectFds(std::vector<pollfd>& fds, std::vector<BackgroundProcess*>& owners) {
    for (auto& [pid, p] : processes_) p->collectFds(fds, owners);
}

void ProcessTable::reapAll() {
    for (auto& [pid, p] : processes_) p->reap();
}

ProcessLogStream::ProcessLogStream(std::uint32_t id, FrameSink& sink, ProcessTable& table,
                                   pid_t pid, bool follow)
    : StreamHandler(id, sink), table_(table), pid_(pid), follow_(follow) {
    // From the first byte: if the ring has already dropped some, the first
    // tick says so before any data.
    cursor_ = 0;
    if (!table_.find(pid)) fail("not_found", "no background process " + std::to_string(pid));
}

bool ProcessLogStream::readyToProduce() const {
    auto* p = table_.find(pid_);
    return p && cursor_ < p->output().end() && sendable() > 0;
}

void ProcessLogStream::tick(std::int64_t) {
    if (done()) return;
    auto* p = table_.find(pid_);
    if (!p) return fail("not_found", "the process was forgotten");
    while (true) {
        std::size_t room = sendable();
        if (room == 0) return;
        if (cursor_ < p->output().begin()) {
            // Overwritten before we got to it. The host must know: what
            // follows may begin in the middle of a secret it masks.
            sendControl(protocol::OutputSkipped{p->output().begin() - cursor_, 1});
            cursor_ = p->output().begin();
        }
        std::string chunk = p->output().read(cursor_, room);
        if (chunk.empty()) break;
        cursor_ += chunk.size();
        sendData(1, chunk);
    }
    p->reap();
    if (!follow_ || (!p->running() && cursor_ >= p->output().end()))
        finish(protocol::toJsonValue(p->describe()));
}

}  // namespace airlock::guest
