#include "daemon/DaemonOptions.hpp"

#include <cctype>
#include <functional>
#include <initializer_list>

#include "core/Error.hpp"
#include "egress/AddressPolicy.hpp"
#include "fleet/HttpExchange.hpp"
#include "packages/PackageService.hpp"

namespace airlock {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::bad_request, message); }

bool allDigits(const std::string& v, std::size_t maxDigits) {
    return !v.empty() && v.size() <= maxDigits &&
           v.find_first_not_of("0123456789") == std::string::npos;
}

unsigned long long number(const std::string& option, const std::string& v, unsigned long long min,
                          unsigned long long max) {
    if (!allDigits(v, 15) || std::stoull(v) < min || std::stoull(v) > max)
        bad(option + " wants a number from " + std::to_string(min) + " to " + std::to_string(max));
    return std::stoull(v);
}

void hostPort(const std::string& option, const std::string& v, std::string& host,
              unsigned short& port) {
    auto colon = v.rfind(':');
    if (colon == std::string::npos || colon == 0) bad(option + " wants HOST:PORT");
    std::string digits = v.substr(colon + 1);
    if (!allDigits(digits, 5) || std::stoi(digits) > 65535) bad(option + " has a bad port");
    host = v.substr(0, colon);
    port = static_cast<unsigned short>(std::stoi(digits));
}

std::string oneOf(const std::string& option, const std::string& v,
                  std::initializer_list<const char*> choices, const std::string& message) {
    for (const char* c : choices)
        if (v == c) return v;
    bad(option + " " + message);
}

// One option of airlockd: its name, what its value looks like in the usage
// (nullptr: a flag without one), whether it may repeat, and how its value
// lands in DaemonOptions (checked there: a bad value stops the start).
// The setter of a numeric option: the value, in [min, max], into `field`.
template <class T>
std::function<void(DaemonOptions&, const std::string&, const std::string&)> numberInto(
    T DaemonOptions::*field, unsigned long long min, unsigned long long max) {
    return [field, min, max](DaemonOptions& o, const std::string& option, const std::string& v) {
        o.*field = static_cast<T>(number(option, v, min, max));
    };
}

struct OptionSpec {
    const char* name;
    const char* value;
    bool repeats;
    std::function<void(DaemonOptions& o, const std::string& option, const std::string& v)> apply;
};

const std::vector<OptionSpec>& optionSpecs() {
    using O = DaemonOptions;
    using S = const std::string&;
    static const std::vector<OptionSpec> specs = {
        {"--listen", "HOST:PORT", false,
         [](O& o, S a, S v) { hostPort(a, v, o.listenHost, o.listenPort); }},
        {"--data-dir", "DIR", false, [](O& o, S, S v) { o.dataDir = v; }},
        {"--templates-dir", "DIR", false, [](O& o, S, S v) { o.templatesDir = v; }},
        {"--console-dir", "DIR", false, [](O& o, S, S v) { o.consoleDir = v; }},
        {"--accel", "auto|kvm|tcg", false,
         [](O& o, S a, S v) {
             o.accel = oneOf(a, v, {"auto", "kvm", "tcg"}, "must be auto, kvm or tcg");
         }},
        {"--libvirt-uri", "URI", false, [](O& o, S, S v) { o.libvirtUri = v; }},
        {"--agent-transport", "auto|serial|vsock", false,
         [](O& o, S a, S v) {
             o.agentTransport =
                 oneOf(a, v, {"auto", "serial", "vsock"}, "must be auto, serial or vsock");
         }},
        {"--exec-output-cap", "BYTES", false, numberInto(&O::execOutputCap, 1024, 256u << 20)},
        {"--default-timeout", "SECONDS", false, numberInto(&O::defaultTimeoutS, 0, 7 * 24 * 3600)},
        {"--warm-templates", "NAME,...", false,
         [](O& o, S, S v) {
             o.warmTemplates.clear();
             std::size_t start = 0;
             while (start <= v.size()) {
                 auto comma = v.find(',', start);
                 std::string name = v.substr(
                     start, comma == std::string::npos ? std::string::npos : comma - start);
                 if (!name.empty()) o.warmTemplates.push_back(name);
                 if (comma == std::string::npos) break;
                 start = comma + 1;
             }
         }},
        {"--spare-vms", "N", false, numberInto(&O::spareVms, 0, 16)},
        {"--policy", "FILE", false, [](O& o, S, S v) { o.policyFile = v; }},
        {"--approval-timeout", "SECONDS", false, numberInto(&O::approvalTimeoutS, 10, 9999999)},
        {"--egress-allow-cidr", "CIDR", true,
         [](O& o, S, S v) {
             egress::CidrRange::parse(v);  // a typo is an error now, not a silent miss later
             o.egressAllowCidrs.push_back(v);
         }},
        {"--egress-max-connections", "N", false, numberInto(&O::egressMaxConnections, 1, 4096)},
        {"--egress-ca-file", "PEM", false, [](O& o, S, S v) { o.egressCaFile = v; }},
        {"--egress-bandwidth", "BYTES_PER_SECOND", false,
         numberInto(&O::egressBytesPerSecond, 1024, 1ull << 40)},
        {"--audit-retention-days", "DAYS", false, numberInto(&O::auditRetentionDays, 0, 36500)},
        {"--evidence-retention-days", "DAYS", false,
         numberInto(&O::evidenceRetentionDays, 1, 36500)},
        {"--rotate-evidence-key", nullptr, false, [](O& o, S, S) { o.rotateEvidenceKey = true; }},
        {"--max-tenant-requests", "N", false, numberInto(&O::maxTenantRequests, 1, 100000)},
        {"--max-connections", "N", false, numberInto(&O::maxConnections, 16, 1000000)},
        {"--qemu-uid-range", "BASE:COUNT", false,
         [](O& o, S a, S v) {
             auto colon = v.find(':');
             if (colon == std::string::npos) bad(a + " wants BASE:COUNT");
             o.qemuUidBase =
                 static_cast<unsigned>(number(a, v.substr(0, colon), 1000, 4000000000u));
             o.qemuUidCount = static_cast<unsigned>(number(a, v.substr(colon + 1), 0, 1000000));
             if (std::uint64_t(o.qemuUidBase) + o.qemuUidCount > 4294967294ull)
                 bad(a + " runs past the largest uid");
         }},
        {"--sandbox-memory-overhead", "MIB", false,
         [](O& o, S a, S v) {
             o.sandboxMemoryOverheadMib = number(a, v, 0, 1 << 20);
             if (o.sandboxMemoryOverheadMib > 0 && o.sandboxMemoryOverheadMib < 128)
                 bad(a + " must be 0 (none) or at least 128 MiB");
         }},
        {"--disk-bandwidth", "BYTES_PER_SECOND", false,
         numberInto(&O::diskBytesPerSecond, 0, 1ull << 40)},
        {"--disk-iops", "N", false, numberInto(&O::diskOpsPerSecond, 0, 10000000)},
        {"--min-free-disk", "MIB", false, numberInto(&O::minFreeDiskMib, 0, 1ull << 30)},
        {"--max-disk-gib", "GIB", false, numberInto(&O::maxDiskGib, 1, 1u << 20)},
        {"--tcg-cache-mib", "MIB", false, numberInto(&O::tcgCacheMib, 8, 4096)},
        {"--free-page-reporting", "on|off", false,
         [](O& o, S a, S v) {
             o.freePageReporting = oneOf(a, v, {"on", "off"}, "wants on or off") == "on";
         }},
        {"--ksm", "auto|off", false,
         [](O& o, S a, S v) {
             o.ksm = oneOf(a, v, {"auto", "off"}, "wants auto or off");
         }},
        {"--tls-cert", "PEM", false, [](O& o, S, S v) { o.tlsCertFile = v; }},
        {"--tls-key", "PEM", false, [](O& o, S, S v) { o.tlsKeyFile = v; }},
        {"--metrics-listen", "HOST:PORT", false,
         [](O& o, S a, S v) { hostPort(a, v, o.metricsListenHost, o.metricsListenPort); }},
        {"--public-domain", "DOMAIN", false,
         [](O& o, S a, S v) {
             for (char c : v)
                 if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'))
                     bad(a + " takes a DNS name");
             if (v.empty() || v.size() > 200) bad(a + " takes a DNS name");
             o.publicDomain = v;
         }},
        {"--push-branch-prefix", "PREFIX", false,
         [](O& o, S a, S v) {
             if (v.empty() || v.size() > 100 || v.find("..") != std::string::npos || v[0] == '/')
                 bad(a + ": a branch name prefix such as agent/");
             o.pushBranchPrefix = v;
         }},
        {"--git-fetch-max-mib", "MIB", false, numberInto(&O::gitFetchMaxMib, 1, 1ull << 30)},
        {"--git-tenant-quota-mib", "MIB", false, numberInto(&O::gitTenantQuotaMib, 0, 1ull << 30)},
        {"--git-mirror-retention-hours", "HOURS", false,
         numberInto(&O::gitMirrorRetentionHours, 0, 24 * 36500)},
        {"--template-cache-gib", "GIB", false, numberInto(&O::templateCacheGib, 0, 1ull << 20)},
        {"--package-upstream", "npm=URL|pypi=URL|apt=URL", true,
         [](O& o, S, S v) {
             o.packageUpstreams.push_back(v);
             packages::PackageUpstreams::parse(o.packageUpstreams);  // a bad URL fails at start
         }},
        {"--package-upstream-auth", "npm=FILE|pypi=FILE|apt=FILE", true,
         [](O& o, S, S v) { o.packageUpstreamAuth.push_back(v); }},
        {"--package-cache-gib", "GIB", false, numberInto(&O::packageCacheGib, 1, 1 << 20)},
        {"--cluster-etcd", "URL,...", false,
         [](O& o, S a, S v) {
             o.clusterEtcd.clear();
             std::size_t start = 0;
             while (start <= v.size()) {
                 auto comma = v.find(',', start);
                 std::string url = v.substr(
                     start, comma == std::string::npos ? std::string::npos : comma - start);
                 if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
                     bad(a + " takes etcd client URLs, http(s)://HOST:PORT,...");
                 o.clusterEtcd.push_back(url);
                 if (comma == std::string::npos) break;
                 start = comma + 1;
             }
         }},
        {"--cluster-etcd-ca", "PEM", false, [](O& o, S, S v) { o.clusterEtcdCa = v; }},
        {"--cluster-etcd-cert", "PEM", false, [](O& o, S, S v) { o.clusterEtcdCert = v; }},
        {"--cluster-etcd-key", "PEM", false, [](O& o, S, S v) { o.clusterEtcdKey = v; }},
        {"--cluster-ca", "PEM", false, [](O& o, S, S v) { o.clusterCa = v; }},
        {"--node-name", "NAME", false, [](O& o, S, S v) { o.nodeName = v; }},
        {"--advertise-url", "URL", false,
         [](O& o, S a, S v) {
             if (v.rfind("http://", 0) != 0 && v.rfind("https://", 0) != 0)
                 bad(a + " takes the URL other nodes reach this one at, http(s)://HOST:PORT");
             o.advertiseUrl = v;
             while (o.advertiseUrl.size() > 8 && o.advertiseUrl.back() == '/')
                 o.advertiseUrl.pop_back();
         }},
        {"--cluster-token-file", "FILE", false, [](O& o, S, S v) { o.clusterTokenFile = v; }},
        {"--cluster-plain-http", nullptr, false, [](O& o, S, S) { o.clusterPlainHttp = true; }},
        {"--log-level", "debug|info|warn|error", false, [](O& o, S, S v) { o.logLevel = v; }},
    };
    return specs;
}

}  // namespace

std::string daemonUsage() {
    std::string out = "usage: airlockd", line;
    for (const auto& spec : optionSpecs()) {
        std::string item = std::string(" [") + spec.name +
                           (spec.value ? std::string(" ") + spec.value : "") + "]" +
                           (spec.repeats ? "..." : "");
        if (out.size() - out.rfind('\n') + line.size() + item.size() > 100 && !line.empty()) {
            out += line + "\n               ";
            line.clear();
        }
        line += item;
    }
    return out + line + "\n";
}

DaemonOptions parseDaemonOptions(const std::vector<std::string>& args) {
    DaemonOptions o;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            o.help = true;
            continue;
        }
        const OptionSpec* spec = nullptr;
        for (const auto& s : optionSpecs())
            if (a == s.name) spec = &s;
        if (!spec) bad("unknown option " + a);
        if (!spec->value) {
            spec->apply(o, a, "");
            continue;
        }
        if (i + 1 >= args.size()) bad(a + " needs a value");
        spec->apply(o, a, args[++i]);
    }
    if (o.tlsCertFile.empty() != o.tlsKeyFile.empty()) bad("--tls-cert and --tls-key go together");
    // Each token file names an upstream that is configured, and reads.
    packages::PackageUpstreams::parse(o.packageUpstreams).authorization(o.packageUpstreamAuth);
    if (o.clusterEtcd.empty()) {
        if (!o.nodeName.empty() || !o.advertiseUrl.empty() || !o.clusterTokenFile.empty() ||
            !o.clusterEtcdCa.empty() || !o.clusterEtcdCert.empty() || !o.clusterEtcdKey.empty() ||
            !o.clusterCa.empty())
            bad("--node-name, --advertise-url, --cluster-token-file, --cluster-ca and "
                "--cluster-etcd-* need --cluster-etcd");
    } else {
        if (o.nodeName.empty()) bad("--cluster-etcd needs --node-name");
        if (o.advertiseUrl.empty()) bad("--cluster-etcd needs --advertise-url");
        if (o.clusterTokenFile.empty())
            bad("--cluster-etcd needs --cluster-token-file (the node-to-node credential)");
        if (o.clusterEtcdCert.empty() != o.clusterEtcdKey.empty())
            bad("--cluster-etcd-cert and --cluster-etcd-key go together");
        // Other nodes speak to this one as its advertise URL says.
        bool advertisesTls = o.advertiseUrl.rfind("https://", 0) == 0;
        if (advertisesTls && o.tlsCertFile.empty())
            bad("--advertise-url https://... needs --tls-cert and --tls-key (this node serves it)");
        if (!advertisesTls && !o.tlsCertFile.empty())
            bad("--tls-cert makes this node serve HTTPS: its --advertise-url must be https://...");
        // Node calls carry callers' identities and sandboxes' memory; etcd
        // holds keys' hashes and sealed secrets.
        if (!o.clusterPlainHttp) {
            if (fleet::plainHttpBeyondLoopback(o.advertiseUrl))
                bad("--advertise-url " + o.advertiseUrl +
                    ": plain http beyond loopback; give https:// (with --tls-cert and --tls-key) "
                    "or, on a network you trust, --cluster-plain-http");
            for (const auto& url : o.clusterEtcd)
                if (fleet::plainHttpBeyondLoopback(url))
                    bad("--cluster-etcd " + url +
                        ": plain http beyond loopback; give https:// (with --cluster-etcd-ca) "
                        "or, on a network you trust, --cluster-plain-http");
        }
    }
    return o;
}

}  // namespace airlock
