/* The collector registry. */
#include "registry.h"

#include "daemon.h"

const struct collector_def collector_defs[COLLECTOR_MAX] = {
    [COLLECTOR_DISKSTATS] = {"diskstats",
                             "block device counters from /proc/diskstats, iostat's derived "
                             "gauges and device facts",
                             true, daemon_setup_diskstats},
    [COLLECTOR_SMART] = {"smart",
                         "SMART and NVMe health, read by the privileged helper every "
                         "--smart.interval",
                         true, daemon_setup_smart},
    [COLLECTOR_CANARY] = {"canary",
                          "what a commit costs: timed write + fdatasync probes on each "
                          "--canary.path",
                          true, daemon_setup_canary},
};
