/* Unit tests of the diskstats collector: against a reference that keeps every sample of the
 * window (as the collector once did) over random rounds of changes, resets, removals, stalls and
 * identity changes, value by value and page by page; files read in chunks; the table reused
 * while nothing changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "diskstats.h"
#include "expo.h"
#include "fsroot.h"
#include "iostat.h"
#include "util.h"

#define WINDOW   (5 * USEC_PER_SEC)
#define INTERVAL USEC_PER_SEC
#define RING     (WINDOW / INTERVAL + 2)

struct tree {
        char dir[64];
        int procfs;
};

static void write_file(struct tree *t, const char *name, const char *text)
{
        char path[128], tmp[160];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", t->dir, name);
        snprintf(tmp, sizeof tmp, "%s.new", path);
        f = fopen(tmp, "w");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(rename(tmp, path), 0);
}

static void tree_init(struct tree *t)
{
        snprintf(t->dir, sizeof t->dir, "/tmp/diskpulse-test-diskstats-XXXXXX");
        assert_non_null(mkdtemp(t->dir));
        write_file(t, "uptime", "1000.50 1900.00\n");
        t->procfs = root_open(t->dir);
        assert_true(t->procfs >= 0);
}

static void tree_done(struct tree *t)
{
        char path[128];

        snprintf(path, sizeof path, "%s/diskstats", t->dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/uptime", t->dir);
        unlink(path);
        rmdir(t->dir);
        close(t->procfs);
}

/* A device source that knows every device by name, with a generation to change identities. */
struct stub {
        struct devsrc base;
        unsigned gen;
        unsigned lookups;
        uint64_t stamp; /* what the stamp op says (when used) */
};

static int stub_lookup(struct devsrc *src, const char *name, unsigned major, unsigned minor,
                       struct device_info *ret)
{
        struct stub *s = (struct stub *)src;

        (void)major;
        (void)minor;
        s->lookups++;
        memset(ret, 0, sizeof(*ret));
        if (strcmp(name, "dm-0") == 0)
                return -ENOENT;
        snprintf(ret->model, sizeof ret->model, "Model \"%s\" gen %u", name, s->gen);
        snprintf(ret->serial, sizeof ret->serial, "S\\%s", name);
        ret->rotational = name[0] == 's';
        if (name[0] != 'm')
                snprintf(ret->write_cache, sizeof ret->write_cache, "write back");
        return 0;
}

static int stub_fd(struct devsrc *src)
{
        (void)src;
        return -1;
}

static int stub_receive(struct devsrc *src, struct dev_event *ret)
{
        (void)src;
        (void)ret;
        return 0;
}

static void stub_free(struct devsrc *src)
{
        (void)src;
}

static uint64_t stub_stamp(struct devsrc *src, const char *name, unsigned major, unsigned minor)
{
        (void)name;
        (void)major;
        (void)minor;
        return ((struct stub *)src)->stamp;
}

static const struct devsrc_ops stub_stamp_ops = {.lookup = stub_lookup,
                                                 .stamp = stub_stamp,
                                                 .monitor_fd = stub_fd,
                                                 .receive = stub_receive,
                                                 .free = stub_free};

static const struct devsrc_ops stub_ops = {
    .lookup = stub_lookup, .monitor_fd = stub_fd, .receive = stub_receive, .free = stub_free};

/* The reference: every sample of a device since its window started, as the collector kept them
 * in a ring before (diskstats.c before change points), and its export as generic families. */
#define NDEV 7
static const char *const names[NDEV] = {"sda", "sdb", "nvme0n1", "dm-0", "md0", "sdb1", "zram0"};

struct ref_dev {
        bool listed;
        unsigned major, minor;
        unsigned nfields;
        uint64_t v[DS_NFIELDS];
        usec_t t[64];
        uint64_t s[64][DS_NFIELDS];
        size_t count;
        unsigned sampled_minor;
        bool since_boot;
};

struct ref {
        struct ref_dev dev[NDEV];
        bool first_done;
        usec_t uptime;
        usec_t rt[RING]; /* the times of the newest rounds, oldest first */
        size_t nrt;
};

static bool excluded(const char *name)
{
        return strcmp(name, "sdb1") == 0 || strcmp(name, "zram0") == 0;
}

static void ref_sample(struct ref *r, usec_t now)
{
        for (size_t i = 0; i < NDEV; i++) {
                struct ref_dev *d = &r->dev[i];
                if (!d->listed || excluded(names[i])) {
                        if (!d->listed)
                                d->count = 0;
                        continue;
                }
                if (d->count > 0 &&
                    (d->sampled_minor != d->minor || iostat_is_reset(d->s[d->count - 1], d->v)))
                        d->count = 0;
                d->sampled_minor = d->minor;
                if (d->count == RING) {
                        memmove(d->s, d->s + 1, (RING - 1) * sizeof(d->s[0]));
                        memmove(d->t, d->t + 1, (RING - 1) * sizeof(d->t[0]));
                        d->count--;
                }
                memcpy(d->s[d->count], d->v, sizeof d->v);
                d->t[d->count] = now;
                d->count++;
                d->since_boot = !r->first_done && d->count == 1;
        }
        r->first_done = true;
        if (r->nrt == RING) {
                memmove(r->rt, r->rt + 1, (RING - 1) * sizeof(r->rt[0]));
                r->nrt--;
        }
        r->rt[r->nrt++] = now;
}

/* diskpulse_disk_window_seconds: since boot in the first round; else from the oldest round within
 * the window (and half an interval) of the newest, or the round just before when none is; 0 with
 * no round before. */
static double ref_span(const struct ref *r)
{
        usec_t newest;

        for (size_t i = 0; i < NDEV; i++)
                if (r->dev[i].listed && !excluded(names[i]) && r->dev[i].count > 0 &&
                    r->dev[i].since_boot)
                        return (double)r->uptime / 1e6;
        if (r->nrt < 2)
                return 0;
        newest = r->rt[r->nrt - 1];
        for (size_t k = 0; k + 1 < r->nrt; k++)
                if (newest - r->rt[k] <= WINDOW + INTERVAL / 2)
                        return (double)(newest - r->rt[k]) / 1e6;
        return (double)(newest - r->rt[r->nrt - 2]) / 1e6;
}

static uint32_t ref_present(const struct ref_dev *d)
{
        return (uint32_t)((1u << d->nfields) - 1);
}

static void ref_derive(const struct ref *r, const struct ref_dev *d, struct iostat_derived *ret)
{
        static const uint64_t zero[DS_NFIELDS];
        const uint64_t *newest = d->s[d->count - 1];
        usec_t limit = WINDOW + INTERVAL / 2;

        if (d->since_boot) {
                iostat_derive(zero, newest, ref_present(d), r->uptime, ret);
                return;
        }
        for (size_t k = 0; k + 1 < d->count; k++) {
                if (d->t[d->count - 1] - d->t[k] <= limit) {
                        iostat_derive(d->s[k], newest, ref_present(d), d->t[d->count - 1] - d->t[k],
                                      ret);
                        return;
                }
        }
        /* none within the window (a stall, irregular scrapes): over the span since the last
         * sample before */
        if (d->count >= 2) {
                iostat_derive(d->s[d->count - 2], newest, ref_present(d),
                              d->t[d->count - 1] - d->t[d->count - 2], ret);
                return;
        }
        iostat_derive(zero, zero, ref_present(d), 0, ret);
}

static const char *const counter_names[DS_NFIELDS] = {
    "diskpulse_disk_reads_completed_total",
    "diskpulse_disk_reads_merged_total",
    "diskpulse_disk_read_bytes_total",
    "diskpulse_disk_read_time_seconds_total",
    "diskpulse_disk_writes_completed_total",
    "diskpulse_disk_writes_merged_total",
    "diskpulse_disk_written_bytes_total",
    "diskpulse_disk_write_time_seconds_total",
    "diskpulse_disk_io_now",
    "diskpulse_disk_io_time_seconds_total",
    "diskpulse_disk_io_time_weighted_seconds_total",
    "diskpulse_disk_discards_completed_total",
    "diskpulse_disk_discards_merged_total",
    "diskpulse_disk_discarded_bytes_total",
    "diskpulse_disk_discard_time_seconds_total",
    "diskpulse_disk_flush_requests_total",
    "diskpulse_disk_flush_time_seconds_total",
};
static const char *const gauge_names[10] = {
    "diskpulse_disk_read_await_seconds",
    "diskpulse_disk_write_await_seconds",
    "diskpulse_disk_discard_await_seconds",
    "diskpulse_disk_flush_await_seconds",
    "diskpulse_disk_utilization_ratio",
    "diskpulse_disk_queue_depth",
    "diskpulse_disk_read_iops",
    "diskpulse_disk_write_iops",
    "diskpulse_disk_read_bytes_per_second",
    "diskpulse_disk_write_bytes_per_second",
};

static double gauge_of(const struct iostat_derived *g, size_t k)
{
        const double v[10] = {g->read_await,
                              g->write_await,
                              g->discard_await,
                              g->flush_await,
                              g->utilization,
                              g->queue_depth,
                              g->read_iops,
                              g->write_iops,
                              g->read_bytes_per_second,
                              g->write_bytes_per_second};
        return v[k];
}

/* The devices of the reference in name order (as the page lists them). */
static size_t ref_order(const struct ref *r, size_t *idx)
{
        size_t n = 0;

        for (size_t i = 0; i < NDEV; i++)
                if (r->dev[i].listed && !excluded(names[i]) && r->dev[i].count > 0)
                        idx[n++] = i;
        for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++)
                        if (strcmp(names[idx[b]], names[idx[a]]) < 0) {
                                size_t t = idx[a];
                                idx[a] = idx[b];
                                idx[b] = t;
                        }
        return n;
}

/* The page the collector printed before tables: the same families built sample by sample. */
static struct mset *ref_export(const struct ref *r, struct stub *src)
{
        struct mset *s = mset_new();
        size_t idx[NDEV], n = ref_order(r, idx);
        struct mfamily *f;

        f = mset_family(s, "diskpulse_disk_info",
                        "Facts about a monitored block device; identity lives only here.",
                        MT_GAUGE);
        for (size_t j = 0; j < n; j++) {
                const struct ref_dev *d = &r->dev[idx[j]];
                struct device_info info;
                char maj[16], min[16];
                if (stub_lookup(&src->base, names[idx[j]], 0, 0, &info) < 0) {
                        memset(&info, 0, sizeof info);
                        info.rotational = -1;
                }
                snprintf(maj, sizeof maj, "%u", d->major);
                snprintf(min, sizeof min, "%u", d->minor);
                mfamily_add(s, f, "", 1.0, "device", names[idx[j]], "major", maj, "minor", min,
                            "model", info.model, "serial", info.serial, "wwn", info.wwn, "path",
                            info.path, "revision", info.revision, "rotational",
                            info.rotational < 0 ? ""
                            : info.rotational   ? "1"
                                                : "0",
                            NULL);
        }
        f = mset_family(s, "diskpulse_disk_write_cache_info",
                        "The kernel's write cache mode of the device (queue/write_cache).",
                        MT_GAUGE);
        for (size_t j = 0; j < n; j++) {
                struct device_info info;
                if (stub_lookup(&src->base, names[idx[j]], 0, 0, &info) == 0 && info.write_cache[0])
                        mfamily_add(s, f, "", 1.0, "device", names[idx[j]], "mode",
                                    info.write_cache, NULL);
        }
        for (size_t c = 0; c < DS_NFIELDS; c++) {
                f = NULL;
                for (size_t j = 0; j < n; j++) {
                        const struct ref_dev *d = &r->dev[idx[j]];
                        uint64_t v = d->s[d->count - 1][c];
                        enum ds_field fl = (enum ds_field)c;
                        bool ms = diskstats_field_is_32bit(fl) && fl != DS_IO_NOW;
                        bool sect = fl == DS_READ_SECTORS || fl == DS_WRITE_SECTORS ||
                                    fl == DS_DISCARD_SECTORS;
                        if (c >= d->nfields)
                                continue;
                        if (!f)
                                f = mset_family(s, counter_names[c], "h", MT_COUNTER);
                        if (ms)
                                mfamily_add(s, f, "", (double)v / 1000.0, "device", names[idx[j]],
                                            NULL);
                        else if (sect && v <= UINT64_MAX / 512)
                                mfamily_add_u64(s, f, "", v * 512, "device", names[idx[j]], NULL);
                        else if (sect)
                                mfamily_add(s, f, "", (double)v * 512.0, "device", names[idx[j]],
                                            NULL);
                        else
                                mfamily_add_u64(s, f, "", v, "device", names[idx[j]], NULL);
                }
        }
        for (size_t g = 0; g < 10; g++) {
                f = n ? mset_family(s, gauge_names[g], "h", MT_GAUGE) : NULL;
                for (size_t j = 0; j < n; j++) {
                        struct iostat_derived der;
                        ref_derive(r, &r->dev[idx[j]], &der);
                        mfamily_add(s, f, "", gauge_of(&der, g), "device", names[idx[j]], NULL);
                }
        }
        mset_gauge(s, "diskpulse_disk_window_seconds", "h", ref_span(r), NULL);
        mset_gauge(s, "diskpulse_disk_devices", "Number of block devices monitored.", (double)n,
                   NULL);
        return s;
}

/* The sample lines of a page (headers differ in help text between the two builds). */
static char *samples_only(struct mset *s)
{
        char *text, *o, *p;
        size_t len;

        assert_int_equal(expo_render(&s, 1, EXPO_FORMAT_TEXT, &text, &len), 0);
        o = p = text;
        while (*p) {
                char *nl = strchr(p, '\n');
                size_t l = (size_t)(nl - p) + 1;
                if (*p != '#' && strncmp(p, "diskpulse_diskstats_malformed", 29) != 0) {
                        memmove(o, p, l);
                        o += l;
                }
                p += l;
        }
        *o = 0;
        return text;
}

static uint64_t rng_next(uint64_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        return *x;
}

static void write_ref(struct tree *t, const struct ref *r)
{
        char *text = xcalloc(1, 65536);
        size_t o = 0;

        for (size_t i = 0; i < NDEV; i++) {
                const struct ref_dev *d = &r->dev[i];
                if (!d->listed)
                        continue;
                o += (size_t)snprintf(text + o, 65536 - o, "%4u %7u %s", d->major, d->minor,
                                      names[i]);
                for (unsigned k = 0; k < d->nfields; k++)
                        o += (size_t)snprintf(text + o, 65536 - o, " %llu",
                                              (unsigned long long)d->v[k]);
                text[o++] = '\n';
        }
        write_file(t, "diskstats", text);
        free(text);
}

static void test_against_reference(void **state)
{
        struct tree t;
        struct stub src = {.base = {.ops = &stub_ops}};
        struct namefilter *exclude = NULL;
        struct ref r;
        uint64_t x = 0x9E3779B97F4A7C15ULL;
        usec_t now = 100 * USEC_PER_SEC;
        struct diskstats *d;
        (void)state;

        tree_init(&t);
        memset(&r, 0, sizeof r);
        r.uptime = 1000 * USEC_PER_SEC + 500000;
        assert_int_equal(namefilter_new(NULL, "^(sdb1|zram0)$", &exclude, NULL, 0), 0);
        for (size_t i = 0; i < NDEV; i++) {
                r.dev[i].listed = true;
                r.dev[i].major = 8;
                r.dev[i].minor = (unsigned)i * 16;
                /* every kernel format, 32-bit ms fields near their wrap */
                r.dev[i].nfields = i == 2 ? 11 : i == 3 ? 15 : 17;
                for (size_t k = 0; k < DS_NFIELDS; k++)
                        r.dev[i].v[k] = diskstats_field_is_32bit((enum ds_field)k)
                                            ? UINT32_MAX - rng_next(&x) % 5000
                                            : rng_next(&x) % 1000000;
        }
        d = diskstats_new(&(struct diskstats_config){.procfs_fd = t.procfs,
                                                     .devsrc = &src.base,
                                                     .filter = exclude,
                                                     .interval = INTERVAL,
                                                     .window = WINDOW,
                                                     .identity_refresh = 0});
        for (unsigned round = 0; round < 400; round++) {
                struct mset *got = mset_new(), *want;
                char *a, *b;

                for (size_t i = 0; i < NDEV; i++) {
                        struct ref_dev *dv = &r.dev[i];
                        uint64_t p = rng_next(&x) % 100;
                        if (!dv->listed) {
                                dv->listed = true; /* back after a round away: a new device */
                                continue;
                        }
                        if (p < 3 && round > 0) {
                                dv->listed = false; /* removed for a round */
                                continue;
                        }
                        if (p < 6) {
                                /* removed and added again between two samples */
                                for (size_t k = 0; k < DS_NFIELDS; k++)
                                        dv->v[k] /= 1000;
                        } else if (p < 8) {
                                dv->minor += 1; /* another device under the same name */
                        } else if (p < 45) {
                                for (size_t k = 0; k < DS_NFIELDS; k++)
                                        if (k == DS_IO_NOW)
                                                dv->v[k] = rng_next(&x) % 4;
                                        else if (rng_next(&x) % 3)
                                                dv->v[k] =
                                                    diskstats_field_is_32bit((enum ds_field)k)
                                                        ? (uint32_t)(dv->v[k] + rng_next(&x) % 900)
                                                        : dv->v[k] + rng_next(&x) % 900;
                        } /* else idle: the same line again */
                }
                if (round % 37 == 36) {
                        src.gen++; /* new identities, as udev change events tell */
                        diskstats_invalidate(d, NULL);
                }
                /* mostly on time, sometimes late, sometimes a stall */
                now +=
                    round % 53 == 52 ? 7 * USEC_PER_SEC : INTERVAL - 200000 + rng_next(&x) % 400000;
                write_ref(&t, &r);
                assert_int_equal(diskstats_sample(d, now), 0);
                ref_sample(&r, now);
                diskstats_export(d, got);
                want = ref_export(&r, &src);
                a = samples_only(got);
                b = samples_only(want);
                if (strcmp(a, b) != 0)
                        fail_msg("round %u:\n--- got\n%s\n--- want\n%s", round, a, b);
                free(a);
                free(b);
                mset_free(got);
                mset_free(want);
        }
        diskstats_free(d);
        namefilter_free(exclude);
        tree_done(&t);
}

/* A family's table in a set. */
static const struct mtable *table_of(struct mset *s)
{
        const struct mfamily *f = mset_find(s, "diskpulse_disk_reads_completed_total");
        assert_non_null(f);
        return f->table;
}

static void test_table_reused_while_nothing_changes(void **state)
{
        struct tree t;
        struct diskstats *d;
        struct mset *s[6];
        usec_t now = 10 * USEC_PER_SEC;
        (void)state;

        tree_init(&t);
        write_file(&t, "diskstats",
                   "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"
                   "8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");
        d = diskstats_new(&(struct diskstats_config){
            .procfs_fd = t.procfs, .interval = INTERVAL, .window = WINDOW});
        for (size_t i = 0; i < 6; i++) {
                if (i == 4)
                        write_file(&t, "diskstats",
                                   "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"
                                   "8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 18\n");
                assert_int_equal(diskstats_sample(d, now += INTERVAL), 0);
                s[i] = mset_new();
                diskstats_export(d, s[i]);
        }
        /* the first round (since boot) differs from the second; then the same table serves */
        assert_ptr_not_equal(table_of(s[0]), table_of(s[1]));
        assert_ptr_equal(table_of(s[1]), table_of(s[2]));
        assert_ptr_equal(table_of(s[2]), table_of(s[3]));
        /* a counter moved: new values, the same rows (labels) */
        assert_ptr_not_equal(table_of(s[3]), table_of(s[4]));
        assert_ptr_equal(table_of(s[3])->rows, table_of(s[4])->rows);
        /* and the window now holds a change: the gauges move, so the table is made anew */
        assert_ptr_not_equal(table_of(s[4]), table_of(s[5]));
        for (size_t i = 0; i < 6; i++)
                mset_free(s[i]);
        diskstats_free(d);
        tree_done(&t);
}

static void test_long_file_read_in_chunks(void **state)
{
        struct tree t;
        struct diskstats *d;
        struct mset *s = mset_new();
        size_t cap = 4u << 20, o = 0, pos = 0, seen = 0;
        char *text = xmalloc(cap), lb[256];
        const struct mfamily *f;
        struct msample sm;
        (void)state;

        tree_init(&t);
        /* 5,000 devices (more than 64 KiB: lines cross the chunks), with an overlong line
         * (malformed) and a line without its newline at the end */
        for (unsigned i = 0; i < 5000; i++) {
                o += (size_t)snprintf(text + o, cap - o,
                                      "%4u %7u d%u %u 0 %u 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
                                      8 + i / 256, i % 256, i, i * 3, i * 7);
                if (i == 2500) {
                        memset(text + o, '9', 100000);
                        o += 100000;
                        text[o++] = '\n';
                }
        }
        o += (size_t)snprintf(text + o, cap - o, "9 9 last 5 0 0 0 0 0 0 0 0 0 0");
        write_file(&t, "diskstats", text);
        d = diskstats_new(&(struct diskstats_config){
            .procfs_fd = t.procfs, .interval = INTERVAL, .window = WINDOW});
        assert_int_equal(diskstats_sample(d, 5 * USEC_PER_SEC), 0);
        assert_int_equal(diskstats_device_count(d), 5001);
        diskstats_export(d, s);
        f = mset_find(s, "diskpulse_disk_reads_completed_total");
        assert_int_equal(f->n, 5001);
        while (mfamily_next(f, &pos, &sm, lb, sizeof lb)) {
                unsigned i;
                if (sscanf(sm.labels, "device=\"d%u\"", &i) == 1) {
                        if (sm.u != (uint64_t)i * 3)
                                fail_msg("%s: %llu", sm.labels, (unsigned long long)sm.u);
                        seen++;
                } else {
                        assert_string_equal(sm.labels, "device=\"last\"");
                        assert_int_equal(sm.u, 5);
                }
        }
        assert_int_equal(seen, 5000);
        f = mset_find(s, "diskpulse_diskstats_malformed_lines_total");
        assert_int_equal(f->samples[0].u, 1);
        mset_free(s);
        free(text);
        diskstats_free(d);
        tree_done(&t);
}

static void test_unreadable_file_keeps_the_last_sample(void **state)
{
        struct tree t;
        struct diskstats *d;
        struct mset *a = mset_new(), *b = mset_new();
        char path[128], *ta, *tb;
        size_t la, lb;
        (void)state;

        tree_init(&t);
        write_file(&t, "diskstats", "8 0 sda 10 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");
        d = diskstats_new(&(struct diskstats_config){
            .procfs_fd = t.procfs, .interval = INTERVAL, .window = WINDOW});
        assert_int_equal(diskstats_sample(d, 5 * USEC_PER_SEC), 0);
        diskstats_export(d, a);
        snprintf(path, sizeof path, "%s/diskstats", t.dir);
        unlink(path);
        assert_int_equal(diskstats_sample(d, 6 * USEC_PER_SEC), -ENOENT);
        diskstats_export(d, b);
        assert_int_equal(expo_render(&a, 1, EXPO_FORMAT_TEXT, &ta, &la), 0);
        assert_int_equal(expo_render(&b, 1, EXPO_FORMAT_TEXT, &tb, &lb), 0);
        assert_string_equal(ta, tb);
        free(ta);
        free(tb);
        mset_free(a);
        mset_free(b);
        diskstats_free(d);
        tree_done(&t);
}

static void test_filters_changed_at_reload(void **state)
{
        struct tree t;
        struct diskstats *d;
        struct namefilter *ex = NULL;
        struct diskstats_config c = {.interval = INTERVAL, .window = WINDOW};
        usec_t now = 5 * USEC_PER_SEC;
        (void)state;

        tree_init(&t);
        c.procfs_fd = t.procfs;
        assert_int_equal(namefilter_new(NULL, "^sda[0-9]+$", &ex, NULL, 0), 0);
        c.filter = ex;
        write_file(&t, "diskstats",
                   "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"
                   "8 1 sda1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"
                   "8 2 sda2 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");
        d = diskstats_new(&c);
        for (int round = 0; round < 8; round++) {
                struct mset *s = mset_new();
                size_t want = round >= 2 && round < 5 ? 3 : 1;
                if (round == 2 || round == 5) {
                        /* a reload: the partitions in (their state grows), then out again */
                        c.filter = round == 2 ? NULL : ex;
                        diskstats_reconfigure(d, &c);
                }
                assert_int_equal(diskstats_sample(d, now += INTERVAL), 0);
                diskstats_export(d, s);
                assert_int_equal(diskstats_device_count(d), want);
                assert_int_equal(mset_find(s, "diskpulse_disk_reads_completed_total")->n, want);
                assert_int_equal(mset_find(s, "diskpulse_disk_info")->n, want);
                mset_free(s);
        }
        diskstats_free(d);
        namefilter_free(ex);
        tree_done(&t);
}

/* The periodic refresh looks a device up again only when the source's stamp moved. */
static void test_identity_refresh_by_stamp(void **state)
{
        struct tree t;
        struct stub src = {.base = {.ops = &stub_stamp_ops}, .stamp = 1};
        struct diskstats *d;
        usec_t now = 1000 * USEC_PER_SEC;
        (void)state;

        tree_init(&t);
        write_file(&t, "diskstats",
                   "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"
                   "8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");
        d = diskstats_new(&(struct diskstats_config){.procfs_fd = t.procfs,
                                                     .devsrc = &src.base,
                                                     .interval = INTERVAL,
                                                     .window = WINDOW,
                                                     .identity_refresh = 60 * USEC_PER_SEC});
        for (int sec = 0; sec < 200; sec++) {
                struct mset *s = mset_new();
                struct msample sm;
                char lb[512];
                size_t pos = 0;

                if (sec == 100) {
                        src.stamp = 2; /* a udev record or queue attribute changed */
                        src.gen = 7;
                }
                assert_int_equal(diskstats_sample(d, now += INTERVAL), 0);
                diskstats_export(d, s);
                if (sec == 99)
                        assert_int_equal(src.lookups, 2); /* the first look only */
                if (sec == 170) {
                        /* looked up again at the first periodic look after the change */
                        assert_int_equal(src.lookups, 4);
                        assert_true(mfamily_next(mset_find(s, "diskpulse_disk_info"), &pos, &sm, lb,
                                                 sizeof lb));
                        assert_non_null(strstr(sm.labels, "gen 7"));
                }
                mset_free(s);
        }
        assert_int_equal(src.lookups, 4);
        diskstats_free(d);
        tree_done(&t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_against_reference),
            cmocka_unit_test(test_table_reused_while_nothing_changes),
            cmocka_unit_test(test_long_file_read_in_chunks),
            cmocka_unit_test(test_unreadable_file_keeps_the_last_sample),
            cmocka_unit_test(test_filters_changed_at_reload),
            cmocka_unit_test(test_identity_refresh_by_stamp),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
