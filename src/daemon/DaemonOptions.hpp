#pragma once
#include <string>
#include <vector>

namespace airlock {

struct DaemonOptions {
    std::string listenHost = "127.0.0.1";
    unsigned short listenPort = 8080;
    std::string tlsCertFile, tlsKeyFile;  // both: HTTPS and WSS on --listen (TLS 1.2 at least)
    std::string metricsListenHost;        // non-empty: GET /metrics without a key there
    unsigned short metricsListenPort = 0;
    std::string dataDir = "data";
    std::string templatesDir;  // empty: the build's template output
    std::string consoleDir;    // empty: the console built beside the binaries
    std::string accel = "auto";
    std::string libvirtUri;  // empty: the embedded driver under dataDir
    std::string logLevel = "info";
    std::string agentTransport = "auto";      // auto | serial | vsock
    std::size_t execOutputCap = 1024 * 1024;  // per stream of a buffered exec
    long long defaultTimeoutS = 300;          // sandboxes that name no timeout_s; 0 = none
    std::vector<std::string> warmTemplates;   // templates given a ready snapshot at start
    unsigned spareVms = 1;                    // pre-started VMs per clone shape (0: none)
    std::string policyFile;            // operator command rules (JSON deny/approve/allow globs)
    long long approvalTimeoutS = 900;  // pending approvals expire after this
    std::vector<std::string> egressAllowCidrs;
    // Workspace pushes go only to branches under this prefix.
    std::string pushBranchPrefix = "agent/";
    // Git on the host: what one fetch may receive, what a tenant's mirrors
    // and work store may hold (0: no quota), and how long a mirror no
    // workspace uses is kept (0: forever).
    unsigned long long gitFetchMaxMib = 2048;
    unsigned long long gitTenantQuotaMib = 20480;
    unsigned gitMirrorRetentionHours = 168;
    // Cached template-build layers past this go, least recently used first
    // (never one a template or a sandbox reads).
    unsigned long long templateCacheGib = 20;
    // Package registries guests install from (npm=URL, pypi=URL, apt=URL...);
    // none: no package proxy.
    std::vector<std::string> packageUpstreams;
    // Files holding the Authorization value for an ecosystem's upstreams
    // (npm=FILE...): an operator's private registry token, added by the
    // package proxy on the host.
    std::vector<std::string> packageUpstreamAuth;
    unsigned packageCacheGib =
        5;  // private ranges egress may reach anyway (tests, on-prem registries)
    unsigned egressMaxConnections = 64;                     // per sandbox, open at once
    std::string egressCaFile;  // a CA hosts with injected secrets may chain to
    unsigned long long egressBytesPerSecond = 20ull << 20;  // per sandbox, both directions
    unsigned auditRetentionDays = 90;  // audit events older than this are pruned; 0 = keep forever
    unsigned evidenceRetentionDays = 30;  // bundles of deleted sandboxes are kept this long
    bool rotateEvidenceKey = false;       // make a new evidence signing key at start
    unsigned maxTenantRequests =
        256;                         // per tenant: JSON requests and streams in flight (429 beyond)
    unsigned maxConnections = 2048;  // open client connections (closed at accept beyond)
    unsigned qemuUidBase = 200000;   // each sandbox's QEMU gets its own uid from
    unsigned qemuUidCount = 4096;    //   [base, base + count) (0: all run as libvirt-qemu)
    unsigned long long sandboxMemoryOverheadMib = 512;     // QEMU's cap: guest RAM + this (0: none)
    unsigned long long diskBytesPerSecond = 256ull << 20;  // per sandbox disk (0: unthrottled)
    unsigned long long diskOpsPerSecond = 8000;
    unsigned maxDiskGib = 256;                 // the largest disk_gib a create may ask for
    unsigned long long minFreeDiskMib = 2048;  // creates, snapshots, uploads answer 507 below this
    // Memory per sandbox (docs/performance.md): TCG's code cache, free page
    // reporting, and kernel samepage merging across guests (auto: on when
    // airlockd may write /sys/kernel/mm/ksm, restored on exit).
    unsigned tcgCacheMib = 16;
    bool freePageReporting = true;
    std::string ksm = "auto";
    // The E2B front door's sandbox domain: Host <port>-<id>.<domain> reaches
    // guest port <port> (49983: envd); "" : routing by headers only.
    std::string publicDomain;
    // A fleet (docs/deploy.md): the etcd members' client URLs; empty: one
    // host on its own, with SQLite only.
    std::vector<std::string> clusterEtcd;
    std::string clusterEtcdCa, clusterEtcdCert, clusterEtcdKey;  // etcd over TLS
    std::string clusterCa;  // verifies nodes that advertise https (empty: system trust)
    std::string nodeName;          // this node's name in the fleet
    std::string advertiseUrl;      // where the other nodes reach this one's API
    std::string clusterTokenFile;  // the node-to-node credential (a shared secret)
    // Node-to-node and etcd calls in clear text beyond loopback (a network
    // the operator trusts); refused without it.
    bool clusterPlainHttp = false;
    bool help = false;
};

// Throws Error(bad_request) with a readable message on bad flags.
DaemonOptions parseDaemonOptions(const std::vector<std::string>& args);
std::string daemonUsage();

}  // namespace airlock
