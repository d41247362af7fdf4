/* The biolatency histograms' pure arithmetic: the bucket bounds of biolatency_shared.h as seconds
 * and as "le" texts, the bucket of a latency (as the BPF program picks it), the wrap-safe
 * accumulation of the program's wrapping per-CPU counters into 64-bit totals, a quantile read
 * from buckets, and the two small texts the reader parses (the possible-CPU list and a uevent's
 * DEVNAME). No I/O, no globals, no clock; any thread. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "biolatency_shared.h"
#include "util.h"

/* Room for an "le" text (format_double_shortest's), "+Inf" included. */
#define BIOLAT_LE_MAX FORMAT_DOUBLE_MAX

/* The bucket grid (biolatency_shared.h): the native bounds and the classic ones, merged. */
struct biolat_grid {
        size_t n;                       /* bounds, <= BIOLAT_MAX_BOUNDS */
        uint64_t ns[BIOLAT_MAX_BOUNDS]; /* strictly increasing */
};

/* The default classic bounds (--biolatency.buckets), seconds: 50 us to 1 s at 1-2.5-5 per decade,
 * the canary's own texts, with the alerts' and the dashboard's 50 ms among them. */
#define BIOLAT_DEFAULT_BUCKETS                                                                     \
        "0.00005,0.0001,0.00025,0.0005,0.001,0.0025,0.005,0.01,0.025,0.05,0.1,0.25,1"

/* The upper bound of native bucket i (BIOLAT_NATIVE_MIN <= i <= BIOLAT_NATIVE_MAX) in whole
 * nanoseconds: floor(1e9 * 2^(i/4)). */
uint64_t biolatency_native_bound_ns(int32_t i);
/* The grid of nclassic classic bounds (nanoseconds, strictly increasing, > 0; 1 to
 * BIOLAT_MAX_CLASSIC of them) and the native bounds, into *g. 0, or -EINVAL for classic bounds
 * out of those rules (*g untouched). Pure: the daemon and the loader make the same grid. */
int biolatency_grid(const uint64_t *classic_ns, size_t nclassic, struct biolat_grid *g);
/* The grid index of bound ns, or g->n when it is not a bound of the grid. */
size_t biolatency_grid_find(const struct biolat_grid *g, uint64_t ns);
/* Upper bound i of the grid in seconds (the double nearest to ns / 1e9); INFINITY for g->n and
 * beyond. */
double biolatency_bound_seconds(const struct biolat_grid *g, size_t i);
/* The "le" text of a bound of ns nanoseconds into buf (BIOLAT_LE_MAX bytes), as the exposition
 * and the canary write it (format_double_shortest: "1e-06", "0.00025", "1"); UINT64_MAX gives
 * "+Inf". Returns buf. */
const char *biolatency_le(uint64_t ns, char *buf, size_t size);
/* The bucket of a latency of ns nanoseconds, as the BPF program picks it: the first whose bound
 * is >= ns; g->n beyond the last bound. */
size_t biolatency_bucket(const struct biolat_grid *g, uint64_t ns);
/* The native index of grid bucket i (0 <= i <= g->n): the native bucket that holds it, or
 * BIOLAT_NATIVE_ZERO for the zero bucket (bounds up to the threshold). Buckets above
 * BIOLAT_NATIVE_MAX's bound go to BIOLAT_NATIVE_MAX + 1 (the one above 128 s; a latency that long
 * is counted there whatever it is). */
#define BIOLAT_NATIVE_ZERO INT32_MIN
int32_t biolatency_native_of(const struct biolat_grid *g, size_t i);

/* Parses a --biolatency.buckets value: seconds, comma-separated, strictly increasing, > 0, at most
 * 1e6 s each, whole nanoseconds, 1 to BIOLAT_MAX_CLASSIC of them, into ns (BIOLAT_MAX_CLASSIC
 * entries) and *ret_n. 0, or -EINVAL with why ("\"TEXT\" is ..."). */
int biolatency_parse_buckets(const char *text, uint64_t *ns, size_t *ret_n, char *why,
                             size_t whysz);

/* Adds cur - *prev modulo 2^32 (resp. 2^64) to *total and sets *prev = cur: exact while fewer
 * than 2^32 (2^64) increments happened between the two readings. */
void biolatency_add_u32(uint64_t *total, uint32_t *prev, uint32_t cur);
void biolatency_add_u64(uint64_t *total, uint64_t *prev, uint64_t cur);

/* The q-quantile (0 <= q <= 1) in seconds of the latencies counted in counts (not cumulative,
 * g->n + 1 of them), as Prometheus' histogram_quantile() reads buckets: linear inside the
 * bucket the rank falls in (the first bucket from 0); the last bound when it falls in +Inf. NaN
 * when the counts are all 0 or q is out of range. Within 19 % of the true quantile while the
 * latencies are between 1 us and 128 s (neighbouring bounds are at most 1.19x apart). */
double biolatency_quantile(const struct biolat_grid *g, const uint64_t *counts, double q);

/* Most CPUs accepted (a larger possible-CPU list is refused). */
#define BIOLAT_MAX_CPUS 65536

/* Parses the kernel's CPU list (Documentation/admin-guide/cputopology.rst, the format of
 * /sys/devices/system/cpu/possible: "0-3,8,10-11", an optional trailing newline) of len bytes
 * into *ret_ncpu: the highest CPU + 1, the number of rows per slot the BPF program indexes by
 * CPU id. 0, or -EINVAL (syntax, a range going down) / -ERANGE (a CPU >= BIOLAT_MAX_CPUS);
 * *ret_ncpu untouched then. */
int biolatency_parse_cpus(const char *text, size_t len, uint32_t *ret_ncpu);

/* Longest device name kept (as devio's names), terminator included. */
#define BIOLAT_NAME_MAX 32

/* Finds the DEVNAME=NAME line of a device's uevent text (len bytes: KEY=VALUE lines, as
 * Documentation/ABI/testing/sysfs-uevent and the kernel's add_uevent_var() write them) and copies
 * NAME into name (size bytes). 0, or -ENOENT without such a line, -EINVAL when NAME is empty, has
 * bytes outside '!'..'~' or a '"' or '\\', or does not fit; name untouched then. */
int biolatency_parse_devname(const char *text, size_t len, char *name, size_t size);
