#pragma once
#include "controller/ApprovalDecisions.hpp"
#include "controller/ApprovalGates.hpp"
#include "controller/GuestFiles.hpp"
#include "controller/GuestPorts.hpp"
#include "controller/GuestProcesses.hpp"
#include "controller/HostStatus.hpp"
#include "controller/SandboxAuditLog.hpp"
#include "controller/SandboxCommands.hpp"
#include "controller/SandboxMetrics.hpp"
#include "controller/SandboxSnapshots.hpp"
#include "controller/SandboxVolumes.hpp"
#include "controller/Sandboxes.hpp"
#include "controller/SnapshotLibrary.hpp"
#include "controller/TenantLimits.hpp"

namespace airlock {

// What a front door (the native API, and the doors to come) reaches of the
// controller: each concern through its own narrow part, never the hub.
struct FrontDoorServices {
    Sandboxes& sandboxes;
    SandboxSnapshots& snapshotting;
    SnapshotLibrary& snapshots;
    SandboxCommands& commands;
    ApprovalGates& gates;
    ApprovalDecisions& approvals;
    SandboxAuditLog& audit;
    GuestFiles& files;
    GuestProcesses& processes;
    GuestPorts& ports;
    TenantLimits& tenants;
    HostStatus& host;
    SandboxMetrics& metrics;
    SandboxVolumes* volumes = nullptr;  // none: the server keeps no volumes
};

}  // namespace airlock
