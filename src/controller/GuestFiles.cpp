// A sandbox's files through its agent: streamed uploads and downloads,
// one-shot operations, and file activity. The activity: the agent watches
// the workspace (fanotify, else inotify) and keeps a bounded per-path
// summary; the host drains it into the audit log, where the evidence bundle
// reads it. Everything in a drain is guest-written: it is checked for shape,
// capped and masked before it is stored, and it never fails the operation
// that asked for it.
#include "controller/GuestFiles.hpp"

#include <mutex>

#include "controller/GuestAnswers.hpp"
#include "controller/MaskedOutput.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Log.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/Messages.hpp"
#include "protocol/Ops.hpp"

namespace airlock {

namespace {
constexpr std::chrono::seconds kFileActivityCallTimeout{10};
constexpr std::size_t kPathsPerRecord = 200;
constexpr std::size_t kMaxPathBytes = 1024;
}  // namespace

void requireAbsolutePath(const std::string& path) {
    if (path.empty() || path[0] != '/')
        throw Error(ErrorCode::bad_request, "path must be absolute, got '" + path + "'");
    if (path.size() > 4096 || path.find('\0') != std::string::npos)
        throw Error(ErrorCode::bad_request, "bad path");
}

std::shared_ptr<AgentStream> GuestFiles::openUpload(const std::string& tenant,
                                                    const std::string& id, const std::string& path,
                                                    std::optional<unsigned> mode,
                                                    AgentStream::Handler handler,
                                                    const std::string& user,
                                                    const protocol::FileMetadata& metadata,
                                                    bool asRoot) {
    requireAbsolutePath(path);
    auto sandbox = sandboxes_.requireOwned(tenant, id);
    sandboxes_.checkWrite(sandbox, path);
    sandboxes_.requireFreeSpace("upload", 0);
    sandbox = sandboxes_.requireRunning(tenant, id);
    return sandboxes_.agentFor(sandbox.id)
        ->open(protocol::FileWriteRequest{path, mode, user, metadata, asRoot}, std::move(handler));
}

protocol::WrittenFile GuestFiles::maskedWrite(const std::string& tenant, const std::string& id,
                                              protocol::WrittenFile written) {
    auto masker = sandboxes_.guestOutputMasker(sandboxes_.requireOwned(tenant, id));
    written.path = masker.mask(std::move(written.path));
    if (written.entry) maskGuestText(*written.entry, masker);
    return written;
}

std::shared_ptr<AgentStream> GuestFiles::openDownload(const std::string& tenant,
                                                      const std::string& id,
                                                      const std::string& path,
                                                      AgentStream::Handler handler,
                                                      const std::string& user) {
    requireAbsolutePath(path);
    auto sandbox = sandboxes_.requireRunning(tenant, id);
    return sandboxes_.agentFor(sandbox.id)
        ->open(protocol::FileReadRequest{path, user}, std::move(handler));
}

std::shared_ptr<AgentStream> GuestFiles::openWatch(const std::string& tenant,
                                                   const std::string& id,
                                                   const protocol::DirWatchRequest& request,
                                                   WatchHandlers handlers) {
    requireAbsolutePath(request.path);
    auto sandbox = sandboxes_.requireRunning(tenant, id);
    struct State {
        std::string partial;  // a record cut by a frame's end
        bool over = false;
        std::mutex mutex;  // the stream is set by the opener while events may arrive
        std::weak_ptr<AgentStream> stream;
        std::weak_ptr<AgentStream> get() {
            std::lock_guard lock(mutex);
            return stream;
        }
    };
    auto state = std::make_shared<State>();
    auto masker = sandboxes_.guestOutputMasker(sandbox);
    auto end = [state, handlers](std::optional<Error> error) {
        if (state->over) return;
        state->over = true;
        handlers.ended(std::move(error));
    };
    auto broken = [state, end](const std::string& why) {
        if (auto s = state->get().lock()) s->reset("bad_frame", why);
        end(Error(ErrorCode::agent_error, "the agent broke the watch: " + why));
    };
    auto handler = [state, handlers, masker, end, broken](AgentStream::Event&& e) {
        using Kind = AgentStream::Event::Kind;
        if (state->over) return;
        if (e.kind == Kind::reset) {
            auto info = protocol::parseResetInfo(e.payload);
            return end(agentError(info.code, masker.mask(info.message)));
        }
        if (e.kind == Kind::close) return end(std::nullopt);
        if (e.kind != Kind::data) return;
        // The frame's bytes go back to the guest once every record in it was taken.
        std::size_t bytes = e.payload.size();
        std::shared_ptr<void> hold(nullptr, [weak = state->get(), bytes](void*) {
            if (auto s = weak.lock()) s->grant(bytes);
        });
        state->partial += e.payload;
        std::size_t start = 0;
        for (;;) {
            auto nl = state->partial.find('\n', start);
            if (nl == std::string::npos) break;
            protocol::WatchRecord record;
            try {
                record = protocol::parseWatchRecord(
                    std::string_view(state->partial).substr(start, nl - start));
            } catch (const protocol::MessageError& err) {
                return broken(err.what());
            }
            start = nl + 1;
            record.name = masker.mask(std::move(record.name));
            if (record.entry) maskGuestText(*record.entry, masker);
            handlers.record(std::move(record), hold);
            if (state->over) return;
        }
        state->partial.erase(0, start);
        if (state->partial.size() > protocol::kMaxWatchLine)
            return broken("a watch record longer than " +
                          std::to_string(protocol::kMaxWatchLine) + " bytes");
    };
    auto stream = sandboxes_.agentFor(sandbox.id)->open(request, std::move(handler));
    {
        std::lock_guard lock(state->mutex);
        state->stream = stream;
    }
    return stream;
}

protocol::FsResult GuestFiles::fileOp(const std::string& tenant, const std::string& id,
                                      const protocol::FsRequest& request) {
    using Action = protocol::FsRequest::Action;
    requireAbsolutePath(request.path);
    bool changes = request.action == Action::mkdir || request.action == Action::remove ||
                   request.action == Action::move;
    auto sandbox = sandboxes_.requireRunning(tenant, id);
    if (changes) {
        sandboxes_.checkWrite(sandbox, request.path);
        if (request.action == Action::move) sandboxes_.checkWrite(sandbox, request.to);
    }
    // Changes to the guest's files through the API are evidence too, also
    // when the guest answers malformed (it may have made the change anyway).
    auto masker = sandboxes_.guestOutputMasker(sandbox);
    auto recordChange = [&](const char* answerError) {
        if (!changes) return;
        nlohmann::json data{{"path", request.path}};
        if (request.action == Action::move) data["to"] = request.to;
        if (request.action == Action::remove) data["recursive"] = request.recursive;
        if (answerError) data["error"] = answerError;
        // An error's text may quote the guest: masked like its answers.
        sandboxes_.record(id, tenant, "file." + protocol::actionName(request.action), data,
                          answerError ? &masker : nullptr);
    };
    protocol::FsResult result;
    try {
        result = askGuest(*sandboxes_.agentFor(sandbox.id), request, masker);
    } catch (const Error& e) {
        if (e.code() == ErrorCode::agent_error) recordChange(e.what());
        throw;
    }
    recordChange(nullptr);
    return result;
}

void GuestFiles::recordFileWrite(const std::string& tenant, const std::string& id,
                                 const std::string& requestedPath, const std::string& writtenPath,
                                 std::uint64_t bytes, const std::string& sha256) {
    nlohmann::json data{{"path", writtenPath}, {"size", bytes}, {"sha256", sha256}};
    if (requestedPath != writtenPath) data["requested_path"] = requestedPath;
    sandboxes_.record(id, tenant, "file.written", data, nullptr);
}

bool GuestFiles::watchFiles(const std::string& tenant, const std::string& id,
                            const std::string& path) {
    try {
        auto sandbox = sandboxes_.requireRunning(tenant, id);
        auto reply = sandboxes_.agentFor(sandbox.id)
                         ->call(protocol::FileWatchRequest{protocol::Op::file_watch, path, {}},
                                kFileActivityCallTimeout);
        auto started = protocol::parseFileActivity(reply);
        if (!started.watching) throw Error(ErrorCode::agent_error, "the agent is not watching");
        const std::string& mechanism = started.mechanism;
        sandboxes_.record(id, tenant, "file.watch_started",
                          {{"path", path}, {"mechanism", mechanism}}, nullptr);
        return true;
    } catch (const std::exception& e) {
        logWarn("controller", "sandbox " + id + ": no file activity for " + path + ": " + e.what());
        sandboxes_.record(id, tenant, "file.watch_failed", {{"path", path}, {"error", e.what()}},
                          nullptr);
        return false;
    }
}

void GuestFiles::drainFileActivity(const SandboxRecord& r) {
    if (r.state != SandboxState::running) return;
    nlohmann::json answer;
    try {
        answer = sandboxes_.agentFor(r.id)->call(
            protocol::FileWatchRequest{protocol::Op::file_activity, {}, {}},
            kFileActivityCallTimeout);
    } catch (const std::exception& e) {
        logWarn("controller", "sandbox " + r.id + ": file activity not drained: " + e.what());
        return;
    }
    protocol::FileActivityReport report;
    try {
        report = protocol::parseFileActivity(answer);
    } catch (const protocol::MessageError& e) {
        // The agent cleared what it sent: the loss is on the record.
        sandboxes_.record(r.id, r.tenant, "agent.protocol_error",
                          {{"reason", e.message}, {"session_ended", false}}, nullptr);
        return;
    }
    if (!report.watching) return;
    auto masker = sandboxes_.guestOutputMasker(r);
    // The guest's clock may lag (a restored snapshot's): its times are moved
    // by the difference between its "now" and ours.
    const std::int64_t hostNowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count();
    const std::int64_t offsetMs = report.nowMs > 0 ? hostNowMs - report.nowMs : 0;
    auto when = [&](std::int64_t ms) -> std::string {
        if (ms <= 0) return {};
        ms += offsetMs;
        if (ms <= 0 || ms > hostNowMs + 60'000) return {};  // nonsense from the guest
        return formatTimestamp(
            std::chrono::system_clock::time_point(std::chrono::milliseconds(ms)));
    };
    std::vector<nlohmann::json> clean;
    clean.reserve(report.paths.size());
    for (const auto& p : report.paths) {
        // An audit record stays small: a longer path is cut.
        std::string path = p.path.substr(0, kMaxPathBytes);
        nlohmann::json rec = {{"path", masker.mask(path)},
                              {"reads", p.reads},
                              {"writes", p.writes},
                              {"first", when(p.firstMs)},
                              {"last", when(p.lastMs)}};
        if (p.writes > 0) {
            rec["first_write"] = when(p.firstWriteMs);
            rec["last_write"] = when(p.lastWriteMs);
            rec["last_writer"] = p.lastWriter;
        }
        rec["execs"] = p.execs;
        clean.push_back(std::move(rec));
    }
    const std::string& mechanism = report.mechanism;
    std::uint64_t dropped = report.dropped;
    bool overflow = report.overflow;
    if (clean.empty() && dropped == 0 && !overflow) return;
    // Several records of a bounded size: an audit record stays small.
    for (std::size_t i = 0; i < clean.size() || i == 0; i += kPathsPerRecord) {
        nlohmann::json chunk = nlohmann::json::array();
        for (std::size_t k = i; k < std::min(clean.size(), i + kPathsPerRecord); ++k)
            chunk.push_back(clean[k]);
        nlohmann::json data = {
            {"mechanism", mechanism}, {"paths", chunk}, {"clock_offset_ms", offsetMs}};
        if (i == 0) {
            data["dropped"] = dropped;
            data["overflow"] = overflow;
        }
        sandboxes_.record(r.id, r.tenant, "file.activity", data, nullptr);
        if (clean.empty()) break;
    }
}

}  // namespace airlock
