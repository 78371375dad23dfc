#include "controller/PreviewPorts.hpp"

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Ids.hpp"

namespace airlock {

ExposedPort PreviewPorts::expose(const std::string& sandboxId, unsigned port) {
    if (port < 1 || port > 65535) throw Error(ErrorCode::bad_request, "port must be 1-65535");
    if (auto existing = store_.find(sandboxId, port)) return *existing;
    ExposedPort p{sandboxId, port, newSecretToken(), nowTimestamp()};
    store_.upsert(p);
    return p;
}

std::vector<ExposedPort> PreviewPorts::list(const std::string& sandboxId) {
    return store_.list(sandboxId);
}

void PreviewPorts::close(const std::string& sandboxId, unsigned port) {
    if (!store_.find(sandboxId, port))
        throw Error(ErrorCode::not_found, "port " + std::to_string(port) + " is not exposed");
    store_.remove(sandboxId, port);
}

bool PreviewPorts::admits(const std::string& sandboxId, unsigned port, const std::string& token) {
    auto exposed = isValidId(sandboxId, "sbx-") ? store_.find(sandboxId, port) : std::nullopt;
    if (!exposed || exposed->token.size() != token.size()) return false;
    unsigned char diff = 0;
    for (std::size_t i = 0; i < token.size(); ++i)
        diff |= static_cast<unsigned char>(exposed->token[i] ^ token[i]);
    return diff == 0;
}

}  // namespace airlock
