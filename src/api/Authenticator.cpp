#include "api/Authenticator.hpp"

#include "core/Error.hpp"

namespace airlock::api {

std::string Authenticator::tenantFor(const std::string& header) {
    static const std::string kBearer = "Bearer ";
    if (header.empty()) throw Error(ErrorCode::unauthorized, "missing API key (Authorization: Bearer KEY)");
    if (header.rfind(kBearer, 0) != 0) throw Error(ErrorCode::unauthorized, "Authorization must be 'Bearer KEY'");
    auto tenant = keys_.tenantForKey(header.substr(kBearer.size()));
    if (!tenant) throw Error(ErrorCode::unauthorized, "invalid API key");
    return *tenant;
}

}  // namespace airlock::api
