#include "hypervisor/DomainXml.hpp"

#include <gtest/gtest.h>

namespace airlock {
namespace {

DomainSpec spec() {
    DomainSpec s;
    s.name = "airlock-sbx-test";
    s.uuid = "0b7a4c3e-1111-4222-8333-444455556666";
    s.vcpus = 2;
    s.memoryMib = 512;
    s.kernelPath = "/t/vmlinuz";
    s.initrdPath = "/t/initramfs.cpio.gz";
    s.cmdline = "console=ttyS0 panic=-1";
    s.consoleLogPath = "/d/console.log";
    s.agentSocketPath = "/d/agent.sock";
    s.agentPortName = "org.airlock.agent.0";
    return s;
}

bool has(const std::string& xml, const std::string& part) { return xml.find(part) != std::string::npos; }

TEST(DomainXml, TcgGuestOnQ35WithDirectKernelBoot) {
    auto xml = buildDomainXml(spec());
    EXPECT_TRUE(has(xml, "<domain type='qemu'>"));
    EXPECT_TRUE(has(xml, "machine='q35'"));
    EXPECT_TRUE(has(xml, "<kernel>/t/vmlinuz</kernel>"));
    EXPECT_TRUE(has(xml, "<initrd>/t/initramfs.cpio.gz</initrd>"));
    EXPECT_TRUE(has(xml, "<memory unit='MiB'>512</memory>"));
    EXPECT_TRUE(has(xml, "<vcpu>2</vcpu>"));
    EXPECT_FALSE(has(xml, "host-passthrough"));
}

TEST(DomainXml, NoUsbNoGraphicsAndABalloonThatOnlyReportsFreePages) {
    auto xml = buildDomainXml(spec());
    EXPECT_TRUE(has(xml, "<controller type='usb' model='none'/>"));
    EXPECT_TRUE(has(xml, "<memballoon model='virtio' freePageReporting='on'/>"));
    EXPECT_FALSE(has(xml, "<graphics"));
    EXPECT_FALSE(has(xml, "<interface"));  // no NIC: default-deny network
}

TEST(DomainXml, FreePageReportingOffMeansNoBalloonAtAll) {
    auto s = spec();
    s.freePageReporting = false;
    auto xml = buildDomainXml(s);
    EXPECT_TRUE(has(xml, "<memballoon model='none'/>"));
    EXPECT_FALSE(has(xml, "freePageReporting"));
}

TEST(DomainXml, TcgCodeCacheHasTheConfiguredSizeAndIsAbsentUnderKvm) {
    auto s = spec();
    EXPECT_TRUE(has(buildDomainXml(s), "<tcg><tb-cache unit='MiB'>16</tb-cache></tcg>"));
    s.tcgCacheMib = 64;
    EXPECT_TRUE(has(buildDomainXml(s), "<tcg><tb-cache unit='MiB'>64</tb-cache></tcg>"));
    s.accel = Accel::kvm;
    EXPECT_FALSE(has(buildDomainXml(s), "<tcg>"));
}

TEST(DomainXml, AgentChannelAndConsoleAndRng) {
    auto xml = buildDomainXml(spec());
    EXPECT_TRUE(has(xml, "<source mode='bind' path='/d/agent.sock'/>"));
    EXPECT_TRUE(has(xml, "<target type='virtio' name='org.airlock.agent.0'/>"));
    EXPECT_TRUE(has(xml, "<serial type='file'>"));
    EXPECT_TRUE(has(xml, "<source path='/d/console.log'/>"));
    EXPECT_TRUE(has(xml, "<rng model='virtio'>"));
}

TEST(DomainXml, VsockTransportSwapsTheChannelForAVsockDevice) {
    auto s = spec();
    s.vsock = true;
    auto xml = buildDomainXml(s);
    EXPECT_TRUE(has(xml, "<vsock model='virtio'>"));
    EXPECT_TRUE(has(xml, "<cid auto='yes'/>"));
    EXPECT_FALSE(has(xml, "<channel"));
    EXPECT_EQ(parseVsockCid("<domain><devices><vsock model='virtio'><cid auto='yes' address='42'/></vsock></devices></domain>"), 42u);
    EXPECT_FALSE(parseVsockCid("<domain><devices></devices></domain>"));
    EXPECT_FALSE(parseVsockCid("<vsock model='virtio'><cid auto='yes'/></vsock>"));
}

TEST(DomainXml, KvmUsesHostCpu) {
    auto s = spec();
    s.accel = Accel::kvm;
    auto xml = buildDomainXml(s);
    EXPECT_TRUE(has(xml, "<domain type='kvm'>"));
    EXPECT_TRUE(has(xml, "host-passthrough"));
}

TEST(DomainXml, EscapesEverythingItInterpolates) {
    auto s = spec();
    s.cmdline = "a<b & c='d'";
    s.agentSocketPath = "/d/x'/><evil/>";
    auto xml = buildDomainXml(s);
    EXPECT_FALSE(has(xml, "<evil/>"));
    EXPECT_TRUE(has(xml, "a&lt;b &amp; c=&apos;d&apos;"));
}

TEST(DomainXml, RejectsIncompleteSpecs) {
    auto s = spec();
    s.kernelPath.clear();
    EXPECT_ANY_THROW(buildDomainXml(s));
    s = spec();
    s.memoryMib = 0;
    EXPECT_ANY_THROW(buildDomainXml(s));
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

TEST(DomainXml, ASandboxsOwnUidIsAStaticLabelWithoutRelabelling) {
    auto s = spec();
    s.diskPath = "/d/disk-0.qcow2";
    auto shared = buildDomainXml(s);
    EXPECT_FALSE(has(shared, "<seclabel type='static'"));
    EXPECT_TRUE(has(shared, "<seclabel model='dac' relabel='no'/>")) << "the backing chain is never chowned";
    s.runAs = std::make_pair(200007u, 200007u);
    auto own = buildDomainXml(s);
    EXPECT_TRUE(has(own, "<seclabel type='static' model='dac' relabel='no'>"));
    EXPECT_TRUE(has(own, "<label>+200007:+200007</label>"));
    EXPECT_FALSE(has(own, "<seclabel model='dac' relabel='no'/>")) << "libvirt refuses a disk override then";
    EXPECT_LT(own.find("</devices>"), own.find("<seclabel type='static'"));
}

}  // namespace
}  // namespace airlock
