// airlock-channel-bench: boots one minimal sandbox through the real
// controller (libvirt + QEMU) and measures the agent channel against its own
// baseline in the same run: the bare virtio-serial channel without framing.
// Prints medians and ratios; scripts/bench runs it. Not a test: no asserts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "agentclient/AgentConnection.hpp"
#include "agentclient/AgentTransport.hpp"
#include "controller/SandboxController.hpp"
#include "hypervisor/AccelProbe.hpp"
#include "hypervisor/LibvirtHypervisor.hpp"
#include "store/Database.hpp"
#include "support/RawChannel.hpp"
#include "support/RealWorld.hpp"
#include "support/TestEnv.hpp"

using namespace airlock;
using namespace std::chrono;
using nlohmann::json;

namespace {
double ms(nanoseconds d) { return duration<double, std::milli>(d).count(); }

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(
                                        p / 100.0 * static_cast<double>(v.size() - 1) + 0.5))];
}

// One machine-readable figure (scripts/bench collects these lines).
void figure(const char* name, double value, const char* unit, const char* baseline = nullptr,
            double baselineValue = 0, const char* goal = nullptr) {
    std::printf("@figure {\"name\":\"channel.%s\",\"value\":%f,\"unit\":\"%s\"", name, value, unit);
    if (baseline)
        std::printf(",\"baseline\":\"channel.%s\",\"baseline_value\":%f", baseline, baselineValue);
    if (goal) std::printf(",\"goal\":\"%s\"", goal);
    std::printf("}\n");
}

double mibPerSec(std::uint64_t bytes, nanoseconds d) {
    return static_cast<double>(bytes) / (1024.0 * 1024.0) / duration<double>(d).count();
}
}  // namespace

int runBench(int argc, char** argv) {
    int runs = argc > 1 ? std::atoi(argv[1]) : 200;
    std::uint64_t fileBytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 64) * 1024 * 1024;
    // The bare-channel baseline needs the agent built with it
    // (airlock-agent-rawbench), in a minimal template of its own that
    // scripts/bench makes: no other template has it.
    if (argc < 4) {
        std::fprintf(stderr,
                     "usage: airlock-channel-bench RUNS FILE_MIB TEMPLATES_DIR (its minimal "
                     "template carrying airlock-agent-rawbench; scripts/bench makes one)\n");
        return 2;
    }
    test::RealWorld world(ControllerConfig{}, argv[3]);
    auto& controller = *world.controller;
    auto& hypervisor = *world.hypervisor;
    auto sandbox = controller.create("bench", CreateSandboxRequest{});
    // A failed run still deletes its VM: an embedded libvirt's QEMU would
    // outlive this process.
    struct DeleteOnExit {
        SandboxController& controller;
        std::string id;
        ~DeleteOnExit() {
            try {
                controller.destroy("bench", id);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "cannot delete %s: %s\n", id.c_str(), e.what());
            }
        }
    } deleteOnExit{controller, sandbox.id};
    // The bare channel first, on a session of its own: the controller's
    // session gives the channel up, then comes back for the framed runs.
    controller.runningAgent("bench", sandbox.id)->closeAndWait();
    std::vector<nanoseconds> echo;
    nanoseconds sink{}, source{};
    {
        test::RawChannel channel(controller.sandboxDir(sandbox.id) + "/agent.sock", seconds(30));
        echo = channel.run("echo", static_cast<std::uint64_t>(runs), seconds(120));
        sink = channel.run("sink", fileBytes, seconds(600)).front();
        source = channel.run("source", fileBytes, seconds(600)).front();
    }
    auto agent = controller.runningAgent("bench", sandbox.id);
    std::printf("channel bench: %s, accel %s, %d runs, %llu MiB files\n", sandbox.id.c_str(),
                accelName(hypervisor.accel()).c_str(), runs,
                static_cast<unsigned long long>(fileBytes >> 20));

    // 1. Round trips: bare channel (1 byte out, 1 byte back), a ping frame, exec of `true`.
    std::vector<double> raw, ping, exec;
    for (auto d : echo) raw.push_back(ms(d));
    for (int i = 0; i < runs; ++i) {
        auto t0 = steady_clock::now();
        agent->ping(seconds(5));
        ping.push_back(ms(steady_clock::now() - t0));
    }
    protocol::ExecRequest t;
    t.argv = {"true"};
    for (int i = 0; i < runs; ++i) {
        auto t0 = steady_clock::now();
        agent->exec(t, 1024, seconds(30));
        exec.push_back(ms(steady_clock::now() - t0));
    }
    // Process start inside the guest, without the channel: 200 spawns of `true` in one shell.
    protocol::ExecRequest loop;
    loop.argv = {"/bin/sh", "-c", "i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done"};
    auto l0 = steady_clock::now();
    agent->exec(loop, 1024, seconds(120));
    double spawn = ms(steady_clock::now() - l0) / 200.0;
    double rawP50 = percentile(raw, 50), execP50 = percentile(exec, 50);
    std::printf(
        "round trip   raw channel p50 %.3f ms p99 %.3f | ping frame p50 %.3f ms | exec true p50 "
        "%.3f ms p99 %.3f\n",
        rawP50, percentile(raw, 99), percentile(ping, 50), execP50, percentile(exec, 99));
    std::printf(
        "             process start in guest %.3f ms; exec p50 / (raw p50 + process start) = %.2fx "
        "(goal <= 2x)\n",
        spawn, execP50 / (rawP50 + spawn));
    figure("raw_round_trip_p50", rawP50, "ms");
    figure("guest_process_start", spawn, "ms");
    figure("raw_round_trip_plus_process_start", rawP50 + spawn, "ms");
    figure("exec_true_p50", execP50, "ms", "raw_round_trip_plus_process_start", rawP50 + spawn,
           "<= 2");

    // 2. Throughput: bare channel both ways vs file upload/download through streams.
    std::string block(256 * 1024, 'u');
    auto u0 = steady_clock::now();
    auto up = agent->open(protocol::FileWriteRequest{"/tmp/bench.bin", std::nullopt, ""});
    for (std::uint64_t sent = 0; sent < fileBytes; sent += block.size())
        up->write(0, block, steady_clock::now() + seconds(60));
    up->closeWrite();
    while (auto e = up->next(steady_clock::now() + seconds(60)))
        if (e->kind != AgentStream::Event::Kind::data) break;
    auto upload = steady_clock::now() - u0;
    auto d0 = steady_clock::now();
    auto down = agent->open(protocol::FileReadRequest{"/tmp/bench.bin", ""});
    std::uint64_t got = 0;
    while (auto e = down->next(steady_clock::now() + seconds(60))) {
        if (e->kind == AgentStream::Event::Kind::data)
            got += e->payload.size();
        else if (e->kind != AgentStream::Event::Kind::control)
            break;
    }
    auto download = steady_clock::now() - d0;
    double rawIn = mibPerSec(fileBytes, sink), rawOut = mibPerSec(fileBytes, source);
    double upRate = mibPerSec(fileBytes, upload), downRate = mibPerSec(got, download);
    std::printf("throughput   raw host->guest %.1f MiB/s, raw guest->host %.1f MiB/s\n", rawIn,
                rawOut);
    std::printf(
        "             upload %.1f MiB/s = %.0f%% of raw, download %.1f MiB/s = %.0f%% of raw (goal "
        ">= 50%%)\n",
        upRate, 100.0 * upRate / rawIn, downRate, 100.0 * downRate / rawOut);
    figure("raw_host_to_guest", rawIn, "MiB/s");
    figure("raw_guest_to_host", rawOut, "MiB/s");
    figure("protocol_upload", upRate, "MiB/s", "raw_host_to_guest", rawIn, ">= 0.5");
    figure("protocol_download", downRate, "MiB/s", "raw_guest_to_host", rawOut, ">= 0.5");
    return 0;
}

int main(int argc, char** argv) {
    // Caught here so that the sandbox's deleter runs (an uncaught exception
    // may skip unwinding).
    try {
        return runBench(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "channel bench failed: %s\n", e.what());
        return 1;
    }
}
