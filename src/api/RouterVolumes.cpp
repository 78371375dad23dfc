// The volume routes: a tenant's volumes made, listed, grown and deleted, and
// the files of a detached one read and written on the host.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "api/StagedDownloadSession.hpp"
#include "api/StagedUploadSession.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/JsonFields.hpp"
#include "core/UniqueFd.hpp"

namespace airlock::api {
using nlohmann::json;

namespace {

constexpr std::uint64_t kGiB = 1024ull * 1024 * 1024;

json volumeJson(const VolumeInfo& v) {
    json attachments = json::array();
    for (const auto& a : v.attachments)
        attachments.push_back({{"sandbox", a.sandbox}, {"path", a.path}, {"read_only", a.readOnly}});
    return json{{"name", v.record.name},
                {"size_gib", v.record.sizeBytes / kGiB},
                {"filesystem", v.record.filesystem},
                {"used_bytes", v.usedBytes},
                {"created_at", v.record.createdAt},
                {"attachments", attachments}};
}

std::string fileTypeName(const std::string& type) { return type.empty() ? "other" : type; }

std::string pathParam(const ApiRequest& request) {
    auto it = request.query.find("path");
    if (it == request.query.end() || it->second.empty())
        throw Error(ErrorCode::bad_request, "'path' (a query parameter) is required");
    return it->second;
}

}  // namespace

SandboxVolumes& Router::volumes() {
    if (!services_.volumes) throw Error(ErrorCode::not_found, "this server keeps no volumes");
    return *services_.volumes;
}

// POST /v1/volumes
ApiResponse Router::createVolume(Context& c) {
    json j = parseJsonBody(c.request.body);
    rejectUnknownFields(j, {"name", "size_gib", "filesystem"}, "volume request");
    auto name = j.find("name");
    if (name == j.end() || !name->is_string())
        throw Error(ErrorCode::bad_request, "'name' (a string) is required");
    auto size = j.find("size_gib");
    if (size == j.end() || !size->is_number_integer() || size->get<std::int64_t>() < 1 ||
        size->get<std::int64_t>() > (1 << 20))
        throw Error(ErrorCode::bad_request, "'size_gib' (a whole number of GiB, at least 1) is required");
    std::string filesystem = "ext4";
    if (auto fsys = j.find("filesystem"); fsys != j.end() && !fsys->is_null()) {
        if (!fsys->is_string()) throw Error(ErrorCode::bad_request, "'filesystem' must be a string");
        filesystem = fsys->get<std::string>();
    }
    return jsonResponse(201, volumeJson(volumes().create(c.tenant, name->get<std::string>(),
                                                         size->get<unsigned>(), filesystem)));
}

// GET /v1/volumes
ApiResponse Router::listVolumes(Context& c) {
    json out = json::array();
    if (services_.volumes)
        for (const auto& v : services_.volumes->list(c.tenant)) out.push_back(volumeJson(v));
    return jsonResponse(200, json{{"volumes", out}});
}

// GET /v1/volumes/{}
ApiResponse Router::getVolume(Context& c) {
    return jsonResponse(200, volumeJson(volumes().get(c.tenant, c.params[0])));
}

// PATCH /v1/volumes/{}
ApiResponse Router::updateVolume(Context& c) {
    json j = parseJsonBody(c.request.body);
    rejectUnknownFields(j, {"size_gib"}, "volume update");
    auto size = j.find("size_gib");
    if (size == j.end() || !size->is_number_integer() || size->get<std::int64_t>() < 1 ||
        size->get<std::int64_t>() > (1 << 20))
        throw Error(ErrorCode::bad_request, "'size_gib' (a whole number of GiB) is required");
    return jsonResponse(200, volumeJson(volumes().grow(c.tenant, c.params[0], size->get<unsigned>())));
}

// DELETE /v1/volumes/{}
ApiResponse Router::deleteVolume(Context& c) {
    volumes().remove(c.tenant, c.params[0]);
    return ApiResponse{204, "", ""};
}

namespace {

// A connection taken over by a volume file route while its tool runs on a
// worker: its socket and context, back on its strand for the answer.
struct VolumeFileCall {
    boost::beast::tcp_stream stream;
    StreamContext context;
    void answer(const ApiResponse& response) {
        writeSimpleResponse(stream, response, [] {});
    }
    void fail(std::exception_ptr error) {
        answer(renderError(ErrorShape::native, errorStatusFor(error, context.request)));
    }
};

}  // namespace

// GET /v1/volumes/{}/files?path=: a directory's entries, or a file's bytes
// streamed (copied out by the tool to a staged host file first, so that no
// lock or tool waits on a slow client).
std::optional<ApiResponse> Router::getVolumeFile(StreamHandover& h) {
    auto path = pathParam(h.context.request);
    auto& vols = volumes();
    auto call = std::make_shared<VolumeFileCall>(
        VolumeFileCall{std::move(h.stream), std::move(h.context)});
    boost::asio::post(call->context.workers, [call, path, &vols] {
        std::exception_ptr error;
        std::optional<ApiResponse> listing;
        UniqueFd staged;
        std::uint64_t size = 0;
        try {
            std::string name = vols.stagingDir() + "/" + newId("down-");
            staged.reset(::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                                0600));
            if (!staged)
                throw Error(ErrorCode::insufficient_storage, "cannot stage " + path);
            ::unlink(name.c_str());  // the descriptor is all that is left of it
            auto read = vols.readPath(call->context.tenant, call->context.params[0], path,
                                      staged.get());
            if (read.stat.type == "dir") {
                json entries = json::array();
                for (const auto& e : read.entries)
                    entries.push_back({{"name", e.name},
                                       {"type", fileTypeName(e.type)},
                                       {"size", e.size},
                                       {"mode", e.mode & 07777},
                                       {"uid", e.uid},
                                       {"gid", e.gid}});
                listing = jsonResponse(200, json{{"path", path}, {"entries", entries}});
            }
            size = read.stat.size;
        } catch (...) {
            error = std::current_exception();
        }
        auto executor = call->stream.get_executor();
        boost::asio::post(executor, [call, error, listing = std::move(listing),
                                     staged = std::make_shared<UniqueFd>(std::move(staged)),
                                     size]() mutable {
            if (error) return call->fail(error);
            if (listing) return call->answer(*listing);
            std::make_shared<StagedDownloadSession>(std::move(call->stream),
                                                    std::move(call->context),
                                                    std::move(*staged), size,
                                                    "application/octet-stream")
                ->start();
        });
    });
    return std::nullopt;
}

// PUT /v1/volumes/{}/files?path=: the body streamed to a staged host file
// (no bigger than the volume), then written into the image by the tool.
std::optional<ApiResponse> Router::putVolumeFile(StreamHandover& h) {
    auto path = pathParam(h.context.request);
    auto& vols = volumes();
    auto tenant = h.context.tenant;
    auto name = h.context.params[0];
    // Refused before a byte of the body is read: no such volume, attached.
    std::uint64_t capacity = vols.prepareUpload(tenant, name);
    StagedUploadPlan plan;
    plan.stagedPath = vols.stagingDir() + "/" + newId("up-");
    plan.maxBytes = capacity;
    plan.reserve = [&vols](std::uint64_t bytes) { vols.requireStagingSpace(bytes); };
    plan.finish = [&vols, tenant, name, path](const std::string& staged, std::uint64_t bytes) {
        // The tool's uid reads it: readable by all, in a directory only root lists.
        ::chmod(staged.c_str(), 0644);
        vols.writeFile(tenant, name, path, staged);
        return jsonResponse(201, json{{"path", path}, {"size", bytes}});
    };
    std::make_shared<StagedUploadSession>(std::move(h.stream), std::move(h.buffer),
                                          std::move(h.header), std::move(h.context),
                                          std::move(plan))
        ->start();
    return std::nullopt;
}

// DELETE /v1/volumes/{}/files?path=
ApiResponse Router::deleteVolumeFile(Context& c) {
    volumes().removeFile(c.tenant, c.params[0], pathParam(c.request));
    return ApiResponse{204, "", ""};
}

}  // namespace airlock::api
