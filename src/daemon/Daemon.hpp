#pragma once
#include "daemon/DaemonOptions.hpp"

namespace airlock {

// Wires store, templates, hypervisor, controller and HTTP server together and
// serves until SIGINT/SIGTERM. Sandboxes keep running after it stops; the
// next start on the same data dir adopts them.
int runDaemon(const DaemonOptions& options);

}  // namespace airlock
