#include <gtest/gtest.h>

#include "daemon/DaemonOptions.hpp"

namespace airlock {
namespace {

TEST(DaemonOptions, ParsesEveryFlag) {
    auto o = parseDaemonOptions({"--listen", "0.0.0.0:9000", "--data-dir", "/d", "--templates-dir",
                                 "/t", "--accel", "tcg", "--libvirt-uri", "qemu:///system"});
    EXPECT_EQ(o.listenHost, "0.0.0.0");
    EXPECT_EQ(o.listenPort, 9000);
    EXPECT_EQ(o.dataDir, "/d");
    EXPECT_EQ(o.templatesDir, "/t");
    EXPECT_EQ(o.accel, "tcg");
    EXPECT_EQ(o.libvirtUri, "qemu:///system");
}

TEST(DaemonOptions, EgressAndRetentionFlags) {
    auto o = parseDaemonOptions({"--egress-allow-cidr", "127.0.0.1/32", "--egress-allow-cidr",
                                 "fd00::/8", "--egress-max-connections", "8", "--egress-bandwidth",
                                 "1048576", "--audit-retention-days", "0"});
    EXPECT_EQ(o.egressAllowCidrs, (std::vector<std::string>{"127.0.0.1/32", "fd00::/8"}));
    EXPECT_EQ(o.egressMaxConnections, 8u);
    EXPECT_EQ(o.egressBytesPerSecond, 1048576u);
    EXPECT_EQ(o.auditRetentionDays, 0u);
    EXPECT_TRUE(parseDaemonOptions({}).egressAllowCidrs.empty())
        << "no private range is open by default";
    EXPECT_ANY_THROW(parseDaemonOptions({"--egress-allow-cidr", "10.0.0.0/33"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--egress-allow-cidr", "localhost"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--egress-max-connections", "0"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--egress-bandwidth", "10"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--audit-retention-days", "-1"}));
}

TEST(DaemonOptions, TlsAndMetricsListener) {
    auto o = parseDaemonOptions(
        {"--tls-cert", "/c.pem", "--tls-key", "/k.pem", "--metrics-listen", "10.0.0.5:9100"});
    EXPECT_EQ(o.tlsCertFile, "/c.pem");
    EXPECT_EQ(o.tlsKeyFile, "/k.pem");
    EXPECT_EQ(o.metricsListenHost, "10.0.0.5");
    EXPECT_EQ(o.metricsListenPort, 9100);
    auto plain = parseDaemonOptions({});
    EXPECT_TRUE(plain.tlsCertFile.empty()) << "plain HTTP is the default";
    EXPECT_TRUE(plain.metricsListenHost.empty()) << "no unauthenticated listener by default";
    EXPECT_ANY_THROW(parseDaemonOptions({"--tls-cert", "/c.pem"})) << "a certificate needs its key";
    EXPECT_ANY_THROW(parseDaemonOptions({"--tls-key", "/k.pem"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--metrics-listen", "9100"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--metrics-listen", ":9100"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--metrics-listen", "h:-1"}));
}

TEST(DaemonOptions, HostMemoryLevers) {
    auto d = parseDaemonOptions({});
    EXPECT_EQ(d.tcgCacheMib, 16u);
    EXPECT_TRUE(d.freePageReporting);
    EXPECT_EQ(d.ksm, "auto");
    auto o = parseDaemonOptions(
        {"--tcg-cache-mib", "256", "--free-page-reporting", "off", "--ksm", "off"});
    EXPECT_EQ(o.tcgCacheMib, 256u);
    EXPECT_FALSE(o.freePageReporting);
    EXPECT_EQ(o.ksm, "off");
    EXPECT_ANY_THROW(parseDaemonOptions({"--tcg-cache-mib", "4"})) << "below what a guest boots in";
    EXPECT_ANY_THROW(parseDaemonOptions({"--free-page-reporting", "yes"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--ksm", "on"}));
}

TEST(DaemonOptions, RejectsBadFlags) {
    EXPECT_ANY_THROW(parseDaemonOptions({"--listen", "nohostport"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--listen", "h:99999"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--accel", "xen"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--data-dir"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--frobnicate"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--exec-output-cap", "12abc"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--exec-output-cap", "10"}));
    EXPECT_ANY_THROW(parseDaemonOptions({"--agent-transport", "pigeon"}));
    EXPECT_EQ(parseDaemonOptions({"--exec-output-cap", "65536"}).execOutputCap, 65536u);
}

// What the options say to `args`: their refusal, or "taken".
std::string refusalOf(const std::vector<std::string>& args) {
    try {
        parseDaemonOptions(args);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "taken";
}

TEST(DaemonOptions, ClusterModeNeedsItsNameAddressAndCredential) {
    auto o = parseDaemonOptions({"--cluster-etcd", "http://127.0.0.1:2379,https://10.0.0.2:2379",
                                 "--node-name", "node1", "--advertise-url",
                                 "http://10.0.0.1:8080/", "--cluster-token-file", "/etc/t",
                                 "--cluster-plain-http"});
    EXPECT_TRUE(o.clusterPlainHttp);
    EXPECT_EQ(o.clusterEtcd,
              (std::vector<std::string>{"http://127.0.0.1:2379", "https://10.0.0.2:2379"}));
    EXPECT_EQ(o.nodeName, "node1");
    EXPECT_EQ(o.advertiseUrl, "http://10.0.0.1:8080");
    EXPECT_EQ(o.clusterTokenFile, "/etc/t");
    EXPECT_TRUE(parseDaemonOptions({}).clusterEtcd.empty());
    EXPECT_NE(refusalOf({"--cluster-etcd", "http://e:1", "--advertise-url", "http://a:1",
                       "--cluster-token-file", "t"})
                  .find("--node-name"),
              std::string::npos);
    EXPECT_NE(refusalOf({"--cluster-etcd", "http://e:1", "--node-name", "n",
                       "--cluster-token-file", "t"})
                  .find("--advertise-url"),
              std::string::npos);
    EXPECT_NE(refusalOf({"--cluster-etcd", "http://e:1", "--node-name", "n", "--advertise-url",
                       "http://a:1"})
                  .find("--cluster-token-file"),
              std::string::npos);
    EXPECT_NE(refusalOf({"--node-name", "n"}).find("need --cluster-etcd"), std::string::npos);
    EXPECT_NE(refusalOf({"--cluster-etcd", "etcd:2379"}).find("http"), std::string::npos);
    EXPECT_NE(refusalOf({"--advertise-url", "10.0.0.1:8080"}).find("http"), std::string::npos);
    // A node serves what it advertises: https with a certificate, http without.
    const std::vector<std::string> base{"--cluster-etcd", "https://e:1", "--node-name", "n",
                                        "--cluster-token-file", "t"};
    auto with = [&](std::vector<std::string> more) {
        auto args = base;
        args.insert(args.end(), more.begin(), more.end());
        return args;
    };
    EXPECT_NE(refusalOf(with({"--advertise-url", "https://a:1"})).find("--tls-cert"),
              std::string::npos);
    EXPECT_NE(refusalOf(with({"--advertise-url", "http://a:1", "--tls-cert", "c", "--tls-key", "k"}))
                  .find("https://"),
              std::string::npos);
    auto tls = parseDaemonOptions(with({"--advertise-url", "https://a:1", "--tls-cert", "c",
                                        "--tls-key", "k", "--cluster-ca", "/etc/fleet-ca.pem"}));
    EXPECT_EQ(tls.clusterCa, "/etc/fleet-ca.pem");
    EXPECT_NE(refusalOf({"--cluster-ca", "ca.pem"}).find("need --cluster-etcd"), std::string::npos);
}

TEST(DaemonOptions, PlainHttpBetweenNodesStaysOnLoopbackUnlessTheOperatorSaysOtherwise) {
    auto node = [](const std::string& etcd, const std::string& advertise) {
        return std::vector<std::string>{"--cluster-etcd", etcd,      "--node-name",         "n",
                                        "--advertise-url", advertise, "--cluster-token-file", "t"};
    };
    EXPECT_EQ(refusalOf(node("http://127.0.0.1:2379", "http://127.0.0.3:8080")), "taken");
    EXPECT_EQ(refusalOf(node("http://[::1]:2379", "http://localhost:8080")), "taken");
    EXPECT_NE(refusalOf(node("http://127.0.0.1:2379", "http://10.0.0.1:8080")).find("--cluster-plain-http"),
              std::string::npos);
    EXPECT_NE(refusalOf(node("http://10.0.0.9:2379", "http://127.0.0.1:8080")).find("--cluster-etcd"),
              std::string::npos);
    EXPECT_NE(refusalOf(node("http://127.0.0.1:2379", "http://127.evil.example:8080"))
                  .find("plain http"),
              std::string::npos);
    auto trusted = node("http://10.0.0.9:2379", "http://10.0.0.1:8080");
    trusted.push_back("--cluster-plain-http");
    EXPECT_EQ(refusalOf(trusted), "taken");
}

TEST(DaemonOptions, TheUsageNamesEveryOptionTheParserKnows) {
    std::string usage = daemonUsage();
    std::size_t named = 0;
    for (std::size_t at = usage.find("[--"); at != std::string::npos;
         at = usage.find("[--", at + 1)) {
        std::string option = usage.substr(at + 1, usage.find_first_of(" ]", at) - at - 1);
        ++named;
        try {
            parseDaemonOptions({option});
        } catch (const std::exception& e) {
            EXPECT_EQ(std::string(e.what()).find("unknown option"), std::string::npos) << option;
            EXPECT_NE(std::string(e.what()).find("needs a value"), std::string::npos) << option;
        }
    }
    EXPECT_GE(named, 37u);
    for (const auto& line : {usage.substr(0, usage.find('\n'))}) EXPECT_LE(line.size(), 100u);
}

}  // namespace
}  // namespace airlock
