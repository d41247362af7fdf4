/* Unit tests of collectors/biolatency: bucket choice at the bounds, the bounds against the
 * canary's, wrap-safe accumulation, two CPUs' rows summed, the exposition of a fake mapping
 * (plain memory laid out as the maps), the device filter, names from a temporary sysfs tree, a
 * renamed device starting from zero, quantiles from buckets, the two text parsers, and the
 * adapter with a fake privileged helper (attached, failed and retried, not built). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"

#include "biolatency.h"
#include "biolatency_collector.h"
#include "biolatency_hist.h"
#include "canary_stats.h"
#include "fsroot.h"
#include "metrics.h"
#include "namefilter.h"
#include "render.h"

#define DEV(maj, min) ((uint32_t)(maj) << 20 | (uint32_t)(min))
#define ROW_ELEM      ((sizeof(struct biolat_row) + 7) & ~(size_t)7)

/* ---- Buckets and bounds ---- */

/* The default grid, made once. */
static struct biolat_grid default_grid(void)
{
        struct biolat_config c;
        struct biolat_grid g;

        biolatency_config_default(&c, 1, 1);
        assert_int_equal(biolatency_grid(c.classic_ns, c.nclassic, &g), 0);
        return g;
}

/* The native index of a latency of ns nanoseconds, from its definition: the i with
 * 2^((i-1)/4) < s <= 2^(i/4), s = ns / 1e9 (the zero bucket: s <= 2^-20). */
static int32_t native_index_of(uint64_t ns)
{
        double s = (double)ns / 1e9;
        int32_t i = (int32_t)ceil(4 * log2(s));

        /* log2 is not exact at the bounds: the definition decides */
        while (i > INT32_MIN / 2 && pow(2, (i - 1) / 4.0) >= s)
                i--;
        while (pow(2, i / 4.0) < s)
                i++;
        if (i <= BIOLAT_NATIVE_MIN)
                return BIOLAT_NATIVE_ZERO;
        return i > BIOLAT_NATIVE_MAX ? BIOLAT_NATIVE_MAX + 1 : i;
}

static void test_grid(void **state)
{
        struct biolat_grid g = default_grid();
        struct biolat_config c;
        uint64_t cl[3] = {500, 1000000000ull, 200000000000ull}; /* 0.5 us, 1 s (native), 200 s */
        (void)state;

        biolatency_config_default(&c, 1, 1);
        assert_int_equal(c.nclassic, 13);
        /* 109 native bounds and the 13 classic ones, 1 s and 0.25 s being both */
        assert_int_equal(g.n, BIOLAT_NATIVE_BOUNDS + 13 - 2);
        assert_int_equal(g.ns[0], 953);                   /* floor(1e9 * 2^-20) */
        assert_int_equal(g.ns[g.n - 1], 128000000000ull); /* 2^7 s */
        for (size_t i = 1; i < g.n; i++) {
                assert_true(g.ns[i] > g.ns[i - 1]);
                /* 2^(1/4), and the floor's one nanosecond */
                if (!((double)g.ns[i] <= (double)g.ns[i - 1] * 1.18921 + 1))
                        fail_msg("bounds %" PRIu64 " and %" PRIu64 " more than 1.19x apart",
                                 g.ns[i - 1], g.ns[i]);
        }
        for (size_t k = 0; k < c.nclassic; k++)
                assert_true(biolatency_grid_find(&g, c.classic_ns[k]) < g.n);
        for (int32_t i = BIOLAT_NATIVE_MIN; i <= BIOLAT_NATIVE_MAX; i++) {
                uint64_t b = biolatency_native_bound_ns(i);
                /* the floor of the real bound */
                assert_true((double)b <= 1e9 * pow(2, i / 4.0) * (1 + 1e-15));
                assert_true((double)(b + 1) > 1e9 * pow(2, i / 4.0));
                assert_true(biolatency_grid_find(&g, b) < g.n);
        }
        assert_int_equal(biolatency_native_bound_ns(0), 1000000000ull);
        assert_int_equal(biolatency_native_bound_ns(-4), 500000000ull);
        assert_int_equal(biolatency_native_bound_ns(1), 1189207115ull);
        assert_int_equal(biolatency_native_bound_ns(-1), 840896415ull);
        /* classic bounds outside the native range are kept */
        assert_int_equal(biolatency_grid(cl, 3, &g), 0);
        assert_int_equal(g.n, BIOLAT_NATIVE_BOUNDS + 2);
        assert_int_equal(g.ns[0], 500);
        assert_int_equal(g.ns[g.n - 1], 200000000000ull);
        /* refused: none, too many, not increasing, 0 */
        assert_int_equal(biolatency_grid(cl, 0, &g), -EINVAL);
        assert_int_equal(biolatency_grid(cl, BIOLAT_MAX_CLASSIC + 1, &g), -EINVAL);
        cl[1] = 500;
        assert_int_equal(biolatency_grid(cl, 2, &g), -EINVAL);
        cl[0] = 0;
        assert_int_equal(biolatency_grid(cl, 1, &g), -EINVAL);
}

static void test_bucket_boundaries(void **state)
{
        struct biolat_grid g = default_grid();
        uint64_t seed = prng_seed(7);
        (void)state;

        assert_int_equal(biolatency_bucket(&g, 0), 0);
        assert_int_equal(biolatency_bucket(&g, 953), 0); /* exactly the first bound */
        assert_int_equal(biolatency_bucket(&g, 954), 1); /* bound + 1: the next bucket */
        assert_int_equal(biolatency_bucket(&g, 128000000000ull), g.n - 1);
        assert_int_equal(biolatency_bucket(&g, 128000000001ull), g.n); /* +Inf */
        assert_int_equal(biolatency_bucket(&g, UINT64_MAX), g.n);
        for (size_t i = 0; i < g.n; i++) {
                assert_int_equal(biolatency_bucket(&g, g.ns[i]), i);
                assert_int_equal(biolatency_bucket(&g, g.ns[i] + 1), i + 1);
        }
        /* every grid bucket lies in one native bucket: the one its latencies have, at its
         * edges and inside */
        for (size_t i = 0; i <= g.n; i++) {
                uint64_t lo = i ? g.ns[i - 1] + 1 : 1, hi = i < g.n ? g.ns[i] : lo * 4;
                int32_t want = biolatency_native_of(&g, i);

                assert_int_equal(native_index_of(lo), want);
                assert_int_equal(native_index_of(hi), want);
        }
        for (int k = 0; k < 20000; k++) {
                uint64_t ns = (uint64_t)(100.0 * exp(prng_unit(&seed) * log(1e12 / 100.0)));
                assert_int_equal(biolatency_native_of(&g, biolatency_bucket(&g, ns)),
                                 native_index_of(ns));
        }
}

static void test_bounds(void **state)
{
        char buf[BIOLAT_LE_MAX], canary[BIOLAT_LE_MAX], why[200];
        struct biolat_config c;
        uint64_t ns[BIOLAT_MAX_CLASSIC];
        size_t n = 0;
        (void)state;

        biolatency_config_default(&c, 1, 1);
        assert_string_equal(biolatency_le(50000, buf, sizeof buf), "5e-05");
        assert_string_equal(biolatency_le(250000, buf, sizeof buf), "0.00025");
        assert_string_equal(biolatency_le(1000000000ull, buf, sizeof buf), "1");
        assert_string_equal(biolatency_le(UINT64_MAX, buf, sizeof buf), "+Inf");
        /* the default bounds are the canary's, with the same texts; 50 ms among them */
        for (size_t i = 0; i < c.nclassic; i++) {
                bool found = false;
                for (size_t k = 0; k < CANARY_HIST_NBOUNDS && !found; k++) {
                        (void)strscpy(canary, canary_hist_le(k), sizeof canary);
                        if ((double)c.classic_ns[i] / 1e9 == canary_hist_bound(k)) {
                                assert_string_equal(biolatency_le(c.classic_ns[i], buf, sizeof buf),
                                                    canary);
                                found = true;
                        }
                }
                if (!found)
                        fail_msg("bound %" PRIu64 " ns is not a canary bound", c.classic_ns[i]);
        }
        assert_int_equal(c.classic_ns[9], 50000000);
        /* the flag's parser */
        assert_int_equal(biolatency_parse_buckets("0.001,0.5,2", ns, &n, why, sizeof why), 0);
        assert_int_equal(n, 3);
        assert_int_equal(ns[0], 1000000);
        assert_int_equal(ns[1], 500000000);
        assert_int_equal(ns[2], 2000000000);
        assert_int_equal(biolatency_parse_buckets("1e-6", ns, &n, why, sizeof why), 0);
        assert_int_equal(ns[0], 1000);
        static const char *const bad[] = {"",    "0.1,", ",0.1", "0.1,0.1",      "0.2,0.1",
                                          "0",   "-1",   "abc",  "1e-10",        "0.1 ,1",
                                          "2e6", "nan",  "inf",  "1.00000000001"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                why[0] = 0;
                if (biolatency_parse_buckets(bad[i], ns, &n, why, sizeof why) != -EINVAL)
                        fail_msg("\"%s\" was accepted", bad[i]);
                assert_true(why[0] != 0);
        }
        assert_int_equal(biolatency_parse_buckets("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18",
                                                  ns, &n, why, sizeof why),
                         0);
        assert_int_equal(biolatency_parse_buckets("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19",
                                                  ns, &n, why, sizeof why),
                         -EINVAL);
        assert_non_null(strstr(why, "more than 18"));
        /* the operations' parser */
        unsigned m = 0;
        assert_int_equal(biolatency_parse_ops("read,flush", &m, why, sizeof why), 0);
        assert_int_equal(m, (1u << BIOLAT_OP_READ) | (1u << BIOLAT_OP_FLUSH));
        assert_int_equal(biolatency_parse_ops("", &m, why, sizeof why), 0);
        assert_int_equal(m, 0);
        assert_int_equal(biolatency_parse_ops("read,", &m, why, sizeof why), -EINVAL);
        assert_int_equal(biolatency_parse_ops("reads", &m, why, sizeof why), -EINVAL);
        assert_non_null(strstr(why, "\"reads\""));
        assert_int_equal(biolatency_parse_ops("read,,write", &m, why, sizeof why), -EINVAL);
}

static void test_wrap_safe(void **state)
{
        uint64_t total = 5, t64 = 0, p64 = UINT64_MAX - 2;
        uint32_t prev = 0xfffffff0u;
        (void)state;

        biolatency_add_u32(&total, &prev, 0x10u); /* across the wrap: 0x20 more */
        assert_int_equal(total, 5 + 0x20);
        assert_int_equal(prev, 0x10u);
        biolatency_add_u32(&total, &prev, 0x10u); /* nothing new */
        assert_int_equal(total, 5 + 0x20);
        biolatency_add_u64(&t64, &p64, 4); /* UINT64_MAX - 2 -> 4: 7 more */
        assert_int_equal(t64, 7);
        assert_int_equal(p64, 4);
}

/* ---- A fake mapping ---- */

struct fakemap {
        uint32_t max, ncpu;
        uint8_t *devs, *rows;
};

static void fakemap_init(struct fakemap *m, uint32_t max, uint32_t ncpu)
{
        m->max = max;
        m->ncpu = ncpu;
        m->devs = calloc(1, biolatency_devs_size(max));
        m->rows = calloc(1, biolatency_rows_size(max, ncpu));
        assert_non_null(m->devs);
        assert_non_null(m->rows);
}

/* A reader of the fake mapping with the default config. */
static struct biolat_reader *reader_mem(struct fakemap *m, uint32_t max, uint32_t ncpu)
{
        struct biolat_config c;

        biolatency_config_default(&c, max, ncpu);
        return biolatency_reader_init_mem(m->devs, m->rows, &c);
}

static void fakemap_done(struct fakemap *m)
{
        free(m->devs);
        free(m->rows);
}

static void set_dev(struct fakemap *m, uint32_t slot, uint32_t dev)
{
        memcpy(m->devs + slot * sizeof dev, &dev, sizeof dev);
}

static struct biolat_row *row(struct fakemap *m, uint32_t cpu, uint32_t slot)
{
        return (struct biolat_row *)(m->rows + ((size_t)slot * m->ncpu + cpu) * ROW_ELEM);
}

/* Names: a fixed table, changeable by the test. */
struct names {
        uint32_t dev[4];
        const char *name[4];
        unsigned calls;
};

static int names_fn(void *ud, uint32_t dev, char *name, size_t size)
{
        struct names *n = ud;

        n->calls++;
        for (size_t i = 0; i < 4; i++)
                if (n->dev[i] == dev && n->name[i]) {
                        (void)strscpy(name, n->name[i], size);
                        return 0;
                }
        return -ENOENT;
}

static void test_two_cpus_summed(void **state)
{
        struct fakemap m;
        struct names nm = {.dev = {DEV(8, 0)}, .name = {"sda"}};
        struct biolat_reader *r;
        const uint64_t *c;
        uint64_t sum = 0;
        (void)state;

        fakemap_init(&m, 4, 2);
        r = reader_mem(&m, 4, 2);
        assert_non_null(r);
        set_dev(&m, 2, DEV(8, 0));
        row(&m, 0, 2)->cell[BIOLAT_OP_READ][BIOLAT_KIND_QUEUE].buckets[5] = 3;
        row(&m, 1, 2)->cell[BIOLAT_OP_READ][BIOLAT_KIND_QUEUE].buckets[5] = 4;
        row(&m, 0, 2)->cell[BIOLAT_OP_READ][BIOLAT_KIND_QUEUE].sum_ns = 1000;
        row(&m, 1, 2)->cell[BIOLAT_OP_READ][BIOLAT_KIND_QUEUE].sum_ns = 2500;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 1);
        c = biolatency_reader_counts(r, "sda", BIOLAT_OP_READ, BIOLAT_KIND_QUEUE, &sum);
        assert_non_null(c);
        assert_int_equal(c[5], 7);
        assert_int_equal(c[4], 0);
        assert_int_equal(sum, 3500);
        /* CPU 1 wraps its u32 count: 4 -> 0xffffffff -> 2 is 0xffffffff - 4 + 3 more */
        row(&m, 1, 2)->cell[BIOLAT_OP_READ][BIOLAT_KIND_QUEUE].buckets[5] = 0xffffffffu;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 2);
        row(&m, 1, 2)->cell[BIOLAT_OP_READ][BIOLAT_KIND_QUEUE].buckets[5] = 2;
        row(&m, 0, 2)->cell[BIOLAT_OP_READ][BIOLAT_KIND_QUEUE].buckets[5] = 4;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 3);
        c = biolatency_reader_counts(r, "sda", BIOLAT_OP_READ, BIOLAT_KIND_QUEUE, NULL);
        assert_int_equal(c[5], 7 + (0xffffffffull - 4) + 3 + 1);
        assert_int_equal(biolatency_reader_devices(r), 1);
        assert_int_equal(nm.calls, 1); /* the name is cached */
        biolatency_reader_free(r);
        fakemap_done(&m);
}

static bool has_line(const char *text, const char *line)
{
        size_t n = strlen(line);

        for (const char *p = text; (p = strstr(p, line)); p += n)
                if ((p == text || p[-1] == '\n') && p[n] == '\n')
                        return true;
        return false;
}

static size_t count_of(const char *text, const char *needle)
{
        size_t n = 0;

        for (const char *p = text; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* The default grid's bucket of a latency. */
static size_t bucket_of(uint64_t ns)
{
        struct biolat_grid g = default_grid();

        return biolatency_bucket(&g, ns);
}

#define ASSERT_LINE(text, line)                                                                    \
        do {                                                                                       \
                if (!has_line(text, line))                                                         \
                        fail_msg("missing line: %s\n%s", line, text);                              \
        } while (0)

static void test_exposition(void **state)
{
        struct fakemap m;
        struct names nm = {.dev = {DEV(8, 16), DEV(8, 0)}, .name = {"sdb", "sda"}};
        struct biolat_reader *r;
        struct mset *set;
        char *text;
        const char *a, *b;
        (void)state;

        fakemap_init(&m, 3, 1);
        r = reader_mem(&m, 3, 1);
        set_dev(&m, 0, DEV(8, 16));
        set_dev(&m, 1, DEV(8, 0));
        /* sda writes: 2 of 100 us, 3 of 1 ms; device time sum 3.2 ms */
        row(&m, 0, 1)->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_DEVICE].buckets[bucket_of(100000)] = 2;
        row(&m, 0, 1)->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_DEVICE].buckets[bucket_of(1000000)] = 3;
        row(&m, 0, 1)->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_DEVICE].sum_ns = 3200000;
        /* sdb flushes queued beyond 128 s */
        row(&m, 0, 0)->cell[BIOLAT_OP_FLUSH][BIOLAT_KIND_QUEUE].buckets[bucket_of(UINT64_MAX)] = 1;
        row(&m, 0, 0)->cell[BIOLAT_OP_FLUSH][BIOLAT_KIND_QUEUE].sum_ns = 200000000000ull;
        row(&m, 0, 0)->untracked = 4;
        row(&m, 0, 3)->cell[BIOLAT_OP_READ][BIOLAT_KIND_DEVICE].buckets[10] = 6; /* overflow */
        row(&m, 0, 3)->cell[BIOLAT_OP_READ][BIOLAT_KIND_QUEUE].buckets[10] = 6;
        row(&m, 0, 3)->untracked = 1;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 1);
        set = mset_new();
        biolatency_export(r, set);
        /* the native histograms: 100 us is native bucket -53 (2^(-54/4) < 1e-4 <= 2^(-53/4)), 1
         * ms bucket -39; 2 and 3 counts, nothing between, the zero bucket empty */
        const struct mfamily *f = mset_find(set, BIOLAT_FAMILY_DEVICE);
        assert_non_null(f);
        assert_int_equal(f->nnatives, 1);
        assert_string_equal(f->natives[0].labels, "device=\"sda\",op=\"write\"");
        const struct mnative *h = &f->natives[0].h;
        assert_int_equal(h->schema, 2);
        assert_true(h->zero_threshold == ldexp(1, -20));
        assert_int_equal(h->zero_count, 0);
        assert_int_equal(h->count, 5);
        assert_true(fabs(h->sum - 0.0032) < 1e-15);
        assert_int_equal(h->offset, -53);
        assert_int_equal(h->n, 15);
        assert_int_equal(h->counts[0], 2);
        assert_int_equal(h->counts[14], 3);
        for (size_t i = 1; i < 14; i++)
                assert_int_equal(h->counts[i], 0);
        f = mset_find(set, BIOLAT_FAMILY_QUEUE);
        assert_int_equal(f->nnatives, 1);
        assert_int_equal(f->natives[0].h.offset, BIOLAT_NATIVE_MAX + 1); /* beyond 128 s */
        assert_int_equal(f->natives[0].h.n, 1);
        text = test_render_set(set);
        ASSERT_LINE(text, "diskpulse_io_latency_up 1");
        ASSERT_LINE(text, "# TYPE diskpulse_io_device_latency_seconds histogram");
        ASSERT_LINE(text, "# HELP diskpulse_io_device_latency_seconds Time block-layer requests "
                          "took from being issued to the driver to completion (the device), by "
                          "device and operation.");
        ASSERT_LINE(text, "# HELP diskpulse_io_queue_latency_seconds Time block-layer requests "
                          "waited from being made to being issued to the driver (queue and "
                          "scheduler), by device and operation.");
        ASSERT_LINE(text, "diskpulse_io_device_latency_seconds_bucket{device=\"sda\",op=\"write\","
                          "le=\"5e-05\"} 0");
        ASSERT_LINE(text, "diskpulse_io_device_latency_seconds_bucket{device=\"sda\",op=\"write\","
                          "le=\"0.0001\"} 2");
        ASSERT_LINE(text, "diskpulse_io_device_latency_seconds_bucket{device=\"sda\",op=\"write\","
                          "le=\"0.0005\"} 2");
        ASSERT_LINE(text, "diskpulse_io_device_latency_seconds_bucket{device=\"sda\",op=\"write\","
                          "le=\"0.001\"} 5");
        ASSERT_LINE(text, "diskpulse_io_device_latency_seconds_bucket{device=\"sda\",op=\"write\","
                          "le=\"1\"} 5");
        ASSERT_LINE(text, "diskpulse_io_device_latency_seconds_bucket{device=\"sda\",op=\"write\","
                          "le=\"+Inf\"} 5");
        ASSERT_LINE(text, "diskpulse_io_device_latency_seconds_sum{device=\"sda\",op=\"write\"} "
                          "0.0032");
        ASSERT_LINE(text,
                    "diskpulse_io_device_latency_seconds_count{device=\"sda\",op=\"write\"} 5");
        /* the classic buckets alone: 13 bounds and +Inf */
        assert_int_equal(count_of(text, "_bucket{device=\"sda\",op=\"write\""), 14);
        ASSERT_LINE(text, "diskpulse_io_queue_latency_seconds_bucket{device=\"sdb\",op=\"flush\","
                          "le=\"1\"} 0");
        ASSERT_LINE(text, "diskpulse_io_queue_latency_seconds_bucket{device=\"sdb\",op=\"flush\","
                          "le=\"+Inf\"} 1");
        ASSERT_LINE(text,
                    "diskpulse_io_queue_latency_seconds_sum{device=\"sdb\",op=\"flush\"} 200");
        ASSERT_LINE(text, "diskpulse_io_latency_untracked_total 5");
        ASSERT_LINE(text, "diskpulse_io_latency_unslotted_total 6");
        /* a (device, op) with no count is left out; so is the overflow row */
        assert_null(strstr(text, "op=\"read\""));
        assert_null(strstr(text, "device_latency_seconds_count{device=\"sdb\""));
        assert_null(strstr(text, "device=\"\""));
        /* devices in name order */
        biolatency_reader_free(r);
        free(text);
        nm.name[0] = "sdb";
        row(&m, 0, 0)->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_DEVICE].buckets[0] = 1;
        r = reader_mem(&m, 3, 1);
        biolatency_reader_collect(r, names_fn, &nm, NULL, 1);
        set = mset_new();
        biolatency_export(r, set);
        text = test_render_set(set);
        a = strstr(text, "device_latency_seconds_count{device=\"sda\"");
        b = strstr(text, "device_latency_seconds_count{device=\"sdb\"");
        assert_non_null(a);
        assert_non_null(b);
        assert_true(a < b);
        free(text);
        /* the name moved to another MAJ:MIN without an event: one series, of the newer */
        nm.dev[2] = DEV(8, 32);
        nm.name[2] = "sdb";
        set_dev(&m, 2, DEV(8, 32));
        row(&m, 0, 2)->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_DEVICE].buckets[0] = 7;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 2);
        set = mset_new();
        biolatency_export(r, set);
        text = test_render_set(set);
        ASSERT_LINE(text,
                    "diskpulse_io_device_latency_seconds_count{device=\"sdb\",op=\"write\"} 7");
        assert_int_equal(count_of(text, "device_latency_seconds_count{device=\"sdb\""), 1);
        free(text);
        biolatency_reader_free(r);
        /* not attached: the up gauge alone */
        set = mset_new();
        biolatency_export(NULL, set);
        text = test_render_set(set);
        assert_string_equal(text, "# HELP diskpulse_io_latency_up Whether the block I/O latency "
                                  "eBPF programs are attached (1) or not (0: the log says why).\n"
                                  "# TYPE diskpulse_io_latency_up gauge\n"
                                  "diskpulse_io_latency_up 0\n");
        free(text);
        fakemap_done(&m);
}

static void test_filter(void **state)
{
        struct fakemap m;
        struct names nm = {.dev = {DEV(8, 0), DEV(8, 16)}, .name = {"sda", "sdb"}};
        struct namefilter *f = NULL;
        struct biolat_reader *r;
        struct mset *set;
        char err[256], *text;
        (void)state;

        assert_int_equal(namefilter_new(NULL, "^sdb$", &f, err, sizeof err), 0);
        fakemap_init(&m, 2, 1);
        r = reader_mem(&m, 2, 1);
        set_dev(&m, 0, DEV(8, 0));
        set_dev(&m, 1, DEV(8, 16));
        row(&m, 0, 0)->cell[BIOLAT_OP_READ][BIOLAT_KIND_DEVICE].buckets[1] = 1;
        row(&m, 0, 1)->cell[BIOLAT_OP_READ][BIOLAT_KIND_DEVICE].buckets[1] = 1;
        biolatency_reader_collect(r, names_fn, &nm, f, 1);
        assert_int_equal(biolatency_reader_devices(r), 1);
        assert_non_null(biolatency_reader_counts(r, "sda", 0, 1, NULL));
        assert_null(biolatency_reader_counts(r, "sdb", 0, 1, NULL));
        set = mset_new();
        biolatency_export(r, set);
        text = test_render_set(set);
        assert_non_null(strstr(text, "device=\"sda\""));
        assert_null(strstr(text, "device=\"sdb\""));
        free(text);
        /* the filter is applied at each collect: without it sdb is there, with its counts */
        biolatency_reader_collect(r, names_fn, &nm, NULL, 2);
        assert_int_equal(biolatency_reader_devices(r), 2);
        assert_int_equal(biolatency_reader_counts(r, "sdb", 0, 1, NULL)[1], 1);
        biolatency_reader_free(r);
        namefilter_free(f);
        fakemap_done(&m);
}

static void test_sysfs_names(void **state)
{
        char root[] = "/tmp/biolat-sysfs-XXXXXX", path[512], name[BIOLAT_NAME_MAX];
        struct fakemap m;
        struct biolat_reader *r;
        struct biolat_row *rw;
        int fd;
        (void)state;

        assert_non_null(mkdtemp(root));
        snprintf(path, sizeof path, "mkdir -p '%s/dev/block/259:0' '%s/dev/block/8:0'", root, root);
        assert_int_equal(system(path), 0);
        assert_int_equal(
            test_write_file(root, "dev/block/259:0/uevent",
                            "MAJOR=259\nMINOR=0\nDEVNAME=nvme0n1\nDEVTYPE=disk\nDISKSEQ=1\n"),
            0);
        assert_int_equal(
            test_write_file(root, "dev/block/8:0/uevent", "MAJOR=8\nMINOR=0\nDEVTYPE=disk\n"), 0);
        fd = root_open(root);
        assert_true(fd >= 0);
        assert_int_equal(biolatency_sysfs_name(fd, DEV(259, 0), name, sizeof name), 0);
        assert_string_equal(name, "nvme0n1");
        assert_int_equal(biolatency_sysfs_name(fd, DEV(8, 0), name, sizeof name), -ENOENT);
        assert_int_equal(biolatency_sysfs_name(fd, DEV(8, 1), name, sizeof name), -ENOENT);

        fakemap_init(&m, 2, 1);
        r = reader_mem(&m, 2, 1);
        set_dev(&m, 1, DEV(259, 0));
        rw = row(&m, 0, 1);
        rw->cell[BIOLAT_OP_READ][BIOLAT_KIND_DEVICE].buckets[7] = 2;
        biolatency_reader_collect_sysfs(r, fd, NULL, 1);
        assert_int_equal(biolatency_reader_counts(r, "nvme0n1", 0, 1, NULL)[7], 2);
        /* hotplug: the device goes; after the event its name cannot be read: not exported */
        snprintf(path, sizeof path, "%s/dev/block/259:0/uevent", root);
        assert_int_equal(unlink(path), 0);
        biolatency_reader_forget(r, "nvme0n1");
        rw->cell[BIOLAT_OP_READ][BIOLAT_KIND_DEVICE].buckets[7] = 3;
        biolatency_reader_collect_sysfs(r, fd, NULL, 2);
        assert_int_equal(biolatency_reader_devices(r), 0);
        assert_null(biolatency_reader_counts(r, "nvme0n1", 0, 1, NULL));
        /* the same dev_t comes back as another disk: from zero, only what came after */
        assert_int_equal(test_write_file(root, "dev/block/259:0/uevent",
                                         "MAJOR=259\nMINOR=0\nDEVNAME=nvme1n1\n"),
                         0);
        rw->cell[BIOLAT_OP_READ][BIOLAT_KIND_DEVICE].buckets[7] = 5;
        biolatency_reader_collect_sysfs(r, fd, NULL, 3);
        assert_int_equal(biolatency_reader_devices(r), 1);
        assert_int_equal(biolatency_reader_counts(r, "nvme1n1", 0, 1, NULL)[7], 0);
        rw->cell[BIOLAT_OP_READ][BIOLAT_KIND_DEVICE].buckets[7] = 9;
        biolatency_reader_collect_sysfs(r, fd, NULL, 4);
        assert_int_equal(biolatency_reader_counts(r, "nvme1n1", 0, 1, NULL)[7], 4);
        biolatency_reader_free(r);
        fakemap_done(&m);
        close(fd);
        assert_int_equal(test_remove_tree(root), 0);
}

static void test_rename_restarts(void **state)
{
        struct fakemap m;
        struct names nm = {.dev = {DEV(8, 0)}, .name = {"sda"}};
        struct biolat_reader *r;
        struct biolat_row *rw;
        uint64_t sum = 0;
        (void)state;

        fakemap_init(&m, 1, 1);
        r = reader_mem(&m, 1, 1);
        set_dev(&m, 0, DEV(8, 0));
        rw = row(&m, 0, 0);
        rw->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_QUEUE].buckets[3] = 10;
        rw->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_QUEUE].sum_ns = 16000;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 1);
        assert_int_equal(biolatency_reader_counts(r, "sda", 1, 0, NULL)[3], 10);
        /* the name is read again after BIOLAT_NAME_REFRESH: now sdc */
        nm.name[0] = "sdc";
        rw->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_QUEUE].buckets[3] = 12;
        rw->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_QUEUE].sum_ns = 19000;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 1 + BIOLAT_NAME_REFRESH - 1);
        assert_non_null(biolatency_reader_counts(r, "sda", 1, 0, NULL)); /* cached still */
        assert_int_equal(biolatency_reader_counts(r, "sda", 1, 0, NULL)[3], 12);
        rw->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_QUEUE].buckets[3] = 15;
        rw->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_QUEUE].sum_ns = 25000;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 1 + BIOLAT_NAME_REFRESH);
        assert_null(biolatency_reader_counts(r, "sda", 1, 0, NULL));
        /* the increase of the renaming round is counted under the new name, nothing before */
        assert_int_equal(biolatency_reader_counts(r, "sdc", 1, 0, &sum)[3], 0);
        assert_int_equal(sum, 0);
        rw->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_QUEUE].buckets[3] = 16;
        rw->cell[BIOLAT_OP_WRITE][BIOLAT_KIND_QUEUE].sum_ns = 26600;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 2 + BIOLAT_NAME_REFRESH);
        assert_int_equal(biolatency_reader_counts(r, "sdc", 1, 0, &sum)[3], 1);
        assert_int_equal(sum, 1600);
        biolatency_reader_free(r);
        fakemap_done(&m);
}

/* ---- Quantiles ---- */

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return (x > y) - (x < y);
}

static void test_quantile(void **state)
{
        static const double qs[] = {0.01, 0.1, 0.5, 0.9, 0.99};
        struct biolat_grid g = default_grid();
        uint64_t counts[BIOLAT_NBUCKETS] = {0}, *lat;
        uint64_t seed = prng_seed(42);
        const size_t n = 20000;
        size_t i1 = bucket_of(1000000000ull); /* (0.84 s, 1 s] */
        (void)state;

        /* one bucket: linear inside it */
        counts[i1] = 4;
        assert_true(fabs(biolatency_quantile(&g, counts, 0.5) - (0.840896415 + 1) / 2) < 1e-9);
        assert_true(fabs(biolatency_quantile(&g, counts, 1) - 1) < 1e-15);
        counts[g.n] = 4; /* beyond: the last bound */
        assert_true(biolatency_quantile(&g, counts, 0.99) == 128);
        assert_true(isnan(biolatency_quantile(&g, counts, 1.5)));
        memset(counts, 0, sizeof counts);
        assert_true(isnan(biolatency_quantile(&g, counts, 0.5)));

        /* log-uniform latencies from 5 us to 2 s: each quantile within 19 % */
        lat = malloc(n * sizeof(*lat));
        assert_non_null(lat);
        for (size_t i = 0; i < n; i++) {
                lat[i] = (uint64_t)(5000.0 * exp(prng_unit(&seed) * log(2e9 / 5000.0)));
                counts[biolatency_bucket(&g, lat[i])]++;
        }
        qsort(lat, n, sizeof(*lat), cmp_u64);
        for (size_t k = 0; k < ARRAY_SIZE(qs); k++) {
                double want = (double)lat[(size_t)(qs[k] * (double)(n - 1))] / 1e9;
                double got = biolatency_quantile(&g, counts, qs[k]);
                if (!(fabs(got - want) <= 0.19 * want))
                        fail_msg("q %g: got %g, want %g", qs[k], got, want);
        }
        free(lat);
}

/* ---- Parsers ---- */

static void test_parse_cpus(void **state)
{
        uint32_t n = 77;
        (void)state;

        assert_int_equal(biolatency_parse_cpus("0-3\n", 4, &n), 0);
        assert_int_equal(n, 4);
        assert_int_equal(biolatency_parse_cpus("0,2-5,7", 7, &n), 0);
        assert_int_equal(n, 8);
        assert_int_equal(biolatency_parse_cpus("0", 1, &n), 0);
        assert_int_equal(n, 1);
        n = 77;
        assert_int_equal(biolatency_parse_cpus("", 0, &n), -EINVAL);
        assert_int_equal(biolatency_parse_cpus("\n", 1, &n), -EINVAL);
        assert_int_equal(biolatency_parse_cpus("3-1", 3, &n), -EINVAL);
        assert_int_equal(biolatency_parse_cpus("0-", 2, &n), -EINVAL);
        assert_int_equal(biolatency_parse_cpus("0,,1", 4, &n), -EINVAL);
        assert_int_equal(biolatency_parse_cpus("0-65536", 7, &n), -ERANGE);
        assert_int_equal(n, 77);
}

static void test_parse_devname(void **state)
{
        char name[8] = "x";
        static const char ok[] = "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n";
        (void)state;

        assert_int_equal(biolatency_parse_devname(ok, strlen(ok), name, sizeof name), 0);
        assert_string_equal(name, "sda");
        assert_int_equal(biolatency_parse_devname("DEVNAME=nvme10n1", 16, name, sizeof name),
                         -EINVAL); /* does not fit 8 */
        assert_int_equal(biolatency_parse_devname("DEVNAME=nvme0n1", 15, name, sizeof name), 0);
        assert_string_equal(name, "nvme0n1");
        assert_int_equal(biolatency_parse_devname("A=1\nDEVNAME=sda", 15, name, sizeof name), 0);
        assert_int_equal(biolatency_parse_devname("XDEVNAME=a\n", 11, name, sizeof name), -ENOENT);
        assert_int_equal(biolatency_parse_devname("DEVNAME=\n", 9, name, sizeof name), -EINVAL);
        assert_int_equal(biolatency_parse_devname("DEVNAME=a b\n", 12, name, sizeof name), -EINVAL);
        assert_int_equal(biolatency_parse_devname("DEVNAME=a\"\n", 11, name, sizeof name), -EINVAL);
        assert_string_equal(name, "sda");
}

/* ---- The adapter, with a fake privileged helper ---- */

struct fakeio {
        struct devio base;
        int result; /* what privileged() returns */
        unsigned calls;
        struct biolat_params last;
        usec_t timeout;
        int rows_fd; /* the rows memfd last given (the test writes through it) */
};

static int fake_privileged(struct devio *io, const char *name, const void *arg, size_t len,
                           usec_t timeout, int fds[], size_t *nfds, char *err, size_t errsz)
{
        struct fakeio *f = (struct fakeio *)io;
        struct biolat_params p;

        f->timeout = timeout;
        f->calls++;
        assert_string_equal(name, "biolatency");
        assert_int_equal(len, sizeof p);
        memcpy(&p, arg, sizeof p);
        f->last = p;
        *nfds = 0;
        if (f->result < 0) {
                snprintf(err, errsz, "fake says no (%d)", f->result);
                return f->result;
        }
        fds[0] = memfd_create("devs", MFD_CLOEXEC);
        fds[1] = memfd_create("rows", MFD_CLOEXEC);
        fds[2] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        fds[3] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_int_equal(ftruncate(fds[0], (off_t)biolatency_devs_size(p.max_devices)), 0);
        assert_int_equal(ftruncate(fds[1], (off_t)biolatency_rows_size(p.max_devices, p.ncpu)), 0);
        f->rows_fd = fds[1];
        *nfds = 4;
        return 0;
}

static const struct devio_ops fake_ops = {.privileged = fake_privileged};

static char *export_text(struct collector *c)
{
        struct mset *set = mset_new();

        c->ops->export(c, set);
        return test_render_set(set);
}

static void test_adapter(void **state)
{
        struct fakeio io = {.base.ops = &fake_ops, .result = -EIO};
        /* as the option entries' defaults leave it, but 8 device slots */
        struct biolatency_options o = {.max_devices = 8,
                                       .buckets = BIOLAT_DEFAULT_BUCKETS,
                                       .ops = BIOLAT_DEFAULT_OPS,
                                       .queue_ops = BIOLAT_DEFAULT_QUEUE_OPS};
        struct collector_host h = {.sysfs_fd = -1, .io = &io.base};
        struct collector *c;
        char *text;
        usec_t t0 = now_monotonic();
        (void)state;

        assert_string_equal(biolatency_collector_def.name, "biolatency");
        assert_true(biolatency_collector_def.default_enabled);
        assert_int_equal(biolatency_collector_def.n_options, 4);
        assert_string_equal(biolatency_collector_def.options[1].name, "biolatency.buckets");
        assert_string_equal(biolatency_collector_def.options[1].def_str, BIOLAT_DEFAULT_BUCKETS);
        assert_string_equal(biolatency_collector_def.options[2].def_str, BIOLAT_DEFAULT_OPS);
        assert_string_equal(biolatency_collector_def.options[3].def_str, BIOLAT_DEFAULT_QUEUE_OPS);
        assert_string_equal(biolatency_collector_def.options[0].name, "biolatency.max-devices");
        assert_int_equal(biolatency_collector_def.options[0].def, 64);
        assert_int_equal(biolatency_collector_def.options[0].max, BIOLAT_MAX_DEVICES);
        assert_ptr_equal(biolatency_collector_def.privileged, biolatency_load);

        /* a failure a retry may fix: up 0, unhealthy, tried again only after 10 minutes */
        c = biolatency_collector_def.setup(&h, &o, NULL);
        assert_non_null(c);
        assert_int_equal(io.calls, 1);
        assert_int_equal(io.timeout, BIOLAT_LOAD_TIMEOUT); /* at start */
        assert_int_equal(io.last.max_devices, 8);
        assert_true(io.last.ncpu >= 1);
        assert_int_equal(c->ops->collect(c, t0 + BIOLAT_RETRY / 2), 0);
        assert_int_equal(io.calls, 1);
        text = export_text(c);
        assert_true(has_line(text, "diskpulse_io_latency_up 0"));
        free(text);
        assert_false(c->ops->healthy(c));
        /* fixed: the retry attaches */
        io.result = 0;
        assert_int_equal(c->ops->collect(c, t0 + BIOLAT_RETRY + USEC_PER_SEC), 0);
        assert_int_equal(io.calls, 2);
        assert_int_equal(io.timeout, BIOLAT_RETRY_TIMEOUT); /* on the main loop */
        assert_true(c->ops->healthy(c));
        text = export_text(c);
        assert_true(has_line(text, "diskpulse_io_latency_up 1"));
        assert_true(has_line(text, "diskpulse_io_latency_unslotted_total 0"));
        free(text);
        assert_int_equal(c->ops->devices(c), 0);
        /* SIGHUP while attached: the same collector, no new load */
        assert_ptr_equal(biolatency_collector_def.setup(&h, &o, c), c);
        assert_int_equal(io.calls, 2);
        collector_free(c);

        /* not built, a kernel the loader refuses, a helper without the privilege (a process
         * never gains capabilities): healthy, never retried */
        static const int permanent[] = {-EOPNOTSUPP, -EPERM, -EACCES};
        for (size_t i = 0; i < sizeof permanent / sizeof permanent[0]; i++) {
                io.result = permanent[i];
                io.calls = 0;
                c = biolatency_collector_def.setup(&h, &o, NULL);
                assert_true(c->ops->healthy(c));
                assert_int_equal(c->ops->collect(c, t0 + 10 * BIOLAT_RETRY), 0);
                assert_int_equal(io.calls, 1);
                /* SIGHUP: tried again at once */
                assert_ptr_equal(biolatency_collector_def.setup(&h, &o, c), c);
                assert_int_equal(io.calls, 2);
                assert_int_equal(io.timeout, BIOLAT_RETRY_TIMEOUT);
                text = export_text(c);
                assert_true(has_line(text, "diskpulse_io_latency_up 0"));
                free(text);
                collector_free(c);
        }

        /* no helper at all */
        h.io = NULL;
        c = biolatency_collector_def.setup(&h, &o, NULL);
        assert_true(c->ops->healthy(c));
        text = export_text(c);
        assert_true(has_line(text, "diskpulse_io_latency_up 0"));
        free(text);
        collector_free(c);
}

/* The reader on real mappings: what the program writes through its map is what we read. */
static void test_reader_open(void **state)
{
        int fds[4];
        struct biolat_reader *r = NULL;
        struct biolat_row *rw;
        uint8_t *devs, *rows;
        size_t dl = biolatency_devs_size(2), rl = biolatency_rows_size(2, 2);
        uint32_t dev = DEV(8, 0);
        struct names nm = {.dev = {DEV(8, 0)}, .name = {"sda"}};
        (void)state;

        fds[0] = memfd_create("devs", MFD_CLOEXEC);
        fds[1] = memfd_create("rows", MFD_CLOEXEC);
        fds[2] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        fds[3] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_int_equal(ftruncate(fds[0], (off_t)dl), 0);
        assert_int_equal(ftruncate(fds[1], (off_t)rl), 0);
        /* out of range: refused, the descriptors stay the caller's */
        struct biolat_config c;
        biolatency_config_default(&c, 0, 2);
        assert_int_equal(biolatency_reader_open(fds, &c, &r), -EINVAL);
        c.max_devices = BIOLAT_MAX_DEVICES + 1;
        assert_int_equal(biolatency_reader_open(fds, &c, &r), -EINVAL);
        c.max_devices = 2;
        c.ncpu = 0;
        assert_int_equal(biolatency_reader_open(fds, &c, &r), -EINVAL);
        c.ncpu = 2;
        c.nclassic = 0;
        assert_int_equal(biolatency_reader_open(fds, &c, &r), -EINVAL);
        assert_null(r);
        assert_int_equal(fcntl(fds[3], F_GETFD), FD_CLOEXEC);
        biolatency_config_default(&c, 2, 2);
        assert_int_equal(biolatency_reader_open(fds, &c, &r), 0);
        devs = mmap(NULL, dl, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        rows = mmap(NULL, rl, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
        assert_true(devs != MAP_FAILED && rows != MAP_FAILED);
        /* nothing in use: the slots' table and the overflow slot's rows alone are mapped */
        size_t page = (size_t)sysconf(_SC_PAGESIZE), idle = biolatency_reader_mapped(r);
        assert_true(idle >= 2 * page && idle <= 4 * page);
        memcpy(devs + sizeof dev, &dev, sizeof dev);               /* slot 1 (struct biolat_devs) */
        rw = (struct biolat_row *)(rows + (1 * 2 + 1) * ROW_ELEM); /* slot 1, CPU 1 */
        rw->cell[BIOLAT_OP_DISCARD][BIOLAT_KIND_DEVICE].buckets[50] = 9;
        rw = (struct biolat_row *)(rows + (2 * 2 + 0) * ROW_ELEM); /* the overflow slot, CPU 0 */
        rw->cell[BIOLAT_OP_READ][BIOLAT_KIND_DEVICE].buckets[3] = 4;
        biolatency_reader_collect(r, names_fn, &nm, NULL, 1);
        assert_int_equal(biolatency_reader_counts(r, "sda", BIOLAT_OP_DISCARD, 1, NULL)[50], 9);
        assert_int_equal(biolatency_reader_unslotted(r), 4);
        /* slot 1 in use: its rows mapped too, a few pages */
        assert_true(biolatency_reader_mapped(r) > idle);
        assert_true(biolatency_reader_mapped(r) <= idle + 4 * page);
        munmap(devs, dl);
        munmap(rows, rl);
        biolatency_reader_free(r); /* closes the four */
        assert_int_equal(fcntl(fds[3], F_GETFD), -1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_grid),
            cmocka_unit_test(test_bucket_boundaries),
            cmocka_unit_test(test_bounds),
            cmocka_unit_test(test_wrap_safe),
            cmocka_unit_test(test_two_cpus_summed),
            cmocka_unit_test(test_exposition),
            cmocka_unit_test(test_filter),
            cmocka_unit_test(test_sysfs_names),
            cmocka_unit_test(test_rename_restarts),
            cmocka_unit_test(test_quantile),
            cmocka_unit_test(test_parse_cpus),
            cmocka_unit_test(test_parse_devname),
            cmocka_unit_test(test_adapter),
            cmocka_unit_test(test_reader_open),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
