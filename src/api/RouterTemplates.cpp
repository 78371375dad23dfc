// The template routes: build a template (a recipe or a Dockerfile, with a
// build context), follow its build, list, get and delete templates.
#include <filesystem>
#include <fstream>

#include "api/ConnectStreamSession.hpp"
#include "api/ErrorMapping.hpp"
#include "api/MultipartForm.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/JsonFields.hpp"
#include "templates/DockerfileParser.hpp"
#include "templates/TemplateBuilder.hpp"
#include "templates/TemplateSpecJson.hpp"

namespace airlock::api {
using nlohmann::json;
using templates::TemplateBuilder;

namespace {

// The guests' PATH (what a Dockerfile's $PATH means before an ENV sets it).
constexpr const char* kGuestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The line FROM is on (comments and parser directives may come first).
unsigned fromLine(const std::string& dockerfile) {
    unsigned line = 1;
    for (std::size_t at = 0; at < dockerfile.size(); ++line) {
        auto end = dockerfile.find('\n', at);
        auto text = dockerfile.substr(at, end == std::string::npos ? std::string::npos : end - at);
        auto first = text.find_first_not_of(" \t");
        if (first != std::string::npos && (text.compare(first, 4, "FROM") == 0 || text.compare(first, 4, "from") == 0))
            return line;
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return 1;
}

json buildJson(const TemplateBuildRecord& b) {
    json j{{"build_id", b.id},         {"id", b.id},
           {"name", b.name},           {"tag", b.tag},
           {"state", buildStateName(b.state)},
           {"steps_cached", b.stepsCached}, {"created_at", b.createdAt},
           {"spec", b.spec}};
    if (!b.finishedAt.empty()) j["finished_at"] = b.finishedAt;
    if (!b.evidenceId.empty()) j["evidence_id"] = b.evidenceId;
    if (b.state == BuildState::failed) {
        json f{{"message", b.error}};
        if (b.failedStep) f["step"] = *b.failedStep + 1;
        if (!b.failedCommand.empty()) f["command"] = b.failedCommand;
        if (b.exitCode) f["exit_code"] = *b.exitCode;
        j["error"] = f;
        if (b.exitCode) j["exit_code"] = *b.exitCode;
    }
    return j;
}

json templateJson(const UserTemplateRecord& t) {
    return {{"name", t.name},
            {"tag", t.tag},
            {"kind", "built"},
            {"from", t.from},
            {"digest", t.digest},
            {"build_id", t.buildId},
            {"evidence_id", t.evidenceId},
            {"env", t.env},
            {"start_cmd", t.startCmd},
            {"user", t.user},
            {"workdir", t.workdir},
            {"vcpus", t.vcpus},
            {"memory_mib", t.memoryMib},
            {"labels", t.labels},
            {"exposed_ports", t.exposedPorts},
            {"created_at", t.createdAt}};
}

std::string lines(const std::vector<templates::BuildLog::Line>& all) {
    std::string out;
    for (const auto& l : all) out += templates::BuildLog::render(l);
    return out;
}

}  // namespace

TemplateBuilder& Router::templateBuilder() {
    if (!templates_)
        throw Error(ErrorCode::unavailable, "template builds are not enabled on this server");
    return *templates_;
}

// GET /v1/templates: the server's templates and the tenant's own
ApiResponse Router::listTemplates(Context& c) {
    json list = json::array();
    for (const auto& t : services_.host.templates().list())
        list.push_back({{"name", t.name},
                        {"kind", "base"},
                        {"vcpus", t.vcpus},
                        {"memory_mib", t.memoryMib},
                        {"digest", t.digest},
                        {"kernel_version", t.kernelVersion},
                        {"has_disk", !t.diskPath.empty()},
                        {"warm", services_.host.hasWarmSnapshot(t.name)}});
    if (templates_)
        for (const auto& t : templates_->list(c.tenant)) list.push_back(templateJson(t));
    return jsonResponse(200, {{"templates", list}});
}

// POST /v1/templates (JSON, or multipart: spec, dockerfile?, context?)
ApiResponse Router::buildTemplate(Context& c) {
    auto& builder = templateBuilder();
    json specPart;
    std::optional<std::string> dockerfile;
    std::optional<std::string> context;
    const auto& type = c.request.contentType;
    if (type.rfind("multipart/form-data", 0) == 0) {
        for (auto& part : parseMultipartForm(type, c.request.body, 3)) {
            if (part.name == "spec")
                specPart = parseJsonBody(part.body);
            else if (part.name == "dockerfile")
                dockerfile = std::move(part.body);
            else if (part.name == "context")
                context = std::move(part.body);
            else
                throw Error(ErrorCode::bad_request, "unknown part '" + part.name.substr(0, 64) +
                                                        "': the parts are spec, dockerfile and context");
        }
        if (specPart.is_null())
            throw Error(ErrorCode::bad_request, "a 'spec' part (application/json) is required");
    } else {
        specPart = parseJsonBody(c.request.body);
    }
    templates::TemplateSpec spec;
    if (dockerfile) {
        templates::requireDockerfileCompanion(specPart);
        json recipe = specPart;
        recipe.erase("ready");
        recipe["from"] = "minimal";  // replaced by the Dockerfile's FROM below
        spec = templates::parseTemplateSpec(recipe);
        std::string names = builder.usableTemplates(c.tenant);
        templates::ParsedDockerfile parsed;
        try {
            parsed = templates::parseDockerfile(*dockerfile);
        } catch (const templates::DockerfileError& e) {
            if (e.instruction() != "FROM") throw;
            throw templates::DockerfileError(e.line(), "FROM",
                                             std::string(e.what()).substr(std::string(e.what()).find("): ") + 3) +
                                                 " (the templates here: " + names + ")");
        }
        auto built = builder.lookup(c.tenant, parsed.from);
        bool known = services_.host.templates().find(parsed.from) || built;
        if (!known)
            throw templates::DockerfileError(
                fromLine(*dockerfile), "FROM",
                "'" + parsed.from.substr(0, 128) +
                    "' is not an Airlock template. There is no image registry here: images cannot be "
                    "pulled, a build starts FROM a template (" + names + ")");
        // Again with the base's environment: ENV PATH=/x:$PATH extends the real PATH.
        std::map<std::string, std::string> baseEnv{{"PATH", kGuestPath}};
        if (built)
            for (const auto& [k, v] : built->env.items())
                if (v.is_string()) baseEnv[k] = v.get<std::string>();
        parsed = templates::parseDockerfile(*dockerfile, {}, baseEnv);
        spec.from = parsed.from;
        spec.steps = std::move(parsed.steps);
        spec.labels = std::move(parsed.labels);
        spec.exposedPorts = std::move(parsed.exposedPorts);
        if (parsed.start) {
            spec.start = std::move(parsed.start);
            if (specPart.contains("ready")) spec.start->ready = templates::parseReadyCheck(specPart["ready"]);
        }
    } else {
        spec = templates::parseTemplateSpec(specPart);
    }
    // The build sandbox's settings are checked now: a bad one is a 400, not a failed build.
    CreateSandboxRequest probe;
    applyBuildSandboxSettings(spec.sandbox, probe);

    std::string contextFile;
    if (context) {
        contextFile = templateBuildsDir_ + "/upload-" + newId("ctx-") + ".tar";
        std::ofstream out(contextFile, std::ios::binary);
        out.write(context->data(), static_cast<std::streamsize>(context->size()));
        out.close();
        if (!out) {
            std::error_code ec;
            std::filesystem::remove(contextFile, ec);
            throw Error(ErrorCode::insufficient_storage, "cannot keep the build context on this server's disk");
        }
    }
    try {
        auto b = builder.submit(c.tenant, std::move(spec), contextFile);
        return jsonResponse(202, buildJson(b));
    } catch (...) {
        std::error_code ec;
        if (!contextFile.empty()) std::filesystem::remove(contextFile, ec);
        throw;
    }
}

// GET /v1/templates/{name}
ApiResponse Router::getTemplate(Context& c) {
    const auto& ref = c.params[0];
    if (auto t = services_.host.templates().find(ref))
        return jsonResponse(200, {{"name", t->name},
                                  {"kind", "base"},
                                  {"vcpus", t->vcpus},
                                  {"memory_mib", t->memoryMib},
                                  {"digest", t->digest},
                                  {"kernel_version", t->kernelVersion},
                                  {"has_disk", !t->diskPath.empty()}});
    return jsonResponse(200, templateJson(templateBuilder().get(c.tenant, ref)));
}

// DELETE /v1/templates/{name[:tag]}
ApiResponse Router::deleteTemplate(Context& c) {
    if (services_.host.templates().find(c.params[0]))
        throw Error(ErrorCode::forbidden, "'" + c.params[0] + "' is one of the server's own templates");
    templateBuilder().remove(c.tenant, c.params[0]);
    return ApiResponse(204, "", "");
}

// GET /v1/templates/{name}/builds/{id}
ApiResponse Router::getTemplateBuild(Context& c) {
    return jsonResponse(200, buildJson(templateBuilder().build(c.tenant, c.params[0], c.params[1])));
}

// GET /v1/templates/{name}/builds/{id}/logs[?follow=1]
std::optional<ApiResponse> Router::templateBuildLogs(StreamHandover& h) {
    auto& builder = templateBuilder();
    const auto& ctx = h.context;
    auto tenant = ctx.tenant;
    auto name = ctx.params[0];
    auto buildId = ctx.params[1];
    auto follow = ctx.request.query.count("follow") ? ctx.request.query.at("follow") : "";
    if (follow != "1" && follow != "true") {
        builder.build(tenant, name, buildId);
        return ApiResponse(200, "text/plain; charset=utf-8", lines(builder.logLines(tenant, name, buildId)));
    }
    builder.build(tenant, name, buildId);  // not found: answered before the stream starts
    auto slots = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
        ctx.tenantSlot, ctx.connectionSlot);
    auto session = std::make_shared<ConnectStreamSession>(
        std::move(h.stream), std::chrono::seconds(0), "", slots, ctx.workers,
        ConnectStreamSession::Framing::text);
    session->start();
    auto handle = builder.followLog(tenant, name, buildId,
                                    templates::BuildLog::Follower{
                                        [session](const templates::BuildLog::Line& l) {
                                            return session->push(templates::BuildLog::render(l));
                                        },
                                        [session] { session->end(std::nullopt); }});
    if (handle) session->onGone([&builder, buildId, handle] { builder.unfollowLog(buildId, handle); });
    return std::nullopt;
}

}  // namespace airlock::api
