#include "support/FakeKeyValueStore.hpp"

#include "core/Error.hpp"

namespace airlock::test {

using fleet::KeyCompare;
using fleet::KeyOp;
using fleet::StoredKey;

void FakeKeyValueStore::check() const {
    if (unavailable_) throw Error(ErrorCode::unavailable, "etcd: no member answered (fake)");
}

std::optional<StoredKey> FakeKeyValueStore::get(const std::string& key) {
    std::lock_guard lock(mutex_);
    check();
    auto it = keys_.find(key);
    if (it == keys_.end()) return std::nullopt;
    return it->second;
}

std::vector<StoredKey> FakeKeyValueStore::list(const std::string& prefix) {
    std::lock_guard lock(mutex_);
    check();
    std::vector<StoredKey> out;
    for (auto it = keys_.lower_bound(prefix); it != keys_.end() && it->first.rfind(prefix, 0) == 0;
         ++it)
        out.push_back(it->second);
    return out;
}

void FakeKeyValueStore::putLocked(const std::string& key, const std::string& value,
                                  std::int64_t lease) {
    if (lease && !leases_.count(lease))
        throw Error(ErrorCode::not_found, "etcd: requested lease not found");
    auto& k = keys_[key];
    if (!k.createRevision) {
        k.key = key;
        k.createRevision = revision_;
        k.version = 0;
    }
    k.value = value;
    k.modRevision = revision_;
    k.version += 1;
    k.lease = lease;
}

bool FakeKeyValueStore::removeLocked(const std::string& key) { return keys_.erase(key) > 0; }

std::int64_t FakeKeyValueStore::put(const std::string& key, const std::string& value,
                                    std::int64_t lease) {
    std::lock_guard lock(mutex_);
    check();
    ++revision_;
    putLocked(key, value, lease);
    return revision_;
}

bool FakeKeyValueStore::remove(const std::string& key) {
    std::lock_guard lock(mutex_);
    check();
    if (!keys_.count(key)) return false;
    ++revision_;
    return removeLocked(key);
}

namespace {
template <class T>
bool holds(KeyCompare::Result r, T a, T b) {
    switch (r) {
        case KeyCompare::Result::equal:
            return a == b;
        case KeyCompare::Result::greater:
            return a > b;
        case KeyCompare::Result::less:
            return a < b;
        case KeyCompare::Result::not_equal:
            return a != b;
    }
    return false;
}
}  // namespace

fleet::TxnResult FakeKeyValueStore::txn(const std::vector<KeyCompare>& compare,
                                        const std::vector<KeyOp>& success,
                                        const std::vector<KeyOp>& failure) {
    std::function<void()> hook;
    {
        std::lock_guard lock(mutex_);
        check();
        hook = beforeTxn_;
    }
    if (hook) hook();
    std::lock_guard lock(mutex_);
    check();
    ++txns_;
    bool ok = true;
    for (const auto& c : compare) {
        auto it = keys_.find(c.key);
        StoredKey none;
        const StoredKey& k = it == keys_.end() ? none : it->second;
        switch (c.target) {
            case KeyCompare::Target::version:
                ok = ok && holds(c.result, k.version, c.number);
                break;
            case KeyCompare::Target::create:
                ok = ok && holds(c.result, k.createRevision, c.number);
                break;
            case KeyCompare::Target::mod:
                ok = ok && holds(c.result, k.modRevision, c.number);
                break;
            case KeyCompare::Target::lease:
                ok = ok && holds(c.result, k.lease, c.number);
                break;
            case KeyCompare::Target::value:
                ok = ok && it != keys_.end() && holds(c.result, k.value, c.value);
                break;
        }
    }
    fleet::TxnResult r;
    r.succeeded = ok;
    const auto& ops = ok ? success : failure;
    bool writes = false;
    for (const auto& op : ops) writes = writes || op.kind != KeyOp::Kind::get;
    if (writes) ++revision_;
    for (const auto& op : ops) {
        switch (op.kind) {
            case KeyOp::Kind::put:
                putLocked(op.key, op.value, op.lease);
                break;
            case KeyOp::Kind::remove:
                removeLocked(op.key);
                break;
            case KeyOp::Kind::get: {
                auto it = keys_.find(op.key);
                r.reads.push_back(it == keys_.end() ? std::nullopt : std::optional(it->second));
                break;
            }
        }
    }
    r.revision = revision_;
    return r;
}

std::int64_t FakeKeyValueStore::grantLease(std::chrono::seconds ttl) {
    std::lock_guard lock(mutex_);
    check();
    leases_[++nextLease_] = ttl.count();
    return nextLease_;
}

std::int64_t FakeKeyValueStore::keepAlive(std::int64_t lease) {
    std::lock_guard lock(mutex_);
    check();
    auto it = leases_.find(lease);
    return it == leases_.end() ? 0 : it->second;
}

void FakeKeyValueStore::revokeLease(std::int64_t lease) { expire(lease); }

void FakeKeyValueStore::expire(std::int64_t lease) {
    std::lock_guard lock(mutex_);
    if (!leases_.erase(lease)) return;
    ++revision_;
    for (auto it = keys_.begin(); it != keys_.end();)
        it = it->second.lease == lease ? keys_.erase(it) : std::next(it);
}

void FakeKeyValueStore::unavailable(bool on) {
    std::lock_guard lock(mutex_);
    unavailable_ = on;
}

void FakeKeyValueStore::beforeTxn(std::function<void()> hook) {
    std::lock_guard lock(mutex_);
    beforeTxn_ = std::move(hook);
}

std::int64_t FakeKeyValueStore::txnCount() const {
    std::lock_guard lock(mutex_);
    return txns_;
}

}  // namespace airlock::test
