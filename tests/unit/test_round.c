/* Unit tests of the collection round (daemon/round.c): fake collectors in the registry's slots,
 * a fake clock; the page's self metrics (duration, success, build info, the other parts' own
 * metrics after them), the landing page's summary frozen with the snapshot, a collector turned
 * off; a window's sample (round_sample()), with fakes and with the real diskstats collector. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "diskstats_collector.h"
#include "fsroot.h"
#include "round.h"
#include "tmptree.h"

/* The fake clock: each reading is 2.5 ms after the one before. */
static usec_t clock_now;

static usec_t fake_now(void)
{
        clock_now += 2500;
        return clock_now;
}

struct fake {
        struct collector base;
        const char *metric;
        int collect_ret; /* what collect returns */
        int sample_ret;  /* what sample returns */
        int healthy;     /* -1: no healthy op */
        unsigned collected, exported, sampled;
        bool *freed;
};

static int fake_collect(struct collector *c, usec_t now)
{
        struct fake *f = (struct fake *)c;

        assert_int_equal(now, clock_now);
        f->collected++;
        return f->collect_ret;
}

static int fake_sample(struct collector *c, usec_t now)
{
        struct fake *f = (struct fake *)c;

        assert_int_equal(now, clock_now);
        f->sampled++;
        return f->sample_ret;
}

static void fake_export(struct collector *c, struct mset *out)
{
        struct fake *f = (struct fake *)c;

        f->exported++;
        mset_gauge(out, f->metric, "A fake.", (double)f->exported, NULL);
}

static bool fake_healthy(struct collector *c)
{
        return ((struct fake *)c)->healthy > 0;
}

static unsigned summarized;

/* A table named after the set's first family, with its value. */
static void fake_summarize(const struct mset *set, struct summary *sum)
{
        static const char *const cols[] = {"name", "value"};
        const struct mfamily *fam = &set->fams[0];
        struct summary_table *t = summary_table(sum, fam->name, cols, 2, 0, NULL, false);
        char v[32];

        summarized++;
        snprintf(v, sizeof v, "%g", fam->samples[0].d);
        summary_row(t, (const char *const[]){fam->name, v});
}

static void fake_free(struct collector *c)
{
        struct fake *f = (struct fake *)c;

        *f->freed = true;
        free(f);
}

static const struct collector_ops fake_ops = {
    .name = "fake",
    .collect = fake_collect,
    .export = fake_export,
    .healthy = NULL,
    .summarize = fake_summarize,
    .free = fake_free,
};

static const struct collector_ops fake_ops_healthy = {
    .name = "fake",
    .collect = fake_collect,
    .export = fake_export,
    .healthy = fake_healthy,
    .free = fake_free,
};

/* A fake that takes counters at a window's start too. */
static const struct collector_ops fake_ops_sample = {
    .name = "fake",
    .collect = fake_collect,
    .sample = fake_sample,
    .export = fake_export,
    .free = fake_free,
};

static struct fake *fake_new(const char *metric, int collect_ret, int healthy, bool *freed)
{
        struct fake *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        f->base.ops = healthy < 0 ? &fake_ops : &fake_ops_healthy;
        f->metric = metric;
        f->collect_ret = collect_ret;
        f->healthy = healthy;
        f->freed = freed;
        *freed = false;
        return f;
}

static unsigned parts_calls;

static void parts_export(void *ud, struct mset *out)
{
        assert_ptr_equal(ud, &parts_calls);
        parts_calls++;
        mset_gauge(out, "diskpulse_part_up", "A part's own metric.", 1.0, NULL);
}

/* The text page of a snapshot, NUL-terminated (the caller frees it). */
static char *page_of(struct snapshot *snap)
{
        const char *buf;
        size_t len;
        char *s;

        assert_int_equal(snapshot_text(snap, &buf, &len), 0);
        s = malloc(len + 1);
        assert_non_null(s);
        memcpy(s, buf, len);
        s[len] = 0;
        return s;
}

static const char self_page_two[] =
    "# HELP diskpulse_build_info A metric with a constant '1' value labeled by version and "
    "revision.\n"
    "# TYPE diskpulse_build_info gauge\n"
    "diskpulse_build_info{version=\"1.2.3\",revision=\"abc\"} 1\n"
    "# HELP diskpulse_collector_duration_seconds How long the collector's last round took.\n"
    "# TYPE diskpulse_collector_duration_seconds gauge\n"
    "diskpulse_collector_duration_seconds{collector=\"diskstats\"} 0.0025\n"
    "diskpulse_collector_duration_seconds{collector=\"canary\"} 0.0025\n"
    "# HELP diskpulse_collector_success Whether the collector's last round succeeded.\n"
    "# TYPE diskpulse_collector_success gauge\n"
    "diskpulse_collector_success{collector=\"diskstats\"} 1\n"
    "diskpulse_collector_success{collector=\"canary\"} 0\n"
    "# HELP diskpulse_part_up A part's own metric.\n"
    "# TYPE diskpulse_part_up gauge\n"
    "diskpulse_part_up 1\n";

static void test_round_self_metrics(void **state)
{
        bool freed_a, freed_c;
        struct fake *a = fake_new("fake_a", 0, -1, &freed_a);
        struct fake *c = fake_new("fake_c", 0, 0, &freed_c); /* collect fine, not healthy */
        struct round r = {.version = "1.2.3",
                          .revision = "abc",
                          .self_export = parts_export,
                          .ud = &parts_calls,
                          .now = fake_now};
        struct snapshot *snap;
        struct mset *const *sets;
        const struct summary *sum;
        char *page;

        (void)state;
        parts_calls = 0;
        summarized = 0;
        r.c[COLLECTOR_DISKSTATS] = &a->base;
        r.c[COLLECTOR_CANARY] = &c->base; /* smart's slot empty: turned off */
        snap = round_run(&r, 1700000000 * USEC_PER_SEC);

        assert_int_equal(r.count, 1);
        assert_int_equal(parts_calls, 1);
        assert_int_equal(a->collected, 1);
        assert_int_equal(a->exported, 1);
        assert_int_equal(c->collected, 1);
        assert_true(r.stats[COLLECTOR_DISKSTATS].ran);
        assert_false(r.stats[COLLECTOR_SMART].ran);
        assert_true(r.stats[COLLECTOR_CANARY].ran);
        assert_true(r.stats[COLLECTOR_DISKSTATS].success);
        assert_false(r.stats[COLLECTOR_CANARY].success); /* healthy() decides over collect's 0 */
        /* two clock readings per collector: 2.5 ms apart */
        assert_true(r.stats[COLLECTOR_DISKSTATS].duration == 0.0025);

        /* one set per collector that ran, in registry order, then the self set */
        assert_int_equal(snapshot_sets(snap, &sets), 3);
        assert_non_null(mset_find(sets[0], "fake_a"));
        assert_non_null(mset_find(sets[1], "fake_c"));
        assert_non_null(mset_find(sets[2], "diskpulse_collector_success"));

        page = page_of(snap);
        assert_non_null(strstr(page, "fake_a 1\n"));
        assert_string_equal(strstr(page, "# HELP diskpulse_build_info"), self_page_two);
        free(page);

        /* the landing page's summary: a's table only (c has no summarize) */
        assert_int_equal(summarized, 0); /* made on the first request, not in the round */
        sum = snapshot_summary(snap);
        assert_int_equal(summarized, 1);
        assert_ptr_equal(snapshot_summary(snap), sum); /* and kept */
        assert_int_equal(summarized, 1);
        assert_non_null(sum);
        /* the disk view first (no device here: two empty tables), then a's table */
        assert_int_equal(sum->n, 3);
        assert_string_equal(sum->tables[0].title, "Devices");
        assert_int_equal(sum->tables[0].nrows, 0);
        assert_string_equal(sum->tables[1].title, "Verdicts");
        assert_int_equal(sum->tables[1].nrows, 0);
        assert_string_equal(sum->tables[2].title, "fake_a");
        assert_int_equal(sum->tables[2].nrows, 1);
        assert_string_equal(sum->tables[2].cells[0], "fake_a");
        assert_string_equal(sum->tables[2].cells[1], "1");
        snapshot_unref(snap);

        /* a failed collect: success 0; canary turned off: gone from the page */
        a->collect_ret = -EIO;
        round_drop(&r, COLLECTOR_CANARY);
        assert_true(freed_c);
        assert_null(r.c[COLLECTOR_CANARY]);
        snap = round_run(&r, 1700000001 * USEC_PER_SEC);
        assert_int_equal(r.count, 2);
        assert_false(r.stats[COLLECTOR_DISKSTATS].success);
        page = page_of(snap);
        assert_non_null(strstr(page, "fake_a 2\n"));
        assert_non_null(strstr(page, "diskpulse_collector_success{collector=\"diskstats\"} 0\n"));
        assert_null(strstr(page, "collector=\"canary\""));
        assert_null(strstr(page, "fake_c"));
        free(page);
        assert_string_equal(snapshot_summary(snap)->tables[2].cells[1], "2");
        snapshot_unref(snap);

        round_free(&r);
        assert_true(freed_a);
        assert_null(r.c[COLLECTOR_DISKSTATS]);
}

/* No collector at all: the page is the self set alone, with empty collector families. */
static void test_round_empty(void **state)
{
        struct round r = {.version = "v", .revision = "r", .now = fake_now};
        struct snapshot *snap;
        struct mset *const *sets;
        char *page;

        (void)state;
        snap = round_run(&r, 0);
        assert_int_equal(snapshot_sets(snap, &sets), 1);
        page = page_of(snap);
        assert_non_null(strstr(page, "diskpulse_build_info{version=\"v\",revision=\"r\"} 1\n"));
        assert_null(strstr(page, "collector=\""));
        free(page);
        /* the disk view alone, empty */
        assert_int_equal(snapshot_summary(snap)->n, 2);
        assert_int_equal(snapshot_summary(snap)->tables[0].nrows, 0);
        snapshot_unref(snap);
}

/* The summary's rows past max_rows are counted, not kept. */
static void test_summary_more(void **state)
{
        struct summary *s = summary_new();
        struct summary_table *t =
            summary_table(s, "T", (const char *const[]){"a"}, 1, 2, "things", true);

        (void)state;
        for (int i = 0; i < 5; i++)
                summary_row(t, (const char *const[]){"x"});
        assert_int_equal(t->nrows, 2);
        assert_int_equal(t->more, 3);
        assert_string_equal(t->more_what, "things");
        assert_true(t->show_empty);
        summary_free(s);
}

/* The real diskstats collector in r's slot, on the fixture's sysfs and udev and the procfs at
 * proc; ds_rig_free() frees it with the roots. */
struct ds_rig {
        int procfs, sysfs, udev;
        struct devsrc *src;
};

static void ds_rig_new(struct ds_rig *g, struct round *r, const char *proc, usec_t interval)
{
        struct diskstats_settings ds = {.procfs = "/proc"};

        g->procfs = root_open(proc);
        g->sysfs = root_open(FIXTURES "/linux-6.1/sys");
        g->udev = root_open(FIXTURES "/linux-6.1/udev");
        assert_true(g->procfs >= 0 && g->sysfs >= 0 && g->udev >= 0);
        g->src = devsrc_files_new(g->sysfs, g->udev);
        ds.cfg = (struct diskstats_config){.procfs_fd = g->procfs,
                                           .devsrc = g->src,
                                           .interval = interval,
                                           .window = 60 * USEC_PER_SEC};
        r->c[COLLECTOR_DISKSTATS] = diskstats_collector_new(&ds);
        assert_string_equal(collector_name(r->c[COLLECTOR_DISKSTATS]), "diskstats");
}

static void ds_rig_free(struct ds_rig *g, struct round *r)
{
        round_free(r);
        devsrc_free(g->src);
        close(g->procfs);
        close(g->sysfs);
        close(g->udev);
}

/* The real diskstats collector through the interface, on a fixture tree: its rows on the
 * landing page's summary, its byte counters scaled from sectors on the page. */
static void test_round_diskstats(void **state)
{
        struct ds_rig g;
        struct round r = {.version = "v", .revision = "r"};
        const struct summary_table *t;
        const struct summary *sum;
        struct snapshot *snap;
        const char *sda = NULL;
        char *page;

        (void)state;
        ds_rig_new(&g, &r, FIXTURES "/linux-6.1/proc", USEC_PER_SEC);
        snap = round_run(&r, 0);
        assert_true(r.stats[COLLECTOR_DISKSTATS].ran && r.stats[COLLECTOR_DISKSTATS].success);
        assert_int_equal(diskstats_collector_devices(r.c[COLLECTOR_DISKSTATS]),
                         snapshot_summary(snap)->tables[0].nrows);

        page = page_of(snap);
        /* 22906386 sectors read */
        assert_non_null(
            strstr(page, "diskpulse_disk_read_bytes_total{device=\"sda\"} 11728069632\n"));
        assert_non_null(strstr(page, "diskpulse_collector_success{collector=\"diskstats\"} 1\n"));
        free(page);

        sum = snapshot_summary(snap);
        assert_int_equal(sum->n, 3);
        assert_string_equal(sum->tables[1].title, "Verdicts");
        assert_int_equal(sum->tables[1].nrows, sum->tables[0].nrows);
        /* which disk to pull: its model and serial */
        t = &sum->tables[2];
        assert_string_equal(t->title, "Identity");
        assert_int_equal(t->nrows, sum->tables[0].nrows);
        for (size_t i = 0; i < t->nrows; i++)
                if (strcmp(t->cells[i * t->ncols], "sda") == 0)
                        sda = t->cells[i * t->ncols + 1];
        assert_non_null(sda);
        assert_string_equal(sda, "ST4000NM0035-1V4107");
        sda = NULL;
        t = &sum->tables[0];
        assert_string_equal(t->title, "Devices");
        assert_int_equal(t->ncols, 9);
        assert_string_equal(t->cols[4], "w_await_ms");
        assert_true(t->show_empty);
        assert_int_equal(t->more, 0);
        for (size_t i = 0; i < t->nrows; i++)
                if (strcmp(t->cells[i * t->ncols], "sda") == 0)
                        sda = t->cells[i * t->ncols + 4];
        assert_non_null(sda);
        /* the first round reads since boot: w_await = write ms / writes of the fixture's line */
        {
                char want[32];
                double ms = 0, n = 0;
                FILE *f = fopen(FIXTURES "/linux-6.1/proc/diskstats", "r");
                char line[512], name[64];
                double v[11];
                assert_non_null(f);
                while (fgets(line, sizeof line, f))
                        if (sscanf(line, "%*u %*u %63s %lf %lf %lf %lf %lf %lf %lf %lf", name,
                                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 9 &&
                            strcmp(name, "sda") == 0) {
                                n = v[4];
                                ms = v[7];
                        }
                fclose(f);
                assert_true(n > 0);
                snprintf(want, sizeof want, "%.2f", ms / n);
                assert_string_equal(sda, want);
        }
        /* the p50/p99 columns: no biolatency collector here */
        assert_string_equal(t->cells[7], "-");
        snapshot_unref(snap);
        ds_rig_free(&g, &r);
}

/* A window's round: each collector with a sample hook once, the others not at all; nothing
 * collected or exported, no round counted; the first error returned. */
static void test_round_sample(void **state)
{
        bool freed_a, freed_b, freed_c;
        struct fake *a = fake_new("fake_a", 0, -1, &freed_a);
        struct fake *b = fake_new("fake_b", 0, -1, &freed_b);
        struct fake *c = fake_new("fake_c", 0, -1, &freed_c);
        struct round r = {.version = "v", .revision = "r", .now = fake_now};

        (void)state;
        assert_int_equal(round_sample(&r), 0); /* nobody there */
        a->base.ops = c->base.ops = &fake_ops_sample;
        a->sample_ret = -EIO;
        c->sample_ret = -ENOENT;
        r.c[0] = &a->base;
        r.c[1] = &b->base; /* no sample hook */
        r.c[COLLECTOR_MAX - 1] = &c->base;
        assert_int_equal(round_sample(&r), -EIO);
        assert_int_equal(a->sampled, 1);
        assert_int_equal(b->sampled, 0);
        assert_int_equal(c->sampled, 1);
        a->sample_ret = 0;
        assert_int_equal(round_sample(&r), -ENOENT);
        c->sample_ret = 0;
        assert_int_equal(round_sample(&r), 0);
        assert_int_equal(a->sampled, 3);
        assert_int_equal(c->sampled, 3);
        assert_int_equal(a->collected + b->collected + c->collected, 0);
        assert_int_equal(a->exported + b->exported + c->exported, 0);
        assert_int_equal(r.count, 0);
        for (size_t i = 0; i < registry_count(); i++)
                assert_false(r.stats[i].ran);
        round_free(&r);
        assert_true(freed_a && freed_b && freed_c);
}

/* The value of the sample of name{device="sda"} on page, or -1. */
static double sda_value(const char *page, const char *name)
{
        char key[160];
        const char *p;

        snprintf(key, sizeof key, "%s{device=\"sda\"} ", name);
        p = strstr(page, key);
        return p ? strtod(p + strlen(key), NULL) : -1;
}

/* The real diskstats collector: a window's sample is a read of /proc/diskstats that the next
 * round's gauges start from. sda's 5 writes took 500 ms since boot; between the sample and the
 * round it wrote 100 more that took 1000 ms: w_await over that window is 10 ms, where a round
 * with no window sample before it would average since boot (1500 ms / 105, 14.3 ms). */
static void test_round_sample_diskstats(void **state)
{
        struct tmpdir proc;
        struct ds_rig g;
        struct round r = {.version = "v", .revision = "r"};
        struct snapshot *snap;
        char *page;

        (void)state;
        assert_int_equal(test_tmpdir_new(&proc, "diskpulse-test-round"), 0);
        assert_int_equal(test_write_file(proc.path, "uptime", "1000.00 2000.00\n"), 0);
        assert_int_equal(
            test_write_file(proc.path, "diskstats",
                            "   8       0 sda 10 0 80 10 5 0 40 500 0 60 510 0 0 0 0 0 0\n"),
            0);
        ds_rig_new(&g, &r, proc.path, 10 * USEC_PER_MSEC);
        assert_non_null(r.c[COLLECTOR_DISKSTATS]->ops->sample);
        assert_int_equal(round_sample(&r), 0);
        assert_int_equal(r.count, 0);
        assert_false(r.stats[COLLECTOR_DISKSTATS].ran);
        usleep(20 * 1000); /* more than the interval: a sample of its own */

        assert_int_equal(
            test_write_file(proc.path, "diskstats",
                            "   8       0 sda 10 0 80 10 105 0 840 1500 0 160 1510 0 0 0 0 0 0\n"),
            0);
        snap = round_run(&r, 0);
        page = page_of(snap);
        assert_true(sda_value(page, "diskpulse_disk_writes_completed_total") == 105);
        assert_true(sda_value(page, "diskpulse_disk_write_await_seconds") > 0.0099 &&
                    sda_value(page, "diskpulse_disk_write_await_seconds") < 0.0101);
        free(page);
        snapshot_unref(snap);
        ds_rig_free(&g, &r);
        assert_int_equal(test_tmpdir_free(&proc), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_self_metrics),
            cmocka_unit_test(test_round_empty),
            cmocka_unit_test(test_summary_more),
            cmocka_unit_test(test_round_diskstats),
            cmocka_unit_test(test_round_sample),
            cmocka_unit_test(test_round_sample_diskstats),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
