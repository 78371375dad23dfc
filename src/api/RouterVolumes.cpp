// The volume routes: a tenant's volumes made, listed, grown and deleted, and
// the files of a detached one read and written on the host.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "api/ErrorMapping.hpp"
#include "api/RequestParsing.hpp"
#include "api/Router.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"
#include "core/JsonFields.hpp"

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

// GET /v1/volumes/{}/files?path=: a file's bytes, or a directory's entries
ApiResponse Router::getVolumeFile(Context& c) {
    auto path = pathParam(c.request);
    auto& vols = volumes();
    auto st = vols.statFile(c.tenant, c.params[0], path);
    if (st.type == "dir") {
        json entries = json::array();
        for (const auto& e : vols.listFiles(c.tenant, c.params[0], path))
            entries.push_back({{"name", e.name},
                               {"type", fileTypeName(e.type)},
                               {"size", e.size},
                               {"mode", e.mode & 07777},
                               {"uid", e.uid},
                               {"gid", e.gid}});
        return jsonResponse(200, json{{"path", path}, {"entries", entries}});
    }
    if (st.type != "file")
        throw Error(ErrorCode::bad_request, path + " is not a regular file or a directory");
    if (st.size > kMaxVolumeFileBytes)
        throw Error(ErrorCode::payload_too_large,
                    path + " is larger than " + std::to_string(kMaxVolumeFileBytes >> 20) +
                        " MiB: read it from a sandbox that mounts the volume");
    std::string body;
    body.reserve(st.size);
    bool cut = false;
    vols.readFile(c.tenant, c.params[0], path, [&body, &cut](std::string_view chunk) {
        cut = body.size() + chunk.size() > kMaxVolumeFileBytes;
        if (cut) return false;
        body.append(chunk);
        return true;
    });
    if (cut || body.size() != st.size)
        throw Error(ErrorCode::conflict, path + " changed while it was read; read it again");
    return ApiResponse{200, "application/octet-stream", std::move(body)};
}

// PUT /v1/volumes/{}/files?path=
ApiResponse Router::putVolumeFile(Context& c) {
    auto path = pathParam(c.request);
    auto& vols = volumes();
    std::string staged = vols.stagingDir() + "/" + newId("up-");
    {
        std::ofstream out(staged, std::ios::binary | std::ios::trunc);
        out.write(c.request.body.data(), static_cast<std::streamsize>(c.request.body.size()));
        if (!out) throw Error(ErrorCode::insufficient_storage, "cannot stage the upload");
    }
    struct Unlink {
        std::string path;
        ~Unlink() { ::unlink(path.c_str()); }
    } unlinkLater{staged};
    // The tool's uid reads it: readable by all, in a directory only root lists.
    ::chmod(staged.c_str(), 0644);
    vols.writeFile(c.tenant, c.params[0], path, staged);
    return jsonResponse(201, json{{"path", path}, {"size", c.request.body.size()}});
}

// DELETE /v1/volumes/{}/files?path=
ApiResponse Router::deleteVolumeFile(Context& c) {
    volumes().removeFile(c.tenant, c.params[0], pathParam(c.request));
    return ApiResponse{204, "", ""};
}

}  // namespace airlock::api
