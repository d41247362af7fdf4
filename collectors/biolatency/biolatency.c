/* The biolatency reader (biolatency.h): the maps read, summed, named, exported. */
#include "biolatency.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fsroot.h"

/* The raw values of one row as last read (what the next reading subtracts). */
struct raw_row {
        uint32_t buckets[BIOLAT_OPS][BIOLAT_KINDS][BIOLAT_NBUCKETS];
        uint64_t sum_ns[BIOLAT_OPS][BIOLAT_KINDS];
        uint64_t untracked;
};

struct totals {
        uint64_t counts[BIOLAT_OPS][BIOLAT_KINDS][BIOLAT_NBUCKETS];
        uint64_t sum_ns[BIOLAT_OPS][BIOLAT_KINDS];
};

/* The pages of the rows map that hold one slot's rows (the kernel maps every page of a mapping
 * at once, and they count in the process's memory: only the slots in use are mapped). */
struct slotmap {
        const uint8_t *p; /* NULL: not mapped */
        size_t off, len;  /* of the mapping in the map */
};

struct slot {
        uint32_t dev;               /* 0: no device seen in the slot yet */
        struct slotmap map;         /* mapped: this slot's rows */
        struct raw_row *prev;       /* ncpu rows, made when the slot first has a device */
        struct totals t;            /* since the device got its name */
        char name[BIOLAT_NAME_MAX]; /* the last name read ("" none) */
        bool named;                 /* name is current (the cache entry) */
        bool pass;                  /* named and passing the filter: exported */
        usec_t name_read;
};

struct biolat_reader {
        struct biolat_config cfg;
        struct biolat_grid grid;
        size_t classic_at[BIOLAT_MAX_CLASSIC]; /* the grid index of each classic bound */
        int32_t native_of[BIOLAT_NBUCKETS];    /* the native index of each grid bucket */
        uint32_t max, ncpu;
        const uint8_t *devs, *rows; /* rows: NULL when mapped (each slot maps its own) */
        size_t devs_len, rows_len;  /* rows_len: the whole map's */
        struct slotmap over;        /* mapped: the overflow slot's rows */
        bool mapped;
        int fds[BIOLAT_NFDS];
        struct slot *slots;       /* max */
        struct raw_row *overflow; /* ncpu: row max of each CPU */
        struct totals overflow_t; /* what the overflow rows counted */
        uint64_t untracked;
        char le[BIOLAT_MAX_CLASSIC + 1][BIOLAT_LE_MAX]; /* the classic bounds', then +Inf */
};

#define DEVS_ELEM sizeof(uint32_t) /* struct biolat_devs: a uint32_t[] */
#define ROW_ELEM  ((sizeof(struct biolat_row) + 7) & ~(size_t)7)

static size_t page_size(void)
{
        long p = sysconf(_SC_PAGESIZE);

        return p > 0 ? (size_t)p : 4096;
}

static size_t page_round(size_t n)
{
        size_t page = page_size();

        return (n + page - 1) / page * page;
}

/* The bytes of the rows of the first n slots. */
static size_t slots_bytes(uint32_t ncpu, size_t n)
{
        return n * ncpu * ROW_ELEM;
}

/* Maps the pages that hold slot s's rows. 0 or -errno. */
static int slotmap_open(struct slotmap *m, int fd, uint32_t ncpu, size_t s)
{
        size_t page = page_size(), start = slots_bytes(ncpu, s) / page * page;
        size_t end = page_round(slots_bytes(ncpu, s + 1));
        void *p = mmap(NULL, end - start, PROT_READ, MAP_SHARED, fd, (off_t)start);

        if (p == MAP_FAILED)
                return -errno;
        *m = (struct slotmap){.p = p, .off = start, .len = end - start};
        return 0;
}

static void slotmap_close(struct slotmap *m)
{
        if (m->p)
                (void)munmap((void *)m->p, m->len);
        m->p = NULL;
}

size_t biolatency_devs_size(uint32_t max_devices)
{
        return page_round((size_t)max_devices * DEVS_ELEM);
}

size_t biolatency_rows_size(uint32_t max_devices, uint32_t ncpu)
{
        return page_round(slots_bytes(ncpu, (size_t)max_devices + 1));
}

void biolatency_config_default(struct biolat_config *c, uint32_t max_devices, uint32_t ncpu)
{
        char why[128];

        memset(c, 0, sizeof(*c));
        c->max_devices = max_devices;
        c->ncpu = ncpu;
        if (biolatency_parse_buckets(BIOLAT_DEFAULT_BUCKETS, c->classic_ns, &c->nclassic, why,
                                     sizeof why) < 0)
                abort(); /* a constant */
        for (unsigned k = 0; k < BIOLAT_KINDS; k++)
                c->ops[k] = (1u << BIOLAT_OPS) - 1;
}

static bool config_ok(const struct biolat_config *c, struct biolat_grid *g)
{
        return c->max_devices >= 1 && c->max_devices <= BIOLAT_MAX_DEVICES && c->ncpu >= 1 &&
               c->ncpu <= BIOLAT_MAX_CPUS && biolatency_grid(c->classic_ns, c->nclassic, g) == 0;
}

static struct biolat_reader *reader_new(const void *devs, const void *rows,
                                        const struct biolat_config *cfg,
                                        const struct biolat_grid *g)
{
        struct biolat_reader *r = xcalloc(1, sizeof(*r));

        r->cfg = *cfg;
        r->grid = *g;
        r->max = cfg->max_devices;
        r->ncpu = cfg->ncpu;
        r->devs = devs;
        r->rows = rows;
        r->devs_len = biolatency_devs_size(r->max);
        r->rows_len = biolatency_rows_size(r->max, r->ncpu);
        for (size_t i = 0; i < BIOLAT_NFDS; i++)
                r->fds[i] = -1;
        r->slots = xcalloc(r->max, sizeof(*r->slots));
        r->overflow = xcalloc(r->ncpu, sizeof(*r->overflow));
        for (size_t i = 0; i < cfg->nclassic; i++) {
                r->classic_at[i] = biolatency_grid_find(g, cfg->classic_ns[i]);
                biolatency_le(cfg->classic_ns[i], r->le[i], sizeof r->le[i]);
        }
        biolatency_le(UINT64_MAX, r->le[cfg->nclassic], sizeof r->le[cfg->nclassic]);
        for (size_t i = 0; i <= g->n; i++)
                r->native_of[i] = biolatency_native_of(g, i);
        return r;
}

struct biolat_reader *biolatency_reader_init_mem(const void *devs, const void *rows,
                                                 const struct biolat_config *cfg)
{
        struct biolat_grid g;

        if (!config_ok(cfg, &g) || !devs || !rows)
                return NULL;
        return reader_new(devs, rows, cfg, &g);
}

int biolatency_reader_open(const int fds[BIOLAT_NFDS], const struct biolat_config *cfg,
                           struct biolat_reader **ret)
{
        struct biolat_grid g;
        struct slotmap over;
        size_t dlen;
        void *devs;
        int r;

        if (!config_ok(cfg, &g))
                return -EINVAL;
        dlen = biolatency_devs_size(cfg->max_devices);
        devs = mmap(NULL, dlen, PROT_READ, MAP_SHARED, fds[BIOLAT_FD_DEVS], 0);
        if (devs == MAP_FAILED)
                return -errno;
        /* the overflow slot's rows, last in the map: the map is as large as this layout */
        r = slotmap_open(&over, fds[BIOLAT_FD_ROWS], cfg->ncpu, cfg->max_devices);
        if (r < 0) {
                (void)munmap(devs, dlen);
                return r;
        }
        *ret = reader_new(devs, NULL, cfg, &g);
        (*ret)->mapped = true;
        (*ret)->over = over;
        memcpy((*ret)->fds, fds, sizeof((*ret)->fds));
        return 0;
}

size_t biolatency_reader_mapped(const struct biolat_reader *r)
{
        size_t n;

        if (!r->mapped)
                return 0;
        n = r->devs_len + r->over.len;
        for (uint32_t s = 0; s < r->max; s++)
                n += r->slots[s].map.len;
        return n;
}

const struct biolat_grid *biolatency_reader_grid(const struct biolat_reader *r)
{
        return &r->grid;
}

struct biolat_reader *biolatency_reader_free(struct biolat_reader *r)
{
        if (!r)
                return NULL;
        if (r->mapped) {
                (void)munmap((void *)r->devs, r->devs_len);
                slotmap_close(&r->over);
                for (size_t i = 0; i < r->max; i++)
                        slotmap_close(&r->slots[i].map);
        }
        for (size_t i = 0; i < BIOLAT_NFDS; i++)
                if (r->fds[i] >= 0)
                        (void)close(r->fds[i]);
        for (size_t i = 0; i < r->max; i++)
                free(r->slots[i].prev);
        free(r->slots);
        free(r->overflow);
        free(r);
        return NULL;
}

/* The program writes while we read: single aligned loads (no tearing, no compiler games). */
static uint32_t load32(const void *p)
{
        return __atomic_load_n((const uint32_t *)p, __ATOMIC_RELAXED);
}

static uint64_t load64(const void *p)
{
        return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
}

/* CPU cpu's row of slot s (max: the overflow slot); mapped, the slot's rows are. */
static const struct biolat_row *row_at(const struct biolat_reader *r, uint32_t cpu, uint32_t s)
{
        size_t off = slots_bytes(r->ncpu, s) + (size_t)cpu * ROW_ELEM;
        const struct slotmap *m = s == r->max ? &r->over : &r->slots[s].map;

        if (r->mapped)
                return (const struct biolat_row *)(m->p + (off - m->off));
        return (const struct biolat_row *)(r->rows + off);
}

/* Adds what row cur gained since prev into t and the untracked total. */
static void add_row(struct biolat_reader *r, struct totals *t, struct raw_row *prev,
                    const struct biolat_row *cur)
{
        for (unsigned op = 0; op < BIOLAT_OPS; op++)
                for (unsigned k = 0; k < BIOLAT_KINDS; k++) {
                        const struct biolat_cell *c = &cur->cell[op][k];
                        for (size_t b = 0; b <= r->grid.n; b++)
                                biolatency_add_u32(&t->counts[op][k][b], &prev->buckets[op][k][b],
                                                   load32(&c->buckets[b]));
                        biolatency_add_u64(&t->sum_ns[op][k], &prev->sum_ns[op][k],
                                           load64(&c->sum_ns));
                }
        biolatency_add_u64(&r->untracked, &prev->untracked, load64(&cur->untracked));
}

/* Looks the slot's name up again; a new name starts the totals from zero. */
static void slot_name(struct slot *sl, biolat_name_fn name_fn, void *ud, usec_t now)
{
        char name[BIOLAT_NAME_MAX];

        sl->name_read = now;
        if (!name_fn || name_fn(ud, sl->dev, name, sizeof name) < 0 || !name[0]) {
                sl->named = false; /* dropped from the cache: asked again next time */
                return;
        }
        if (strcmp(name, sl->name) != 0) {
                if (sl->name[0]) /* another device now: its own totals from here */
                        memset(&sl->t, 0, sizeof(sl->t));
                (void)strscpy(sl->name, name, sizeof sl->name);
        }
        sl->named = true;
}

void biolatency_reader_collect(struct biolat_reader *r, biolat_name_fn name_fn, void *ud,
                               const struct namefilter *filter, usec_t now)
{
        for (uint32_t s = 0; s < r->max; s++) {
                struct slot *sl = &r->slots[s];
                uint32_t dev = load32(r->devs + s * DEVS_ELEM);

                if (dev == 0 && sl->dev == 0)
                        continue;
                if (dev != sl->dev) {
                        /* A new device in the slot (slots are never given back, so only from
                         * 0): from zero, named anew. */
                        memset(&sl->t, 0, sizeof(sl->t));
                        sl->name[0] = 0;
                        sl->named = false;
                        sl->dev = dev;
                }
                if (r->mapped && !sl->map.p &&
                    slotmap_open(&sl->map, r->fds[BIOLAT_FD_ROWS], r->ncpu, s) < 0)
                        continue; /* tried again next time (the kernel's memory is short) */
                if (!sl->prev)
                        sl->prev = xcalloc(r->ncpu, sizeof(*sl->prev));
                for (uint32_t c = 0; c < r->ncpu; c++)
                        add_row(r, &sl->t, &sl->prev[c], row_at(r, c, s));
                if (!sl->named || now < sl->name_read || now - sl->name_read >= BIOLAT_NAME_REFRESH)
                        slot_name(sl, name_fn, ud, now);
                sl->pass = sl->named && namefilter_match(filter, sl->name);
        }
        for (uint32_t c = 0; c < r->ncpu; c++)
                add_row(r, &r->overflow_t, &r->overflow[c], row_at(r, c, r->max));
}

int biolatency_sysfs_name(int sysfs_fd, uint32_t dev, char *name, size_t size)
{
        char path[64], text[1024];
        int n;

        snprintf(path, sizeof path, "dev/block/%u:%u/uevent", dev >> 20, dev & 0xfffff);
        n = read_attr_at(sysfs_fd, path, text, sizeof text);
        if (n < 0)
                return n;
        return biolatency_parse_devname(text, (size_t)n, name, size);
}

static int sysfs_name_fn(void *ud, uint32_t dev, char *name, size_t size)
{
        return biolatency_sysfs_name(*(const int *)ud, dev, name, size);
}

void biolatency_reader_collect_sysfs(struct biolat_reader *r, int sysfs_fd,
                                     const struct namefilter *filter, usec_t now)
{
        biolatency_reader_collect(r, sysfs_name_fn, &sysfs_fd, filter, now);
}

void biolatency_reader_forget(struct biolat_reader *r, const char *device)
{
        for (uint32_t s = 0; r && s < r->max; s++)
                if (!device || strcmp(r->slots[s].name, device) == 0)
                        r->slots[s].named = false;
}

size_t biolatency_reader_devices(const struct biolat_reader *r)
{
        size_t n = 0;

        for (uint32_t s = 0; r && s < r->max; s++)
                n += r->slots[s].pass;
        return n;
}

const uint64_t *biolatency_reader_counts(const struct biolat_reader *r, const char *device,
                                         unsigned op, unsigned kind, uint64_t *ret_sum_ns)
{
        if (op >= BIOLAT_OPS || kind >= BIOLAT_KINDS)
                return NULL;
        for (uint32_t s = 0; s < r->max; s++) {
                const struct slot *sl = &r->slots[s];
                if (sl->pass && strcmp(sl->name, device) == 0) {
                        if (ret_sum_ns)
                                *ret_sum_ns = sl->t.sum_ns[op][kind];
                        return sl->t.counts[op][kind];
                }
        }
        return NULL;
}

uint64_t biolatency_reader_untracked(const struct biolat_reader *r)
{
        return r->untracked;
}

uint64_t biolatency_reader_unslotted(const struct biolat_reader *r)
{
        uint64_t n = 0;

        for (unsigned op = 0; op < BIOLAT_OPS; op++)
                for (size_t b = 0; b <= r->grid.n; b++)
                        n += r->overflow_t.counts[op][BIOLAT_KIND_DEVICE][b];
        return n;
}

static const char *const op_names[BIOLAT_OPS] = {
    [BIOLAT_OP_READ] = "read",
    [BIOLAT_OP_WRITE] = "write",
    [BIOLAT_OP_FLUSH] = "flush",
    [BIOLAT_OP_DISCARD] = "discard",
};

static int cmp_slot(const void *a, const void *b, void *ud)
{
        const struct biolat_reader *r = ud;
        const struct slot *x = &r->slots[*(const uint32_t *)a];
        const struct slot *y = &r->slots[*(const uint32_t *)b];
        int c = strcmp(x->name, y->name);

        /* two slots of one name (the name moved to another MAJ:MIN and no hotplug event told
         * us): the name read last first, the one exported */
        if (c)
                return c;
        if (x->name_read != y->name_read)
                return x->name_read > y->name_read ? -1 : 1;
        return (x > y) - (x < y);
}

/* The native histogram of one series' grid counts: the zero bucket, and the native buckets from
 * the first to the last that counted anything. */
static void export_native(const struct biolat_reader *r, struct mset *out, struct mfamily *f,
                          const char *labels, const uint64_t *cnt, uint64_t total, double sum)
{
        enum { SPAN = BIOLAT_NATIVE_MAX + 1 - BIOLAT_NATIVE_MIN }; /* indices MIN+1 .. MAX+1 */
        uint64_t nat[SPAN] = {0}, zero = 0;
        size_t first = SPAN, last = 0;

        for (size_t b = 0; b <= r->grid.n; b++) {
                int32_t i = r->native_of[b];

                if (cnt[b] == 0)
                        continue;
                if (i == BIOLAT_NATIVE_ZERO) {
                        zero += cnt[b];
                        continue;
                }
                size_t k = (size_t)(i - (BIOLAT_NATIVE_MIN + 1));
                nat[k] += cnt[b];
                if (k < first)
                        first = k;
                if (k > last)
                        last = k;
        }
        struct mnative h = {
            .schema = BIOLAT_NATIVE_SCHEMA,
            .zero_threshold = ldexp(1.0, BIOLAT_NATIVE_MIN / 4),
            .zero_count = zero,
            .count = total,
            .sum = sum,
            .offset = first < SPAN ? (int32_t)first + BIOLAT_NATIVE_MIN + 1 : 0,
            .n = first < SPAN ? last - first + 1 : 0,
            .counts = first < SPAN ? nat + first : NULL,
        };
        mfamily_add_native(out, f, labels, &h);
}

static void export_hist(const struct biolat_reader *r, struct mset *out, unsigned kind,
                        const uint32_t *order, size_t n)
{
        static const char *const names[BIOLAT_KINDS] = {
            [BIOLAT_KIND_QUEUE] = BIOLAT_FAMILY_QUEUE, [BIOLAT_KIND_DEVICE] = BIOLAT_FAMILY_DEVICE};
        static const char *const helps[BIOLAT_KINDS] = {
            [BIOLAT_KIND_QUEUE] = "Time block-layer requests waited from being made to being "
                                  "issued to the driver (queue and scheduler), by device and "
                                  "operation.",
            [BIOLAT_KIND_DEVICE] = "Time block-layer requests took from being issued to the "
                                   "driver to completion (the device), by device and operation."};
        struct mfamily *f;

        if (!r->cfg.ops[kind])
                return;
        f = mset_family(out, names[kind], helps[kind], MT_HISTOGRAM);
        for (size_t i = 0; i < n; i++) {
                const struct slot *sl = &r->slots[order[i]];
                for (unsigned op = 0; op < BIOLAT_OPS; op++) {
                        const uint64_t *cnt = sl->t.counts[op][kind];
                        uint64_t cum = 0, total = 0;
                        double sum = (double)sl->t.sum_ns[op][kind] / 1e9;
                        const char *labels;
                        size_t b = 0;

                        if (!(r->cfg.ops[kind] & (1u << op)))
                                continue;
                        for (size_t k = 0; k <= r->grid.n; k++)
                                total += cnt[k];
                        if (total == 0)
                                continue;
                        labels = mset_labels(out, "device", sl->name, "op", op_names[op], NULL);
                        for (size_t c = 0; c < r->cfg.nclassic; c++) {
                                for (; b <= r->classic_at[c]; b++)
                                        cum += cnt[b];
                                mfamily_add_sample(out, f,
                                                   &(struct msample_args){.suffix = "_bucket",
                                                                          .labels = labels,
                                                                          .extra_name = "le",
                                                                          .extra_value = r->le[c],
                                                                          .is_int = true,
                                                                          .u = cum});
                        }
                        mfamily_add_sample(
                            out, f,
                            &(struct msample_args){.suffix = "_bucket",
                                                   .labels = labels,
                                                   .extra_name = "le",
                                                   .extra_value = r->le[r->cfg.nclassic],
                                                   .is_int = true,
                                                   .u = total});
                        mfamily_add_sample(
                            out, f,
                            &(struct msample_args){.suffix = "_sum", .labels = labels, .d = sum});
                        mfamily_add_sample(
                            out, f,
                            &(struct msample_args){
                                .suffix = "_count", .labels = labels, .is_int = true, .u = total});
                        export_native(r, out, f, labels, cnt, total, sum);
                }
        }
}

void biolatency_export(const struct biolat_reader *r, struct mset *out)
{
        _cleanup_free_ uint32_t *order = NULL;
        struct mfamily *f;
        uint64_t unslotted;
        size_t n = 0, k = 0;

        mset_gauge(out, BIOLAT_FAMILY_UP,
                   "Whether the block I/O latency eBPF programs are attached (1) or not (0: the "
                   "log says why).",
                   r ? 1.0 : 0.0, NULL);
        if (!r)
                return;
        order = xmalloc((r->max ? r->max : 1) * sizeof(*order));
        for (uint32_t s = 0; s < r->max; s++)
                if (r->slots[s].pass)
                        order[n++] = s;
        qsort_r(order, n, sizeof(*order), cmp_slot, (void *)r);
        /* one series per name: the first of each run of equal names */
        for (size_t i = 0; i < n; i++)
                if (k == 0 || strcmp(r->slots[order[i]].name, r->slots[order[k - 1]].name) != 0)
                        order[k++] = order[i];
        n = k;
        for (unsigned kind = 0; kind < BIOLAT_KINDS; kind++)
                export_hist(r, out, kind, order, n);
        f = mset_family(out, BIOLAT_FAMILY_UNTRACKED,
                        "Block-layer completions with no issue on record (issued before the "
                        "programs were attached, or their in-flight entry was lost).",
                        MT_COUNTER);
        mfamily_add_sample(out, f, &(struct msample_args){.is_int = true, .u = r->untracked});
        f = mset_family(out, BIOLAT_FAMILY_UNSLOTTED,
                        "Completed block-layer requests of devices that found no free slot "
                        "(--biolatency.max-devices), not in the histograms.",
                        MT_COUNTER);
        unslotted = biolatency_reader_unslotted(r);
        mfamily_add_sample(out, f, &(struct msample_args){.is_int = true, .u = unslotted});
}
