#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "controller/SandboxMoves.hpp"
#include "core/SafeFs.hpp"

namespace airlock::api {

// Sandboxes arriving from another node of the fleet: announced with their
// record and the size and SHA-256 of each file, the files sent in order in
// bounded pieces, then started here (commit) or dropped (abort). Bounded:
// a few arrivals at once, each file no larger than announced, and an
// arrival that hears nothing for ten minutes is dropped.
class IncomingMoves {
  public:
    static constexpr std::size_t kMaxArrivals = 4;
    static constexpr std::size_t kPieceBytes = 8u << 20;
    static constexpr const char* kState = "state";
    static constexpr const char* kDisk = "disk";
    // The host's commits of its repository workspace (a git pack), when it has any.
    static constexpr const char* kWorkspace = "workspace";

    // What a crash left of moves in or out goes.
    explicit IncomingMoves(SandboxMoves& moves);
    ~IncomingMoves();

    // Error(conflict) when the id is arriving already, Error(unavailable)
    // when too many are, Error(bad_request) for files that cannot be.
    void begin(const std::string& from, MovedSandbox moved,
               const std::map<std::string, safefs::FileDigest>& files);
    // The next piece of one file, at the offset it has reached.
    void write(const std::string& from, const std::string& id, const std::string& file,
               std::uint64_t offset, std::string_view bytes);
    // Every file whole and as announced: the sandbox runs here, and
    // `placed` records it so; when that throws, it goes again.
    SandboxRecord commit(const std::string& from, const std::string& id,
                         const SecretCipher& journey,
                         const std::function<void(const SandboxRecord&)>& placed);
    void abort(const std::string& from, const std::string& id);

  private:
    struct Arrival {
        std::string from;
        MovedSandbox moved;
        std::map<std::string, safefs::FileDigest> expected;
        std::map<std::string, std::uint64_t> received;
        std::string dir;
        std::chrono::steady_clock::time_point touched;
        bool starting = false;
        bool writing = false;  // a piece is being written, outside the lock
        std::uint64_t serial = 0;  // tells this arrival from a later one of the same id
    };
    Arrival& find(const std::string& from, const std::string& id);
    void dropExpired();
    void drop(const std::string& id);

    SandboxMoves& moves_;
    std::mutex mutex_;
    std::uint64_t serials_ = 0;
    std::map<std::string, Arrival> arrivals_;
};

}  // namespace airlock::api
