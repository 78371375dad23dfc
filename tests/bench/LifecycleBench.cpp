// airlock-lifecycle-bench: create paths measured side by side in one run,
// through the real controller (libvirt + QEMU, minimal template):
//   cold create -> first exec; snapshot; clone from the snapshot -> first exec
//   (a spare VM ready, the daemon's default); a warm template's create ->
//   first exec; and the baseline: the raw restore of the same state straight
//   through the hypervisor (start paused, load, resume, agent hello, exec)
//   without the controller; and the floor under cold create: QEMU started by
//   hand (no libvirt) on the same kernel, initramfs and devices, to the
//   agent's answer. The debian template (disk-backed) the same way: cold,
//   clone. Then QEMU's resident memory per idle sandbox and how create
//   latency grows with 1, 5, 10 and 20 sandboxes already running.
// Every figure is also printed as an "@figure {json}" line for --json.
// Prints medians and ratios; scripts/bench runs it. Not a test: no asserts.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentTransport.hpp"
#include "controller/SandboxController.hpp"
#include "core/Ids.hpp"
#include "hypervisor/AccelProbe.hpp"
#include "hypervisor/LibvirtHypervisor.hpp"
#include "protocol/Messages.hpp"
#include "store/Database.hpp"
#include "support/RealWorld.hpp"
#include "support/TestEnv.hpp"

using namespace airlock;
using namespace std::chrono;

namespace {
double secondsSince(steady_clock::time_point t0) { return duration<double>(steady_clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

ExecOptions trueCommand() {
    ExecOptions o;
    o.argv = {"true"};
    return o;
}

// Resident memory of the QEMU process whose command line names `needle`.
long qemuRssKib(const std::string& needle) {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        std::ifstream cmd(entry.path() / "cmdline");
        std::string cmdline((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
        if (cmdline.find("qemu-system") == std::string::npos || cmdline.find(needle) == std::string::npos) continue;
        std::ifstream status(entry.path() / "status");
        for (std::string line; std::getline(status, line);)
            if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
}

void print(const char* what, const std::vector<double>& v) {
    std::printf("%-44s median %.3f s (min %.3f, max %.3f, n=%zu)\n", what, median(v),
                *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()), v.size());
}

// One machine-readable figure (scripts/bench collects these lines).
void figure(const std::string& name, const std::vector<double>& samples, const std::string& baseline = {},
            double baselineValue = 0, const std::string& goal = {}) {
    std::string line = "@figure {\"name\":\"lifecycle." + name + "\",\"unit\":\"s\",\"value\":" +
                       std::to_string(median(samples)) + ",\"samples\":[";
    for (std::size_t i = 0; i < samples.size(); ++i) line += (i ? "," : "") + std::to_string(samples[i]);
    line += "]";
    if (!baseline.empty())
        line += ",\"baseline\":\"lifecycle." + baseline + "\",\"baseline_value\":" + std::to_string(baselineValue);
    if (!goal.empty()) line += ",\"goal\":\"" + goal + "\"";
    std::printf("%s}\n", line.c_str());
}

// A domain of the template straight through the hypervisor, without the
// controller: its directory handed to the QEMU user.
DomainSpec bareDomain(const TemplateInfo& tmpl, const std::string& sdir, Accel accel, unsigned tcgCacheMib) {
    std::filesystem::create_directories(sdir);
    if (std::system(("chown libvirt-qemu:libvirt-qemu " + sdir + " 2>/dev/null").c_str()) != 0)
        std::fprintf(stderr, "cannot hand %s to libvirt-qemu\n", sdir.c_str());
    DomainSpec spec;
    spec.name = "airlock-bench-" + std::filesystem::path(sdir).filename().string();
    spec.uuid = newUuid();
    spec.kernelPath = tmpl.kernelPath;
    spec.initrdPath = tmpl.initrdPath;
    spec.cmdline = tmpl.cmdline;
    spec.consoleLogPath = sdir + "/console.log";
    spec.agentSocketPath = sdir + "/agent.sock";
    spec.agentPortName = protocol::kAgentPortName;
    spec.accel = accel;
    spec.tcgCacheMib = tcgCacheMib;
    return spec;
}

// The agent's hello, then an exec of `true`.
void execTrueOver(const std::string& socketPath) {
    auto agent = AgentConnection::connect(socketPath, seconds(60));
    protocol::ExecRequest request;
    request.argv = {"true"};
    agent->exec(request, 4096, seconds(60));
    agent->close();
}

// QEMU started by hand, as libvirt would but without it: same kernel,
// initramfs, command line, machine, CPU model, TCG cache and devices, the
// agent's channel on a socket QEMU listens on. Seconds from fork to the
// agent's answer to an exec of `true`.
double rawQemuBoot(const TemplateInfo& tmpl, const std::string& dir, unsigned memoryMib, unsigned tcgCacheMib) {
    std::filesystem::create_directories(dir);
    std::string sock = dir + "/agent.sock";
    std::vector<std::string> args = {
        "qemu-system-x86_64", "-nodefaults", "-no-user-config", "-display", "none",
        "-machine", "q35", "-accel", "tcg,tb-size=" + std::to_string(tcgCacheMib), "-cpu", "qemu64",
        "-m", std::to_string(memoryMib), "-smp", "1",
        "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
        "-kernel", tmpl.kernelPath, "-initrd", tmpl.initrdPath, "-append", tmpl.cmdline,
        "-serial", "file:" + dir + "/console.log",
        "-device", "virtio-serial-pci,id=vs", "-chardev", "socket,id=agent,path=" + sock + ",server=on,wait=off",
        "-device", "virtserialport,bus=vs.0,chardev=agent,name=" + std::string(protocol::kAgentPortName),
        "-device", "virtio-rng-pci", "-device", "virtio-balloon-pci,free-page-reporting=on"};
    auto t0 = steady_clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execvp(argv[0], argv.data());
        ::_exit(127);
    }
    double took = -1;
    try {
        test::waitFor([&] { return std::filesystem::exists(sock); }, seconds(30));
        execTrueOver(sock);
        took = secondsSince(t0);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "raw QEMU boot failed: %s\n", e.what());
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    std::filesystem::remove_all(dir);
    return took;
}
}  // namespace

int main(int argc, char** argv) {
    int runs = argc > 1 ? std::atoi(argv[1]) : 5;
    ControllerConfig config;
    config.defaultTimeoutS = 0;
    config.sparesPerShape = 1;
    test::RealWorld world(config);
    auto& controller = *world.controller;
    auto& hypervisor = *world.hypervisor;
    auto& dir = world.dir;
    auto tmpl = world.templates->find("minimal");
    if (!tmpl) {
        std::fprintf(stderr, "no minimal template: run scripts/setup\n");
        return 1;
    }
    const std::string tenant = "bench";

    std::vector<double> cold, snap, clone, raw, warm;
    for (int i = 0; i < runs; ++i) {
        auto t0 = steady_clock::now();
        auto s = controller.create(tenant, CreateSandboxRequest{});
        controller.commands().exec(tenant, s.id, trueCommand());
        cold.push_back(secondsSince(t0));
        controller.destroy(tenant, s.id);
    }
    std::vector<double> rawBoot, libvirtStart, libvirtBoot;
    for (int i = 0; i < runs; ++i) {
        double t = rawQemuBoot(*tmpl, dir.path() + "/rawboot", 256, config.tcgCacheMib);
        if (t > 0) rawBoot.push_back(t);
    }
    // Where cold create's time goes: the same boot through libvirt without
    // the controller, split at the return of the domain start (libvirt's
    // QEMU launch and its QMP set-up) and the agent's answer (guest boot).
    for (int i = 0; i < runs; ++i) {
        std::string sdir = dir.path() + "/boot-" + newId("sbx-");
        DomainSpec spec = bareDomain(*tmpl, sdir, hypervisor.accel(), config.tcgCacheMib);
        auto t0 = steady_clock::now();
        hypervisor.startDomain(spec);
        libvirtStart.push_back(secondsSince(t0));
        execTrueOver(spec.agentSocketPath);
        libvirtBoot.push_back(secondsSince(t0));
        hypervisor.destroyDomain(spec.name);
        std::filesystem::remove_all(sdir);
    }
    auto source = controller.create(tenant, CreateSandboxRequest{});
    controller.commands().exec(tenant, source.id, trueCommand());
    std::string snapshotId;
    for (int i = 0; i < runs; ++i) {
        auto t0 = steady_clock::now();
        auto s = controller.snapshot(tenant, source.id);
        snap.push_back(secondsSince(t0));
        if (!snapshotId.empty()) controller.deleteSnapshot(tenant, snapshotId);
        snapshotId = s.id;
    }
    std::string statePath = dir.path() + "/snapshots/" + snapshotId + "/memory.state";

    // Baseline: the same state restored straight through libvirt + QEMU.
    for (int i = 0; i < runs; ++i) {
        std::string sdir = dir.path() + "/raw-" + newId("sbx-");
        DomainSpec spec = bareDomain(*tmpl, sdir, hypervisor.accel(), config.tcgCacheMib);
        spec.vcpus = source.vcpus;
        spec.memoryMib = source.memoryMib;
        spec.incoming = true;
        auto t0 = steady_clock::now();
        hypervisor.restoreDomain(spec, statePath, sdir);
        hypervisor.resumeDomain(spec.name);
        execTrueOver(spec.agentSocketPath);
        raw.push_back(secondsSince(t0));
        hypervisor.destroyDomain(spec.name);
        std::filesystem::remove_all(sdir);
    }

    CreateSandboxRequest fromSnapshot;
    fromSnapshot.snapshot = snapshotId;
    std::vector<std::string> clones;
    for (int i = 0; i < runs; ++i) {
        test::waitFor([&] { return controller.spareCount() >= 1; }, seconds(60));
        auto t0 = steady_clock::now();
        auto c = controller.create(tenant, fromSnapshot);
        controller.commands().exec(tenant, c.id, trueCommand());
        clone.push_back(secondsSince(t0));
        clones.push_back(c.id);
    }
    long sourceRss = qemuRssKib(source.id), cloneRss = qemuRssKib(clones.front());
    for (const auto& id : clones) controller.destroy(tenant, id);

    controller.warmTemplate("minimal");
    for (int i = 0; i < runs; ++i) {
        test::waitFor([&] { return controller.spareCount() >= 1; }, seconds(60));
        auto t0 = steady_clock::now();
        auto w = controller.create(tenant, CreateSandboxRequest{});
        controller.commands().exec(tenant, w.id, trueCommand());
        warm.push_back(secondsSince(t0));
        controller.destroy(tenant, w.id);
    }

    // The disk-backed shape: debian cold, then clones of its idle snapshot.
    std::vector<double> debianCold, debianClone;
    if (world.templates->find("debian")) {
        CreateSandboxRequest debian;
        debian.templateName = "debian";
        debian.boot = BootMode::cold;
        for (int i = 0; i < std::max(2, runs / 2); ++i) {
            auto t0 = steady_clock::now();
            auto s = controller.create(tenant, debian);
            controller.commands().exec(tenant, s.id, trueCommand());
            debianCold.push_back(secondsSince(t0));
            controller.destroy(tenant, s.id);
        }
        auto base = controller.create(tenant, debian);
        controller.commands().exec(tenant, base.id, trueCommand());
        auto snap = controller.snapshot(tenant, base.id);
        CreateSandboxRequest fromDebian;
        fromDebian.snapshot = snap.id;
        std::vector<std::string> made;
        for (int i = 0; i < runs; ++i) {
            // Its own spare (the minimal shape has one too): a disk-backed
            // spare boots and loads 512 MiB of state, about 5 s here, so
            // clones faster than that take the slower path.
            test::waitFor([&] { return controller.sparesIdle() && controller.spareCount() >= 2; }, seconds(60));
            auto t0 = steady_clock::now();
            auto c = controller.create(tenant, fromDebian);
            controller.commands().exec(tenant, c.id, trueCommand());
            debianClone.push_back(secondsSince(t0));
            made.push_back(c.id);
        }
        for (const auto& id : made) controller.destroy(tenant, id);
        controller.destroy(tenant, base.id);
        controller.deleteSnapshot(tenant, snap.id);
    }

    std::printf("accelerator: %s   runs: %d\n", accelName(hypervisor.accel()).c_str(), runs);
    print("raw QEMU boot -> agent exec (no libvirt)", rawBoot);
    print("libvirt start (QEMU launch + QMP set-up)", libvirtStart);
    print("libvirt boot -> agent exec (no controller)", libvirtBoot);
    print("cold create -> first exec", cold);
    print("snapshot of an idle sandbox", snap);
    print("raw restore (libvirt+QEMU, no controller)", raw);
    print("clone from snapshot -> first exec", clone);
    print("warm template create -> first exec", warm);
    std::printf("ratios: clone/cold %.2fx (goal <= 0.15x), warm/cold %.2fx, clone/raw restore %.2fx (goal <= 1.5x)\n",
                median(clone) / median(cold), median(warm) / median(cold), median(clone) / median(raw));
    std::printf("QEMU RSS of an idle sandbox: booted %ld MiB, cloned %ld MiB (guest memory %u MiB)\n",
                sourceRss / 1024, cloneRss / 1024, source.memoryMib);
    std::printf("cold create / raw QEMU boot %.2fx (goal <= 1.3x)\n", median(cold) / median(rawBoot));
    figure("raw_qemu_boot_to_agent_exec", rawBoot);
    figure("libvirt_domain_start", libvirtStart);
    figure("libvirt_boot_to_agent_exec", libvirtBoot, "raw_qemu_boot_to_agent_exec", median(rawBoot));
    figure("minimal_cold_create_to_first_exec", cold, "raw_qemu_boot_to_agent_exec", median(rawBoot), "<= 1.3");
    figure("minimal_snapshot", snap, "minimal_cold_create_to_first_exec", median(cold));
    figure("raw_restore_to_agent_exec", raw);
    figure("minimal_clone_to_first_exec", clone, "minimal_cold_create_to_first_exec", median(cold), "<= 0.15");
    figure("minimal_warm_create_to_first_exec", warm, "minimal_cold_create_to_first_exec", median(cold), "<= 0.1");
    figure("minimal_clone_vs_raw_restore", clone, "raw_restore_to_agent_exec", median(raw));
    if (!debianCold.empty()) {
        print("debian cold create -> first exec", debianCold);
        print("debian clone from snapshot -> first exec", debianClone);
        std::printf("ratios: debian clone/cold %.2fx (goal <= 0.15x)\n", median(debianClone) / median(debianCold));
        figure("debian_cold_create_to_first_exec", debianCold);
        figure("debian_clone_to_first_exec", debianClone, "debian_cold_create_to_first_exec", median(debianCold),
               "<= 0.15");
    }

    // Create latency as the machine fills up (idle sandboxes are clones).
    std::vector<std::string> running = {source.id};
    for (int level : {1, 5, 10, 20}) {
        while (static_cast<int>(running.size()) < level) running.push_back(controller.create(tenant, fromSnapshot).id);
        std::vector<double> c;
        for (int i = 0; i < 3; ++i) {
            test::waitFor([&] { return controller.spareCount() >= 1; }, seconds(60));
            auto t0 = steady_clock::now();
            auto s = controller.create(tenant, fromSnapshot);
            controller.commands().exec(tenant, s.id, trueCommand());
            c.push_back(secondsSince(t0));
            controller.destroy(tenant, s.id);
        }
        auto t0 = steady_clock::now();
        CreateSandboxRequest coldRequest;
        coldRequest.boot = BootMode::cold;
        auto s = controller.create(tenant, coldRequest);
        controller.commands().exec(tenant, s.id, trueCommand());
        double coldAtLevel = secondsSince(t0);
        controller.destroy(tenant, s.id);
        std::printf("with %2d running: clone -> exec median %.3f s, cold create -> exec %.3f s\n", level, median(c),
                    coldAtLevel);
        figure("clone_to_first_exec_with_" + std::to_string(level) + "_running", c, "minimal_clone_to_first_exec",
               median(clone));
    }
    for (const auto& id : running) controller.destroy(tenant, id);
    controller.deleteSnapshot(tenant, snapshotId);
    controller.shutdown();
    return 0;
}
