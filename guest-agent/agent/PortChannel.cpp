#include "agent/PortChannel.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace airlock::guest {

std::string PortChannel::findPortDevice(const std::string& portName) {
    const char* base = "/sys/class/virtio-ports";
    DIR* dir = ::opendir(base);
    if (!dir) return {};
    std::string found;
    while (dirent* e = ::readdir(dir)) {
        std::string entry = e->d_name;
        if (entry == "." || entry == "..") continue;
        std::ifstream nameFile(std::string(base) + "/" + entry + "/name");
        std::string name;
        std::getline(nameFile, name);
        if (name == portName) {
            found = "/dev/" + entry;
            break;
        }
    }
    ::closedir(dir);
    return found;
}

bool PortChannel::open(const std::string& devicePath) {
    fd_.reset(::open(devicePath.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    return fd_.valid();
}

void PortChannel::adopt(UniqueFd fd) {
    fd_ = std::move(fd);
    if (fd_) ::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
}

bool PortChannel::enqueue(std::string_view bytes) {
    if (queued() + bytes.size() > kMaxQueued) return false;
    if (outOffset_ > 0 && outOffset_ == out_.size()) {
        out_.clear();
        outOffset_ = 0;
    }
    out_.append(bytes);
    return true;
}

bool PortChannel::enqueueFrame(protocol::FrameType type, std::uint32_t stream, std::string_view payload,
                               std::uint8_t flags) {
    if (queued() + protocol::kHeaderSize + payload.size() > kMaxQueued) return false;
    if (outOffset_ > 0 && outOffset_ == out_.size()) {
        out_.clear();
        outOffset_ = 0;
    }
    protocol::appendFrame(out_, type, stream, payload, flags);
    return true;
}

void PortChannel::dropQueued() {
    out_.clear();
    outOffset_ = 0;
}

bool PortChannel::flush() {
    while (queued() > 0) {
        ssize_t n = ::write(fd_.get(), out_.data() + outOffset_, queued());
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return true;
            return false;
        }
        outOffset_ += static_cast<std::size_t>(n);
    }
    out_.clear();
    outOffset_ = 0;
    return true;
}

long PortChannel::readSome(std::string& into, std::size_t max) {
    std::size_t old = into.size();
    into.resize(old + max);
    ssize_t n = ::read(fd_.get(), into.data() + old, max);
    if (n < 0) {
        into.resize(old);
        return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    }
    into.resize(old + static_cast<std::size_t>(n));
    return static_cast<long>(n);
}

}  // namespace airlock::guest
