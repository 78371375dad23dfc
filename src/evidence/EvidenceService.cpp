#include "evidence/EvidenceService.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/Ids.hpp"
#include "core/JsonFields.hpp"
#include "core/Log.hpp"
#include "core/Sha256.hpp"
#include "core/UniqueFd.hpp"
#include "evidence/BundlePath.hpp"
#include "evidence/BundleWriter.hpp"
#include "evidence/ChangeClassifier.hpp"
#include "evidence/DependencyChanges.hpp"
#include "evidence/Dsse.hpp"
#include "evidence/Findings.hpp"
#include "evidence/JunitReport.hpp"
#include "evidence/ReportHtml.hpp"
#include "protocol/GuestResults.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/PathGlob.hpp"
#include "store/TaskSpec.hpp"
#include "workspace/WorkspaceEvidence.hpp"

namespace airlock {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::size_t kMaxAuditEvents = 200000;
constexpr int kMaxArtifactDepth = 256;  // below it, paths reach Linux's 4096 bytes first

// JSON text of the bundle's files: guest-chosen bytes that are not UTF-8
// become U+FFFD instead of failing the seal.
std::string jsonl(const std::vector<json>& records) {
    std::string out;
    for (const auto& r : records) out += jsonText(r) + "\n";
    return out;
}

std::string pretty(const json& j) {
    return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

// The model's data, masked value by value before anything renders or signs
// it (maskRecord: keys, verdicts and digests stay).
void maskModel(EvidenceModel& m, const SecretMasker& masker) {
    m.files = maskRecord(m.files, masker);
    for (auto* list : {&m.commands, &m.approvals, &m.egress, &m.packages, &m.activity})
        for (auto& rec : *list) rec = maskRecord(rec, masker);
    for (auto& c : m.dependencyChanges)
        for (auto* f : {&c.file, &c.name, &c.before, &c.after}) *f = masker.mask(*f);
    for (auto& t : m.testRuns) t.command = masker.mask(t.command);
    for (auto& f : m.junit) {
        f.path = masker.mask(f.path);
        f.error = masker.mask(f.error);
        f.notCounted = masker.mask(f.notCounted);
        for (auto& c : f.cases)
            for (auto* s : {&c.name, &c.classname, &c.suite, &c.message}) *s = masker.mask(*s);
    }
    for (auto& a : m.artifacts)
        for (auto* s : {&a.path, &a.skipped}) *s = masker.mask(*s);
    for (const char* k : {"task", "workspace", "artifacts", "artifacts_note", "file_activity"})
        if (m.manifest.contains(k)) m.manifest[k] = maskRecord(m.manifest[k], masker);
}

std::string mediaType(const std::string& path) {
    auto dot = path.rfind('.');
    std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static const std::map<std::string, std::string> types = {
        {"png", "image/png"},       {"jpg", "image/jpeg"},        {"jpeg", "image/jpeg"},
        {"gif", "image/gif"},       {"webp", "image/webp"},       {"svg", "image/svg+xml"},
        {"xml", "application/xml"}, {"json", "application/json"}, {"html", "text/html"},
        {"htm", "text/html"},       {"txt", "text/plain"},        {"log", "text/plain"},
        {"md", "text/markdown"},    {"csv", "text/csv"},          {"lcov", "text/plain"},
        {"info", "text/plain"},     {"pdf", "application/pdf"},   {"zip", "application/zip"},
        {"gz", "application/gzip"}, {"tgz", "application/gzip"}};
    auto it = types.find(ext);
    return it == types.end() ? "application/octet-stream" : it->second;
}

void writePrivateFile(const std::string& path, const std::string& bytes) {
    std::string tmp = path + ".tmp";
    ::unlink(tmp.c_str());
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    std::size_t done = 0;
    while (fd && done < bytes.size()) {
        ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
    }
    if (!fd || done != bytes.size() || ::fsync(fd.get()) != 0 ||
        ::rename(tmp.c_str(), path.c_str()) != 0) {
        ::unlink(tmp.c_str());
        throw Error(ErrorCode::insufficient_storage, "cannot write " + path);
    }
}

std::string readWhole(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorCode::not_found, "the bundle file is gone");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

json summaryOf(const json& findings, const json& tests, const json& counts) {
    json bySeverity = json::object(), kinds = json::array();
    for (const auto& f : findings["findings"]) {
        std::string sev = stringOrEmpty(f, "severity");
        bySeverity[sev] = bySeverity.value(sev, 0) + 1;
        kinds.push_back(f["kind"]);
    }
    return {{"findings", kinds},
            {"by_severity", bySeverity},
            {"tests", tests.value("result", "")},
            {"counts", counts}};
}

}  // namespace

struct EvidenceService::Gathered {
    EvidenceModel model;
    std::map<std::string, std::string> files;  // bundle path -> bytes (besides the generated ones)
    json counts = json::object();
};

EvidenceService::EvidenceService(EvidenceConfig config, SandboxEvidenceSource& sandboxes,
                                 WorkspaceEvidenceSource* workspaces, EvidenceStore& store)
    : config_(std::move(config)),
      sandboxes_(sandboxes),
      workspaces_(workspaces),
      store_(store),
      key_(EvidenceKey::loadOrCreate(config_.dataDir + "/keys")) {
    std::error_code ec;
    fs::create_directories(config_.dataDir + "/bundles", ec);
    ::chmod(config_.dataDir.c_str(), 0700);
    ::chmod((config_.dataDir + "/bundles").c_str(), 0700);
    logInfo("evidence",
            "signing key " + key_.keyid().substr(0, 16) + " (" + EvidenceKey::kAlg + ")");
}

std::string EvidenceService::bundlePath(const std::string& id) const {
    return config_.dataDir + "/bundles/" + id + ".tar.gz";
}

std::shared_ptr<std::mutex> EvidenceService::sandboxLock(const std::string& id) {
    std::lock_guard lock(locksGuard_);
    auto& m = locks_[id];
    if (!m) m = std::make_shared<std::mutex>();
    return m;
}

EvidenceService::Gathered EvidenceService::gather(const SandboxRecord& r,
                                                  const std::string& bundleId,
                                                  const std::string& degraded) {
    Gathered g;
    EvidenceModel& m = g.model;
    // A bundle is mostly guest output: masked with what the guest was given
    // only (host-only values were masked in the host's records when written,
    // and are never compared with what the guest wrote).
    auto masker = sandboxes_.guestOutputMasker(r);
    std::vector<std::string> secretValues;
    for (const auto& n : masker.needles()) secretValues.push_back(n);
    auto taskSpec = taskOf(r);
    json task = taskSpec ? taskSpec->toJson() : json(nullptr);
    std::vector<std::string> sensitivePaths =
        taskSpec ? taskSpec->sensitivePaths : std::vector<std::string>{};
    bool running = r.state == SandboxState::running;

    // The audit log, in order.
    std::vector<AuditEvent> events;
    AuditQuery q;
    q.limit = 1000;
    while (events.size() < kMaxAuditEvents) {
        auto page = sandboxes_.audit(r.tenant, r.id, q);
        if (page.empty()) break;
        q.after = page.back().seq;
        events.insert(events.end(), page.begin(), page.end());
        if (page.size() < static_cast<std::size_t>(q.limit)) break;
    }

    // Guest file activity (file.activity records), merged per path.
    std::map<std::string, json> guestActivity;
    std::uint64_t guestDropped = 0;
    bool guestOverflow = false;
    std::string activityMechanism;
    json activityWatch;

    // Commands: one record per exec, its request, decision, approval and outcome merged.
    std::map<std::string, std::size_t> byExec;
    std::vector<json>& cmds = m.commands;
    std::map<std::string, std::string> outputs;  // bundle path -> masked bytes
    std::set<std::string> apiWritten;            // absolute paths the files API changed
    auto commandFor = [&](const AuditEvent& e, const json& d) -> json& {
        std::string execId = stringOrEmpty(d, "exec_id");
        if (!execId.empty()) {
            auto it = byExec.find(execId);
            if (it != byExec.end()) return cmds[it->second];
            byExec[execId] = cmds.size();
        }
        cmds.push_back({{"id", execId.empty() ? "cmd-" + std::to_string(e.seq) : execId},
                        {"seq", e.seq},
                        {"at", e.at},
                        {"command", stringOrEmpty(d, "command")}});
        return cmds.back();
    };
    for (const auto& e : events) {
        json d = json::parse(e.dataJson, nullptr, false);
        if (!d.is_object()) continue;
        // Recorded masked; masked again for values added since (its data,
        // never its structure or verdicts: maskRecord).
        d = maskRecord(d, masker);
        if (e.type.rfind("exec.", 0) == 0) {
            json& c = commandFor(e, d);
            // A terminal's line (exec.line) keeps its terminal and whose
            // account it is: the guest shell's, never the host's own.
            for (const char* k : {"cwd", "user", "path", "purpose", "approval_id", "started_at",
                                  "terminal", "reported_by"})
                if (d.contains(k)) c[k] = d[k];
            // What the audit record masked, where and how often.
            if (d.contains("masked") && d["masked"].is_object())
                for (const auto& [where, n] : d["masked"].items()) c["masked"][where] = n;
            if (d.contains("policy") && d["policy"].is_object()) {
                c["class"] = d["policy"].value("class", "");
                c["reason"] = d["policy"].value("reason", "");
                if (e.type != "exec.executed" || !c.contains("decision"))
                    c["decision"] = d["policy"].value("decision", "");
            }
            if (e.type == "exec.pending_approval") c["approval"] = "pending";
            if (e.type == "exec.allowed" && !c.contains("decision")) c["decision"] = "allow";
            if (e.type == "exec.executed" || e.type == "exec.failed") {
                if (!c.contains("decision"))
                    c["decision"] = c.contains("approval_id") ? "approve" : "allow";
                c["ended_at"] = e.at;
                for (const char* k :
                     {"exit_code", "duration_ms", "truncated", "timed_out", "error"})
                    if (d.contains(k)) c[k] = d[k];
                for (const char* stream : {"stdout", "stderr"}) {
                    if (!d.contains(stream) || !d[stream].is_string()) continue;
                    std::string bytes = d[stream].get<std::string>();
                    std::string file = "commands/" + c["id"].get<std::string>() + "." + stream;
                    c[stream] = {
                        {"file", file}, {"size", bytes.size()}, {"sha256", sha256Hex(bytes)}};
                    outputs[file] = bytes;
                }
            }
        } else if (e.type.rfind("approval.", 0) == 0) {
            std::string outcome = e.type.substr(9);
            json rec = d;
            rec["at"] = e.at;
            rec["event"] = e.type;
            m.approvals.push_back(rec);
            if (d.contains("exec_id")) {
                auto it = byExec.find(stringOrEmpty(d, "exec_id"));
                if (it != byExec.end()) cmds[it->second]["approval"] = outcome;
            }
        } else if (e.type.rfind("egress.", 0) == 0 && e.type != "egress.suppressed") {
            json rec = d;
            rec["at"] = e.at;
            rec["event"] = e.type;  // a connection's end, or a secret added or refused in it
            if (!rec.contains("decision")) rec["decision"] = e.type.substr(7);
            m.egress.push_back(rec);
        } else if (e.type.rfind("package.", 0) == 0) {
            json rec = d;
            rec["at"] = e.at;
            rec["event"] = e.type;
            m.packages.push_back(rec);
        } else if (e.type == "file.activity") {
            // Drained from the guest's watch: merged per path over drains.
            guestDropped += d.value("dropped", std::uint64_t(0));
            guestOverflow = guestOverflow || d.value("overflow", false);
            if (activityMechanism.empty()) activityMechanism = stringOrEmpty(d, "mechanism");
            for (const auto& p : d.value("paths", json::array())) {
                if (!p.is_object()) continue;
                std::string path = stringOrEmpty(p, "path");
                if (path.empty()) continue;
                json& a = guestActivity[path];
                if (a.is_null())
                    a = {{"path", path},
                         {"source", "guest"},
                         {"reads", 0},
                         {"writes", 0},
                         {"execs", json::array()}};
                a["reads"] = a["reads"].get<std::uint64_t>() + p.value("reads", std::uint64_t(0));
                a["writes"] =
                    a["writes"].get<std::uint64_t>() + p.value("writes", std::uint64_t(0));
                for (const char* k : {"first", "first_write"})
                    if (!stringOrEmpty(p, k).empty() &&
                        (stringOrEmpty(a, k).empty() || stringOrEmpty(p, k) < stringOrEmpty(a, k)))
                        a[k] = stringOrEmpty(p, k);
                for (const char* k : {"last", "last_write"})
                    if (stringOrEmpty(p, k) > stringOrEmpty(a, k)) a[k] = stringOrEmpty(p, k);
                if (p.value("writes", std::uint64_t(0)) > 0 && p.contains("last_writer"))
                    a["last_writer"] = p["last_writer"];  // drains come in order
                for (const auto& x : p.value("execs", json::array()))
                    if (x.is_string() &&
                        std::find(a["execs"].begin(), a["execs"].end(), x) == a["execs"].end())
                        a["execs"].push_back(x);
            }
        } else if (e.type == "file.watch_started" || e.type == "file.watch_failed") {
            activityWatch = d;
            activityWatch["event"] = e.type;
        } else if (e.type.rfind("file.", 0) == 0) {
            // Changes made through the files API (by the client, not by a
            // process in the guest).
            json rec = d;
            rec["at"] = e.at;
            rec["event"] = e.type;
            rec["source"] = "api";
            for (const char* k : {"path", "to"})
                if (d.contains(k) && d[k].is_string()) apiWritten.insert(d[k].get<std::string>());
            m.activity.push_back(rec);
        }
    }
    // Whose write came last, per watched path (before the merge moves out).
    std::map<std::string, std::string> lastWriters;  // masked relative path -> exec id ("" none)
    for (const auto& [path, a] : guestActivity)
        if (a.value("writes", std::uint64_t(0)) > 0)
            lastWriters[path] = a.contains("last_writer") && a["last_writer"].is_string()
                                    ? a["last_writer"].get<std::string>()
                                    : std::string();
    {
        ChangeClassifier classify({}, sensitivePaths, "");
        for (auto& [path, a] : guestActivity) {
            a["sensitive"] = classify.sensitive(path);
            m.activity.push_back(std::move(a));
        }
    }
    std::set<std::string> testRunIds;
    for (const auto& c : cmds) {
        if (c.value("purpose", "") != "test" || !c.contains("exit_code")) continue;
        testRunIds.insert(stringOrEmpty(c, "id"));
        m.testRuns.push_back({stringOrEmpty(c, "id"), stringOrEmpty(c, "command"),
                              stringOrEmpty(c, "ended_at"),
                              c["exit_code"].is_number_integer() ? c["exit_code"].get<int>() : -1,
                              c.value("timed_out", false)});
    }

    // The workspace: base, final tree, patch, files and the dependency files.
    json ws = nullptr;
    std::string artifactRoot = config_.defaultArtifactRoot;
    if (workspaces_ && running && degraded.empty()) {
        try {
            auto view = workspaces_->evidenceView(
                r.tenant, r.id, [](const std::string& p) { return dependencies::understands(p); });
            if (view) {
                ws = {{"repo", view->repo},
                      {"ref", view->ref},
                      {"base_commit", view->baseCommit},
                      {"base_tree", view->baseTree},
                      {"branch", view->branch},
                      {"path", view->path},
                      {"write_scope", view->writeScope},
                      {"enforce_scope", view->enforceScope},
                      {"final_tree", view->finalTree}};
                if (view->finalCommit) ws["final_commit"] = *view->finalCommit;
                if (!view->path.empty()) artifactRoot = view->path;
                ChangeClassifier classify(view->writeScope, sensitivePaths, view->gitattributes);
                for (const auto& file : view->files) {
                    json f = workspace::changedFileJson(file);
                    f["lockfile"] = dependencies::isLockfile(file.path);
                    f["manifest"] = dependencies::isManifest(file.path);
                    f["generated"] = classify.generated(file.path);
                    f["sensitive"] =
                        classify.sensitive(file.path) || classify.sensitive(file.oldPath);
                    m.files.push_back(f);
                }
                for (const auto& [path, both] : view->contents)
                    for (auto& c : dependencies::diff(path, both.first, both.second))
                        m.dependencyChanges.push_back(c);
                m.patch = view->patch;
            }
        } catch (const std::exception& e) {
            ws = {{"error", std::string("the workspace could not be read: ") + e.what()}};
        }
    } else if (workspaces_ && !degraded.empty()) {
        ws = {{"error", "the working tree was not read: this bundle was sealed after a full seal "
                        "failed"}};
    } else if (workspaces_ && !running) {
        ws = {{"error",
               "the sandbox is " + sandboxStateName(r.state) + ": its working tree was not read"}};
    }
    std::string maskedPatch = masker.mask(m.patch);
    bool secretInChanges = maskedPatch != m.patch;
    m.patch = maskedPatch;

    // A test report counts only when a recorded test run wrote it last, as the
    // guest's file activity (fanotify, which names the process) saw it, and
    // the files API never wrote it: the agent cannot make "passed" by hand.
    const std::string watchRoot = stringOrEmpty(activityWatch, "path");
    const std::string watchMechanism =
        activityMechanism.empty() ? stringOrEmpty(activityWatch, "mechanism") : activityMechanism;
    auto attributeReport = [&](const std::string& root, EvidenceModel::TestFile& tf) {
        if (activityWatch.is_null() || stringOrEmpty(activityWatch, "event") != "file.watch_started")
            tf.notCounted = "no file activity was watched here, so no test run can be shown to "
                            "have written it";
        else if (watchMechanism != "fanotify")
            tf.notCounted = "file activity here (" + watchMechanism +
                            ") does not name the command that wrote it";
        else if (root != watchRoot)
            tf.notCounted = "it is outside the watched workspace";
        else if (apiWritten.count(root + "/" + tf.path))
            tf.notCounted = "it was written through the files API";
        else if (auto it = lastWriters.find(masker.mask(tf.path)); it == lastWriters.end())
            tf.notCounted = "no recorded command was seen writing it";
        else if (it->second.empty())
            tf.notCounted = "its last write was made by no recorded command";
        else if (!testRunIds.count(it->second))
            tf.notCounted = "its last write came from " + it->second +
                            ", which is not a recorded test run";
        else
            tf.writtenBy = it->second;
    };

    // Artifacts: the globs over the working tree (or the user's home).
    const std::vector<std::string>& globs = r.artifacts;
    json artifactNote = nullptr;
    if (!globs.empty() && running && degraded.empty()) {
        try {
            auto agent = sandboxes_.runningAgent(r.tenant, r.id);
            std::vector<std::pair<std::string, std::uint64_t>> found;  // relative path, size
            std::vector<std::pair<std::string, int>> dirs{{"", 0}};
            std::size_t visited = 0, unlistable = 0;
            bool cut = false;
            while (!dirs.empty() && !cut) {
                auto [rel, depth] = dirs.back();
                dirs.pop_back();
                protocol::FsResult listing;
                try {
                    protocol::FsRequest list;
                    list.action = protocol::FsRequest::Action::list;
                    list.path = rel.empty() ? artifactRoot : artifactRoot + "/" + rel;
                    list.user = config_.artifactUser;
                    listing = sandboxes_.fileOp(r.tenant, r.id, list);
                } catch (const Error&) {
                    continue;
                }
                if (!listing.entries) continue;
                for (const auto& entry : *listing.entries) {
                    if (++visited > config_.maxWalkEntries) {
                        cut = true;
                        break;
                    }
                    const std::string& name = entry.name;
                    // A listing that names "..", "a/b" or "" is hostile: that
                    // entry is left out (counted), the rest still counts.
                    if (!isListableName(name)) {
                        ++unlistable;
                        continue;
                    }
                    std::string path = rel.empty() ? name : rel + "/" + name;
                    if (path.size() > protocol::kMaxGuestPath) continue;
                    using Type = protocol::FileEntry::Type;
                    if (entry.type == Type::directory) {
                        if (name == ".git" || depth >= kMaxArtifactDepth) continue;
                        if (name == "node_modules") {
                            bool asked = false;
                            for (const auto& gl : globs)
                                asked = asked || gl.find("node_modules") != std::string::npos;
                            if (!asked) continue;
                        }
                        dirs.push_back({path, depth + 1});
                    } else if (entry.type == Type::file) {
                        for (const auto& gl : globs)
                            if (protocol::wildmatch(gl, path)) {
                                found.push_back({path, entry.size});
                                break;
                            }
                    }
                }
            }
            if (cut)
                artifactNote = "the search stopped after " +
                               std::to_string(config_.maxWalkEntries) + " entries";
            if (unlistable)
                artifactNote = (artifactNote.is_null() ? std::string() : artifactNote.get<std::string>() + "; ") +
                               std::to_string(unlistable) +
                               " listed entries had names no file can have and were left out";
            std::sort(found.begin(), found.end());
            // The guest chose the names: each is carried escaped (no name can
            // fail the seal or leave the bundle's root), its secrets masked,
            // and made unique again if masking made two the same.
            auto uniqueName = [&](const std::string& prefix, const std::string& path) {
                std::string base = prefix + bundleSafePath(masker.mask(path)), name = base;
                for (int n = 2; g.files.count(name); ++n) name = base + "~" + std::to_string(n);
                return name;
            };
            std::uint64_t total = 0;
            for (const auto& [path, size] : found) {
                EvidenceModel::Artifact a;
                a.path = path;
                a.size = size;
                a.type = mediaType(path);
                if (m.artifacts.size() >= config_.maxArtifactFiles) {
                    a.skipped =
                        "more than " + std::to_string(config_.maxArtifactFiles) + " artifacts";
                } else if (size > config_.maxArtifactFileBytes) {
                    a.skipped = "larger than the " +
                                std::to_string(config_.maxArtifactFileBytes >> 20) + " MiB cap";
                } else if (total + size > config_.maxArtifactBytes) {
                    a.skipped = "the bundle's " + std::to_string(config_.maxArtifactBytes >> 20) +
                                " MiB of artifacts is full";
                } else {
                    std::string bytes;
                    try {
                        auto stream = agent->open(protocol::FileReadRequest{
                            artifactRoot + "/" + path, config_.artifactUser});
                        bytes = stream->readToClose(
                            config_.maxArtifactFileBytes,
                            AgentStream::Clock::now() + std::chrono::seconds(60));
                    } catch (const std::exception& e) {
                        a.skipped = std::string("could not be read: ") + masker.mask(e.what());
                    }
                    if (a.skipped.empty()) {
                        a.size = bytes.size();
                        a.sensitive = sensitiveArtifactReason(path, bytes, secretValues);
                        if (!a.sensitive.empty()) {
                            // Listed, never copied: a reviewer should not
                            // receive a key because the agent wrote one.
                            a.skipped = "withheld: it looks like a secret";
                        } else {
                            total += bytes.size();
                            a.collected = true;
                            if (a.type == "application/xml" &&
                                bytes.find("<testsuite") != std::string::npos) {
                                EvidenceModel::TestFile tf;
                                tf.path = path;
                                try {
                                    tf.cases = JunitReport::parse(bytes).cases();
                                    g.files[uniqueName("tests/junit/", path)] = bytes;
                                } catch (const std::exception& e) {
                                    tf.error = e.what();
                                }
                                attributeReport(artifactRoot, tf);
                                m.junit.push_back(std::move(tf));
                            }
                            a.bundlePath = uniqueName("artifacts/", path);
                            g.files[a.bundlePath] = std::move(bytes);
                        }
                    }
                }
                m.artifacts.push_back(std::move(a));
            }
        } catch (const std::exception& e) {
            artifactNote =
                std::string("artifacts could not be collected: ") + masker.mask(e.what());
        }
    } else if (!globs.empty() && !degraded.empty()) {
        artifactNote = "no artifact was collected: this bundle was sealed after a full seal failed";
    } else if (!globs.empty()) {
        artifactNote =
            "the sandbox is " + sandboxStateName(r.state) + ": no artifact was collected";
    }

    // Previews (never their tokens).
    json previews = json::array();
    if (running) try {
            for (const auto& p : sandboxes_.exposedPorts(r.tenant, r.id))
                previews.push_back({{"port", p.port}, {"created_at", p.createdAt}});
        } catch (const std::exception&) {
        }

    // Counts and the manifest's own fields.
    std::size_t denied = 0, gated = 0, approved = 0, egressAllowed = 0, egressDenied = 0,
                packages = 0;
    for (const auto& c : cmds) {
        denied += stringOrEmpty(c, "decision") == "deny";
        gated += stringOrEmpty(c, "decision") == "approve";
        approved += stringOrEmpty(c, "approval") == "approved";
    }
    for (const auto& e : m.egress) {
        egressAllowed += stringOrEmpty(e, "decision") == "allowed";
        egressDenied += stringOrEmpty(e, "decision") == "denied";
    }
    for (const auto& p : m.packages) packages += stringOrEmpty(p, "event") == "package.artifact";
    g.counts = {{"commands", cmds.size()},
                {"denied", denied},
                {"gated", gated},
                {"approvals", approved},
                {"egress_allowed", egressAllowed},
                {"egress_denied", egressDenied},
                {"packages", packages},
                {"artifacts", m.artifacts.size()}};
    json activityNote = {
        {"api", "changes made through the files API are recorded by the host (source \"api\")"},
        {"guest", activityWatch.is_null()
                      ? json("not watched: the sandbox has no workspace")
                      : json{{"watch", activityWatch},
                             {"mechanism", activityMechanism.empty()
                                               ? stringOrEmpty(activityWatch, "mechanism")
                                               : activityMechanism},
                             {"paths", guestActivity.size()},
                             {"dropped", guestDropped},
                             {"overflow", guestOverflow},
                             {"limits",
                              "reads and writes of files under the workspace by the guest's "
                              "processes; not seen: directory listings, stat, creation and "
                              "removal by themselves, memory-mapped access after the first, the "
                              "agent's own work (the files API); with inotify only writes, "
                              "with no command (see docs/evidence.md)"}}}};
    auto tmpl = json{{"name", r.templateName}};
    for (const auto& e : events)
        if (e.type == "sandbox.created") {
            auto d = json::parse(e.dataJson, nullptr, false);
            if (d.is_object() && d.contains("digest")) tmpl["digest"] = d["digest"];
        }
    m.manifest = {{"schema", "https://airlock.dev/evidence/v1"},
                  {"id", bundleId},
                  {"sandbox", r.id},
                  {"tenant", r.tenant},
                  {"task", task},
                  {"template", tmpl},
                  {"workspace", ws},
                  {"started_at", r.createdAt},
                  {"ended_at", nowTimestamp()},
                  {"counts", g.counts},
                  {"secrets_in_changes", secretInChanges},
                  {"file_activity", activityNote}};
    if (!artifactNote.is_null()) m.manifest["artifacts_note"] = artifactNote;
    // A template build's sandbox: what it built (the template's digest over
    // its disk layers and memory state, and the layers themselves).
    for (const auto& e : events)
        if (e.type == "template.built") {
            auto d = json::parse(e.dataJson, nullptr, false);
            if (d.is_object()) m.manifest["template_build"] = d;
        }
    if (!degraded.empty()) m.manifest["degraded"] = degraded;
    json artifactList = json::array();
    for (const auto& a : m.artifacts) {
        json e = {{"path", a.path}, {"type", a.type}, {"size", a.size}, {"collected", a.collected}};
        if (!a.bundlePath.empty()) e["bundle_path"] = a.bundlePath;
        e["path_hex"] = hexEncode(a.path);  // the name's bytes as the guest listed them
        if (!a.skipped.empty()) e["skipped"] = a.skipped;
        if (!a.sensitive.empty()) e["sensitive"] = a.sensitive;
        artifactList.push_back(e);
    }
    m.manifest["artifacts"] = artifactList;
    g.files["previews.json"] = previews.dump(2) + "\n";
    for (auto& [path, bytes] : outputs) g.files[path] = std::move(bytes);
    return g;
}

EvidenceRecord EvidenceService::seal(const std::string& tenant, const std::string& sandboxId,
                                     const std::string& kind) {
    return sealBundle(tenant, sandboxId, kind, "");
}

EvidenceRecord EvidenceService::sealBundle(const std::string& tenant, const std::string& sandboxId,
                                           const std::string& kind, const std::string& degraded) {
    auto r = sandboxes_.get(tenant, sandboxId);
    auto lock = sandboxLock(sandboxId);
    std::lock_guard hold(*lock);
    std::string id = newId("evd-");
    // What the guest gathered since the last drain joins the audit log first.
    if (degraded.empty()) sandboxes_.drainFileActivity(r);
    auto g = gather(r, id, degraded);
    EvidenceModel& m = g.model;
    auto masker = sandboxes_.guestOutputMasker(r);
    // Verdicts first, from the data as it was: findings, the test result.
    json findings = computeFindings(m);
    if (m.manifest.value("secrets_in_changes", false))
        findings["findings"].push_back(
            {{"kind", "secrets_in_changes"},
             {"severity", "high"},
             {"summary",
              "the change holds the value of one of the sandbox's secrets (masked in "
              "changes.patch, "
              "which therefore no longer gives the recorded tree)"},
             {"evidence", json::array({{{"file", "changes/changes.patch"}, {"ref", "***"}}})}});
    json tests = testSummary(m);
    const std::string testResult = tests.value("result", "");
    json passed = json::array(), failed = json::array();
    for (const auto& f : m.junit) {
        if (!f.counted()) continue;
        for (const auto& c : f.cases)
            (c.status == "failed" || c.status == "error" ? failed : passed)
                .push_back(c.classname.empty() ? c.name : c.classname + "." + c.name);
    }
    // Then the data is masked, value by value, and only then rendered and
    // signed: a secret can hide itself, never edit the page, a verdict or
    // the record's structure (maskRecord keeps keys, verdicts and digests).
    maskModel(m, masker);
    findings = maskRecord(findings, masker);
    tests = maskRecord(tests, masker);
    passed = maskRecord(passed, masker, false);
    failed = maskRecord(failed, masker, false);
    m.manifest["tests"] = tests;
    m.manifest["kind"] = kind;
    m.manifest["signing"] = {{"alg", EvidenceKey::kAlg}, {"keyid", key_.keyid()}};

    BundleWriter w(id, nowUnixSeconds());
    w.add("changes/changes.patch", m.patch);
    w.add("changes/files.json", pretty(json{{"files", m.files}}));
    json deps = json::array();
    for (const auto& c : m.dependencyChanges)
        deps.push_back({{"ecosystem", c.ecosystem},
                        {"file", c.file},
                        {"name", c.name},
                        {"before", c.before},
                        {"after", c.after},
                        {"change", c.change}});
    w.add("changes/dependencies.json", pretty(json{{"changes", deps}}));
    w.add("commands/commands.jsonl", jsonl(m.commands));
    w.add("approvals/approvals.jsonl", jsonl(m.approvals));
    w.add("network/egress.jsonl", jsonl(m.egress));
    w.add("packages/packages.jsonl", jsonl(m.packages));
    w.add("files/activity.jsonl", jsonl(m.activity));
    w.add("tests/summary.json", pretty(tests));
    w.add("findings.json", pretty(findings));
    w.add("report.html", renderReport(m, findings, tests));
    for (auto& [path, bytes] : g.files) {
        if (path.rfind("artifacts/", 0) == 0 || path.rfind("tests/junit/", 0) == 0)
            w.add(path, std::move(bytes));  // binary: withheld above when it held a secret
        else
            w.add(path, masker.mask(std::move(bytes)));  // a command's output: data
    }

    // Attestations: SLSA provenance of the change and a test result, each a
    // DSSE envelope by the evidence key.
    json subjects = json::array();
    std::string patchSha = sha256Hex(m.patch);
    subjects.push_back({{"name", "changes/changes.patch"}, {"digest", {{"sha256", patchSha}}}});
    const json& ws = m.manifest["workspace"];
    if (ws.is_object() && ws.contains("final_tree"))
        subjects.push_back({{"name", "final_tree"}, {"digest", {{"gitTree", ws["final_tree"]}}}});
    json resolved = json::array();
    if (ws.is_object() && ws.contains("base_commit"))
        resolved.push_back(
            {{"uri", "git+" + stringOrEmpty(ws, "repo") + "@" + stringOrEmpty(ws, "ref")},
             {"digest", {{"gitCommit", ws["base_commit"]}}}});
    for (const auto& p : m.packages)
        if (stringOrEmpty(p, "event") == "package.artifact" && p.contains("sha256"))
            resolved.push_back(
                {{"uri", stringOrEmpty(p, "ecosystem") + ":" + stringOrEmpty(p, "name") + "@" +
                             stringOrEmpty(p, "version")},
                 {"digest", {{"sha256", p["sha256"]}}}});
    json provenance = {
        {"_type", "https://in-toto.io/Statement/v1"},
        {"subject", subjects},
        {"predicateType", "https://slsa.dev/provenance/v1"},
        {"predicate",
         {{"buildDefinition",
           {{"buildType", "https://airlock.dev/evidence/agent-session/v1"},
            {"externalParameters",
             {{"task", m.manifest["task"].is_object() ? m.manifest["task"].value("id", "") : ""},
              {"prompt_sha256", m.manifest["task"].is_object()
                                    ? sha256Hex(m.manifest["task"].value("prompt", ""))
                                    : ""},
              {"repo", ws.is_object() ? stringOrEmpty(ws, "repo") : ""},
              {"ref", ws.is_object() ? stringOrEmpty(ws, "ref") : ""}}},
            {"internalParameters", {{"template", m.manifest["template"]}, {"sandbox", r.id}}},
            {"resolvedDependencies", resolved}}},
          {"runDetails",
           {{"builder", {{"id", "https://airlock.dev/airlockd"}}},
            {"metadata",
             {{"invocationId", r.id},
              {"startedOn", m.manifest["started_at"]},
              {"finishedOn", m.manifest["ended_at"]}}}}}}}};
    std::string result = testResult == "passed"   ? "PASSED"
                         : testResult == "failed" ? "FAILED"
                                                  : "WARNED";
    json configuration = json::array();
    for (const auto& t : m.testRuns) configuration.push_back({{"name", t.command}});
    json testStatement = {{"_type", "https://in-toto.io/Statement/v1"},
                          {"subject", subjects},
                          {"predicateType", "https://in-toto.io/attestation/test-result/v0.1"},
                          {"predicate",
                           {{"result", result},
                            {"configuration", configuration},
                            {"passedTests", passed},
                            {"warnedTests", json::array()},
                            {"failedTests", failed}}}};
    std::string attestations;
    for (const auto& st : {provenance, testStatement})
        attestations += jsonText(dsse::sign(key_, dsse::kInTotoPayloadType, jsonText(st))) + "\n";
    w.add("attestations.intoto.jsonl", attestations);

    auto sealed = w.seal(m.manifest, key_);
    writePrivateFile(bundlePath(id), sealed.gz);
    EvidenceRecord rec;
    rec.id = id;
    rec.sandboxId = r.id;
    rec.tenant = r.tenant;
    rec.createdAt = nowTimestamp();
    rec.kind = kind;
    rec.sha256 = sealed.sha256;
    rec.size = sealed.gz.size();
    rec.summaryJson = jsonText(summaryOf(findings, tests, g.counts));
    if (ws.is_object() && ws.contains("final_tree") && ws["final_tree"].is_string()) {
        // The tree it covers: a push approval quotes only a bundle of its commit's tree.
        json covered = json::parse(rec.summaryJson);
        covered["final_tree"] = ws["final_tree"];
        rec.summaryJson = jsonText(covered);
    }
    try {
        store_.insert(rec);
    } catch (...) {
        ::unlink(bundlePath(id).c_str());
        throw;
    }
    if (sealedHook_) {
        try {
            sealedHook_(rec);
        } catch (const std::exception& e) {
            logWarn("evidence", "bundle " + id + " is not in the fleet's directory: " + e.what());
        }
    }
    sandboxes_.recordEvent(r, "evidence.sealed",
                            {{"evidence_id", id},
                             {"kind", kind},
                             {"sha256", rec.sha256},
                             {"size", rec.size},
                             {"summary", json::parse(rec.summaryJson)}});
    logInfo("evidence", "sealed " + id + " for " + r.id + " (" + std::to_string(rec.size) +
                            " bytes, " + std::to_string(findings["findings"].size()) +
                            " findings)");
    return rec;
}

std::vector<EvidenceRecord> EvidenceService::list(const std::string& tenant,
                                                  const std::string& sandboxId) {
    auto rows = store_.listForSandbox(sandboxId, TenantScope::only(tenant));
    if (rows.empty()) sandboxes_.get(tenant, sandboxId);  // 404 for a sandbox it never had
    return rows;
}

EvidenceRecord EvidenceService::get(const std::string& tenant, const std::string& id) {
    auto r = isValidId(id, "evd-") ? store_.find(id) : std::nullopt;
    if (!r || r->tenant != tenant) throw Error(ErrorCode::not_found, "no evidence bundle " + id);
    return *r;
}

std::string EvidenceService::bundleBytes(const EvidenceRecord& r) const {
    return readWhole(bundlePath(r.id));
}

std::vector<EvidenceKey::PublicKey> EvidenceService::keys() const {
    return EvidenceKey::list(config_.dataDir + "/keys");
}

EvidenceReview EvidenceService::review(const std::string& tenant, const std::string& id,
                                       ReviewDecision decision, const std::string& reason,
                                       const std::string& reviewer) {
    auto rec = get(tenant, id);
    EvidenceReview out;
    out.decision = decision;
    out.reason = reason;
    out.reviewer = reviewer;
    out.at = nowTimestamp();
    json statement = {
        {"_type", "https://in-toto.io/Statement/v1"},
        {"subject",
         json::array({{{"name", id + ".tar.gz"}, {"digest", {{"sha256", rec.sha256}}}}})},
        {"predicateType", "https://in-toto.io/attestation/human-review/v0.1"},
        {"predicate",
         {{"result", decision == ReviewDecision::approve ? "approved" : "rejected"},
          {"reviewer", reviewer},
          {"reason", reason},
          {"timestamp", out.at}}}};
    out.attestation = dsse::sign(key_, dsse::kInTotoPayloadType, statement.dump());
    json summary = {{"decision", reviewDecisionName(decision)},
                    {"reason", reason},
                    {"reviewer", reviewer},
                    {"at", out.at}};
    json stored = summary;
    stored["attestation"] = out.attestation;
    writePrivateFile(config_.dataDir + "/bundles/" + id + ".review.json", stored.dump(2) + "\n");
    store_.setReview(id, summary.dump());
    try {
        auto sandbox = sandboxes_.get(tenant, rec.sandboxId);
        sandboxes_.recordEvent(sandbox, "evidence.reviewed",
                                {{"evidence_id", id},
                                 {"decision", reviewDecisionName(decision)},
                                 {"reason", reason},
                                 {"reviewer", reviewer}});
    } catch (const Error&) {
        // The sandbox is gone: the review is still kept with the bundle.
    }
    return out;
}

EvidenceReview EvidenceService::reviewOf(const std::string& tenant, const std::string& id) {
    get(tenant, id);
    std::ifstream in(config_.dataDir + "/bundles/" + id + ".review.json");
    if (!in) throw Error(ErrorCode::not_found, "bundle " + id + " has no review yet");
    std::stringstream s;
    s << in.rdbuf();
    auto j = json::parse(s.str(), nullptr, false);
    if (!j.is_object() || !j.contains("decision") || !j["decision"].is_string())
        throw Error(ErrorCode::internal, "the review of " + id + " is damaged");
    EvidenceReview out;
    try {
        out.decision = parseReviewDecision(j["decision"].get<std::string>());
        out.reason = j.value("reason", "");
        out.reviewer = j.value("reviewer", "");
        out.at = j.value("at", "");
    } catch (const std::exception&) {
        throw Error(ErrorCode::internal, "the review of " + id + " is damaged");
    }
    out.attestation = j.value("attestation", json(nullptr));
    return out;
}

void EvidenceService::setDirectoryHooks(std::function<void(const EvidenceRecord&)> sealed,
                                        std::function<void(const std::string&)> removed) {
    sealedHook_ = std::move(sealed);
    removedHook_ = std::move(removed);
}

std::optional<std::string> EvidenceService::ownerOf(const std::string& evidenceId) {
    if (!isValidId(evidenceId, "evd-")) return std::nullopt;
    auto r = store_.find(evidenceId);
    return r ? std::optional<std::string>(r->tenant) : std::nullopt;
}

std::optional<EvidenceBrief> EvidenceService::latestForTree(const std::string& sandboxId,
                                                            const std::string& tree) {
    if (tree.empty()) return std::nullopt;
    auto rows = store_.listForSandbox(sandboxId, TenantScope::all());
    for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
        auto summary = json::parse(it->summaryJson, nullptr, false);
        if (summary.is_object() && summary.value("final_tree", "") == tree)
            return EvidenceBrief{it->id, it->summaryJson};
    }
    return std::nullopt;
}

void EvidenceService::beforeDelete(const SandboxRecord& r) {
    bool hasWorkspace = workspaces_ && workspaces_->hasWorkspace(r.id);
    if (r.taskJson.empty() && !hasWorkspace) return;
    // The final bundle is always written: when the full seal fails, one that
    // reads nothing more from the guest, saying why, from the host's records.
    try {
        seal(r.tenant, r.id, "final");
        return;
    } catch (const std::exception& e) {
        logError("evidence", "the final bundle of " + r.id + " failed: " + e.what());
        sandboxes_.recordEvent(r, "evidence.seal_failed",
                                {{"kind", "final"}, {"error", e.what()}});
        try {
            sealBundle(r.tenant, r.id, "final", std::string("the full seal failed: ") + e.what());
        } catch (const std::exception& again) {
            logError("evidence", "no final bundle for " + r.id + ": " + again.what());
            sandboxes_.recordEvent(r, "evidence.seal_failed",
                                    {{"kind", "final"}, {"degraded", true}, {"error", again.what()}});
        }
    }
}

void EvidenceService::afterDelete(const std::string& sandboxId) {
    store_.setExpiry(sandboxId, nowUnixSeconds() + config_.retentionDays * 86400);
    std::lock_guard lock(locksGuard_);
    locks_.erase(sandboxId);
}

void EvidenceService::collectExpired() {
    for (const auto& r : store_.expired(nowUnixSeconds())) {
        ::unlink(bundlePath(r.id).c_str());
        ::unlink((config_.dataDir + "/bundles/" + r.id + ".review.json").c_str());
        store_.remove(r.id);
        if (removedHook_) {
            try {
                removedHook_(r.id);
            } catch (const std::exception& e) {
                logWarn("evidence", "bundle " + r.id + " stays in the fleet's directory: " + e.what());
            }
        }
        logInfo("evidence",
                "bundle " + r.id + " of " + r.sandboxId + " removed after its retention");
    }
}

}  // namespace airlock
