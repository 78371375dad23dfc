#include <cctype>
#include "daemon/DaemonOptions.hpp"

#include <tuple>

#include "core/Error.hpp"
#include "egress/AddressPolicy.hpp"
#include "packages/PackageService.hpp"

namespace airlock {

std::string daemonUsage() {
    return "usage: airlockd [--listen HOST:PORT] [--data-dir DIR] [--templates-dir DIR]\n"
           "                [--accel auto|kvm|tcg] [--libvirt-uri URI] [--agent-transport "
           "auto|serial|vsock]\n"
           "                [--exec-output-cap BYTES] [--default-timeout SECONDS] "
           "[--warm-templates NAME,...]\n"
           "                [--spare-vms N] [--policy FILE] [--approval-timeout SECONDS]\n"
           "                [--egress-allow-cidr CIDR]... [--egress-max-connections N]\n"
           "                [--egress-bandwidth BYTES_PER_SECOND] [--audit-retention-days DAYS]\n"
           "                [--evidence-retention-days DAYS] [--rotate-evidence-key]\n"
           "                [--max-tenant-requests N] [--max-connections N] [--qemu-uid-range "
           "BASE:COUNT]\n"
           "                [--sandbox-memory-overhead MIB] [--disk-bandwidth BYTES_PER_SECOND] "
           "[--disk-iops N]\n"
           "                [--min-free-disk MIB] [--max-disk-gib GIB]\n"
           "                [--tcg-cache-mib MIB] [--free-page-reporting on|off] [--ksm auto|off]\n"
           "                [--tls-cert PEM --tls-key PEM] [--metrics-listen HOST:PORT]\n"
           "                [--public-domain DOMAIN]\n"
           "                [--push-branch-prefix PREFIX]\n"
           "                [--package-upstream npm=URL|pypi=URL|apt=URL]... [--package-cache-gib "
           "GIB]\n"
           "                [--log-level debug|info|warn|error]\n";
}

DaemonOptions parseDaemonOptions(const std::vector<std::string>& args) {
    DaemonOptions o;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw Error(ErrorCode::bad_request, a + " needs a value");
            return args[++i];
        };
        auto number = [&](const std::string& v, unsigned long long min, unsigned long long max) {
            if (v.empty() || v.size() > 15 ||
                v.find_first_not_of("0123456789") != std::string::npos || std::stoull(v) < min ||
                std::stoull(v) > max)
                throw Error(ErrorCode::bad_request, a + " wants a number from " +
                                                        std::to_string(min) + " to " +
                                                        std::to_string(max));
            return std::stoull(v);
        };
        auto hostPort = [&](const std::string& v) -> std::pair<std::string, unsigned short> {
            auto colon = v.rfind(':');
            if (colon == std::string::npos || colon == 0)
                throw Error(ErrorCode::bad_request, a + " wants HOST:PORT");
            std::string port = v.substr(colon + 1);
            if (port.empty() || port.size() > 5 ||
                port.find_first_not_of("0123456789") != std::string::npos ||
                std::stoi(port) > 65535)
                throw Error(ErrorCode::bad_request, a + " has a bad port");
            return {v.substr(0, colon), static_cast<unsigned short>(std::stoi(port))};
        };
        if (a == "--help" || a == "-h") {
            o.help = true;
        } else if (a == "--listen") {
            std::tie(o.listenHost, o.listenPort) = hostPort(value());
        } else if (a == "--public-domain") {
            o.publicDomain = value();
            for (char c : o.publicDomain)
                if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'))
                    throw Error(ErrorCode::bad_request, "--public-domain takes a DNS name");
            if (o.publicDomain.empty() || o.publicDomain.size() > 200)
                throw Error(ErrorCode::bad_request, "--public-domain takes a DNS name");
        } else if (a == "--metrics-listen") {
            auto [host, port] = hostPort(value());
            o.metricsListenHost = host;
            o.metricsListenPort = port;
        } else if (a == "--tls-cert") {
            o.tlsCertFile = value();
        } else if (a == "--tls-key") {
            o.tlsKeyFile = value();
        } else if (a == "--data-dir") {
            o.dataDir = value();
        } else if (a == "--templates-dir") {
            o.templatesDir = value();
        } else if (a == "--accel") {
            o.accel = value();
            if (o.accel != "auto" && o.accel != "kvm" && o.accel != "tcg")
                throw Error(ErrorCode::bad_request, "--accel must be auto, kvm or tcg");
        } else if (a == "--libvirt-uri") {
            o.libvirtUri = value();
        } else if (a == "--agent-transport") {
            o.agentTransport = value();
            if (o.agentTransport != "auto" && o.agentTransport != "serial" &&
                o.agentTransport != "vsock")
                throw Error(ErrorCode::bad_request,
                            "--agent-transport must be auto, serial or vsock");
        } else if (a == "--exec-output-cap") {
            std::string v = value();
            try {
                std::size_t used = 0;
                o.execOutputCap = std::stoull(v, &used);
                if (used != v.size()) throw std::invalid_argument(v);
            } catch (const std::exception&) {
                throw Error(ErrorCode::bad_request, "--exec-output-cap wants a number of bytes");
            }
            if (o.execOutputCap < 1024 || o.execOutputCap > (256u << 20))
                throw Error(ErrorCode::bad_request,
                            "--exec-output-cap must be between 1 KiB and 256 MiB");
        } else if (a == "--default-timeout") {
            std::string v = value();
            try {
                std::size_t used = 0;
                o.defaultTimeoutS = std::stoll(v, &used);
                if (used != v.size()) throw std::invalid_argument(v);
            } catch (const std::exception&) {
                throw Error(ErrorCode::bad_request, "--default-timeout wants a number of seconds");
            }
            if (o.defaultTimeoutS < 0 || o.defaultTimeoutS > 7 * 24 * 3600)
                throw Error(ErrorCode::bad_request,
                            "--default-timeout must be between 0 (none) and 604800");
        } else if (a == "--policy") {
            o.policyFile = value();
        } else if (a == "--approval-timeout") {
            std::string v = value();
            if (v.empty() || v.size() > 7 ||
                v.find_first_not_of("0123456789") != std::string::npos || std::stoll(v) < 10)
                throw Error(ErrorCode::bad_request,
                            "--approval-timeout wants a number of seconds (at least 10)");
            o.approvalTimeoutS = std::stoll(v);
        } else if (a == "--spare-vms") {
            std::string v = value();
            if (v.empty() || v.size() > 2 ||
                v.find_first_not_of("0123456789") != std::string::npos || std::stoul(v) > 16)
                throw Error(ErrorCode::bad_request, "--spare-vms wants a number from 0 to 16");
            o.spareVms = static_cast<unsigned>(std::stoul(v));
        } else if (a == "--warm-templates") {
            std::string v = value();
            o.warmTemplates.clear();
            std::size_t start = 0;
            while (start <= v.size()) {
                auto comma = v.find(',', start);
                std::string name =
                    v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
                if (!name.empty()) o.warmTemplates.push_back(name);
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
        } else if (a == "--push-branch-prefix") {
            o.pushBranchPrefix = value();
            if (o.pushBranchPrefix.empty() || o.pushBranchPrefix.size() > 100 ||
                o.pushBranchPrefix.find("..") != std::string::npos || o.pushBranchPrefix[0] == '/')
                throw Error(ErrorCode::bad_request,
                            "--push-branch-prefix: a branch name prefix such as agent/");
        } else if (a == "--package-upstream") {
            o.packageUpstreams.push_back(value());
            packages::PackageUpstreams::parse(o.packageUpstreams);  // a bad URL fails at start
        } else if (a == "--package-cache-gib") {
            o.packageCacheGib = static_cast<unsigned>(number(value(), 1, 1 << 20));
        } else if (a == "--egress-allow-cidr") {
            std::string v = value();
            egress::CidrRange::parse(v);  // a typo is an error now, not a silent miss later
            o.egressAllowCidrs.push_back(v);
        } else if (a == "--egress-max-connections") {
            o.egressMaxConnections = static_cast<unsigned>(number(value(), 1, 4096));
        } else if (a == "--egress-bandwidth") {
            o.egressBytesPerSecond = number(value(), 1024, 1ull << 40);
        } else if (a == "--evidence-retention-days") {
            o.evidenceRetentionDays = static_cast<unsigned>(number(value(), 1, 36500));
        } else if (a == "--rotate-evidence-key") {
            o.rotateEvidenceKey = true;
        } else if (a == "--audit-retention-days") {
            o.auditRetentionDays = static_cast<unsigned>(number(value(), 0, 36500));
        } else if (a == "--max-tenant-requests") {
            o.maxTenantRequests = static_cast<unsigned>(number(value(), 1, 100000));
        } else if (a == "--max-connections") {
            o.maxConnections = static_cast<unsigned>(number(value(), 16, 1000000));
        } else if (a == "--qemu-uid-range") {
            std::string v = value();
            auto colon = v.find(':');
            if (colon == std::string::npos)
                throw Error(ErrorCode::bad_request, "--qemu-uid-range wants BASE:COUNT");
            o.qemuUidBase = static_cast<unsigned>(number(v.substr(0, colon), 1000, 4000000000u));
            o.qemuUidCount = static_cast<unsigned>(number(v.substr(colon + 1), 0, 1000000));
            if (std::uint64_t(o.qemuUidBase) + o.qemuUidCount > 4294967294ull)
                throw Error(ErrorCode::bad_request, "--qemu-uid-range runs past the largest uid");
        } else if (a == "--sandbox-memory-overhead") {
            o.sandboxMemoryOverheadMib = number(value(), 0, 1 << 20);
            if (o.sandboxMemoryOverheadMib > 0 && o.sandboxMemoryOverheadMib < 128)
                throw Error(ErrorCode::bad_request,
                            "--sandbox-memory-overhead must be 0 (none) or at least 128 MiB");
        } else if (a == "--disk-bandwidth") {
            o.diskBytesPerSecond = number(value(), 0, 1ull << 40);
        } else if (a == "--disk-iops") {
            o.diskOpsPerSecond = number(value(), 0, 10000000);
        } else if (a == "--max-disk-gib") {
            o.maxDiskGib = static_cast<unsigned>(number(value(), 1, 1u << 20));
        } else if (a == "--min-free-disk") {
            o.minFreeDiskMib = number(value(), 0, 1ull << 30);
        } else if (a == "--tcg-cache-mib") {
            o.tcgCacheMib = static_cast<unsigned>(number(value(), 8, 4096));
        } else if (a == "--free-page-reporting") {
            std::string v = value();
            if (v != "on" && v != "off")
                throw Error(ErrorCode::bad_request, "--free-page-reporting wants on or off");
            o.freePageReporting = v == "on";
        } else if (a == "--ksm") {
            o.ksm = value();
            if (o.ksm != "auto" && o.ksm != "off")
                throw Error(ErrorCode::bad_request, "--ksm wants auto or off");
        } else if (a == "--log-level") {
            o.logLevel = value();
        } else {
            throw Error(ErrorCode::bad_request, "unknown option " + a);
        }
    }
    if (o.tlsCertFile.empty() != o.tlsKeyFile.empty())
        throw Error(ErrorCode::bad_request, "--tls-cert and --tls-key go together");
    return o;
}

}  // namespace airlock
