/* The memory the BPF program (biolatency.bpf.c) writes and the daemon reads: both include this
 * file, the program compiled by clang -target bpf, the daemon by the C compiler, so that the layout
 * is written once. It includes nothing: the includer has the fixed-width types (stdint.h in the
 * daemon, the program's own typedefs of uint32_t/uint64_t).
 *
 * Two maps the daemon maps read-only (BPF_F_MMAPABLE arrays; mmap needs no capability, the
 * bpf() syscall would):
 *   devs: one element, struct biolat_devs: dev[s] is the kernel dev_t (major << 20 | minor)
 *         that owns device slot s (s < max_devices), 0 while free; mapped, a uint32_t[] from
 *         offset 0 (one element for all slots: an array map's elements are at least 8 bytes
 *         apart, so one uint32_t element a slot would not map as a uint32_t[]). The program
 *         claims a slot for a new device with a compare-and-swap from a hash of dev_t, probing
 *         linearly; slots are never given back.
 *   rows: struct biolat_row[(max_devices + 1) * ncpu]: CPU c's row for slot s at s * ncpu + c,
 *         so that a slot's rows are together and the daemon maps only the slots in use. Each
 *         CPU writes only its own rows (per-CPU state, no shared counter on the I/O path). Slot
 *         max_devices's rows count the I/O of devices that found no free slot.
 * Counts are 32-bit and wrap: the reader adds the difference modulo 2^32 from one read to the
 * next, which is exact while fewer than 2^32 events land in one bucket of one CPU between two
 * reads. Sums are 64-bit nanoseconds. */
#pragma once

/* The operations kept apart, by the kernel's REQ_OP_* (cmd_flags & REQ_OP_MASK); any other
 * operation (write-zeroes, zone commands, driver pass-through such as SMART commands) is not
 * counted. */
#define BIOLAT_OP_READ    0
#define BIOLAT_OP_WRITE   1
#define BIOLAT_OP_FLUSH   2
#define BIOLAT_OP_DISCARD 3
#define BIOLAT_OPS        4

/* queue: the request made (rq->start_time_ns, the start diskstats' own time counters use) ->
 * its last issue to the driver (block_rq_issue); device: last issue -> completed
 * (block_rq_complete). Both are recorded at the completion, once a request: a request requeued
 * and issued again counts once in each, as in /proc/diskstats, its queue time holding all before
 * the issue that completed. */
#define BIOLAT_KIND_QUEUE  0
#define BIOLAT_KIND_DEVICE 1
#define BIOLAT_KINDS       2

/* The buckets: one grid of upper bounds in nanoseconds, strictly increasing, that holds both the
 * bounds of the native (exponential) histogram and the classic bounds the operator chose
 * (--biolatency.buckets), so that both are sums of the grid's buckets and exact. The
 * daemon and the loader make the grid with biolatency_grid() (biolatency_hist.h) from the classic
 * bounds the loader is given (struct biolat_params); the program gets it as read-only data
 * (bounds_ns, nbounds). A latency falls in the first bucket whose bound is >= it; beyond the
 * last bound, in bucket nbounds.
 *
 * The native histogram (Prometheus' schema 2): bucket i holds (2^((i-1)/4), 2^(i/4)] seconds,
 * neighbours 1.19x apart (at least as fine as the 1.2x of the earlier fixed grid); its bounds on
 * the grid are floor(1e9 * 2^(i/4)) ns for i from BIOLAT_NATIVE_MIN to BIOLAT_NATIVE_MAX (an
 * integer latency is <= the real bound exactly when it is <= its floor). What is at most
 * 2^(BIOLAT_NATIVE_MIN/4) s (953 ns) counts in the zero bucket, of that threshold. */
#define BIOLAT_NATIVE_SCHEMA 2
#define BIOLAT_NATIVE_MIN    (-80) /* 2^-20 s = 953.67 ns: the zero bucket's threshold */
#define BIOLAT_NATIVE_MAX    28    /* 2^7 s = 128 s */
#define BIOLAT_NATIVE_BOUNDS (BIOLAT_NATIVE_MAX - BIOLAT_NATIVE_MIN + 1) /* 109 */
#define BIOLAT_MAX_CLASSIC   18 /* classic bounds the operator may choose */
#define BIOLAT_MAX_BOUNDS    (BIOLAT_NATIVE_BOUNDS + BIOLAT_MAX_CLASSIC) /* 127 */
#define BIOLAT_NBUCKETS      (BIOLAT_MAX_BOUNDS + 1) /* a cell's buckets; the grid's nbounds + 1 used */

#define BIOLAT_MAX_DEVICES 4096

struct biolat_devs {
        uint32_t dev[BIOLAT_MAX_DEVICES]; /* the first max_devices are used */
};

struct biolat_cell {
        uint32_t buckets[BIOLAT_NBUCKETS]; /* wrapping counts, not cumulative; the grid's
                                            * nbounds + 1 used */
        uint64_t sum_ns;                   /* wrapping */
};

struct biolat_row {
        struct biolat_cell cell[BIOLAT_OPS][BIOLAT_KINDS];
        uint64_t untracked; /* completions of this CPU with no issue on record: issued before the
                             * program was attached, or their in-flight entry was taken */
        uint64_t pad[7];    /* rows of different CPUs never share a cache line */
};

/* The descriptors the privileged loader returns, in this order. */
#define BIOLAT_FD_DEVS       0
#define BIOLAT_FD_ROWS       1
#define BIOLAT_FD_LINK_ISSUE 2
#define BIOLAT_FD_LINK_DONE  3
#define BIOLAT_NFDS          4

/* What the daemon asks the loader for (the privileged call's argument). */
struct biolat_params {
        uint32_t max_devices; /* device slots, 1 to BIOLAT_MAX_DEVICES */
        uint32_t ncpu;        /* possible CPUs as the daemon counts them (the loader checks) */
        uint32_t nclassic;    /* classic bounds, 1 to BIOLAT_MAX_CLASSIC */
        uint32_t pad;         /* 0 */
        uint64_t classic_ns[BIOLAT_MAX_CLASSIC]; /* strictly increasing, > 0; the rest 0 */
};
