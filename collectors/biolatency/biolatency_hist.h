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

/* Upper bound i in nanoseconds (i < BIOLAT_NBOUNDS); UINT64_MAX for BIOLAT_NBOUNDS and beyond. */
uint64_t biolatency_bound_ns(size_t i);
/* Upper bound i in seconds (the bound in ns / 1e9, the double nearest to the decimal value);
 * INFINITY for BIOLAT_NBOUNDS and beyond. */
double biolatency_bound_seconds(size_t i);
/* The "le" text of bucket i into buf (BIOLAT_LE_MAX bytes): the bound in seconds as the
 * exposition and the canary write it (format_double_shortest: "1e-06", "1.2e-06", "0.0001",
 * "10"), "+Inf" for BIOLAT_NBOUNDS and beyond. Returns buf. */
const char *biolatency_le(size_t i, char *buf, size_t size);
/* The bucket of a latency of ns nanoseconds, as the BPF program picks it: the first whose bound
 * is >= ns; BIOLAT_NBOUNDS (+Inf) beyond the last bound. */
size_t biolatency_bucket(uint64_t ns);

/* Adds cur - *prev modulo 2^32 (resp. 2^64) to *total and sets *prev = cur: exact while fewer
 * than 2^32 (2^64) increments happened between the two readings. */
void biolatency_add_u32(uint64_t *total, uint32_t *prev, uint32_t cur);
void biolatency_add_u64(uint64_t *total, uint64_t *prev, uint64_t cur);

/* The q-quantile (0 <= q <= 1) in seconds of the latencies counted in counts (not cumulative,
 * BIOLAT_NBUCKETS of them), as Prometheus' histogram_quantile() reads buckets: linear inside the
 * bucket the rank falls in (the first bucket from 0); the last bound when it falls in +Inf. NaN
 * when the counts are all 0 or q is out of range. Within 20 % of the true quantile while the
 * latencies are between 1 us and 10 s (neighbouring bounds are at most 1.2x apart). */
double biolatency_quantile(const uint64_t *counts, double q);

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
