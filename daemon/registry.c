/* The collector registry. */
#include "registry.h"

const struct collector_def collector_defs[COLLECTOR_MAX] = {
    [COLLECTOR_DISKSTATS] = {"diskstats",
                             "block device counters from /proc/diskstats, iostat's derived "
                             "gauges and device facts",
                             true},
    [COLLECTOR_SMART] = {"smart",
                         "SMART and NVMe health, read by the privileged helper every "
                         "--smart.interval",
                         true},
    [COLLECTOR_CANARY] = {"canary",
                          "what a commit costs: timed write + fdatasync probes on each "
                          "--canary.path",
                          true},
};
