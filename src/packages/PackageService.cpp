#include "packages/PackageService.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/JsonFields.hpp"
#include "core/Log.hpp"
#include "core/UniqueFd.hpp"
#include "packages/DigestStream.hpp"
#include "packages/NpmPackument.hpp"
#include "packages/PypiIndex.hpp"
#include "protocol/JsonText.hpp"

namespace airlock::packages {

using nlohmann::json;

// What one request did, written as one package.* audit record.
struct PackageService::Record {
    std::string type = "package.metadata";
    json data = json::object();
    bool skip = false;
};

struct PackageService::ParseSlot {
    explicit ParseSlot(std::counting_semaphore<64>& s) : sem(s) {
        if (!sem.try_acquire_for(std::chrono::seconds(60)))
            throw UpstreamError("the package proxy is busy filtering metadata; retry");
    }
    ~ParseSlot() { sem.release(); }
    std::counting_semaphore<64>& sem;
};

namespace {
// Packuments and index pages are shallow; deeper is hostile (see jsonNestingWithin).
constexpr unsigned kMaxJsonDepth = 64;

std::string lastSegment(const HttpUrl& u) {
    std::string p = u.path();
    while (!p.empty() && p.back() == '/') p.pop_back();
    return p.substr(p.rfind('/') + 1);
}

std::string withSlash(std::string s) {
    if (s.empty() || s.back() != '/') s += '/';
    return s;
}

// A status line's phrase carries the reason: npm and pip print it.
std::string phrase(const std::string& prefix, const std::string& reason) {
    std::string out = prefix + (reason.empty() ? "" : ": " + reason);
    for (auto& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = ' ';
    if (out.size() > 300) out.resize(300);
    return out;
}

GuestResponse errorResponse(int status, const std::string& prefix, const std::string& reason,
                            json extra = json::object()) {
    GuestResponse r;
    r.status = status;
    r.reason = phrase(prefix, reason);
    extra["error"] = reason.empty() ? prefix : reason;
    r.body = jsonText(extra);
    return r;
}

std::string percentDecode(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() &&
            std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

}  // namespace

std::map<std::string, std::string> PackageUpstreams::authorization(
    const std::vector<std::string>& specs) const {
    std::map<std::string, std::string> out;
    for (const auto& spec : specs) {
        auto eq = spec.find('=');
        auto eco = eq == std::string::npos ? std::nullopt : parseEcosystem(spec.substr(0, eq));
        if (!eco || eq + 1 == spec.size())
            throw Error(ErrorCode::bad_request,
                        "--package-upstream-auth takes npm=FILE, pypi=FILE or apt=FILE, not '" +
                            spec.substr(0, 200) + "'");
        std::string kind = spec.substr(0, eq), file = spec.substr(eq + 1);
        std::ifstream in(file);
        std::string value{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        if (!in)
            throw Error(ErrorCode::bad_request,
                        "--package-upstream-auth " + kind + ": cannot read " + file);
        if (!value.empty() && value.back() == '\n') value.pop_back();
        if (!value.empty() && value.back() == '\r') value.pop_back();
        if (value.empty() || value.size() > 8192 ||
            value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos)
            throw Error(ErrorCode::bad_request,
                        "--package-upstream-auth " + kind + ": " + file +
                            " must hold one line, the Authorization value (e.g. \"Bearer ...\")");
        std::vector<HttpUrl> urls;
        if (*eco == Ecosystem::npm && npm) urls.push_back(*npm);
        if (*eco == Ecosystem::pypi && pypi) urls.push_back(*pypi);
        if (*eco == Ecosystem::apt)
            for (const auto& [name, url] : apt) urls.push_back(url);
        if (urls.empty())
            throw Error(ErrorCode::bad_request, "--package-upstream-auth " + kind +
                                                    ": no --package-upstream " + kind + "= to send it to");
        for (const auto& url : urls) {
            if (url.scheme != "https")
                throw Error(ErrorCode::bad_request,
                            "--package-upstream-auth " + kind + ": " + url.origin() +
                                " is not https (a token would cross the network in clear)");
            if (out.count(url.origin()) && out[url.origin()] != value)
                throw Error(ErrorCode::bad_request, "--package-upstream-auth: two values for " +
                                                        url.origin());
            out[url.origin()] = value;
        }
    }
    return out;
}

PackageUpstreams PackageUpstreams::parse(const std::vector<std::string>& specs) {
    PackageUpstreams u;
    for (const auto& spec : specs) {
        auto eq = spec.find('=');
        auto eco = eq == std::string::npos ? std::nullopt : parseEcosystem(spec.substr(0, eq));
        if (!eco)
            throw Error(
                ErrorCode::bad_request,
                "--package-upstream takes npm=URL, pypi=URL or apt=URL, not '" + spec + "'");
        auto url = HttpUrl::parse(spec.substr(eq + 1));
        if (!url)
            throw Error(ErrorCode::bad_request, "--package-upstream " + spec.substr(0, eq) +
                                                    ": not an http(s) URL without credentials");
        if (url->target.find('?') != std::string::npos)
            throw Error(ErrorCode::bad_request,
                        "--package-upstream " + spec + ": no query, please");
        url->target = withSlash(url->target);
        switch (*eco) {
            case Ecosystem::npm:
                if (u.npm)
                    throw Error(ErrorCode::bad_request, "--package-upstream npm= given twice");
                u.npm = url;
                break;
            case Ecosystem::pypi:
                if (u.pypi)
                    throw Error(ErrorCode::bad_request, "--package-upstream pypi= given twice");
                u.pypi = url;
                break;
            case Ecosystem::apt: {
                std::string name = lastSegment(*url);
                if (name.empty() ||
                    name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") !=
                        std::string::npos)
                    throw Error(
                        ErrorCode::bad_request,
                        "--package-upstream apt=" + url->text() +
                            ": the URL's last path segment names it for guests (e.g. …/debian)");
                for (const auto& [n, _] : u.apt)
                    if (n == name)
                        throw Error(ErrorCode::bad_request,
                                    "--package-upstream: two apt upstreams end in /" + name);
                u.apt.emplace_back(name, *url);
                break;
            }
        }
    }
    return u;
}

bool PackageUpstreams::serves(Ecosystem e) const {
    return e == Ecosystem::npm    ? npm.has_value()
           : e == Ecosystem::pypi ? pypi.has_value()
                                  : !apt.empty();
}

std::vector<std::string> PackageUpstreams::hosts() const {
    std::vector<std::string> out;
    if (npm) out.push_back(npm->host);
    if (pypi) out.push_back(pypi->host);
    for (const auto& [_, u] : apt) out.push_back(u.host);
    return out;
}

PackageService::PackageService(PackageServiceConfig config, PackageAuditSink audit,
                               PackageApprovals approvals, RunningExecLookup runningExec)
    : config_(std::move(config)),
      audit_(std::move(audit)),
      approvals_(std::move(approvals)),
      runningExec_(std::move(runningExec)),
      cache_(config_.cacheDir, config_.cacheBytes, config_.metadataTtl),
      client_(
          UpstreamClient::systemTls(),
          [this](const HttpUrl& u, const boost::asio::ip::address& a) {
              return addressRefusal(u, a);
          },
          config_.limits),
      addresses_(config_.allowCidrs) {
    client_.setAuthorization(config_.upstreamAuthorization);
}

std::string PackageService::addressRefusal(const HttpUrl& url,
                                           const boost::asio::ip::address& a) const {
    // The operator named the upstreams: they may live anywhere (a registry
    // on the LAN). Hosts a registry points at are held to egress's rule.
    for (const auto& h : config_.upstreams.hosts())
        if (h == url.host) return "";
    auto why = addresses_.refusal(a);
    return why ? *why + " address " + a.to_string() : "";
}

GuestResponse PackageService::handle(const SandboxPackages& s, const GuestRequest& r) {
    auto started = std::chrono::steady_clock::now();
    Record rec;
    rec.data["ecosystem"] = ecosystemName(r.ecosystem);
    rec.data["method"] = r.method;
    rec.data["path"] = r.target.substr(0, 512);
    GuestResponse out;
    try {
        if (r.method != "GET" && r.method != "HEAD") {
            rec.data["decision"] = "deny";
            rec.data["rule"] = "endpoint";
            out = errorResponse(405, "Method Not Allowed",
                                "the package proxy only downloads: publishing, audits and other "
                                "uploads are refused");
        } else if (r.ecosystem == Ecosystem::npm) {
            out = npm(s, r, rec);
        } else if (r.ecosystem == Ecosystem::pypi) {
            out = pypi(s, r, rec);
        } else {
            out = apt(s, r, rec);
        }
    } catch (const UpstreamError& e) {
        rec.data["decision"] = rec.data.value("decision", "allow");
        rec.data["error"] = e.what();
        out = errorResponse(502, "Bad Gateway", std::string("upstream registry: ") + e.what());
    } catch (const std::exception& e) {
        rec.data["error"] = e.what();
        out = errorResponse(502, "Bad Gateway", e.what());
    }
    // npm prints the status phrase and the body's "error" both: the reason once is enough.
    if (r.ecosystem == Ecosystem::npm && out.status >= 400)
        out.reason = out.reason.substr(0, out.reason.find(':'));
    rec.data["status"] = out.status;
    rec.data["duration_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - started)
                                  .count();
    if (runningExec_) {
        auto exec = runningExec_(s.id);
        if (!exec.empty()) rec.data["command"] = exec;
    }
    if (s.rules.dryRun) rec.data["dry_run"] = true;
    std::uint64_t flushed = 0;
    bool admitted = true;
    {
        std::lock_guard lock(recordMutex_);
        if (recordWindows_.size() > 10'000) recordWindows_.clear();  // sandboxes come and go
        auto& w = recordWindows_[s.id];
        auto now = std::chrono::steady_clock::now();
        if (now - w.start >= std::chrono::minutes(1)) {
            flushed = std::exchange(w.suppressed, 0);
            w.start = now;
            w.written = 0;
        }
        if (!rec.skip) {
            admitted = w.written < kMaxRecordsPerMinute;
            if (admitted)
                ++w.written;
            else
                ++w.suppressed;
        }
    }
    if (flushed && audit_) {
        try {
            audit_(s.id, s.tenant, "package.suppressed", {{"count", flushed}});
        } catch (const std::exception&) {
        }
    }
    if (!rec.skip && admitted && audit_) {
        try {
            audit_(s.id, s.tenant, rec.type, rec.data);
        } catch (const std::exception& e) {
            logError("packages", std::string("cannot record a package request: ") + e.what());
        }
    }
    return out;
}

std::optional<PackageCache::Metadata> PackageService::metadata(const std::string& url,
                                                               const std::string& accept,
                                                               Record& rec,
                                                               GuestResponse& failure) {
    rec.data["upstream"] = url;
    std::string key = accept + " " + url;
    if (auto hit = cache_.findMetadata(key)) {
        rec.data["cache"] = "hit";
        return hit;
    }
    rec.data["cache"] = "miss";
    PackageCache::Metadata m;
    std::string errorBody;
    auto resp = client_.get(
        url, {{"Accept", accept}}, config_.maxMetadataBytes,
        [&](std::string_view piece) { m.body.append(piece); }, &errorBody);
    if (resp.status == 404 || resp.status == 410) {
        failure = errorResponse(404, "Not Found", "not found in the upstream registry");
        return std::nullopt;
    }
    if (resp.status < 200 || resp.status >= 300) {
        failure = errorResponse(502, "Bad Gateway",
                                "the upstream registry answered " + std::to_string(resp.status));
        return std::nullopt;
    }
    m.contentType = resp.contentType;
    cache_.putMetadata(key, m);
    return m;
}

std::optional<GuestResponse> PackageService::gate(const SandboxPackages& s, Ecosystem e,
                                                  const std::string& name,
                                                  const std::string& version, const Verdict& v,
                                                  Record& rec) {
    if (v.gate == Gate::allow) {
        rec.data["decision"] = "allow";
        return std::nullopt;
    }
    rec.data["rule"] = v.rule;
    rec.data["reason"] = v.reason;
    if (s.rules.dryRun) {
        // Logged as what it would have been, and served.
        rec.data["decision"] = "allow";
        rec.data["would_decide"] = gateName(v.gate);
        return std::nullopt;
    }
    if (v.gate == Gate::approve && approvals_) {
        auto state = approvals_({s.id, s.tenant, e, name, version, v.reason});
        rec.data["approval_id"] = state.approvalId;
        if (state.state == PackageApprovalState::State::approved) {
            rec.data["decision"] = "allow";
            rec.data["approved"] = true;
            return std::nullopt;
        }
        rec.data["decision"] =
            state.state == PackageApprovalState::State::pending ? "approve" : "deny";
        if (state.approvalId.empty())
            return errorResponse(
                403, "Forbidden",
                v.reason + " (too many package approvals are pending in this sandbox)");
        std::string reason = v.reason + " (approval " + state.approvalId +
                             (state.state == PackageApprovalState::State::pending
                                  ? ": an approver can allow it with POST /v1/approvals/" +
                                        state.approvalId + ", then retry)"
                                  : " was denied)");
        return errorResponse(403, "Forbidden", reason, {{"approval_id", state.approvalId}});
    }
    rec.data["decision"] = "deny";
    return errorResponse(403, "Forbidden", v.reason);
}

// ---- npm ----

GuestResponse PackageService::npm(const SandboxPackages& s, const GuestRequest& r, Record& rec) {
    std::string path = r.target.substr(0, r.target.find('?'));
    if (path.rfind("/-/", 0) == 0) {
        rec.data["decision"] = "deny";
        rec.data["rule"] = "endpoint";
        return errorResponse(
            403, "Forbidden",
            "the package proxy serves package metadata and tarballs only (no search, "
            "audit, login or publish)");
    }
    if (auto t = parseNpmTarballPath(path)) {
        rec.type = "package.artifact";
        return npmTarball(s, t->name, t->version, rec);
    }
    if (auto name = parseNpmPackagePath(path)) return npmPackument(s, r, *name, rec);
    rec.skip = true;
    return errorResponse(404, "Not Found", "not a package path");
}

GuestResponse PackageService::npmPackument(const SandboxPackages& s, const GuestRequest& r,
                                           const std::string& name, Record& rec) {
    rec.data["name"] = name;
    if (!s.rules.npm.enabled && !s.rules.dryRun) {
        rec.data["decision"] = "deny";
        rec.data["rule"] = "enabled";
        return errorResponse(403, "Forbidden", "npm packages are disabled in this sandbox");
    }
    std::string encoded = name;
    if (auto slash = encoded.find('/'); slash != std::string::npos)
        encoded.replace(slash, 1, "%2f");
    GuestResponse failure;
    auto meta = metadata(config_.upstreams.npm->text() + encoded, "application/json", rec, failure);
    if (!meta) {
        rec.data["decision"] = "allow";
        return failure;
    }
    ParseSlot slot(parsing_);
    if (!jsonNestingWithin(meta->body, kMaxJsonDepth))
        return errorResponse(502, "Bad Gateway", "the upstream packument nests too deep");
    auto doc = json::parse(meta->body, nullptr, false);
    if (!doc.is_object())
        return errorResponse(502, "Bad Gateway", "the upstream packument is not JSON");
    std::string base = "http://" + (r.host.empty() ? "127.0.0.1" : r.host);
    auto filtered = filterPackument(doc, name, s.rules, nowUnixSeconds(), base);
    json hidden = json::array();
    for (const auto& f : filtered.refused)
        if (hidden.size() < 50)
            hidden.push_back({{"version", f.version}, {"rule", f.verdict.rule}});
    rec.data["versions"] = filtered.kept.size();
    if (!hidden.empty()) rec.data["hidden"] = hidden;
    if (filtered.doc["versions"].empty() && !filtered.refused.empty()) {
        // Nothing left to resolve: the manager gets the reason, not "no such version".
        const auto& last = filtered.refused.back();
        rec.data["decision"] = "deny";
        rec.data["rule"] = last.verdict.rule;
        rec.data["reason"] = last.verdict.reason;
        return errorResponse(403, "Forbidden", last.verdict.reason);
    }
    rec.data["decision"] = "allow";
    GuestResponse out;
    out.body = jsonText(filtered.doc);
    rec.data["size"] = out.body.size();
    return out;
}

GuestResponse PackageService::npmTarball(const SandboxPackages& s, const std::string& name,
                                         const std::string& version, Record& rec) {
    rec.data["name"] = name;
    rec.data["version"] = version;
    GuestResponse failure;
    std::string encoded = name;
    if (auto slash = encoded.find('/'); slash != std::string::npos)
        encoded.replace(slash, 1, "%2f");
    Record metaRec;  // the packument lookup is part of this record
    auto meta =
        metadata(config_.upstreams.npm->text() + encoded, "application/json", metaRec, failure);
    if (!meta) return failure;
    std::optional<NpmVersion> info;
    {
        ParseSlot slot(parsing_);
        if (!jsonNestingWithin(meta->body, kMaxJsonDepth))
            return errorResponse(502, "Bad Gateway", "the upstream packument nests too deep");
        info = npmVersion(json::parse(meta->body, nullptr, false), version);
    }
    if (!info)
        return errorResponse(404, "Not Found", name + "@" + version + " is not in the registry");
    rec.data["install_scripts"] = info->installScripts;
    if (info->published) rec.data["published"] = formatUnixSeconds(*info->published);
    rec.data["integrity"] = info->integrity;
    auto verdict = judge(Ecosystem::npm, s.rules.npm, name, version, info->published,
                         info->installScripts, nowUnixSeconds());
    if (auto refused = gate(s, Ecosystem::npm, name, version, verdict, rec)) return *refused;
    std::string sha512 = sriSha512Hex(info->integrity);
    std::string sha1 = isLowerHex(info->shasum, 40) ? info->shasum : "";
    if (sha512.empty() && sha1.empty())
        return errorResponse(
            502, "Bad Gateway",
            name + "@" + version + " has no integrity in the registry: it cannot be verified");
    // The tarball comes from the upstream's own origin, whatever the packument says.
    std::string url = info->tarball;
    auto parsed = HttpUrl::parse(url);
    if (!parsed || !parsed->sameOrigin(*config_.upstreams.npm))
        url = config_.upstreams.npm->text() + name + "/-/" +
              name.substr(name.find('/') == std::string::npos ? 0 : name.find('/') + 1) + "-" +
              version + ".tgz";
    rec.data["file"] = url.substr(url.rfind('/') + 1);
    return download(url, sha512.empty() ? "" : "sha512", sha512, sha512.empty() ? sha1 : "", rec);
}

// ---- PyPI ----

GuestResponse PackageService::pypi(const SandboxPackages& s, const GuestRequest& r, Record& rec) {
    std::string path = r.target.substr(0, r.target.find('?'));
    if (path.rfind("/files/", 0) == 0) {
        rec.type = "package.artifact";
        std::string rest = path.substr(7);
        std::string sha = rest.substr(0, rest.find('/'));
        if (!isLowerHex(sha, 64))
            return errorResponse(404, "Not Found", "not a file of this proxy");
        return pypiFile(s, sha, rec);
    }
    if (path.rfind("/simple/", 0) != 0 || path.size() <= 8) {
        rec.skip = true;
        return errorResponse(404, "Not Found",
                             "the proxy serves project pages under /simple/<project>/");
    }
    std::string project = percentDecode(path.substr(8));
    while (!project.empty() && project.back() == '/') project.pop_back();
    if (project.empty() || project.size() > 200 || project.find('/') != std::string::npos)
        return errorResponse(404, "Not Found", "not a project name");
    for (char c : project)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
            return errorResponse(404, "Not Found", "not a project name");
    std::string normalized = normalizeName(Ecosystem::pypi, project);
    rec.data["name"] = normalized;
    if (!s.rules.pypi.enabled && !s.rules.dryRun) {
        rec.data["decision"] = "deny";
        rec.data["rule"] = "enabled";
        return errorResponse(403, "Forbidden", "PyPI packages are disabled in this sandbox");
    }
    std::string url = config_.upstreams.pypi->text() + normalized + "/";
    GuestResponse failure;
    auto meta = metadata(url, "application/vnd.pypi.simple.v1+json, text/html;q=0.1", rec, failure);
    if (!meta) {
        rec.data["decision"] = "allow";
        return failure;
    }
    auto page = HttpUrl::parse(url);
    ParseSlot slot(parsing_);
    auto files = parsePypiIndex(meta->body, meta->contentType, *page);
    auto filtered = filterPypiFiles(files, normalized, s.rules, nowUnixSeconds());
    {
        std::lock_guard lock(offeredMutex_);
        for (const auto& f : filtered.kept) {
            auto [it, fresh] = offered_.insert_or_assign(
                f.sha256,
                OfferedFile{normalized, f.filename, f.version, f.url, f.uploaded, f.sdist});
            if (fresh) offeredOrder_.push_back(f.sha256);
        }
        // Bounded: the oldest offers go first (an install asks for the files
        // of the pages it just read).
        while (offered_.size() > 200'000 && !offeredOrder_.empty()) {
            offered_.erase(offeredOrder_.front());
            offeredOrder_.pop_front();
        }
    }
    json hidden = json::array();
    for (const auto& [f, v] : filtered.refused)
        if (hidden.size() < 50) hidden.push_back({{"file", f.filename}, {"rule", v.rule}});
    if (!hidden.empty()) rec.data["hidden"] = hidden;
    rec.data["files"] = filtered.kept.size();
    if (filtered.kept.empty() && !filtered.refused.empty()) {
        const auto& last = filtered.refused.back().second;
        rec.data["decision"] = "deny";
        rec.data["rule"] = last.rule;
        rec.data["reason"] = last.reason;
        return errorResponse(403, "Forbidden", last.reason);
    }
    rec.data["decision"] = "allow";
    std::string base = "http://" + (r.host.empty() ? "127.0.0.1" : r.host) + "/files";
    GuestResponse out;
    if (r.accept.find("application/vnd.pypi.simple.v1+json") != std::string::npos) {
        out.contentType = "application/vnd.pypi.simple.v1+json";
        out.body = renderPypiJson(normalized, filtered.kept, base);
    } else {
        out.contentType = "text/html";
        out.body = renderPypiHtml(normalized, filtered.kept, base);
    }
    return out;
}

GuestResponse PackageService::pypiFile(const SandboxPackages& s, const std::string& sha256,
                                       Record& rec) {
    OfferedFile f;
    {
        std::lock_guard lock(offeredMutex_);
        auto it = offered_.find(sha256);
        if (it == offered_.end())
            return errorResponse(404, "Not Found",
                                 "unknown file: the proxy serves files its project pages offered");
        f = it->second;
    }
    rec.data["name"] = f.project;
    rec.data["version"] = f.version;
    rec.data["file"] = f.filename;
    rec.data["sha256"] = sha256;
    if (f.uploaded) rec.data["published"] = formatUnixSeconds(*f.uploaded);
    rec.data["install_scripts"] = f.sdist;
    // Judged again: the rules may have changed since the page was served.
    auto verdict = judge(Ecosystem::pypi, s.rules.pypi, f.project, f.version, f.uploaded, f.sdist,
                         nowUnixSeconds());
    if (auto refused = gate(s, Ecosystem::pypi, f.project, f.version, verdict, rec))
        return *refused;
    return download(f.url, "sha256", sha256, "", rec);
}

// ---- apt ----

GuestResponse PackageService::apt(const SandboxPackages& s, const GuestRequest& r, Record& rec) {
    std::string path = r.target.substr(0, r.target.find('?'));
    auto slash = path.find('/', 1);
    std::string name = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
    const HttpUrl* upstream = nullptr;
    for (const auto& [n, u] : config_.upstreams.apt)
        if (n == name) upstream = &u;
    if (!upstream || slash == std::string::npos) {
        rec.skip = true;
        return errorResponse(404, "Not Found",
                             "no apt upstream named '" + name.substr(0, 80) + "'");
    }
    std::string rest = path.substr(slash + 1);
    // Only the escapes apt writes (an epoch's ':', '+', '~'): nothing decodes
    // into a separator or a dot segment upstream.
    for (std::size_t i = 0; i < rest.size(); ++i) {
        char c = rest[i];
        if (c == '%') {
            std::string esc = rest.substr(i + 1, 2);
            for (auto& e : esc) e = static_cast<char>(std::tolower(static_cast<unsigned char>(e)));
            if (esc != "3a" && esc != "2b" && esc != "7e")
                return errorResponse(404, "Not Found", "not a repository path");
            i += 2;
        } else if (!std::isalnum(static_cast<unsigned char>(c)) &&
                   std::string("-_.+~/:").find(c) == std::string::npos) {
            return errorResponse(404, "Not Found", "not a repository path");
        }
    }
    // "." segments go (a flat repository, "deb URL ./", asks for "/name/./Release");
    // ".." and empty segments are refused.
    {
        std::string clean;
        for (std::size_t at = 0; at <= rest.size();) {
            auto next = rest.find('/', at);
            std::string seg =
                rest.substr(at, next == std::string::npos ? std::string::npos : next - at);
            if (seg == ".." || (seg.empty() && next != std::string::npos))
                return errorResponse(404, "Not Found", "not a repository path");
            if (seg != ".") clean += (clean.empty() ? "" : "/") + seg;
            if (next == std::string::npos) break;
            at = next + 1;
        }
        rest = clean;
    }
    if (rest.empty()) return errorResponse(404, "Not Found", "not a repository path");
    std::string url = upstream->text() + rest;
    std::string file = percentDecode(rest.substr(rest.rfind('/') + 1));
    // Indices (signed Release files and what they list) pass; every other
    // file (.deb, .udeb, .dsc, source tarballs...) is a package download.
    static const char* kIndexNames[] = {"Release", "InRelease", "Release.gpg", "Packages",
                                        "Sources", "Contents",  "Translation", "Components",
                                        "Index",   "icons",     "dep11",       "Commands"};
    bool index = ("/" + rest).find("/dists/") != std::string::npos ||
                 rest.find("/by-hash/") != std::string::npos;
    for (const char* n : kIndexNames) index = index || file.rfind(n, 0) == 0;
    if (!index) {
        rec.type = "package.artifact";
        // name_version_arch.deb (the version's epoch colon arrives as %3a).
        auto a = file.find('_');
        auto b = a == std::string::npos ? std::string::npos : file.find('_', a + 1);
        if (b == std::string::npos && a != std::string::npos) {
            // Source files: name_version.dsc, name_version.orig.tar.xz...
            b = file.size();
            for (const char* suffix : {".dsc", ".orig", ".debian", ".diff", ".tar"})
                if (auto at = file.find(suffix, a + 1); at != std::string::npos)
                    b = std::min(b, at);
        }
        std::string pkg = file.substr(0, a);
        std::string version = b == std::string::npos ? "" : file.substr(a + 1, b - a - 1);
        rec.data["name"] = pkg;
        rec.data["version"] = version;
        rec.data["file"] = file;
        auto verdict =
            judge(Ecosystem::apt, s.rules.apt, pkg, version, std::nullopt, false, nowUnixSeconds());
        if (auto refused = gate(s, Ecosystem::apt, pkg, version, verdict, rec)) return *refused;
        return download(url, "", "", "", rec);
    }
    // Indices (Release, Packages, by-hash...): apt checks them against the
    // archive's signed Release itself.
    rec.data["name"] = name;
    if (!s.rules.apt.enabled && !s.rules.dryRun) {
        rec.data["decision"] = "deny";
        rec.data["rule"] = "enabled";
        return errorResponse(403, "Forbidden", "apt is disabled in this sandbox");
    }
    rec.data["decision"] = "allow";
    rec.data["file"] = rest;
    return download(url, "", "", "", rec);
}

// ---- downloads ----

GuestResponse PackageService::download(const std::string& url, const std::string& algorithm,
                                       const std::string& expectedHex, const std::string& sha1Hex,
                                       Record& rec) {
    rec.data["upstream"] = url;
    if (!algorithm.empty()) {
        rec.data[algorithm] = expectedHex;
        if (auto hit = cache_.findBlob(algorithm, expectedHex)) {
            rec.data["cache"] = "hit";
            GuestResponse out;
            out.contentType = "application/octet-stream";
            out.filePath = *hit;
            std::error_code ec;
            out.fileSize = std::filesystem::file_size(*hit, ec);
            rec.data["size"] = out.fileSize;
            return out;
        }
    }
    rec.data["cache"] = algorithm.empty() ? "none" : "miss";
    std::string staging = cache_.stagingPath();
    struct Remove {
        std::string path;
        bool keep = false;
        ~Remove() {
            if (!keep) ::unlink(path.c_str());
        }
    } guard{staging};
    UniqueFd fd(::open(staging.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd) throw Error(ErrorCode::internal, "cannot create a download file in the package cache");
    DigestStream digest(algorithm.empty() ? "sha256" : algorithm);
    std::optional<DigestStream> sha1;
    if (!sha1Hex.empty()) sha1.emplace("sha1");
    std::string errorBody;
    auto resp = client_.get(
        url, {}, config_.maxArtifactBytes,
        [&](std::string_view piece) {
            digest.update(piece);
            if (sha1) sha1->update(piece);
            std::size_t off = 0;
            while (off < piece.size()) {
                auto n = ::write(fd.get(), piece.data() + off, piece.size() - off);
                if (n <= 0) {
                    if (n < 0 && errno == EINTR) continue;
                    throw Error(ErrorCode::insufficient_storage,
                                "cannot write to the package cache");
                }
                off += static_cast<std::size_t>(n);
            }
        },
        &errorBody);
    if (resp.status == 404 || resp.status == 410)
        return errorResponse(404, "Not Found", "not in the upstream registry");
    if (resp.status < 200 || resp.status >= 300)
        return errorResponse(502, "Bad Gateway",
                             "the upstream registry answered " + std::to_string(resp.status));
    fd.reset();
    std::string got = digest.hexDigest();
    rec.data["size"] = resp.bytes;
    bool ok = algorithm.empty() || got == expectedHex;
    std::string gotSha1 = sha1 ? sha1->hexDigest() : "";
    if (sha1 && gotSha1 != sha1Hex) ok = false;
    if (!ok) {
        rec.type = "package.integrity_failed";
        rec.data["decision"] = "deny";
        rec.data["rule"] = "integrity";
        rec.data["actual_" + (algorithm.empty() ? std::string("sha1") : algorithm)] =
            algorithm.empty() ? gotSha1 : got;
        return errorResponse(502, "Bad Gateway",
                             "integrity check failed: the download does not match the registry's " +
                                 (algorithm.empty() ? std::string("sha1") : algorithm) +
                                 " digest; nothing was cached");
    }
    GuestResponse out;
    out.contentType = "application/octet-stream";
    out.fileSize = resp.bytes;
    if (algorithm.empty()) {
        // Pass-through: served once, then removed.
        rec.data["sha256"] = got;
        out.filePath = staging;
        out.removeFile = true;
        guard.keep = true;
        return out;
    }
    out.filePath = cache_.adoptBlob(staging, algorithm, expectedHex);
    guard.keep = true;
    return out;
}

}  // namespace airlock::packages
