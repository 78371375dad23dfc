#include "templates/TemplateBuilder.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <fstream>

#include "agentclient/AgentConnection.hpp"
#include "core/ShellQuote.hpp"
#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "core/Sha256.hpp"
#include "templates/BuildContext.hpp"
#include "templates/DockerIgnore.hpp"
#include "templates/TemplateSpecJson.hpp"

namespace airlock::templates {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kBuildMetadata = "airlock.template_build";

std::string absoluteIn(const std::string& workdir, const std::string& path) {
    if (!path.empty() && path[0] == '/') return path;
    std::string base = workdir.empty() ? "/" : workdir;
    if (base.back() != '/') base += '/';
    return base + path;
}

std::int64_t unixNow() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// What a build carries from step to step besides the disk.
struct StepState {
    std::vector<std::pair<std::string, std::string>> env;
    std::string user;     // "": root
    std::string workdir;  // "": /

    std::map<std::string, std::string> envMap() const {
        std::map<std::string, std::string> m;
        for (const auto& [k, v] : env) m[k] = v;
        return m;
    }
    void setEnv(const std::string& k, const std::string& v) {
        for (auto& [ek, ev] : env)
            if (ek == k) {
                ev = v;
                return;
            }
        env.emplace_back(k, v);
    }
};

// A package step's command (its packages were checked to be names only).
std::string packageCommand(const PackagesStep& step) {
    std::string names;
    for (const auto& n : step.packages) names += " " + n;
    switch (step.manager) {
        case PackageManager::apt: return "apt-get update && apt-get install -y --no-install-recommends" + names;
        case PackageManager::npm: return "npm install -g --no-audit --no-fund" + names;
        case PackageManager::pip: return "pip install --break-system-packages" + names;
    }
    return "";
}

struct StepFailed {
    std::string message;
    std::optional<int> exitCode;
};

void uploadFile(GuestFiles& files, const std::string& tenant, const std::string& sandbox,
                const std::string& guestPath, const std::string& hostPath,
                Clock::time_point deadline) {
    auto stream = files.openUpload(tenant, sandbox, guestPath, 0600, nullptr, "", {}, true);
    std::ifstream in(hostPath, std::ios::binary);
    if (!in) throw Error(ErrorCode::internal, "cannot read " + hostPath);
    std::string buf(256 * 1024, '\0');
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        auto n = static_cast<std::size_t>(in.gcount());
        if (n) stream->write(0, std::string_view(buf.data(), n), deadline);
    }
    stream->closeWrite();
    while (auto e = stream->next(deadline)) {
        if (e->kind == AgentStream::Event::Kind::reset) {
            auto info = protocol::parseResetInfo(e->payload);
            throw agentError(info.code, info.message);
        }
        if (e->kind == AgentStream::Event::Kind::close) return;
    }
    throw Error(ErrorCode::agent_timeout, "the guest did not confirm the copy's upload");
}

}  // namespace

protocol::ExecResult TemplateBuilder::runStreamed(const std::string& tenant, const std::string& sandbox,
                                                  const ExecOptions& options,
                                                  const std::shared_ptr<BuildLog>& log,
                                                  Clock::time_point deadline) {
    // The command's output reaches the log line by line as it runs (masked
    // by the stream); the window it takes is given back as it is logged.
    struct Live {
        std::mutex mutex;
        std::condition_variable done;
        std::shared_ptr<AgentStream> stream;
        std::size_t owed = 0;  // consumed before the stream was known
        bool ended = false;
        protocol::ExecResult result;
        std::string partial[3];
    };
    auto live = std::make_shared<Live>();
    // Whole lines as they complete; a partial one at the end, or once it
    // outgrows a log line.
    auto emit = [log](std::uint8_t channel, std::string& partial, bool all) {
        const char* level = channel == 2 ? "warn" : "info";
        auto nl = partial.rfind('\n');
        if (nl != std::string::npos) {
            log->appendOutput(level, partial.substr(0, nl + 1));
            partial.erase(0, nl + 1);
        }
        if ((all && !partial.empty()) || partial.size() > BuildLog::kMaxLine) {
            log->appendOutput(level, partial);
            partial.clear();
        }
    };
    auto handler = [live, emit](AgentStream::Event&& e) {
        using Kind = AgentStream::Event::Kind;
        if (e.kind == Kind::data) {
            auto& partial = live->partial[e.channel == 2 ? 2 : 1];  // the agent's thread only
            partial += e.payload;
            emit(e.channel, partial, false);
            std::shared_ptr<AgentStream> stream;
            {
                std::lock_guard lock(live->mutex);
                stream = live->stream;
                if (!stream) live->owed += e.payload.size();
            }
            if (stream) stream->grant(e.payload.size());
            return;
        }
        if (e.kind != Kind::close && e.kind != Kind::reset) return;
        emit(1, live->partial[1], true);
        emit(2, live->partial[2], true);
        protocol::ExecResult r;
        try {
            if (e.kind == Kind::reset) {
                r.error = "the command's stream ended: " + protocol::parseResetInfo(e.payload).message;
            } else {
                r = protocol::parseExecResult(e.payload);
            }
        } catch (const std::exception& bad) {
            r.exit_code = -1;
            r.error = std::string("the guest's answer was malformed: ") + bad.what();
        }
        {
            std::lock_guard lock(live->mutex);
            live->result = r;
            live->ended = true;
        }
        live->done.notify_all();
    };
    TerminalOptions terminal;
    terminal.stdinStream = false;
    auto opened = p_.commands.openStreamed(tenant, sandbox, options, terminal, handler);
    if (!opened.stream) throw StepFailed{"the command needs approval; a build runs unattended: allow it in the build's policy", std::nullopt};
    std::size_t owed = 0;
    {
        std::lock_guard lock(live->mutex);
        live->stream = opened.stream;
        owed = live->owed;
        live->owed = 0;
    }
    if (owed) opened.stream->grant(owed);
    std::unique_lock lock(live->mutex);
    if (!live->done.wait_until(lock, deadline, [&] { return live->ended; })) {
        lock.unlock();
        opened.stream->reset("cancelled", "the template build's timeout passed");
        throw StepFailed{"the command passed the build's timeout", std::nullopt};
    }
    return live->result;
}

TemplateBuilder::TemplateBuilder(Parts parts, TemplateBuilderConfig config)
    : p_(std::move(parts)), config_(std::move(config)) {
    fs::create_directories(config_.dataDir);
    for (unsigned i = 0; i < std::max(1u, config_.workers); ++i)
        threads_.emplace_back([this] { work(); });
}

TemplateBuilder::~TemplateBuilder() { shutdown(); }

void TemplateBuilder::shutdown() {
    std::map<std::string, std::pair<std::string, std::string>> inFlight;
    {
        std::lock_guard lock(mutex_);
        if (stopping_ && threads_.empty()) return;
        stopping_ = true;
        inFlight = sandboxes_;
    }
    wake_.notify_all();
    // A build in flight ends now, not with its step: its sandbox goes (a
    // restart would fail the build anyway).
    for (const auto& [build, where] : inFlight) {
        try {
            p_.sandboxes.destroy(where.first, where.second, "airlockd is stopping");
        } catch (const std::exception& e) {
            logWarn("templates", "build " + build + ": " + e.what());
        }
    }
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
}

std::string TemplateBuilder::logPath(const std::string& buildId) const {
    return config_.dataDir + "/" + buildId + ".log";
}

std::string TemplateBuilder::usableTemplates(const std::string& tenant) {
    std::string names;
    for (const auto& t : p_.catalog.list()) names += (names.empty() ? "" : ", ") + t.name;
    for (const auto& t : p_.store.listTemplates(tenant))
        names += ", " + t.name + (t.tag == "latest" ? "" : ":" + t.tag);
    return names;
}

std::optional<UserTemplateRecord> TemplateBuilder::lookup(const std::string& tenant,
                                                          const std::string& ref) {
    TemplateRef r;
    try {
        r = parseTemplateRef(ref);
    } catch (const Error&) {
        return std::nullopt;
    }
    return p_.store.findTemplate(tenant, r.name, r.tag);
}

TemplateBuildRecord TemplateBuilder::submit(const std::string& tenant, TemplateSpec spec,
                                            const std::string& contextTar,
                                            const std::string& buildId) {
    auto job = std::make_unique<Job>();
    if (p_.catalog.find(spec.name))
        throw Error(ErrorCode::conflict, "'" + spec.name + "' is one of the server's own templates: pick another name");
    bool needsContext = false;
    for (const auto& s : spec.steps) needsContext |= std::holds_alternative<CopyStep>(s);
    if (needsContext && contextTar.empty())
        throw Error(ErrorCode::bad_request,
                    "a copy step needs a build context: send a 'context' part (a tar)");
    // `from` must name something now: a build that could never start is refused at once.
    if (!p_.catalog.find(spec.from) && !lookup(tenant, spec.from)) {
        auto snap = isValidId(spec.from, "snap-") ? p_.snapshotRecords.find(spec.from) : std::nullopt;
        if (!snap || snap->tenant != tenant || snap->state != SnapshotState::ready ||
            isBuildKind(snap->kind)) {
            throw Error(ErrorCode::not_found, "no template or snapshot named '" + spec.from +
                                                  "' to build from; there are: " + usableTemplates(tenant));
        }
    }
    p_.access.requireFreeSpace("template build", 0);
    job->record.id = buildId.empty() ? newId("bld-") : buildId;
    job->record.tenant = tenant;
    job->record.name = spec.name;
    job->record.tag = spec.tag;
    job->record.state = BuildState::queued;
    job->record.spec = specJson(spec);
    job->record.createdAt = nowTimestamp();
    if (!contextTar.empty()) {
        job->contextTar = config_.dataDir + "/" + job->record.id + ".context.tar";
        fs::rename(contextTar, job->contextTar);
        try {
            BuildContext::open(job->contextTar);  // a malformed context is refused now
        } catch (...) {
            std::error_code ec;
            fs::remove(job->contextTar, ec);
            throw;
        }
    }
    job->spec = std::move(spec);
    job->log = std::make_shared<BuildLog>(logPath(job->record.id));
    auto record = job->record;
    {
        std::lock_guard lock(mutex_);
        std::size_t mine = 0;
        for (const auto& [id, where] : owners_) mine += where == tenant;
        if (mine >= kMaxBuildsPerTenant) {
            std::error_code ec;
            if (!job->contextTar.empty()) fs::remove(job->contextTar, ec);
            throw Error(ErrorCode::too_many_requests,
                        "the tenant has " + std::to_string(mine) + " template builds queued or running; at most " +
                            std::to_string(kMaxBuildsPerTenant));
        }
        if (stopping_) {
            std::error_code ec;
            if (!job->contextTar.empty()) fs::remove(job->contextTar, ec);
            throw Error(ErrorCode::unavailable, "the server is shutting down");
        }
        p_.store.putBuild(job->record);
        owners_[record.id] = tenant;
        active_[record.id] = job->log;
        queue_.push_back(std::move(job));
    }
    wake_.notify_one();
    return record;
}

void TemplateBuilder::work() {
    for (;;) {
        std::unique_ptr<Job> job;
        {
            std::unique_lock lock(mutex_);
            // The next job: one whose name has no build running (builds of a
            // name run one at a time), preferring a tenant with none running
            // (one tenant's long builds never hold every worker for others).
            auto next = [this]() -> std::deque<std::unique_ptr<Job>>::iterator {
                auto fallback = queue_.end();
                for (auto it = queue_.begin(); it != queue_.end(); ++it) {
                    if (busyNames_.count((*it)->record.tenant + "/" + (*it)->record.name)) continue;
                    if (!running_.count((*it)->record.tenant)) return it;
                    if (fallback == queue_.end()) fallback = it;
                }
                return fallback;
            };
            wake_.wait(lock, [&] { return stopping_ || next() != queue_.end(); });
            if (stopping_) return;
            auto it = next();
            job = std::move(*it);
            queue_.erase(it);
            busyNames_.insert(job->record.tenant + "/" + job->record.name);
            ++running_[job->record.tenant];
        }
        try {
            run(*job);
        } catch (const std::exception& e) {
            // What run() could not place (a bad context, a store error): the
            // build ends failed, with why, never stays "building".
            logError("templates", "build " + job->record.id + ": " + e.what());
            std::optional<std::pair<std::string, std::string>> left;
            {
                std::lock_guard lock(mutex_);
                if (auto it = sandboxes_.find(job->record.id); it != sandboxes_.end()) {
                    left = it->second;
                    sandboxes_.erase(it);
                }
            }
            try {
                if (left) p_.sandboxes.destroy(left->first, left->second, "its template build failed");
            } catch (const std::exception&) {
                // gone already
            }
            job->record.state = BuildState::failed;
            job->record.error = e.what();
            job->record.finishedAt = nowTimestamp();
            job->log->append("error", std::string("the build failed: ") + e.what());
            try {
                p_.store.putBuild(job->record);
            } catch (const std::exception& again) {
                logError("templates", "build " + job->record.id + " not recorded: " + again.what());
            }
        }
        {
            std::lock_guard lock(mutex_);
            busyNames_.erase(job->record.tenant + "/" + job->record.name);
            running_[job->record.tenant]--;
            if (running_[job->record.tenant] == 0) running_.erase(job->record.tenant);
        }
        wake_.notify_all();
        job->log->close();
        std::error_code ec;
        if (!job->contextTar.empty()) fs::remove(job->contextTar, ec);
        {
            std::lock_guard lock(mutex_);
            active_.erase(job->record.id);
            owners_.erase(job->record.id);
        }
        try {
            evictLayers();
            // A tenant's older builds (records and logs) go past its newest kKeptBuilds.
            std::set<std::string> live;
            {
                std::lock_guard lock(mutex_);
                for (const auto& [id, owner] : owners_) live.insert(id);
            }
            for (const auto& id : p_.store.buildsPast(job->record.tenant, kKeptBuilds)) {
                if (live.count(id)) continue;
                p_.store.removeBuild(id);
                std::error_code ec;
                fs::remove(logPath(id), ec);
            }
        } catch (const std::exception& e) {
            logWarn("templates", std::string("layer eviction: ") + e.what());
        }
    }
}

void TemplateBuilder::run(Job& job) {
    auto& rec = job.record;
    auto& log = *job.log;
    const auto& spec = job.spec;
    const std::string tenant = rec.tenant;
    auto deadline = Clock::now() + std::chrono::seconds(spec.timeoutS);
    auto remainingS = [&]() -> unsigned {
        auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count();
        if (left <= 0) throw StepFailed{"the build passed its timeout (" + std::to_string(spec.timeoutS) + " s)", std::nullopt};
        return static_cast<unsigned>(std::min<long long>(left, kMaxExecTimeoutS));
    };
    rec.state = BuildState::building;
    p_.store.putBuild(rec);
    log.append("info", "build " + rec.id + " of " + rec.name + ":" + rec.tag + " from " + spec.from);

    std::optional<BuildContext> context;
    std::optional<DockerIgnore> ignore;
    std::string ignoreDigest;  // what leaves files out of a copy keys it as well
    if (!job.contextTar.empty()) {
        context = BuildContext::open(job.contextTar);
        // The context's .dockerignore: what a copy leaves out (as Docker's build does).
        for (const auto& e : context->entries())
            if (e.path == ".dockerignore" && e.type == '0' && e.size <= (1u << 20)) {
                std::ifstream in(job.contextTar, std::ios::binary);
                std::string text(e.size, '\0');
                in.seekg(static_cast<std::streamoff>(e.dataOffset));
                in.read(text.data(), static_cast<std::streamsize>(text.size()));
                ignore.emplace(text);
                ignoreDigest = sha256Hex(text);
            }
    }

    // The base and every step's layer key.
    std::string baseKey;
    CreateSandboxRequest req;
    std::optional<UserTemplateRecord> fromTemplate;
    if (auto t = p_.catalog.find(spec.from)) {
        baseKey = "template:" + t->name + "@" + t->digest;
        req.templateName = t->name;
    } else if ((fromTemplate = lookup(tenant, spec.from))) {
        baseKey = "built:" + fromTemplate->digest;
        req.snapshot = fromTemplate->snapshotId;
    } else {
        baseKey = "snapshot:" + spec.from;
        req.snapshot = spec.from;
    }
    baseKey += "|" + std::to_string(spec.vcpus.value_or(0)) + "|" +
               std::to_string(spec.memoryMib.value_or(0)) + "|" + std::to_string(spec.diskGib.value_or(0)) +
               "|" + json(spec.sandbox).dump();
    std::vector<std::string> keys;
    std::string key = sha256Hex(baseKey);
    for (const auto& step : spec.steps) {
        std::string content = stepJson(step).dump();
        if (const auto* c = std::get_if<CopyStep>(&step))
            content += "\n" + context->digestOf(c->src) + "\n" + ignoreDigest;
        key = sha256Hex(key + "\n" + content);
        keys.push_back(key);
    }
    // The longest prefix whose last disk-changing step has a layer.
    std::size_t resumeAfter = 0;  // steps [0, resumeAfter) are cached
    std::size_t layerStep = 0;    // the step whose layer the build starts from (1-based)
    std::string resumeSnapshot;
    for (std::size_t i = spec.noCache ? 0 : spec.steps.size(); i-- > 0;) {
        if (!changesDisk(spec.steps[i])) continue;
        auto layer = p_.store.findLayer(tenant, keys[i]);
        if (!layer) continue;
        auto snap = p_.snapshotRecords.find(layer->snapshotId);
        if (!snap || snap->state != SnapshotState::ready) {
            p_.store.removeLayer(tenant, keys[i]);
            continue;
        }
        resumeAfter = i + 1;
        layerStep = i + 1;
        resumeSnapshot = snap->id;
        layer->lastUsed = unixNow();
        p_.store.putLayer(*layer);
        break;
    }
    // Env and user steps right after it are state only: cached as well.
    if (!resumeSnapshot.empty())
        while (resumeAfter < spec.steps.size() && (std::holds_alternative<EnvStep>(spec.steps[resumeAfter]) ||
                                                   std::holds_alternative<UserStep>(spec.steps[resumeAfter])))
            ++resumeAfter;
    StepState state;
    if (fromTemplate)
        for (const auto& [k, v] : fromTemplate->env.items())
            if (v.is_string()) state.setEnv(k, v.get<std::string>());
    for (std::size_t i = 0; i < resumeAfter; ++i) {
        const auto& step = spec.steps[i];
        if (const auto* e = std::get_if<EnvStep>(&step))
            for (const auto& [k, v] : e->vars) state.setEnv(k, v);
        if (const auto* w = std::get_if<WorkdirStep>(&step)) state.workdir = absoluteIn(state.workdir, w->path);
        if (const auto* u = std::get_if<UserStep>(&step)) state.user = u->user;
        log.append("info", "step " + std::to_string(i + 1) + "/" + std::to_string(spec.steps.size()) +
                               ": " + stepText(step) + " (cached)");
    }
    rec.stepsCached = resumeAfter;

    if (!resumeSnapshot.empty()) {
        req = CreateSandboxRequest{};
        req.snapshot = resumeSnapshot;
    }
    req.fromBuildSnapshot = true;
    if (req.snapshot.empty()) {
        req.vcpus = spec.vcpus;
        req.memoryMib = spec.memoryMib;
        req.diskGib = spec.diskGib;
    }
    req.timeoutS = static_cast<std::int64_t>(spec.timeoutS) + 600;
    req.metadata[kBuildMetadata] = rec.id;
    if (p_.sandboxSettings) p_.sandboxSettings(spec.sandbox, req);
    // The package steps the builder runs are the recipe's own: the command
    // policy lets exactly them through (the tenant's deny rules still win);
    // the package proxy still judges every package under the build's rules.
    for (const auto& step : spec.steps)
        if (const auto* pk = std::get_if<PackagesStep>(&step)) {
            // The policy judges each part of a command on its own.
            std::string cmd = packageCommand(*pk);
            for (std::size_t at = 0; at <= cmd.size();) {
                auto end = cmd.find(" && ", at);
                req.policy.allow.push_back(cmd.substr(at, end == std::string::npos ? std::string::npos : end - at));
                if (end == std::string::npos) break;
                at = end + 4;
            }
        }

    std::string sandbox;
    std::string templateSnapshot;
    Failure failure;
    bool failed = false;
    auto exec = [&](const std::string& shell, const std::string& user, const std::string& cwd,
                    const std::map<std::string, std::string>& env) {
        ExecOptions o;
        o.shell = shell;
        o.user = user.empty() ? "root" : user;
        o.cwd = cwd.empty() ? "/" : cwd;
        o.env = env;
        o.timeoutS = remainingS();
        auto result = runStreamed(tenant, sandbox, o, job.log, Clock::now() + std::chrono::seconds(o.timeoutS + 30));
        if (result.timed_out)
            throw StepFailed{"the command passed the build's timeout", result.exit_code};
        if (!result.error.empty()) throw StepFailed{result.error, std::nullopt};
        if (result.exit_code != 0)
            throw StepFailed{"the command exited with " + std::to_string(result.exit_code), result.exit_code};
    };
    std::size_t current = 0;
    bool inStart = false;
    try {
        log.append("info", resumeSnapshot.empty() ? "starting the build sandbox"
                                                  : "starting the build sandbox from the cached layer of step " +
                                                        std::to_string(layerStep));
        auto r = p_.sandboxes.create(tenant, req);
        sandbox = r.id;
        {
            std::lock_guard lock(mutex_);
            sandboxes_[rec.id] = {tenant, sandbox};
            if (stopping_) throw Error(ErrorCode::unavailable, "airlockd is stopping");
        }
        rec.sandboxId = sandbox;
        p_.store.putBuild(rec);
        log.append("info", "build sandbox " + sandbox + " is running");

        for (current = resumeAfter; current < spec.steps.size(); ++current) {
            const auto& step = spec.steps[current];
            log.append("info", "step " + std::to_string(current + 1) + "/" +
                                   std::to_string(spec.steps.size()) + ": " + stepText(step));
            if (const auto* e = std::get_if<EnvStep>(&step)) {
                for (const auto& [k, v] : e->vars) state.setEnv(k, v);
                continue;
            }
            if (const auto* u = std::get_if<UserStep>(&step)) {
                state.user = u->user;
                continue;
            }
            if (const auto* w = std::get_if<WorkdirStep>(&step)) {
                state.workdir = absoluteIn(state.workdir, w->path);
                // The directory exists from here on, its user's when this made it.
                std::string made = "[ -d " + shellQuote(state.workdir) + " ] || { mkdir -p " + shellQuote(state.workdir);
                if (!state.user.empty() && state.user != "root") made += " && chown " + shellQuote(state.user) + " " + shellQuote(state.workdir);
                exec(made + "; }", "root", "/", {});
                continue;
            }
            if (const auto* s = std::get_if<RunStep>(&step)) {
                auto env = state.envMap();
                for (const auto& [k, v] : s->env) env[k] = v;
                exec(s->shell, s->user.value_or(state.user),
                     s->cwd ? absoluteIn(state.workdir, *s->cwd) : state.workdir, env);
            } else if (const auto* c = std::get_if<CopyStep>(&step)) {
                auto selection = config_.dataDir + "/" + rec.id + ".copy.tar";
                auto entries = context->select(c->src);  // not_found/unprocessable: says which
                bool singleFile = entries.size() == 1 && entries[0].type == '0' &&
                                  !c->src.empty() && c->src.back() != '/';
                std::string guestTar = "/tmp/.airlock-copy-" + std::to_string(current) + ".tar";
                struct Removed {
                    std::string path;
                    ~Removed() {
                        std::error_code ec;
                        fs::remove(path, ec);
                    }
                } selectionFile{selection};
                std::size_t written = context->writeSelection(
                    c->src, selection, [&](std::string_view path) { return ignore && ignore->ignored(path); });
                if (written == 0)
                    throw StepFailed{"nothing to copy: '" + c->src + "' holds only what .dockerignore leaves out", std::nullopt};
                uploadFile(p_.files, tenant, sandbox, guestTar, selection, Clock::now() + std::chrono::seconds(remainingS()));
                std::string dest = absoluteIn(state.workdir, c->dest);
                // Unpacked apart, owner and mode set there (every name quoted
                // by the shell, none expanded), then moved into place.
                std::string sh = "set -e; T=" + shellQuote(guestTar) + "; X=$(mktemp -d); tar -xof \"$T\" -C \"$X\"; rm -f \"$T\"; ";
                if (c->owner) sh += "chown -R " + shellQuote(*c->owner) + " \"$X\"/.; ";
                if (c->mode) sh += "find \"$X\" -mindepth 1 -exec chmod " + shellQuote(*c->mode) + " {} +; ";
                if (singleFile && dest.back() != '/') {
                    auto base = fs::path(entries[0].path).filename().string();
                    sh += "mkdir -p \"$(dirname " + shellQuote(dest) + ")\"; mv -f \"$X\"/" + shellQuote(base) + " " + shellQuote(dest) + "; ";
                } else {
                    // Entry by entry (hidden ones too): the destination directory
                    // itself keeps its owner and mode, as with Docker's COPY.
                    sh += "mkdir -p " + shellQuote(dest) + "; for f in \"$X\"/* \"$X\"/.[!.]* \"$X\"/..?*; do "
                          "if [ -e \"$f\" ] || [ -L \"$f\" ]; then cp -a \"$f\" " + shellQuote(dest) + "/; fi; done; ";
                }
                sh += "rm -rf \"$X\"";
                exec(sh, "root", "/", {});
            } else if (const auto* pk = std::get_if<PackagesStep>(&step)) {
                auto env = state.envMap();
                env["DEBIAN_FRONTEND"] = "noninteractive";
                exec(packageCommand(*pk), "root", state.workdir, env);
            } else if (const auto* g = std::get_if<GitStep>(&step)) {
                std::string dest = absoluteIn(state.workdir, g->dest);
                exec("git clone -- " + shellQuote(g->repo) + " " + shellQuote(dest) + " && cd " + shellQuote(dest) +
                         " && git checkout " + shellQuote(g->ref) + " --",
                     state.user, "/", state.envMap());
            }
            // The disk after this step: a cached layer for the next build.
            auto layer = p_.snapshotting.buildSnapshot(tenant, sandbox, "layer");
            // A parallel build may have cached this step first: that one stays
            // the cached layer; this one is only this build's chain (recover()
            // removes it once nothing reads it).
            auto cached = p_.store.findLayer(tenant, keys[current]);
            if (!cached || spec.noCache) {
                p_.store.putLayer(TemplateLayerRecord{tenant, keys[current], layer.id, layer.sizeBytes, unixNow()});
                // The layer it replaces: kept while a template or a sandbox reads it.
                if (cached && cached->snapshotId != layer.id) p_.snapshotting.deleteBuildSnapshot(cached->snapshotId);
            }
        }
        current = spec.steps.size();

        if (spec.start) {
            inStart = true;
            const auto& start = *spec.start;
            log.append("info", "start: " + start.cmd);
            std::string cmd = start.cmd;
            if (start.ready.kind == ReadyCheck::Kind::log)
                cmd = "exec > /tmp/.airlock-start.log 2>&1; " + cmd;
            ExecOptions o;
            o.argv = {"/bin/sh", "-c", cmd};
            o.user = state.user.empty() ? "root" : state.user;
            o.cwd = state.workdir.empty() ? "/" : state.workdir;
            o.env = state.envMap();
            o.timeoutS = kMaxExecTimeoutS;
            p_.processes.start(tenant, sandbox, o, false);
            const auto& ready = start.ready;
            std::string check;
            switch (ready.kind) {
                case ReadyCheck::Kind::none: break;
                case ReadyCheck::Kind::command: check = ready.command; break;
                case ReadyCheck::Kind::port:
                    check = "(ss -Htln 2>/dev/null || netstat -tln 2>/dev/null) | grep -Eq '[:.]" +
                            std::to_string(ready.port) + "[[:space:]]'";
                    break;
                case ReadyCheck::Kind::file: check = "test -e " + shellQuote(ready.path); break;
                case ReadyCheck::Kind::log: check = "grep -qF -- " + shellQuote(ready.pattern) + " /tmp/.airlock-start.log"; break;
                case ReadyCheck::Kind::delay: check = "sleep " + std::to_string(ready.delayS); break;
            }
            if (!check.empty()) {
                log.append("info", "waiting up to " + std::to_string(ready.timeoutS) + " s for the start command to be ready");
                std::string loop = ready.kind == ReadyCheck::Kind::delay
                                       ? check
                                       : "i=0; while [ $i -lt " + std::to_string(ready.timeoutS * 4) + " ]; do if " + check +
                                             "; then exit 0; fi; sleep 0.25; i=$((i+1)); done; echo 'the start command was not ready within " +
                                             std::to_string(ready.timeoutS) + " s' >&2; exit 1";
                exec(loop, state.user, state.workdir, state.envMap());
            }
            log.append("info", "the start command is ready");
        }
        log.append("info", "taking the template's snapshot");
        auto snap = p_.snapshotting.buildSnapshot(tenant, sandbox, "template");
        templateSnapshot = snap.id;
        // Its identity: the base template, every disk layer of its chain and
        // its memory state, each as its manifest hashed it.
        json identity{{"base", {{"name", snap.templateName}, {"digest", snap.templateDigest}}},
                      {"layers", json::array()}};
        for (const auto& layerId : snap.layers) {
            auto layer = layerId == snap.id ? std::optional(snap) : p_.snapshotRecords.find(layerId);
            auto m = layer ? json::parse(layer->manifestJson, nullptr, false) : json();
            if (!m.is_object() || !m.contains("files"))
                throw Error(ErrorCode::internal, "layer " + layerId + " of the template has no manifest");
            for (const auto& f : m["files"])
                if (f.value("name", "") == SnapshotLibrary::kLayerFile)
                    identity["layers"].push_back({{"layer", layerId}, {"sha256", f.value("sha256", "")}});
        }
        for (const auto& f : json::parse(snap.manifestJson, nullptr, false).value("files", json::array()))
            if (f.value("name", "") == SnapshotLibrary::kMemoryFile) identity["memory"] = f.value("sha256", "");
        std::string digest = "sha256:" + sha256Hex(identity.dump());
        json env = json::object();
        for (const auto& [k, v] : state.env) env[k] = v;
        p_.access.record(sandbox, tenant, "template.built",
                         {{"build", rec.id}, {"template", rec.name + ":" + rec.tag},
                          {"digest", digest}, {"snapshot", snap.id}, {"identity", identity},
                          {"steps_cached", rec.stepsCached}},
                         nullptr);
        auto evidence = p_.evidence.seal(tenant, sandbox, "manual");
        rec.evidenceId = evidence.id;
        log.append("info", "sealed the build's evidence bundle " + evidence.id);

        UserTemplateRecord t;
        t.tenant = tenant;
        t.name = rec.name;
        t.tag = rec.tag;
        t.snapshotId = snap.id;
        t.buildId = rec.id;
        t.evidenceId = evidence.id;
        t.digest = digest;
        t.from = spec.from;
        t.env = env;
        t.startCmd = spec.start ? spec.start->cmd : "";
        t.user = state.user;
        t.workdir = state.workdir;
        t.vcpus = snap.vcpus;
        t.memoryMib = snap.memoryMib;
        t.labels = spec.labels;
        t.exposedPorts = spec.exposedPorts;
        t.createdAt = nowTimestamp();
        auto before = p_.store.findTemplate(tenant, t.name, t.tag);
        p_.store.putTemplate(t);
        templateSnapshot.clear();  // the template's now
        // The older build's snapshot goes; sandboxes on it keep its layers.
        if (before && before->snapshotId != t.snapshotId) p_.snapshotting.deleteBuildSnapshot(before->snapshotId);
        rec.state = BuildState::ready;
        log.append("info", "template " + t.name + ":" + t.tag + " is ready (" + digest + ")");
    } catch (const StepFailed& f) {
        failed = true;
        failure = Failure{current, "", f.exitCode, f.message};
    } catch (const std::exception& e) {
        failed = true;
        failure = Failure{current, "", std::nullopt, e.what()};
    }
    if (failed) {
        rec.state = BuildState::failed;
        if (inStart) {
            failure.step.reset();
            failure.command = spec.start->cmd;
            rec.error = "the start command: " + failure.message;
        } else if (failure.step && *failure.step < spec.steps.size()) {
            failure.command = stepText(spec.steps[*failure.step]);
            rec.error = "step " + std::to_string(*failure.step + 1) + " (" + failure.command + "): " + failure.message;
        } else {
            failure.step.reset();
            rec.error = failure.message;
        }
        rec.failedStep = failure.step;
        rec.failedCommand = failure.command;
        rec.exitCode = failure.exitCode;
        log.append("error", "the build failed: " + rec.error);
        if (!templateSnapshot.empty()) p_.snapshotting.deleteBuildSnapshot(templateSnapshot);
    }
    if (!sandbox.empty()) {
        {
            std::lock_guard lock(mutex_);
            sandboxes_.erase(rec.id);
        }
        try {
            p_.sandboxes.destroy(tenant, sandbox, "its template build ended");
        } catch (const std::exception& e) {
            logWarn("templates", "build sandbox " + sandbox + " of " + rec.id + ": " + e.what());
        }
    }
    rec.finishedAt = nowTimestamp();
    p_.store.putBuild(rec);
}

std::shared_ptr<BuildLog> TemplateBuilder::activeLog(const std::string& buildId) {
    std::lock_guard lock(mutex_);
    auto it = active_.find(buildId);
    return it == active_.end() ? nullptr : it->second;
}

TemplateBuildRecord TemplateBuilder::owned(const std::string& tenant, const std::string& name,
                                           const std::string& buildId) {
    auto b = isValidId(buildId, "bld-") ? p_.store.findBuild(buildId) : std::nullopt;
    if (!b || b->tenant != tenant || b->name != name)
        throw Error(ErrorCode::not_found, "no build " + buildId + " of template " + name);
    return *b;
}

TemplateBuildRecord TemplateBuilder::build(const std::string& tenant, const std::string& name,
                                           const std::string& buildId) {
    return owned(tenant, name, buildId);
}

std::vector<BuildLog::Line> TemplateBuilder::logLines(const std::string& tenant,
                                                      const std::string& name,
                                                      const std::string& buildId,
                                                      std::size_t from) {
    owned(tenant, name, buildId);
    if (auto log = activeLog(buildId)) return log->lines(from);
    auto all = BuildLog::readFile(logPath(buildId));
    if (from >= all.size()) return {};
    return {all.begin() + static_cast<std::ptrdiff_t>(from), all.end()};
}

std::uint64_t TemplateBuilder::followLog(const std::string& tenant, const std::string& name,
                                         const std::string& buildId, BuildLog::Follower follower) {
    owned(tenant, name, buildId);
    if (auto log = activeLog(buildId)) return log->follow(std::move(follower));
    for (const auto& l : BuildLog::readFile(logPath(buildId)))
        if (!follower.line(l)) break;
    follower.end();
    return 0;
}

void TemplateBuilder::unfollowLog(const std::string& buildId, std::uint64_t handle) {
    if (auto log = activeLog(buildId)) log->unfollow(handle);
}

std::vector<UserTemplateRecord> TemplateBuilder::list(const std::string& tenant) {
    return p_.store.listTemplates(tenant);
}

UserTemplateRecord TemplateBuilder::get(const std::string& tenant, const std::string& ref) {
    auto r = parseTemplateRef(ref);
    auto t = p_.store.findTemplate(tenant, r.name, r.tag);
    if (!t) throw Error(ErrorCode::not_found, "no template named '" + ref + "'");
    return *t;
}

void TemplateBuilder::remove(const std::string& tenant, const std::string& ref) {
    auto t = get(tenant, ref);
    p_.store.removeTemplate(tenant, t.name, t.tag);
    p_.snapshotting.deleteBuildSnapshot(t.snapshotId);
}

void TemplateBuilder::recover() {
    for (auto b : p_.store.unfinishedBuilds()) {
        b.state = BuildState::failed;
        b.error = "airlockd restarted during the build";
        b.finishedAt = nowTimestamp();
        if (!b.sandboxId.empty()) {
            try {
                p_.sandboxes.destroy(b.tenant, b.sandboxId, "its template build was interrupted");
            } catch (const std::exception&) {
                // gone already
            }
        }
        p_.store.putBuild(b);
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(config_.dataDir, ec))
        if (e.path().extension() == ".tar") fs::remove(e.path(), ec);
    // Build snapshots nothing names any more (a crash between a snapshot and
    // its record, a layer a parallel build cached first): what a template,
    // a cached layer or a live sandbox reads stays.
    auto kept = layersInUse();
    for (const auto& t : p_.store.allTemplates()) kept.insert(t.snapshotId);
    for (const auto& l : p_.store.listLayers()) {
        kept.insert(l.snapshotId);
        if (auto s = p_.snapshotRecords.find(l.snapshotId)) kept.insert(s->layers.begin(), s->layers.end());
    }
    for (const auto& s : p_.snapshotRecords.list(TenantScope::all()))
        if (isBuildKind(s.kind) && s.state == SnapshotState::ready && !kept.count(s.id)) {
            logInfo("templates", "removing build snapshot " + s.id + ": nothing names it");
            p_.snapshotting.deleteBuildSnapshot(s.id);
        }
}

std::set<std::string> TemplateBuilder::layersInUse() {
    std::set<std::string> used;
    for (const auto& t : p_.store.allTemplates())
        if (auto s = p_.snapshotRecords.find(t.snapshotId)) used.insert(s->layers.begin(), s->layers.end());
    for (const auto& r : p_.sandboxes.list(TenantScope::all())) used.insert(r.layers.begin(), r.layers.end());
    return used;
}

void TemplateBuilder::evictLayers() {
    std::lock_guard lock(evictMutex_);
    auto layers = p_.store.listLayers();  // oldest use first
    std::int64_t total = 0;
    for (const auto& l : layers) total += l.sizeBytes;
    if (total <= static_cast<std::int64_t>(config_.layerCacheBytes)) return;
    auto used = layersInUse();
    std::map<std::string, std::vector<std::string>> chainOf;  // layer snapshot -> its chain
    for (const auto& l : layers)
        if (auto s = p_.snapshotRecords.find(l.snapshotId)) chainOf[l.snapshotId] = s->layers;
    std::set<std::string> gone;
    for (const auto& l : layers) {
        if (total <= static_cast<std::int64_t>(config_.layerCacheBytes)) break;
        if (gone.count(l.snapshotId)) continue;
        // A layer goes with every cached layer above it (they read it).
        std::vector<const TemplateLayerRecord*> with;
        bool inUse = false;
        for (const auto& other : layers) {
            const auto& chain = chainOf[other.snapshotId];
            if (other.snapshotId == l.snapshotId ||
                std::find(chain.begin(), chain.end(), l.snapshotId) != chain.end()) {
                with.push_back(&other);
                inUse |= used.count(other.snapshotId) > 0;
            }
        }
        if (inUse) continue;
        for (const auto* w : with) {
            if (!gone.insert(w->snapshotId).second) continue;
            p_.store.removeLayer(w->tenant, w->key);
            p_.snapshotting.deleteBuildSnapshot(w->snapshotId);
            total -= w->sizeBytes;
        }
    }
}

}  // namespace airlock::templates
