#include "core/Sha256.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "core/Error.hpp"
#include "core/Sha256Stream.hpp"
#include "core/UniqueFd.hpp"

namespace airlock {

std::string sha256Hex(std::string_view data) {
    Sha256Stream hash;
    hash.update(data);
    return hash.hexDigest();
}

std::string sha256FileHex(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw Error(ErrorCode::internal, "cannot open " + path);
    Sha256Stream hash;
    std::vector<char> buf(1 << 20);
    bool ok = true;
    while (true) {
        ssize_t n = ::read(fd.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ok = n == 0;
            break;
        }
        hash.update(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    }
    if (!ok) throw Error(ErrorCode::internal, "cannot hash " + path);
    return hash.hexDigest();
}

}  // namespace airlock
