#include "e2b/E2bProcesses.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/Error.hpp"
#include "core/Log.hpp"
#include "core/SecretCipher.hpp"
#include "e2b/E2bWire.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Messages.hpp"
#include "protocol/ControlFrames.hpp"

namespace airlock::e2b {
using nlohmann::json;

std::string startEventJson(std::uint32_t pid) {
    return jsonText({{"event", {{"start", {{"pid", pid}}}}}});
}

std::string dataEventJson(const std::string& bytes, std::uint8_t channel, bool pty) {
    const char* key = pty ? "pty" : channel == 2 ? "stderr" : "stdout";
    return jsonText({{"event", {{"data", {{key, base64Encode(bytes)}}}}}});
}

std::string keepaliveEventJson() { return R"({"event":{"keepalive":{}}})"; }

std::string endEventJson(const std::string& execResultJson) {
    json end;
    try {
        auto r = protocol::parseExecResult(execResultJson);
        if (!r.error.empty()) {
            end = {{"exitCode", r.exit_code == 0 ? -1 : r.exit_code},
                   {"exited", false},
                   {"status", "error"},
                   {"error", r.error}};
        } else if (r.signal) {
            std::string status = r.timed_out ? "signal: killed (its timeout passed)"
                                             : "signal: " + std::to_string(*r.signal);
            end = {{"exitCode", -1}, {"exited", false}, {"status", status}, {"error", status}};
        } else {
            std::string status = "exit status " + std::to_string(r.exit_code);
            end = {{"exited", true}, {"status", status}};
            if (r.exit_code != 0) {
                end["exitCode"] = r.exit_code;
                end["error"] = status;
            }
        }
    } catch (const std::exception& e) {
        end = {{"exitCode", -1},
               {"exited", false},
               {"status", "unknown"},
               {"error", std::string("bad result: ") + e.what()}};
    }
    return jsonText({{"event", {{"end", end}}}});
}

std::uint32_t E2bProcess::pid() const {
    std::lock_guard lock(mutex_);
    return pid_;
}

bool E2bProcess::subscribe(const std::shared_ptr<ProcessSubscriber>& s) {
    std::lock_guard lock(mutex_);
    if (over_) return false;
    // Events go out under the lock (subscribers never block): the start
    // event is always first.
    if (pid_ != 0 && !s->event(startEventJson(pid_))) return false;
    subscribers_.push_back(s);
    return true;
}

void E2bProcess::unsubscribe(const ProcessSubscriber* s) {
    std::lock_guard lock(mutex_);
    std::erase_if(subscribers_, [s](const auto& p) { return p.get() == s; });
}

std::shared_ptr<AgentStream> E2bProcess::stream() {
    std::lock_guard lock(mutex_);
    if (over_ || !stream_)
        throw Error(ErrorCode::not_found, "process " + std::to_string(pid_) + " is not running");
    return stream_;
}

void E2bProcess::sendInput(const std::string& bytes, bool pty) {
    if (pty != spec_.pty)
        throw Error(ErrorCode::bad_request,
                    pty ? "the process has no pty" : "the process runs on a pty: send pty input");
    if (!spec_.stdinOpen && !spec_.pty)
        throw Error(ErrorCode::conflict, "the process was started without stdin");
    // Blocking until the guest's window took it: a client that sends faster
    // than the process reads waits, and the host never queues without bound.
    stream()->write(0, bytes, AgentStream::Clock::now() + std::chrono::seconds(30));
}

void E2bProcess::closeStdin() {
    // After the last queued byte, never ahead of it.
    stream()->writeAsync(0, "", true);
}

void E2bProcess::signal(const std::string& name) {
    stream()->control(protocol::controlPayload(protocol::SignalRequest{name}));
}

void E2bProcess::resize(unsigned rows, unsigned cols) {
    if (!spec_.pty) throw Error(ErrorCode::bad_request, "the process has no pty");
    stream()->control(protocol::controlPayload(protocol::ResizeRequest{rows, cols}));
}

struct E2bProcess::OutputWindow {
    OutputWindow(std::weak_ptr<E2bProcess> p, std::size_t n) : process(std::move(p)), bytes(n) {}
    OutputWindow(const OutputWindow&) = delete;
    OutputWindow& operator=(const OutputWindow&) = delete;
    std::weak_ptr<E2bProcess> process;
    std::size_t bytes = 0;
    ~OutputWindow() {
        if (auto p = process.lock()) p->returnWindow(bytes);
    }
};

void E2bProcess::attach(std::shared_ptr<AgentStream> s) {
    {
        std::lock_guard lock(mutex_);
        if (over_) return;  // it ended before the open returned: keep no cycle
        stream_ = s;
    }
    std::size_t owed = 0;
    {
        std::lock_guard lock(windowMutex_);
        windowStream_ = s;
        owed = std::exchange(ungranted_, 0);
    }
    if (owed) s->grant(owed);
}

void E2bProcess::returnWindow(std::size_t bytes) {
    std::shared_ptr<AgentStream> to;
    {
        std::lock_guard lock(windowMutex_);
        to = windowStream_.lock();
        if (!to) {
            ungranted_ += bytes;  // not attached yet (or over: then it does not matter)
            return;
        }
    }
    to->grant(bytes);
}

void E2bProcess::onEvent(AgentStream::Event&& e) {
    using Kind = AgentStream::Event::Kind;
    if (e.kind == Kind::data) {
        // Out of the lock (events of one stream come one at a time): the
        // window may come back inside a watcher's call.
        std::vector<std::shared_ptr<ProcessSubscriber>> watchers;
        {
            std::lock_guard lock(mutex_);
            if (over_) return;
            watchers = subscribers_;
        }
        std::vector<const ProcessSubscriber*> refused;
        {
            std::string json = dataEventJson(e.payload, e.channel, spec_.pty);
            auto window = std::make_shared<OutputWindow>(weak_from_this(), e.payload.size());
            for (const auto& w : watchers)
                if (!w->event(json, window)) refused.push_back(w.get());
        }  // no watcher took it: the window is back already
        if (refused.empty()) return;
        std::lock_guard lock(mutex_);
        std::erase_if(subscribers_, [&](const auto& w) {
            return std::find(refused.begin(), refused.end(), w.get()) != refused.end();
        });
        return;
    }
    if (e.kind == Kind::control) {
        // A judged terminal's line: to its TerminalLines, outside this lock.
        std::optional<protocol::LineToJudge> line;
        try {
            auto frame = protocol::parseControl(e.payload);
            if (auto* l = std::get_if<protocol::LineToJudge>(&frame)) line = std::move(*l);
        } catch (const protocol::MessageError&) {
        }
        if (line) {
            std::shared_ptr<TerminalLines> lines;
            {
                std::lock_guard lock(mutex_);
                if (over_) return;
                lines = lines_;
            }
            if (lines) lines->onLine(std::move(*line));
            return;
        }
    }
    std::function<void(std::uint32_t)> over;
    std::uint32_t pid = 0;
    std::shared_ptr<TerminalLines> lines;
    {
        std::lock_guard lock(mutex_);
        if (over_) return;
        auto deliver = [&](const std::string& j) {
            std::erase_if(subscribers_, [&](const auto& s) { return !s->event(j); });
        };
        if (e.kind == Kind::control) {
            std::optional<protocol::ExecStarted> started;
            try {
                if (pid_ == 0) started = protocol::parseExecStarted(e.payload);
            } catch (const protocol::MessageError&) {
                // not a start: nothing to tell
            }
            if (started) {
                pid_ = started->pid;
                // Findable by its pid before any client hears of it: a client
                // answers the start event with SendInput at once. (Lock order:
                // a process's, then the table's; the table never calls back.)
                if (onStart_) onStart_(pid_);
                deliver(startEventJson(pid_));
            }
        } else {
            over_ = true;
            auto subs = std::move(subscribers_);
            subscribers_.clear();
            std::optional<std::pair<std::string, std::string>> error;
            bool broken = false;
            if (e.kind == Kind::close && pid_ != 0) {
                std::string end = endEventJson(e.payload);
                for (auto& s : subs) s->event(end);
            } else if (e.kind == Kind::close) {
                std::string why = "the command did not start";
                try {
                    auto r = protocol::parseExecResult(e.payload);
                    if (!r.error.empty()) why = r.error;
                } catch (const std::exception&) {
                }
                error = std::make_pair(std::string("invalid_argument"), why);
            } else if (pid_ == 0) {
                auto info = protocol::parseResetInfo(e.payload);
                error = std::make_pair(std::string("unavailable"),
                                       "the command could not run: " + info.message);
            } else {
                broken = true;
            }
            for (auto& s : subs) broken ? s->broken() : s->ended(error);
            stream_.reset();  // the handler holds us: no cycle outlives the stream
            lines = std::move(lines_);
            over = onOver_;
            pid = pid_;
        }
    }
    if (lines) lines->close();
    if (over) over(pid);
}

std::shared_ptr<E2bProcess> E2bProcessTable::start(
    const std::string& tenant, const std::string& sandboxId, const ProcessSpec& spec,
    const std::shared_ptr<ProcessSubscriber>& first) {
    ExecOptions options;
    options.argv.push_back(spec.cmd);
    options.argv.insert(options.argv.end(), spec.args.begin(), spec.args.end());
    options.env = spec.envs;
    options.user = spec.user;
    options.cwd = spec.cwd ? resolveUserPath(*spec.cwd, spec.user) : resolveUserPath("", spec.user);
    options.timeoutS = spec.timeoutS;
    if (options.argv[0].empty()) throw Error(ErrorCode::bad_request, "process.cmd is required");

    auto verdict = commands_.judge(tenant, sandboxId, options);
    if (verdict.decision == policy::Decision::approve) {
        // Parked as an exec a human decides on; approved, it runs then, and
        // its result is kept with the exec (the stream cannot wait an hour).
        ExecOptions parked = options;
        if (parked.timeoutS == 0) parked.timeoutS = 3600;
        auto g = commands_.submitAsync(tenant, sandboxId, parked, [](auto, auto) {});
        if (!g)
            throw Error(ErrorCode::conflict,
                        "the policy changed while the command started; run it again");
        throw Error(ErrorCode::policy_denied,
                    "approval required: the policy parks this command (" + g->reason +
                        ") as approval " + g->approvalId + "; once approved it runs as exec " +
                        g->id + " (GET /v1/sandboxes/" + sandboxId + "/execs/" + g->id + ")");
    }
    {
        std::lock_guard lock(mutex_);
        auto& live = bySandbox_[sandboxId];
        if (live.size() + starting_[sandboxId] >= kMaxPerSandbox)
            throw Error(ErrorCode::too_many_requests, "sandbox " + sandboxId + " already runs " +
                                                          std::to_string(kMaxPerSandbox) +
                                                          " envd processes");
        ++starting_[sandboxId];
    }
    auto proc = std::make_shared<E2bProcess>(sandboxId, spec);
    proc->subscribers_.push_back(first);
    bool counted = true;
    auto uncount = [this, sandboxId, &counted] {
        std::lock_guard lock(mutex_);
        if (counted && starting_[sandboxId] > 0 && --starting_[sandboxId] == 0)
            starting_.erase(sandboxId);
        counted = false;
    };
    std::weak_ptr<E2bProcess> weak = proc;
    auto startedFlag = std::make_shared<std::atomic<bool>>(false);
    proc->onStart_ = [this, sandboxId, weak, startedFlag](std::uint32_t pid) {
        std::lock_guard lock(mutex_);
        if (auto p = weak.lock()) bySandbox_[sandboxId][pid] = p;
        startedFlag->store(true);
        if (starting_[sandboxId] > 0 && --starting_[sandboxId] == 0) starting_.erase(sandboxId);
    };
    proc->onOver_ = [this, sandboxId, startedFlag](std::uint32_t pid) {
        if (startedFlag->load()) return forget(sandboxId, pid);
        std::lock_guard lock(mutex_);
        if (starting_[sandboxId] > 0 && --starting_[sandboxId] == 0) starting_.erase(sandboxId);
    };
    TerminalOptions terminal;
    terminal.tty = spec.pty;
    terminal.rows = spec.rows;
    terminal.cols = spec.cols;
    terminal.stdinStream = spec.stdinOpen || spec.pty;
    terminal.judgeLines = spec.pty;  // answered here (TerminalLines) when it is a bash
    try {
        // The handler holds the process until its stream ends.
        auto opened = commands_.openStreamed(
            tenant, sandboxId, options, terminal,
            [proc](AgentStream::Event&& e) { proc->onEvent(std::move(e)); });
        counted = false;  // the start or the end uncounts it now
        if (!opened.stream) throw Error(ErrorCode::internal, "the exec did not open");
        proc->attach(opened.stream);
        if (linesJudged(options, terminal)) {
            auto lines = TerminalLines::open(
                commands_, workers_, {tenant, sandboxId, opened.execId, options},
                [weak](const protocol::LineVerdict& v) {
                    if (auto p = weak.lock())
                        if (auto s = p->stream()) s->control(protocol::controlPayload(v));
                });
            bool over = false;
            {
                std::lock_guard lock(proc->mutex_);
                over = proc->over_;
                if (!over) proc->lines_ = lines;
            }
            if (over) lines->close();
        }
    } catch (...) {
        uncount();
        throw;
    }
    return proc;
}

std::shared_ptr<E2bProcess> E2bProcessTable::find(const std::string& sandboxId, std::uint32_t pid,
                                                  const std::string& tag) {
    std::lock_guard lock(mutex_);
    auto it = bySandbox_.find(sandboxId);
    if (it == bySandbox_.end()) return nullptr;
    if (pid) {
        auto p = it->second.find(pid);
        return p == it->second.end() ? nullptr : p->second;
    }
    for (const auto& [_, p] : it->second)
        if (p->spec().tag && *p->spec().tag == tag) return p;
    return nullptr;
}

std::vector<std::shared_ptr<E2bProcess>> E2bProcessTable::list(const std::string& sandboxId) {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<E2bProcess>> out;
    if (auto it = bySandbox_.find(sandboxId); it != bySandbox_.end())
        for (const auto& [_, p] : it->second) out.push_back(p);
    return out;
}

void E2bProcessTable::forget(const std::string& sandboxId, std::uint32_t pid) {
    std::lock_guard lock(mutex_);
    auto it = bySandbox_.find(sandboxId);
    if (it == bySandbox_.end()) return;
    it->second.erase(pid);
    if (it->second.empty()) bySandbox_.erase(it);
}

}  // namespace airlock::e2b
