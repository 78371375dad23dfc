#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "fleet/KeyValueStore.hpp"

namespace boost::asio::ssl {
class context;
}

namespace airlock::fleet {

// Client certificates and the CA that signs etcd's server certificates
// (--cluster-etcd-ca/-cert/-key); empty: the system's trust store, no
// client certificate.
struct EtcdTls {
    std::string caFile, certFile, keyFile;
};

// etcd's v3 API through its JSON gateway (POST /v3/kv/range, /v3/kv/txn,
// /v3/lease/...): plain HTTP/1.1 that Beast already speaks, no gRPC or
// protobuf build, readable with curl, and the /v3/ paths every etcd since
// 3.4 serves. Keys and values travel base64, 64-bit numbers as strings.
//
// Thread-safe: each call has its own connection (Connection: close) and a
// deadline. The members are tried in turn, starting with the last one that
// answered: a member that refuses the connection or answers 503 (no leader
// on its side) passes the call to the next. A call whose request went out
// and got no answer is retried elsewhere only when it changes nothing (a
// read, a keepalive); otherwise its outcome is unknown and it throws. For a
// second after no member answered, calls fail at once.
class EtcdClient final : public KeyValueStore {
  public:
    // urls: http(s)://host:port of each member.
    explicit EtcdClient(const std::vector<std::string>& urls, const EtcdTls& tls = {},
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));
    ~EtcdClient() override;

    std::optional<StoredKey> get(const std::string& key) override;
    std::vector<StoredKey> list(const std::string& prefix) override;
    std::int64_t put(const std::string& key, const std::string& value,
                     std::int64_t lease = 0) override;
    bool remove(const std::string& key) override;
    TxnResult txn(const std::vector<KeyCompare>& compare, const std::vector<KeyOp>& success,
                  const std::vector<KeyOp>& failure) override;
    std::int64_t grantLease(std::chrono::seconds ttl) override;
    std::int64_t keepAlive(std::int64_t lease) override;
    void revokeLease(std::int64_t lease) override;

    // Whether some member answers GET /health with {"health":"true"}.
    bool healthy();
    const std::vector<std::string>& urls() const { return urlTexts_; }

  private:
    struct Member {
        bool tls = false;
        std::string host, port;
    };
    // POSTs `body` to `path` on some member; the parsed answer of a 200.
    // Throws Error(unavailable) when no member answers, Error(conflict)
    // for etcd's refusals of the request itself.
    nlohmann::json call(const std::string& path, const nlohmann::json& body, bool idempotent);
    nlohmann::json attempt(const std::string& path, const nlohmann::json& body, bool idempotent);

    std::vector<Member> members_;
    std::vector<std::string> urlTexts_;
    std::shared_ptr<boost::asio::ssl::context> tls_;
    std::chrono::milliseconds timeout_;
    std::atomic<std::size_t> current_{0};
    // When a call last found no member answering (steady clock ticks): for
    // a second after, calls but one probe fail at once instead of waiting
    // out their deadline again; a success clears it.
    std::atomic<std::chrono::steady_clock::rep> failedAt_{0};
    std::atomic<bool> probing_{false};
    std::atomic<std::chrono::steady_clock::rep> answeredAt_{0};  // the last answer's time
};

}  // namespace airlock::fleet
