#pragma once
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <semaphore>
#include <string>
#include <vector>

#include "egress/AddressPolicy.hpp"
#include "packages/HttpUrl.hpp"
#include "packages/PackageCache.hpp"
#include "packages/PackageRules.hpp"
#include "packages/UpstreamClient.hpp"

namespace airlock::packages {

// Where each ecosystem's packages come from (--package-upstream ECO=URL).
// apt may have several (a suite, its security suite...): the guest reaches
// each under /<last path segment of its URL>/ on the apt port.
struct PackageUpstreams {
    std::optional<HttpUrl> npm;
    std::optional<HttpUrl> pypi;  // the simple index ("…/simple/")
    std::vector<std::pair<std::string, HttpUrl>> apt;
    // Parses "npm=URL", "pypi=URL", "apt=URL"; throws Error(bad_request).
    static PackageUpstreams parse(const std::vector<std::string>& specs);
    // "npm=FILE", "pypi=FILE", "apt=FILE" (--package-upstream-auth): the
    // Authorization value in FILE for that ecosystem's upstream origins
    // (every apt upstream's for apt). Throws Error(bad_request) naming the
    // spec or the file, never the value.
    std::map<std::string, std::string> authorization(const std::vector<std::string>& specs) const;
    bool serves(Ecosystem e) const;
    std::vector<std::string> hosts() const;  // every upstream's host name
};

// A request a guest's package manager made on one of the proxy's ports.
struct GuestRequest {
    Ecosystem ecosystem = Ecosystem::npm;
    std::string method;
    std::string target;  // origin-form: path and query
    std::string host;    // the Host header (how the guest reached us)
    std::string accept;
};

// What goes back: a body in memory or a file (an artifact) streamed from disk.
struct GuestResponse {
    int status = 200;
    std::string reason;  // the status line's phrase: package managers print it
    std::string contentType = "application/json";
    std::string body;
    std::string filePath;     // when set, the body is this file
    bool removeFile = false;  // a pass-through download, not a cache blob
    std::uint64_t fileSize = 0;
};

struct SandboxPackages {
    std::string id;
    std::string tenant;
    PackageRules rules;
};

// An approver's word on one package version in one sandbox.
struct PackageApprovalRequest {
    std::string sandboxId, tenant;
    Ecosystem ecosystem = Ecosystem::npm;
    std::string name, version, reason;
};
struct PackageApprovalState {
    enum class State { approved, pending, denied } state = State::pending;
    std::string approvalId;
};
// Looks up (and when there is none pending, opens) the approval for a version.
using PackageApprovals = std::function<PackageApprovalState(const PackageApprovalRequest&)>;
using PackageAuditSink = std::function<void(const std::string& sandboxId, const std::string& tenant,
                                            const std::string& type, const nlohmann::json& data)>;
// The command running in a sandbox when a request arrives ("" when none or several).
using RunningExecLookup = std::function<std::string(const std::string& sandboxId)>;

struct PackageServiceConfig {
    PackageUpstreams upstreams;
    std::string cacheDir;
    std::uint64_t cacheBytes = 5ull << 30;
    std::chrono::seconds metadataTtl{300};
    std::uint64_t maxMetadataBytes = 48ull << 20;   // one packument or index page
    std::uint64_t maxArtifactBytes = 512ull << 20;  // one download
    std::vector<egress::CidrRange> allowCidrs;  // hosts registries point at, opened by the operator
    UpstreamClient::Limits limits;
    // Origin → Authorization value for the operator's private registries.
    std::map<std::string, std::string> upstreamAuthorization;
};

// The package proxy's decisions, independent of how requests arrive: each
// guest request is judged against the sandbox's rules, served from the
// cache or fetched upstream and verified, and recorded.
class PackageService {
  public:
    PackageService(PackageServiceConfig config, PackageAuditSink audit, PackageApprovals approvals,
                   RunningExecLookup runningExec = nullptr);
    GuestResponse handle(const SandboxPackages& sandbox, const GuestRequest& request);
    const PackageUpstreams& upstreams() const { return config_.upstreams; }
    PackageCache& cache() { return cache_; }

  private:
    struct Record;
    GuestResponse npm(const SandboxPackages& s, const GuestRequest& r, Record& rec);
    GuestResponse npmPackument(const SandboxPackages& s, const GuestRequest& r,
                               const std::string& name, Record& rec);
    GuestResponse npmTarball(const SandboxPackages& s, const std::string& name,
                             const std::string& version, Record& rec);
    GuestResponse pypi(const SandboxPackages& s, const GuestRequest& r, Record& rec);
    GuestResponse pypiFile(const SandboxPackages& s, const std::string& sha256, Record& rec);
    GuestResponse apt(const SandboxPackages& s, const GuestRequest& r, Record& rec);
    // A gate that is not "allow": refused, or held for approval (403 with its id).
    std::optional<GuestResponse> gate(const SandboxPackages& s, Ecosystem e,
                                      const std::string& name, const std::string& version,
                                      const Verdict& v, Record& rec);
    // Metadata from the cache or upstream: nullopt with `failure` set to the
    // response for the guest (upstream 404, 502).
    std::optional<PackageCache::Metadata> metadata(const std::string& url,
                                                   const std::string& accept, Record& rec,
                                                   GuestResponse& failure);
    // Downloads url into the cache verified against the digest (or, with
    // no algorithm, into a pass-through file).
    GuestResponse download(const std::string& url, const std::string& algorithm,
                           const std::string& expectedHex, const std::string& sha1Hex, Record& rec);
    std::string addressRefusal(const HttpUrl& url, const boost::asio::ip::address& a) const;

    PackageServiceConfig config_;
    PackageAuditSink audit_;
    PackageApprovals approvals_;
    RunningExecLookup runningExec_;
    PackageCache cache_;
    UpstreamClient client_;
    egress::AddressPolicy addresses_;
    // PyPI files offered in index pages: the guest asks for them by digest.
    struct OfferedFile {
        std::string project, filename, version, url;
        std::optional<std::int64_t> uploaded;
        bool sdist = false;
    };
    // Parsed metadata takes several times its size in memory: a few
    // documents at a time, whatever the guests ask for at once.
    std::counting_semaphore<64> parsing_{4};
    struct ParseSlot;
    // Records per sandbox and minute (a guest looping over requests cannot
    // grow the audit log without bound): beyond, requests are judged as
    // ever but only counted (package.suppressed, once the minute is over).
    static constexpr unsigned kMaxRecordsPerMinute = 600;
    struct RecordWindow {
        std::chrono::steady_clock::time_point start;
        unsigned written = 0;
        std::uint64_t suppressed = 0;
    };
    std::mutex recordMutex_;
    std::map<std::string, RecordWindow> recordWindows_;
    std::mutex offeredMutex_;
    std::map<std::string, OfferedFile> offered_;  // sha256 -> file
    std::deque<std::string> offeredOrder_;        // oldest first: evicted first
};

}  // namespace airlock::packages
