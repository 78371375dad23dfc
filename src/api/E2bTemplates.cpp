#include "api/E2bTemplates.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/ErrorMapping.hpp"
#include "core/Error.hpp"
#include "core/GzipInflater.hpp"
#include "core/Hex.hpp"
#include "core/Ids.hpp"
#include "core/JsonFields.hpp"
#include "core/Sha256.hpp"
#include "e2b/E2bWire.hpp"
#include "templates/TemplateBuilder.hpp"
#include "templates/TemplateSpecJson.hpp"

namespace airlock::api {
namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr auto kRequestLife = 1h;
constexpr auto kUploadLife = 1h;
constexpr std::size_t kMaxPending = 4096;
// The SDK's default image and the names of E2B's base: Airlock's `base`.
bool isE2bBaseImage(const std::string& image) {
    return image == "e2bdev/base" || image.rfind("e2bdev/base:", 0) == 0 ||
           image == "docker.io/e2bdev/base" || image.rfind("docker.io/e2bdev/base:", 0) == 0;
}

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A plain tar's entries without its end-of-archive blocks (so that several
// archives make one context).
std::string tarEntries(const std::string& tar) {
    std::size_t at = 0;
    while (at + 512 <= tar.size()) {
        const char* h = tar.data() + at;
        bool zero = true;
        for (int i = 0; i < 512 && zero; ++i) zero = h[i] == 0;
        if (zero) break;
        std::uint64_t size = 0;
        for (int i = 124; i < 136 && h[i]; ++i) {
            if (h[i] == ' ') continue;
            if (h[i] < '0' || h[i] > '7') throw Error(ErrorCode::bad_request, "an uploaded archive is not a tar");
            size = size * 8 + static_cast<std::uint64_t>(h[i] - '0');
        }
        at += 512 + (size + 511) / 512 * 512;
    }
    if (at > tar.size()) throw Error(ErrorCode::bad_request, "an uploaded archive is cut short");
    return tar.substr(0, at);
}

std::string plainTar(const std::string& bytes) {
    if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0x1f ||
        static_cast<unsigned char>(bytes[1]) != 0x8b)
        return bytes;
    GzipInflater inflater;
    inflater.feed(bytes);
    std::string out;
    for (;;) {
        auto piece = inflater.next(1 << 20);
        if (piece.empty()) break;
        out += piece;
        if (out.size() > E2bTemplates::kMaxArchive) throw Error(ErrorCode::payload_too_large, "an uploaded archive unpacks to more than 256 MiB");
    }
    inflater.finish();
    return out;
}

// Written whole or not at all (a full disk is a 507, never half a file).
void writeWhole(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
        std::error_code ec;
        fs::remove(path, ec);
        throw Error(ErrorCode::insufficient_storage, "cannot keep the template's files on this server's disk");
    }
}

// The SDK's package helpers as it writes them, run as root: a package step.
std::optional<templates::PackagesStep> packageStepOf(const templates::RunStep& run) {
    if (run.user != "root") return std::nullopt;
    std::vector<std::string> words;
    std::istringstream in(run.shell);
    for (std::string w; in >> w;) words.push_back(w);
    auto rest = [&](std::size_t from, templates::PackageManager m) -> std::optional<templates::PackagesStep> {
        templates::PackagesStep step{m, {}};
        for (std::size_t i = from; i < words.size(); ++i) {
            const auto& w = words[i];
            if (w == "--no-install-recommends" || w == "--fix-missing") continue;
            if (!templates::isPackageName(w)) return std::nullopt;
            step.packages.push_back(w);
        }
        if (step.packages.empty()) return std::nullopt;
        return step;
    };
    auto starts = [&](std::initializer_list<const char*> prefix) {
        if (words.size() < prefix.size()) return false;
        std::size_t i = 0;
        for (const char* p : prefix)
            if (words[i++] != p) return false;
        return true;
    };
    if (starts({"apt-get", "update", "&&", "DEBIAN_FRONTEND=noninteractive", "DEBCONF_NOWARNINGS=yes", "apt-get",
                "install", "-y"}))
        return rest(8, templates::PackageManager::apt);
    if (starts({"pip", "install"})) return rest(2, templates::PackageManager::pip);
    if (starts({"npm", "install", "-g"})) return rest(3, templates::PackageManager::npm);
    return std::nullopt;
}

std::string stringArg(const json& args, std::size_t i, const std::string& what) {
    if (!args.is_array() || i >= args.size() || !args[i].is_string())
        throw Error(ErrorCode::bad_request, what + ": argument " + std::to_string(i + 1) + " must be a string");
    return args[i].get<std::string>();
}

}  // namespace

E2bTemplates::E2bTemplates(templates::TemplateBuilder& builder, const TemplateCatalog& catalog,
                           std::string filesDir, bool tls)
    : builder_(builder), catalog_(catalog), filesDir_(std::move(filesDir)), tls_(tls) {
    fs::create_directories(filesDir_);
}

void E2bTemplates::prune() {
    auto now = std::chrono::steady_clock::now();
    std::erase_if(requested_, [&](const auto& kv) { return now - kv.second.at > kRequestLife; });
    std::erase_if(grants_, [&](const auto& kv) { return now > kv.second.expires; });
}

std::string E2bTemplates::archivePath(const std::string& tenant, const std::string& hash) const {
    return filesDir_ + "/" + sha256Hex(tenant).substr(0, 32) + "-" + hash + ".tar";
}

std::uint64_t E2bTemplates::archivedBytes(const std::string& tenant) {
    // Archives unused for a day go (a build that wants one asks for it again).
    auto prefix = sha256Hex(tenant).substr(0, 32) + "-";
    auto dayAgo = fs::file_time_type::clock::now() - std::chrono::hours(24);
    std::uint64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(filesDir_, ec)) {
        std::error_code fe;
        auto when = e.last_write_time(fe);
        if (!fe && when < dayAgo) {
            fs::remove(e.path(), fe);
            continue;
        }
        if (e.path().filename().string().rfind(prefix, 0) == 0) total += e.file_size(fe);
    }
    return total;
}

void E2bTemplates::checkUpload(const ApiRequest& head, const std::vector<std::string>& params) {
    auto it = head.query.find("token");
    std::lock_guard lock(mutex_);
    prune();
    auto g = it == head.query.end() ? grants_.end() : grants_.find(it->second);
    if (g == grants_.end() || params.size() < 2 || g->second.hash != params[1])
        throw Error(ErrorCode::forbidden, "this upload link is not valid (or has expired)");
}

bool E2bTemplates::isBuilt(const std::string& tenant, const std::string& name) {
    return builder_.lookup(tenant, name).has_value();
}

void E2bTemplates::removeBuilt(const std::string& tenant, const std::string& name) {
    builder_.remove(tenant, name);
}

std::string E2bTemplates::usableTemplates(const std::string& tenant) const {
    return "base, " + builder_.usableTemplates(tenant);
}

// POST /v3/templates {name, tags?, cpuCount?, memoryMB?}
ApiResponse E2bTemplates::requestBuild(RouteContext& c) {
    json body = parseJsonBody(c.request.body);
    rejectUnknownFields(body, {"name", "tags", "cpuCount", "memoryMB", "minFreeDiskMb", "alias", "teamID"},
                        "template request");
    std::string asked = body.contains("name") ? stringField(body, "name")
                                              : body.contains("alias") ? stringField(body, "alias") : "";
    auto ref = templates::parseTemplateRef(asked);
    if (body.contains("tags")) {
        if (!body["tags"].is_array() || body["tags"].size() > 1)
            throw Error(ErrorCode::bad_request, "'tags' takes one tag here (give more builds for more tags)");
        if (!body["tags"].empty()) {
            if (!body["tags"][0].is_string()) throw Error(ErrorCode::bad_request, "a tag must be a string");
            ref.tag = body["tags"][0].get<std::string>();
            if (!templates::isValidTemplateTag(ref.tag))
                throw Error(ErrorCode::bad_request, "a template tag is 1 to 64 of a-z, 0-9, '-', '_' and '.'");
        }
    }
    if (catalog_.find(ref.name) || ref.name == "base")
        throw Error(ErrorCode::conflict, "'" + ref.name + "' is one of the server's own templates");
    Requested r{c.tenant, ref.name, ref.tag, std::nullopt, std::nullopt, std::chrono::steady_clock::now()};
    if (body.contains("cpuCount")) {
        if (!body["cpuCount"].is_number_integer() || body["cpuCount"].get<long long>() < 1 || body["cpuCount"].get<long long>() > 64)
            throw Error(ErrorCode::bad_request, "'cpuCount' must be an integer from 1 to 64");
        r.vcpus = body["cpuCount"].get<unsigned>();
    }
    if (body.contains("memoryMB")) {
        if (!body["memoryMB"].is_number_integer() || body["memoryMB"].get<long long>() < 64 || body["memoryMB"].get<long long>() > (1 << 20))
            throw Error(ErrorCode::bad_request, "'memoryMB' must be an integer from 64 to 1048576");
        r.memoryMib = body["memoryMB"].get<unsigned>();
    }
    std::string buildId = newId("bld-");
    {
        std::lock_guard lock(mutex_);
        prune();
        std::size_t mine = 0;
        for (const auto& [id, req] : requested_) mine += req.tenant == c.tenant;
        if (requested_.size() >= kMaxPending || mine >= kMaxRequestedPerTenant)
            throw Error(ErrorCode::too_many_requests, "too many template builds requested and not started");
        requested_[buildId] = r;
    }
    return jsonResponse(202, {{"templateID", ref.name},
                              {"buildID", buildId},
                              {"tags", json::array({ref.tag})},
                              {"names", json::array({ref.name})},
                              {"aliases", json::array({ref.name})},
                              {"public", false}});
}

// GET /templates/aliases/{alias}
ApiResponse E2bTemplates::alias(RouteContext& c) {
    const auto& name = c.params[0];
    if (name == "base" || catalog_.find(name) || builder_.lookup(c.tenant, name))
        return jsonResponse(200, {{"templateID", name}, {"public", false}});
    throw Error(ErrorCode::not_found, "no template named '" + name + "'");
}

// GET /templates/{templateID}/files/{hash}
ApiResponse E2bTemplates::fileLink(RouteContext& c) {
    const auto& hash = c.params[1];
    if (hash.size() != 64 || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
        throw Error(ErrorCode::bad_request, "a files hash is 64 lower-case hex digits");
    if (fs::exists(archivePath(c.tenant, hash))) {
        std::error_code ec;
        fs::last_write_time(archivePath(c.tenant, hash), fs::file_time_type::clock::now(), ec);  // used again
        return jsonResponse(201, {{"present", true}});
    }
    if (archivedBytes(c.tenant) >= kMaxTenantArchives)
        throw Error(ErrorCode::quota_exceeded,
                    "quota exceeded: template files (the tenant's uploads for builds hold 2 GiB; unused ones go after a day)");
    std::string token = newId("upl-");
    {
        std::lock_guard lock(mutex_);
        prune();
        std::size_t mine = 0;
        for (const auto& [token, g] : grants_) mine += g.tenant == c.tenant;
        if (grants_.size() >= kMaxPending || mine >= kMaxGrantsPerTenant)
            throw Error(ErrorCode::too_many_requests, "too many uploads granted and not made");
        grants_[token] = UploadGrant{c.tenant, hash, std::chrono::steady_clock::now() + kUploadLife};
    }
    std::string host = c.request.host.empty() ? "127.0.0.1" : c.request.host;
    std::string url = std::string(tls_ ? "https://" : "http://") + host + "/templates/" + c.params[0] +
                      "/files/" + hash + "/upload?token=" + token;
    return jsonResponse(201, {{"present", false}, {"url", url}});
}

// PUT /templates/{templateID}/files/{hash}/upload?token=T (the SDK's archive)
ApiResponse E2bTemplates::upload(RouteContext& c) {
    auto it = c.request.query.find("token");
    UploadGrant grant;
    {
        std::lock_guard lock(mutex_);
        prune();
        auto g = it == c.request.query.end() ? grants_.end() : grants_.find(it->second);
        if (g == grants_.end() || g->second.hash != c.params[1])
            throw Error(ErrorCode::forbidden, "this upload link is not valid (or has expired)");
        grant = g->second;
        grants_.erase(g);
    }
    auto tar = plainTar(c.request.body);
    tarEntries(tar);  // a tar, or refused now
    auto path = archivePath(grant.tenant, grant.hash);
    auto tmp = path + ".part";
    writeWhole(tmp, tar);
    fs::rename(tmp, path);
    return ApiResponse(200, "application/json", "{}");
}

// POST /v2/templates/{templateID}/builds/{buildID}
ApiResponse E2bTemplates::startBuild(RouteContext& c) {
    const auto& buildId = c.params[1];
    Requested r;
    {
        std::lock_guard lock(mutex_);
        prune();
        auto it = requested_.find(buildId);
        if (it == requested_.end() || it->second.tenant != c.tenant || it->second.name != c.params[0])
            throw Error(ErrorCode::not_found, "no template build " + buildId + " was requested");
        r = it->second;
        requested_.erase(it);
    }
    json body = parseJsonBody(c.request.body);
    rejectUnknownFields(body, {"fromImage", "fromTemplate", "fromImageRegistry", "steps", "startCmd", "readyCmd", "force"},
                        "template build");
    templates::TemplateSpec spec;
    spec.name = r.name;
    spec.tag = r.tag;
    // The SDK's skipCache: the whole build, or (per step) from that step on.
    if (body.contains("force") && body["force"].is_boolean() && body["force"].get<bool>()) spec.noCache = true;
    if (body.contains("steps") && body["steps"].is_array())
        for (const auto& s : body["steps"])
            if (s.is_object() && s.value("force", false) == true) spec.noCache = true;
    spec.vcpus = r.vcpus;
    spec.memoryMib = r.memoryMib;
    if (body.contains("fromTemplate")) {
        auto from = stringField(body, "fromTemplate");
        spec.from = from == "base" ? e2b::kBaseTemplate : from;
    } else {
        auto image = body.contains("fromImage") ? stringField(body, "fromImage") : "e2bdev/base";
        if (!isE2bBaseImage(image) || body.contains("fromImageRegistry"))
            throw Error(ErrorCode::bad_request,
                        "cannot build from the image '" + image.substr(0, 128) +
                            "': images cannot be pulled here (there is no image registry). Build fromTemplate() "
                            "one of the templates that can be used: " + usableTemplates(c.tenant));
        spec.from = e2b::kBaseTemplate;
    }
    // E2B's defaults: steps run as `user` in /home/user.
    spec.steps.push_back(templates::UserStep{"user"});
    spec.steps.push_back(templates::WorkdirStep{"/home/user"});
    std::string user = "user";
    std::vector<std::string> archives;  // each COPY's, once
    const auto& steps = body.contains("steps") ? body["steps"] : json::array();
    if (!steps.is_array() || steps.size() > 500) throw Error(ErrorCode::bad_request, "'steps' must be a list of at most 500");
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const auto& s = steps[i];
        std::string where = "steps[" + std::to_string(i) + "]";
        if (!s.is_object() || !s.contains("type") || !s["type"].is_string())
            throw Error(ErrorCode::bad_request, where + " must be {type, args}");
        auto type = s["type"].get<std::string>();
        const auto& args = s.contains("args") ? s["args"] : json::array();
        if (type == "RUN") {
            templates::RunStep run{stringArg(args, 0, where), std::nullopt, std::nullopt, {}};
            if (args.size() > 1) run.user = stringArg(args, 1, where);
            // The SDK's aptInstall/pipInstall/npmInstall: package steps (the proxy and its rules).
            if (auto packages = packageStepOf(run)) spec.steps.push_back(*packages);
            else spec.steps.push_back(run);
        } else if (type == "COPY") {
            templates::CopyStep copy{stringArg(args, 0, where), stringArg(args, 1, where), std::nullopt, std::nullopt};
            auto owner = args.size() > 2 ? stringArg(args, 2, where) : "";
            if (owner.empty()) owner = user;
            copy.owner = owner.find(':') == std::string::npos ? owner + ":" + owner : owner;
            if (args.size() > 3 && !stringArg(args, 3, where).empty()) copy.mode = stringArg(args, 3, where);
            auto h = s.find("filesHash");
            std::string hash = h != s.end() && h->is_string() ? h->get<std::string>() : "";
            if (hash.size() != 64 || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
                throw Error(ErrorCode::bad_request, where + ": filesHash must be 64 lower-case hex digits");
            auto archive = archivePath(c.tenant, hash);
            if (!fs::exists(archive))
                throw Error(ErrorCode::bad_request, where + ": its files (" + hash + ") were not uploaded");
            if (std::find(archives.begin(), archives.end(), archive) == archives.end()) archives.push_back(archive);
            spec.steps.push_back(copy);
        } else if (type == "ENV") {
            templates::EnvStep env;
            if (!args.is_array() || args.size() % 2) throw Error(ErrorCode::bad_request, where + ": ENV takes name, value pairs");
            for (std::size_t k = 0; k + 1 < args.size(); k += 2)
                env.vars.emplace_back(stringArg(args, k, where), stringArg(args, k + 1, where));
            spec.steps.push_back(env);
        } else if (type == "WORKDIR") {
            spec.steps.push_back(templates::WorkdirStep{stringArg(args, 0, where)});
        } else if (type == "USER") {
            user = stringArg(args, 0, where);
            spec.steps.push_back(templates::UserStep{user});
        } else {
            throw Error(ErrorCode::bad_request, where + ": no step of type '" + type.substr(0, 32) + "'");
        }
    }
    if (body.contains("startCmd")) {
        templates::StartSpec start;
        start.cmd = stringField(body, "startCmd");
        if (body.contains("readyCmd")) {
            start.ready.kind = templates::ReadyCheck::Kind::command;
            start.ready.command = stringField(body, "readyCmd");
            start.ready.timeoutS = 120;
        }
        spec.start = start;
    }
    // The archives, one after another, make the build's context (one in memory at a time).
    std::string contextFile;
    try {
        if (!archives.empty()) {
            contextFile = filesDir_ + "/ctx-" + buildId + ".tar";
            std::ofstream out(contextFile, std::ios::binary);
            std::uint64_t total = 0;
            for (const auto& archive : archives) {
                auto entries = tarEntries(readFile(archive));
                total += entries.size();
                if (total > kMaxContext)
                    throw Error(ErrorCode::payload_too_large, "a build's files hold more than 1 GiB together");
                out.write(entries.data(), static_cast<std::streamsize>(entries.size()));
            }
            out << std::string(1024, '\0');
            out.close();
            if (!out) throw Error(ErrorCode::insufficient_storage, "cannot keep the build's files on this server's disk");
        }
        builder_.submit(c.tenant, std::move(spec), contextFile, buildId);
    } catch (...) {
        std::error_code ec;
        if (!contextFile.empty()) fs::remove(contextFile, ec);
        // The request stands: the SDK (or its user) may send the build again.
        std::lock_guard lock(mutex_);
        requested_.emplace(buildId, r);
        throw;
    }
    return ApiResponse(202, "application/json", "{}");
}

// GET /templates/{templateID}/builds/{buildID}/status?logsOffset=N
ApiResponse E2bTemplates::status(RouteContext& c) {
    const auto& name = c.params[0];
    const auto& buildId = c.params[1];
    std::size_t offset = 0;
    if (auto it = c.request.query.find("logsOffset"); it != c.request.query.end()) {
        try {
            offset = std::stoul(it->second);
        } catch (const std::exception&) {
            throw Error(ErrorCode::bad_request, "logsOffset must be a number");
        }
    }
    {
        std::lock_guard lock(mutex_);
        auto it = requested_.find(buildId);
        if (it != requested_.end() && it->second.tenant == c.tenant && it->second.name == name)
            return jsonResponse(200, {{"templateID", name}, {"buildID", buildId}, {"status", "waiting"},
                                      {"logEntries", json::array()}, {"logs", json::array()}});
    }
    auto b = builder_.build(c.tenant, name, buildId);
    json entries = json::array();
    for (const auto& l : builder_.logLines(c.tenant, name, buildId, offset))
        entries.push_back({{"timestamp", l.time}, {"level", l.level}, {"message", l.text}});
    std::string state = b.state == BuildState::queued     ? "waiting"
                        : b.state == BuildState::building ? "building"
                        : b.state == BuildState::ready    ? "ready"
                                                          : "error";
    json j{{"templateID", name}, {"buildID", buildId}, {"status", state}, {"logEntries", entries}, {"logs", json::array()}};
    if (b.state == BuildState::failed) {
        json reason{{"message", b.error}};
        if (b.failedStep) reason["step"] = std::to_string(*b.failedStep + 1);
        j["reason"] = reason;
    }
    return jsonResponse(200, j);
}

}  // namespace airlock::api
