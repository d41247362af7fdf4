/* The biolatency collector behind the collector interface (lib/collector.h). */
#pragma once

#include <stddef.h>

#include "biolatency.h"
#include "collector.h"
#include "devio.h"

/* Its options, the --biolatency.* flags: the storage of its option entries. */
struct biolatency_options {
        unsigned max_devices; /* device slots of the maps, 1 .. BIOLAT_MAX_DEVICES */
        char *buckets;        /* classic bounds in seconds, comma-separated */
        char *ops;            /* operations of the device-time histogram, comma-separated */
        char *queue_ops;      /* operations of the queue-time histogram, comma-separated */
};

/* The default operations of each histogram (--biolatency.ops, --biolatency.queue-ops): the
 * device time of every operation; the queue time of writes, which the kernel holds back (the I/O
 * schedulers favour reads, writeback throttling delays writes), so that a disk costs no more
 * series than node_exporter's diskstats and ebpf_exporter's biolatency together
 * (docs/BENCHMARKS.md). */
#define BIOLAT_DEFAULT_OPS       "read,write,flush,discard"
#define BIOLAT_DEFAULT_QUEUE_OPS "write"

/* Parses a list of operations ("read,write", "" none) into a mask of 1 << BIOLAT_OP_*. 0, or
 * -EINVAL with why. */
int biolatency_parse_ops(const char *text, unsigned *ret, char *why, size_t whysz);

/* How often a failed attachment is tried again (an operator who fixed the cause need not
 * restart), and how long the helper may take to load the programs: at start (before the
 * service is ready, so systemd's watchdog does not run yet), and later, on the main loop, where
 * a wait must stay well inside the unit's WatchdogSec=30s (pinged every 15 s). */
#define BIOLAT_RETRY         (600 * USEC_PER_SEC)
#define BIOLAT_LOAD_TIMEOUT  (30 * USEC_PER_SEC)
#define BIOLAT_RETRY_TIMEOUT (10 * USEC_PER_SEC)

/* The privileged loader (biolatency_load.c): loads and attaches the BPF program in a worker of
 * the privileged helper, arg a struct biolat_params, and gives the BIOLAT_NFDS descriptors in the
 * BIOLAT_FD_* order. 0, or -errno with the message in err: -EOPNOTSUPP when this build or kernel
 * cannot (no retry helps), others when a retry may. The signature of collector_def.privileged. */
int biolatency_load(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz);

/* Its definition, for the daemon's registry. */
extern const struct collector_def biolatency_collector_def;

/* Its part of the landing page's summary from the set it exported (its summarize function, named
 * for tests): pure, any thread. */
void biolatency_summarize(const struct mset *set, struct summary *sum);
