#include "api/Authenticator.hpp"

#include "core/Clock.hpp"
#include "core/Error.hpp"

namespace airlock::api {

Principal Authenticator::principalFor(const std::string& header) {
    static const std::string kBearer = "Bearer ";
    if (header.empty())
        throw Error(ErrorCode::unauthorized, "missing API key (Authorization: Bearer KEY)");
    if (header.rfind(kBearer, 0) != 0)
        throw Error(ErrorCode::unauthorized, "Authorization must be 'Bearer KEY'");
    auto key = keys_.findValid(header.substr(kBearer.size()), nowUnixSeconds());
    if (!key) throw Error(ErrorCode::unauthorized, "invalid, revoked or expired API key");
    return Principal{key->id, key->name, key->tenant, key->role};
}

}  // namespace airlock::api
