/* The biolatency BPF program: per device, per operation, the block layer's queue time (request
 * made -> last issued to the driver) and device time (last issued -> completed) into the
 * histograms of biolatency_shared.h, from two BTF tracepoints (tp_btf: a kernel with BTF; the
 * one-argument block_rq_issue of 5.11 and later; the compare-and-swap, -mcpu=v3 atomics, 5.12 and
 * later). Built by clang -target bpf (bpf.cmake) and loaded by biolatency_load.c; the daemon only
 * reads the maps (mmap).
 *
 * Both samples of a request are recorded at its completion, once: queue = last issue -
 * rq->start_time_ns, device = completion - last issue. A request the driver gave back
 * (block_rq_requeue: busy, out of resources) and issued again is still one request, as
 * /proc/diskstats counts it: its device time is that of the issue that completed, and its queue
 * time all that came before it (the first issue, the time requeued, the wait to be issued
 * again). Recording the queue sample at each issue counted it once per issue (issue 33: 59
 * requeues in 60 s gave 150 queue samples for 100 writes).
 *
 * The last issue's time: where the queue has QUEUE_FLAG_STATS (writeback throttling, io.latency,
 * hybrid polling turn it on) the kernel stamps it in rq->io_start_time_ns itself
 * (blk_mq_start_request, just after the block_rq_issue tracepoint; 0 from blk_mq_rq_ctx_init
 * until then), and then the issue program only reads the queue's flags and returns. Otherwise
 * the issue program keeps it in a set-associative array indexed by the request's device,
 * hardware queue and tag. The flag's bit is given by the loader: from the kernel's BTF where
 * the flags are an enum, else the #define's value (20, as in 6.1).
 *
 * The I/O path takes no lock and uses no hash map: a device's slot is found by probing a small
 * array from a hash of its dev_t (at completion only); the counters are the CPU's own rows.
 * Tracepoints as in the kernel's include/trace/events/block.h: block_rq_issue(struct request *rq)
 * fires in blk_mq_start_request() before the driver gets the request (again for a requeued
 * request issued again); block_rq_complete(struct request *rq, blk_status_t error, unsigned int
 * nr_bytes) in blk_update_request() (once per partial completion) and in
 * blk_mq_end_request_batch(). */
#include "biolatency_kernel.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "biolatency_shared.h"

/* Set by the loader before the program is loaded (the skeleton's rodata): verified constants. */
const volatile uint32_t ncpu = 1;          /* possible CPUs */
const volatile uint32_t max_devices = 1;   /* device slots, 1..BIOLAT_MAX_DEVICES */
const volatile uint32_t inflight_mask = 0; /* in-flight sets - 1, sets a power of two */
/* The bit of QUEUE_FLAG_STATS in request_queue.queue_flags; 64 or more: not known, the in-flight
 * array for every request. */
const volatile uint32_t stats_bit = 64;
/* The bucket grid (biolatency_shared.h): nbounds strictly increasing upper bounds in ns. */
const volatile uint32_t nbounds = 1;
const volatile uint64_t bounds_ns[BIOLAT_MAX_BOUNDS] = {1};

/* slot -> dev_t: struct biolat_devs (biolatency_shared.h), one element holding every slot. */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(map_flags, BPF_F_MMAPABLE);
        __uint(max_entries, 1);
        __type(key, u32);
        __type(value, struct biolat_devs);
} devs SEC(".maps");

/* CPU c's row for slot s at s * ncpu + c (max_entries: (max_devices + 1) * ncpu). */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(map_flags, BPF_F_MMAPABLE);
        __uint(max_entries, 1);
        __type(key, u32);
        __type(value, struct biolat_row);
} rows SEC(".maps");

/* The requests issued and not yet completed, by a hash of their address: BIOLAT_WAYS ways a set,
 * one set a 64-byte entry (a cache line). rq 0: the way is free. A request completed while the
 * program was not attached leaves its way taken; request structures are reused (the tag set's),
 * so its next issue takes the way back, and a way older than BIOLAT_STALE_NS may be taken by
 * another request when its set is full. */
#define BIOLAT_WAYS     4
#define BIOLAT_STALE_NS (60ull * 1000000000ull)
struct biolat_way {
        u64 rq;
        u64 issue_ns;
};
struct biolat_set {
        struct biolat_way way[BIOLAT_WAYS];
};
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1); /* sets: inflight_mask + 1 */
        __type(key, u32);
        __type(value, struct biolat_set);
} inflight SEC(".maps");

/* The bucket of a latency: the first bound >= ns (binary search), nbounds beyond the last. */
static __always_inline u32 bucket_of(u64 ns)
{
        u32 n = nbounds < BIOLAT_MAX_BOUNDS ? nbounds : BIOLAT_MAX_BOUNDS, lo = 0, hi = n;

        /* The first bucket at once: most queue times of a fast device (under 1 us) */
        if (ns <= bounds_ns[0])
                return 0;
        for (int i = 0; i < 7 && lo < hi; i++) { /* 2^7 = BIOLAT_MAX_BOUNDS + 1 */
                u32 mid = (lo + hi) / 2;

                if (mid >= BIOLAT_MAX_BOUNDS)
                        break;
                if (bounds_ns[mid] >= ns)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return lo < n ? lo : n;
}

/* The kernel dev_t (MKDEV: major << 20 | minor) of the request's disk; 0: none. */
static __always_inline u32 dev_of(struct request *rq)
{
        struct gendisk *disk;

        if (bpf_core_field_exists(struct request___old, rq_disk))
                disk = BPF_CORE_READ((struct request___old *)rq, rq_disk);
        else
                disk = rq->q->disk;
        if (!disk)
                return 0;
        return ((u32)disk->major << 20) | (u32)disk->first_minor;
}

/* Probing for the slot of dev from h: step i looks at slot (h + i) % n, taking it if it is dev's
 * or claiming it if it is free (slots are never given back). 1: found (*slot), 0: go on. The slot
 * is computed from i, not kept in a counter that wraps to 0: from a known 0 the verifier would
 * follow every slot after it as a path of its own. */
#define BIOLAT_PROBES_INLINE 16
struct biolat_probe {
        struct biolat_devs *d;
        u32 dev, h, n, slot;
};

static __always_inline int probe_step(struct biolat_probe *p, u32 i)
{
        u32 s = p->h + i, was; /* h < n: a subtraction, not a division */

        if (s >= p->n)
                s -= p->n;

        /* s < n <= BIOLAT_MAX_DEVICES (a power of two): the mask changes nothing but bounds the
         * very register that indexes. A check of s alone is not enough for older verifiers (6.1
         * refused the program: the compiler indexed with a copy of s made before the check, and
         * the check's bounds did not reach the copy). */
        s &= BIOLAT_MAX_DEVICES - 1;
        was = p->d->dev[s];
        if (was == 0)
                was = __sync_val_compare_and_swap(&p->d->dev[s], 0, p->dev);
        if (was != 0 && was != p->dev)
                return 0;
        p->slot = s;
        return 1;
}

static long probe_cb(u32 i, void *ctx)
{
        struct biolat_probe *p = ctx;

        return probe_step(p, i + BIOLAT_PROBES_INLINE);
}

/* The device's slot: its own or a free one claimed, probing linearly from a hash of dev; the
 * first BIOLAT_PROBES_INLINE steps in line, the rest (up to max_devices in all) with bpf_loop
 * (5.17+; without it a device that finds no slot in those steps counts in the overflow row): the
 * verifier refuses a loop of 4096 steps in line ("The sequence of 8193 jumps is too complex").
 * max_devices (the overflow row) when every slot belongs to another device. */
static __always_inline u32 slot_of(u32 dev)
{
        u32 zero = 0;
        struct biolat_probe p = {
            .dev = dev,
            /* a hash of dev scaled to 0..n-1 (multiply and shift, no division) */
            .h = (u32)(((u64)(u32)(dev * 0x9E3779B1u) * max_devices) >> 32),
            .n = max_devices,
            .slot = max_devices,
        };

        p.d = bpf_map_lookup_elem(&devs, &zero);
        if (!p.d)
                return p.n;
        for (u32 i = 0; i < BIOLAT_PROBES_INLINE; i++) {
                if (i >= p.n)
                        return p.slot;
                if (probe_step(&p, i))
                        return p.slot;
        }
        if (p.n > BIOLAT_PROBES_INLINE &&
            bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop))
                bpf_loop(p.n - BIOLAT_PROBES_INLINE, probe_cb, &p, 0);
        return p.slot;
}

/* This CPU's row for device dev; NULL: a request not counted (no disk, no row). */
static __always_inline struct biolat_row *row_of(u32 dev)
{
        u32 cpu = bpf_get_smp_processor_id(), idx;

        if (dev == 0 || cpu >= ncpu)
                return NULL;
        idx = slot_of(dev) * ncpu + cpu;
        return bpf_map_lookup_elem(&rows, &idx);
}

static __always_inline void record(struct biolat_row *row, u32 op, u32 kind, u64 ns)
{
        u32 b = bucket_of(ns);

        if (op >= BIOLAT_OPS || kind >= BIOLAT_KINDS || b >= BIOLAT_NBUCKETS)
                return;
        __sync_fetch_and_add(&row->cell[op][kind].buckets[b], 1);
        __sync_fetch_and_add(&row->cell[op][kind].sum_ns, ns);
}

/* The set of an in-flight key: from the device's dev_t, the hardware queue and the tag, not from a
 * hash of the key, so that a device's requests, whose tags are small consecutive numbers, fill
 * neighbouring sets: the few cache lines in use stay in the cache (a hash spread them over the
 * whole table, and its cache misses were most of the program's cost: 67 ns of 164 a run). Keys
 * that meet in a set (another device, another queue) take another way. */
static __always_inline struct biolat_set *set_of(u64 key, u32 dev)
{
        u32 idx = ((u32)key & 0xffff) + (((u32)(key >> 16) & 0xffff) << 10) + dev * 0x9E3779B1u;

        idx &= inflight_mask;
        return bpf_map_lookup_elem(&inflight, &idx);
}

/* The in-flight key of an issued request: its device, hardware queue and driver tag, which no
 * other request in flight shares (a tag is unique in its tag set until the request completes; a
 * flush request borrows the tag of the request it flushes for, which waits meanwhile). 0: none
 * (no driver tag). Read from the request's fields, not its address: the verifier allows no
 * arithmetic on the typed pointer, and copying it out with a helper cost a call per hook. A way
 * left taken by a completion the program missed is taken back by the next request with the same
 * tag. */
static __always_inline u64 key_of(struct request *rq, u32 dev)
{
        struct blk_mq_hw_ctx *hctx = rq->mq_hctx;
        int tag = rq->tag;

        if (tag < 0 || !hctx)
                return 0;
        return ((u64)dev << 32) | ((u64)(hctx->queue_num & 0xffff) << 16) | (u64)(tag & 0xffff);
}

/* The operation counted (BIOLAT_OP_*), or BIOLAT_OPS for one not counted. */
static __always_inline u32 op_of(struct request *rq)
{
        u32 op = rq->cmd_flags & REQ_OP_MASK;

        return op < BIOLAT_OPS ? op : BIOLAT_OPS;
}

/* Whether the kernel stamps this request's issue in rq->io_start_time_ns: its queue has
 * QUEUE_FLAG_STATS (read at issue, as blk_mq_start_request tests it just after the tracepoint). */
static __always_inline int kernel_stamps(struct request *rq)
{
        u32 bit = stats_bit;

        if (bit >= 64)
                return 0;
        return (rq->q->queue_flags >> (bit & 63)) & 1;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(biolat_issue, struct request *rq)
{
        u64 now, key;
        u32 dev;
        struct biolat_set *set;
        int w;

        if (op_of(rq) >= BIOLAT_OPS || kernel_stamps(rq))
                return 0;
        dev = dev_of(rq);
        if (dev == 0)
                return 0;
        key = key_of(rq, dev);
        set = key ? set_of(key, dev) : NULL;
        if (!set)
                return 0;
        now = bpf_ktime_get_ns();
        /* A requeued request issued again with the same tag keeps its way; with another tag it
         * takes another, and the old one is taken back by the tag's next request. */
        for (w = 0; w < BIOLAT_WAYS; w++)
                if (set->way[w].rq == key)
                        goto take;
        for (w = 0; w < BIOLAT_WAYS; w++)
                if (set->way[w].rq == 0 &&
                    __sync_val_compare_and_swap(&set->way[w].rq, 0, key) == 0)
                        goto take;
        for (w = 0; w < BIOLAT_WAYS; w++) {
                u64 old = set->way[w].rq, then = set->way[w].issue_ns;

                if (then + BIOLAT_STALE_NS < now &&
                    __sync_val_compare_and_swap(&set->way[w].rq, old, key) == old)
                        goto take;
        }
        return 0; /* the set is full: the completion counts as untracked */
take:
        set->way[w & (BIOLAT_WAYS - 1)].issue_ns = now;
        return 0;
}

/* The request's last issue from the in-flight array, its way given back; 0: none on record. */
static __always_inline u64 issued_inflight(struct request *rq, u32 dev)
{
        u64 key = key_of(rq, dev), issued;
        struct biolat_set *set = key ? set_of(key, dev) : NULL;
        int w;

        if (!set)
                return 0;
        for (w = 0; w < BIOLAT_WAYS; w++) {
                if (set->way[w].rq != key)
                        continue;
                issued = set->way[w].issue_ns;
                /* The way is this request's until now: no other issue takes a way that holds a
                 * key (unless stale), so a plain store gives it back. */
                set->way[w].rq = 0;
                return issued;
        }
        return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(biolat_done, struct request *rq, int error /* blk_status_t, unused */,
             unsigned int nr_bytes)
{
        u64 now, issued = 0, start;
        u32 op = op_of(rq), dev;
        struct biolat_row *row;

        if (op >= BIOLAT_OPS)
                return 0;
        /* A partial completion: the request goes on. */
        if (nr_bytes < rq->__data_len)
                return 0;
        dev = dev_of(rq);
        if (dev == 0)
                return 0;
        now = bpf_ktime_get_ns();
        /* Stamped by the kernel at the last issue (QUEUE_FLAG_STATS): the issue program kept
         * nothing. A request issued while the flag was off has 0 here and its entry in the array.
         * The flag is looked at only where the loader knows its bit. */
        if (stats_bit < 64)
                issued = rq->io_start_time_ns;
        if (issued == 0)
                issued = issued_inflight(rq, dev);
        row = row_of(dev);
        if (!row)
                return 0;
        if (issued != 0 && issued <= now) {
                record(row, op, BIOLAT_KIND_DEVICE, now - issued);
                start = rq->start_time_ns;
                if (start != 0)
                        record(row, op, BIOLAT_KIND_QUEUE, issued > start ? issued - start : 0);
        } else if (nr_bytes != 0) {
                __sync_fetch_and_add(&row->untracked, 1);
        }
        /* Else a request without data that was never issued itself: an empty write with
         * REQ_PREFLUSH, which the flush machinery (block/blk-flush.c) completes after issuing
         * its own flush request in its place (counted as a flush). Measured: every fsync's flush
         * left one such completion. */
        return 0;
}

/* The licence must be GPL-compatible: BPF_CORE_READ calls bpf_probe_read_kernel, which the kernel
 * gives only to GPL-compatible programs (kernel/trace/bpf_trace.c, gpl_only). "Dual MIT/GPL" is
 * one the kernel accepts (include/linux/license.h) without deciding the project's own licence,
 * which is not chosen yet (packaging/debian/copyright). */
char LICENSE[] SEC("license") = "Dual MIT/GPL";
