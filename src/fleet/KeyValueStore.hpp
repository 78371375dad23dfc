#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace airlock::fleet {

// One key as the fleet's store holds it (etcd's mvccpb.KeyValue).
struct StoredKey {
    std::string key;
    std::string value;
    std::int64_t createRevision = 0;  // 0: the key does not exist
    std::int64_t modRevision = 0;
    std::int64_t version = 0;
    std::int64_t lease = 0;  // 0: no lease
};

// A condition of a transaction (etcd's Compare).
struct KeyCompare {
    enum class Target { version, create, mod, value, lease };
    enum class Result { equal, greater, less, not_equal };
    std::string key;
    Target target = Target::create;
    Result result = Result::equal;
    std::int64_t number = 0;  // version, create or mod revision, lease
    std::string value;        // Target::value

    static KeyCompare absent(std::string key) {
        return {std::move(key), Target::create, Result::equal, 0, {}};
    }
    static KeyCompare modRevision(std::string key, std::int64_t revision) {
        return {std::move(key), Target::mod, Result::equal, revision, {}};
    }
    static KeyCompare createRevision(std::string key, std::int64_t revision) {
        return {std::move(key), Target::create, Result::equal, revision, {}};
    }
};

// One operation of a transaction's branch.
struct KeyOp {
    enum class Kind { put, remove, get };
    Kind kind = Kind::get;
    std::string key;
    std::string value;
    std::int64_t lease = 0;  // put: attach the key to this lease

    static KeyOp put(std::string key, std::string value, std::int64_t lease = 0) {
        return {Kind::put, std::move(key), std::move(value), lease};
    }
    static KeyOp remove(std::string key) { return {Kind::remove, std::move(key), {}, 0}; }
    static KeyOp get(std::string key) { return {Kind::get, std::move(key), {}, 0}; }
};

struct TxnResult {
    bool succeeded = false;
    std::int64_t revision = 0;  // the store's revision after the transaction
    // The keys the branch that ran read, one entry per get (nullopt: absent).
    std::vector<std::optional<StoredKey>> reads;
};

// The coordination store of a fleet: etcd's v3 key-value, transaction and
// lease operations, all linearizable. The real one is EtcdClient; unit tests
// use an in-memory fake. Every call throws Error(unavailable) when the store
// cannot answer (no quorum, no member reachable, time out): a caller never
// takes a missing answer for "absent".
class KeyValueStore {
  public:
    virtual ~KeyValueStore() = default;
    virtual std::optional<StoredKey> get(const std::string& key) = 0;
    // Every key under `prefix`, in key order.
    virtual std::vector<StoredKey> list(const std::string& prefix) = 0;
    // The revision the put made.
    virtual std::int64_t put(const std::string& key, const std::string& value,
                             std::int64_t lease = 0) = 0;
    // Whether a key was there to delete.
    virtual bool remove(const std::string& key) = 0;
    virtual TxnResult txn(const std::vector<KeyCompare>& compare, const std::vector<KeyOp>& success,
                          const std::vector<KeyOp>& failure) = 0;
    // A lease of `ttl`; keys put under it go when it expires or is revoked.
    virtual std::int64_t grantLease(std::chrono::seconds ttl) = 0;
    // Renews a lease: the seconds it has left, 0 when it has expired.
    virtual std::int64_t keepAlive(std::int64_t lease) = 0;
    virtual void revokeLease(std::int64_t lease) = 0;
};

// The first key after every key that starts with `prefix` (etcd's range end).
std::string prefixEnd(const std::string& prefix);

}  // namespace airlock::fleet
