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
 *   rows: struct biolat_row[ncpu * (max_devices + 1)]: CPU c's row for slot s at
 *         c * (max_devices + 1) + s. Each CPU writes only its own rows (per-CPU state, no shared
 *         counter on the I/O path). Row max_devices of each CPU counts the I/O of devices that
 *         found no free slot.
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
 * issued to the driver (block_rq_issue); device: issued -> completed (block_rq_complete). */
#define BIOLAT_KIND_QUEUE  0
#define BIOLAT_KIND_DEVICE 1
#define BIOLAT_KINDS       2

/* Upper bounds of the buckets ("le"), in nanoseconds: 1 us to 10 s, per decade 1, 1.2, 1.4, 1.6,
 * 1.8, 2.1, 2.5, 3, 3.5, 4.2, 5, 6, 7, 8.4. Adjacent bounds differ by at most 1.2x, so a quantile
 * read from the buckets is within 20 % of the true one; the canary's bounds (1-2.5-5 from 10 us to
 * 10 s) are all among them, so the two histograms can be read together. A latency falls in the
 * first bucket whose bound is >= it; beyond the last bound, in bucket BIOLAT_NBOUNDS (+Inf). */
#define BIOLAT_NBOUNDS  99
#define BIOLAT_NBUCKETS (BIOLAT_NBOUNDS + 1)
#define BIOLAT_BOUNDS_NS                                                                           \
        {                                                                                          \
                1000ull, 1200ull, 1400ull, 1600ull, 1800ull, 2100ull, 2500ull, 3000ull, 3500ull,   \
                    4200ull, 5000ull, 6000ull, 7000ull, 8400ull, 10000ull, 12000ull, 14000ull,     \
                    16000ull, 18000ull, 21000ull, 25000ull, 30000ull, 35000ull, 42000ull,          \
                    50000ull, 60000ull, 70000ull, 84000ull, 100000ull, 120000ull, 140000ull,       \
                    160000ull, 180000ull, 210000ull, 250000ull, 300000ull, 350000ull, 420000ull,   \
                    500000ull, 600000ull, 700000ull, 840000ull, 1000000ull, 1200000ull,            \
                    1400000ull, 1600000ull, 1800000ull, 2100000ull, 2500000ull, 3000000ull,        \
                    3500000ull, 4200000ull, 5000000ull, 6000000ull, 7000000ull, 8400000ull,        \
                    10000000ull, 12000000ull, 14000000ull, 16000000ull, 18000000ull, 21000000ull,  \
                    25000000ull, 30000000ull, 35000000ull, 42000000ull, 50000000ull, 60000000ull,  \
                    70000000ull, 84000000ull, 100000000ull, 120000000ull, 140000000ull,            \
                    160000000ull, 180000000ull, 210000000ull, 250000000ull, 300000000ull,          \
                    350000000ull, 420000000ull, 500000000ull, 600000000ull, 700000000ull,          \
                    840000000ull, 1000000000ull, 1200000000ull, 1400000000ull, 1600000000ull,      \
                    1800000000ull, 2100000000ull, 2500000000ull, 3000000000ull, 3500000000ull,     \
                    4200000000ull, 5000000000ull, 6000000000ull, 7000000000ull, 8400000000ull,     \
                    10000000000ull,                                                                \
        }

#define BIOLAT_MAX_DEVICES 4096

struct biolat_devs {
        uint32_t dev[BIOLAT_MAX_DEVICES]; /* the first max_devices are used */
};

struct biolat_cell {
        uint32_t buckets[BIOLAT_NBUCKETS]; /* wrapping counts, not cumulative */
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
};
