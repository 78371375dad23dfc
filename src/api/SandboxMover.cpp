#include "api/SandboxMover.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/IncomingMoves.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "core/SafeFs.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::api {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

std::string answerText(const fleet::HttpAnswer& a) {
    if (a.outcome != fleet::HttpOutcome::answered) return a.why;
    auto j = json::parse(a.body, nullptr, false);
    std::string message = j.is_object() && j.contains("message") && j["message"].is_string()
                              ? j["message"].get<std::string>()
                              : a.body.substr(0, 200);
    return "status " + std::to_string(a.status) + ": " + message;
}

}  // namespace

SandboxMover::~SandboxMover() { stop(); }

void SandboxMover::stop() {
    stopping_ = true;
    std::thread running;
    {
        std::lock_guard lock(mutex_);
        running_ = true;  // start() adds nothing from now on
        running = std::move(thread_);
    }
    // Joined unlocked: the thread records its outcomes under the lock.
    if (running.joinable()) running.join();
}

std::vector<std::string> SandboxMover::start() {
    std::lock_guard lock(mutex_);
    auto sandboxes = moves_.movable();
    std::vector<std::string> ids;
    for (const auto& r : sandboxes) ids.push_back(r.id);
    if (running_) return {};
    if (thread_.joinable()) thread_.join();
    running_ = true;
    outcomes_.clear();
    for (const auto& id : ids) outcomes_[id] = "waiting to move";
    thread_ = std::thread(
        [this, sandboxes = std::move(sandboxes)]() mutable { run(std::move(sandboxes)); });
    return ids;
}

std::map<std::string, std::string> SandboxMover::outcomes() {
    std::lock_guard lock(mutex_);
    return outcomes_;
}

void SandboxMover::run(std::vector<SandboxRecord> sandboxes) {
    for (const auto& r : sandboxes) {
        if (stopping_) break;
        std::string outcome;
        try {
            outcome = "moved to " + moveOne(r);
        } catch (const std::exception& e) {
            outcome = std::string("stayed: ") + e.what();
            logWarn("fleet", "sandbox " + r.id + " did not move: " + e.what());
        }
        std::lock_guard lock(mutex_);
        outcomes_[r.id] = outcome;
    }
    std::lock_guard lock(mutex_);
    if (!stopping_) running_ = false;
}

std::string SandboxMover::moveOne(const SandboxRecord& r) {
    fleet::PlacementRequest wanted;
    wanted.templateName = r.templateName;
    wanted.vcpus = r.vcpus;
    wanted.memoryMib = r.memoryMib;
    auto nodes = fleet_.membership().nodes();
    std::erase_if(nodes,
                  [&](const fleet::NodeStatus& n) { return n.record.name == fleet_.self(); });
    auto ranked = fleet_.placement().rank(nodes, wanted);
    if (ranked.empty())
        throw Error(ErrorCode::unavailable,
                    "no other node has its template and room for it, or every one is draining");
    std::string work = moves_.arrivalsDir() + "/leaving-" + r.id;
    safefs::removeTree(work);
    fs::create_directory(work);
    fs::permissions(work, fs::perms::owner_all);
    std::string refusals;
    try {
        SecretCipher journey(fleet_.credential().journeyKey());
        auto started = steadyMillis();
        auto out = moves_.moveOut(r.id, journey, work);
        for (std::size_t i = 0; i < ranked.size() && i < 3; ++i) {
            const auto& node = ranked[i].node;
            try {
                sendTo(node, *out);
            } catch (const std::exception& e) {
                refusals += (refusals.empty() ? "" : "; ") + node + ": " + e.what();
                continue;
            }
            out->finish(node);
            logInfo("fleet", "sandbox " + r.id + " moved to node " + node + " in " +
                                 std::to_string(steadyMillis() - started) + " ms");
            safefs::removeTree(work);
            return node;
        }
    } catch (...) {
        safefs::removeTree(work);
        throw;
    }
    safefs::removeTree(work);
    throw Error(ErrorCode::unavailable, "no node took it (" + refusals + ")");
}

void SandboxMover::sendTo(const std::string& node, const OutgoingMove& out) {
    auto peer = fleet_.peer(node);
    if (!peer) throw Error(ErrorCode::unavailable, "unreachable");
    const auto& id = out.sandbox().record.id;
    // The node signs as itself: only another node's signed call reaches these routes.
    fleet::ForwardedCaller caller{"node:" + fleet_.self(), "node " + fleet_.self(), "_fleet",
                                  "admin"};
    auto call = [&](const std::string& method, const std::string& target, const std::string& body,
                    std::chrono::seconds timeout, const char* type) {
        auto headers =
            fleet_.credential().sign(fleet_.self(), node, method, target, caller,
                                     nowUnixSeconds());
        headers["content-type"] = type;
        return fleet::httpExchange(*peer, method, target, headers, body, Clock::now() + timeout,
                                   1 << 20);
    };
    std::map<std::string, std::string> paths{{IncomingMoves::kState, out.statePath()}};
    if (!out.diskPath().empty()) paths[IncomingMoves::kDisk] = out.diskPath();
    if (!out.workspacePath().empty()) paths[IncomingMoves::kWorkspace] = out.workspacePath();
    json files = json::object();
    for (const auto& [name, path] : paths) {
        auto d = safefs::digest(path);
        files[name] = {{"bytes", d.size}, {"sha256", d.sha256}};
    }
    auto begun = call("POST", "/v1/internal/moves",
                      json{{"sandbox", out.sandbox().toJson()}, {"files", files}}.dump(),
                      std::chrono::seconds(30), "application/json");
    if (begun.outcome != fleet::HttpOutcome::answered || begun.status != 201)
        throw Error(ErrorCode::unavailable, "it refused the move (" + answerText(begun) + ")");
    auto abandon = [&] {
        auto a = call("DELETE", "/v1/internal/moves?sandbox=" + id, {}, std::chrono::seconds(30),
                      "application/json");
        if (a.outcome != fleet::HttpOutcome::answered)
            logWarn("fleet",
                    "node " + node + " may keep the files of " + id + " for a while: " + a.why);
    };
    try {
        std::string piece(IncomingMoves::kPieceBytes, '\0');
        for (const auto& [name, path] : paths) {
            UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
            if (!fd) throw Error(ErrorCode::internal, "cannot open " + path);
            for (std::uint64_t offset = 0;;) {
                if (stopping_) throw Error(ErrorCode::unavailable, "this node is stopping");
                ssize_t n =
                    ::pread(fd.get(), piece.data(), piece.size(), static_cast<off_t>(offset));
                if (n < 0) throw Error(ErrorCode::internal, "cannot read " + path);
                if (n == 0) break;
                auto sent = call("PUT",
                                 "/v1/internal/moves/piece?sandbox=" + id + "&file=" + name +
                                     "&offset=" + std::to_string(offset),
                                 piece.substr(0, static_cast<std::size_t>(n)),
                                 std::chrono::seconds(120), "application/octet-stream");
                if (sent.outcome != fleet::HttpOutcome::answered || sent.status != 204)
                    throw Error(ErrorCode::unavailable,
                                "sending its " + name + " failed (" + answerText(sent) + ")");
                offset += static_cast<std::uint64_t>(n);
            }
        }
    } catch (...) {
        abandon();
        throw;
    }
    auto started = call("POST", "/v1/internal/moves/start?sandbox=" + id, {},
                        std::chrono::seconds(300), "application/json");
    if (started.outcome == fleet::HttpOutcome::answered && started.status == 200) return;
    if (started.outcome == fleet::HttpOutcome::answered)
        throw Error(ErrorCode::unavailable, "it did not start it (" + answerText(started) + ")");
    // No answer: it may run there now, and must never run twice. Until the
    // node says it dropped the files or the fleet's record names it, the
    // sandbox stays held here.
    auto deadline = Clock::now() + std::chrono::minutes(5);
    auto placedThere = [&] {
        auto placed = fleet_.directory().find(id);
        return placed && placed->node == node;
    };
    while (Clock::now() < deadline && !stopping_) {
        try {
            if (placedThere()) return;
        } catch (const std::exception&) {
            // etcd unreachable: asked again below
        }
        auto a = call("DELETE", "/v1/internal/moves?sandbox=" + id, {}, std::chrono::seconds(30),
                      "application/json");
        if (a.outcome == fleet::HttpOutcome::answered && a.status == 204)
            throw Error(ErrorCode::unavailable, "it did not answer the start and dropped it");
        if (a.outcome == fleet::HttpOutcome::answered && a.status == 404) {
            try {
                if (placedThere()) return;
            } catch (const std::exception&) {
                std::this_thread::sleep_for(std::chrono::seconds(2));
                continue;
            }
            throw Error(ErrorCode::unavailable, "it could not start it (" + started.why + ")");
        }
        std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    // Still unknown: the sandbox goes on here; the node's copy, if it
    // started, is the one the fleet does not name, and recover() on it
    // answers for it only through its own record.
    throw Error(ErrorCode::unavailable,
                "whether it started there is unknown after five minutes (" + started.why + ")");
}

}  // namespace airlock::api
