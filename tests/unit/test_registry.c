/* Unit tests of the daemon's collector-blind calls: the registry (daemon/registry.c: its count
 * and definitions, the collector whose one-shot command the options ask for, the sampler's
 * window from the collectors' options) and the round's window sample (round_sample(): every
 * collector with a sample hook takes its counters, nothing is exported), with fakes and with
 * the real diskstats collector on a fixture tree. */
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

#include "canary_collector.h"
#include "diskstats_collector.h"
#include "fsroot.h"
#include "round.h"

/* The registry's calls say what its table holds, in its order. */
static void test_registry_table(void **state)
{
        (void)state;
        assert_int_equal(registry_count(), COLLECTOR_MAX);
        for (size_t i = 0; i < registry_count(); i++)
                assert_ptr_equal(registry_def(i), collector_defs[i]);
        assert_ptr_equal(registry_def(COLLECTOR_DISKSTATS), &diskstats_collector_def);
        assert_ptr_equal(registry_def(COLLECTOR_CANARY), &canary_collector_def);
}

/* The canary's command is asked for by any of its four flags (import-path alone too, so that it
 * can refuse it); nothing else asks for a command. */
static void test_registry_commanded(void **state)
{
        struct canary_options co = {0};
        void *opts[COLLECTOR_MAX] = {0};
        char path[] = "/data";

        (void)state;
        assert_int_equal(registry_commanded(opts), -1); /* no options at all */
        opts[COLLECTOR_CANARY] = &co;
        assert_int_equal(registry_commanded(opts), -1);
        co.reset_reference = path;
        assert_int_equal(registry_commanded(opts), COLLECTOR_CANARY);
        co.reset_reference = NULL;
        co.export_disk = path;
        assert_int_equal(registry_commanded(opts), COLLECTOR_CANARY);
        co.export_disk = NULL;
        co.import_file = path;
        assert_int_equal(registry_commanded(opts), COLLECTOR_CANARY);
        co.import_file = NULL;
        co.import_path = path;
        assert_int_equal(registry_commanded(opts), COLLECTOR_CANARY);
        assert_true(canary_commanded(&co));
        co.import_path = NULL;
        assert_false(canary_commanded(&co));
}

/* The sampler's window is diskstats' --diskstats.window, read from its options blob; without
 * the blob no collector has one. */
static void test_registry_window(void **state)
{
        struct diskstats_options dso = {.window = 42 * USEC_PER_SEC};
        void *opts[COLLECTOR_MAX] = {0};
        usec_t w = 1;

        (void)state;
        assert_false(registry_window(opts, &w));
        assert_int_equal(w, 0);
        opts[COLLECTOR_DISKSTATS] = &dso;
        assert_true(registry_window(opts, &w));
        assert_int_equal(w, 42 * USEC_PER_SEC);
        dso.window = 10 * USEC_PER_SEC;
        assert_true(registry_window(opts, &w));
        assert_int_equal(w, 10 * USEC_PER_SEC);
}

struct fake {
        struct collector base;
        int sample_ret;
        unsigned sampled, collected, exported;
};

static int fake_sample(struct collector *c, usec_t now)
{
        struct fake *f = (struct fake *)c;

        assert_true(now > 0);
        f->sampled++;
        return f->sample_ret;
}

static int fake_collect(struct collector *c, usec_t now)
{
        (void)now;
        ((struct fake *)c)->collected++;
        return 0;
}

static void fake_export(struct collector *c, struct mset *out)
{
        (void)out;
        ((struct fake *)c)->exported++;
}

static void fake_free(struct collector *c)
{
        (void)c; /* on the stack */
}

static const struct collector_ops with_sample = {
    .name = "fake",
    .collect = fake_collect,
    .sample = fake_sample,
    .export = fake_export,
    .free = fake_free,
};

static const struct collector_ops without_sample = {
    .name = "fake",
    .collect = fake_collect,
    .export = fake_export,
    .free = fake_free,
};

/* A window's round: each collector with a sample hook once, the others not at all; nothing
 * collected or exported, no round counted; the first error returned. */
static void test_round_sample_fakes(void **state)
{
        struct fake a = {.base.ops = &with_sample, .sample_ret = -EIO};
        struct fake b = {.base.ops = &without_sample};
        struct fake c = {.base.ops = &with_sample, .sample_ret = -ENOENT};
        struct round r = {0};

        (void)state;
        assert_int_equal(round_sample(&r), 0); /* nobody there */
        r.c[0] = &a.base;
        r.c[1] = &b.base;
        r.c[COLLECTOR_MAX - 1] = &c.base;
        assert_int_equal(round_sample(&r), -EIO);
        assert_int_equal(a.sampled, 1);
        assert_int_equal(b.sampled, 0);
        assert_int_equal(c.sampled, 1);
        a.sample_ret = 0;
        assert_int_equal(round_sample(&r), -ENOENT);
        c.sample_ret = 0;
        assert_int_equal(round_sample(&r), 0);
        assert_int_equal(a.sampled, 3);
        assert_int_equal(c.sampled, 3);
        assert_int_equal(a.collected + b.collected + c.collected, 0);
        assert_int_equal(a.exported + b.exported + c.exported, 0);
        assert_int_equal(r.count, 0);
        for (size_t i = 0; i < registry_count(); i++)
                assert_false(r.stats[i].ran);
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

/* The real diskstats collector: a window's sample is a read of /proc/diskstats that the next
 * round's gauges start from. sda's 5 writes took 500 ms since boot; between the sample and the
 * round it wrote 100 more that took 1000 ms: w_await over that window is 10 ms, where a round
 * with no window sample before it would average since boot (1500 ms / 105, 14.3 ms). */
static void test_round_sample_diskstats(void **state)
{
        char dir[] = "/tmp/diskpulse-test-registry-XXXXXX";
        char path[256], line[512], *page;
        int sysfs = root_open(FIXTURES "/linux-6.1/sys");
        int udev = root_open(FIXTURES "/linux-6.1/udev");
        struct diskstats_settings ds = {.procfs = "/proc"};
        struct round r = {.version = "v", .revision = "r"};
        struct devsrc *src;
        struct snapshot *snap;
        FILE *in, *out;
        int procfs;

        (void)state;
        assert_non_null(mkdtemp(dir));
        assert_true(sysfs >= 0 && udev >= 0);
        src = devsrc_files_new(sysfs, udev);
        snprintf(path, sizeof path, "%s/uptime", dir);
        out = fopen(path, "w");
        assert_non_null(out);
        fputs("1000.00 2000.00\n", out);
        fclose(out);
        /* sda: 5 writes taking 500 ms since boot */
        snprintf(path, sizeof path, "%s/diskstats", dir);
        out = fopen(path, "w");
        assert_non_null(out);
        fputs("   8       0 sda 10 0 80 10 5 0 40 500 0 60 510 0 0 0 0 0 0\n", out);
        fclose(out);
        procfs = root_open(dir);
        assert_true(procfs >= 0);
        ds.cfg = (struct diskstats_config){.procfs_fd = procfs,
                                           .devsrc = src,
                                           .interval = 10 * USEC_PER_MSEC,
                                           .window = 60 * USEC_PER_SEC};
        r.c[COLLECTOR_DISKSTATS] = diskstats_collector_new(&ds);
        assert_non_null(r.c[COLLECTOR_DISKSTATS]->ops->sample);
        assert_int_equal(round_sample(&r), 0);
        assert_int_equal(r.count, 0);
        assert_false(r.stats[COLLECTOR_DISKSTATS].ran);
        usleep(20 * 1000);

        in = fopen(path, "w");
        assert_non_null(in);
        snprintf(line, sizeof line,
                 "   8       0 sda 10 0 80 10 105 0 840 1500 0 160 1510 0 0 0 0 0 0\n");
        fputs(line, in);
        fclose(in);
        snap = round_run(&r, 0);
        page = page_of(snap);
        assert_true(sda_value(page, "diskpulse_disk_writes_completed_total") == 105);
        assert_true(sda_value(page, "diskpulse_disk_write_await_seconds") > 0.0099 &&
                    sda_value(page, "diskpulse_disk_write_await_seconds") < 0.0101);
        free(page);
        snapshot_unref(snap);

        round_free(&r);
        devsrc_free(src);
        close(procfs);
        close(sysfs);
        close(udev);
        snprintf(path, sizeof path, "%s/diskstats", dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/uptime", dir);
        unlink(path);
        rmdir(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_registry_table),
            cmocka_unit_test(test_registry_commanded),
            cmocka_unit_test(test_registry_window),
            cmocka_unit_test(test_round_sample_fakes),
            cmocka_unit_test(test_round_sample_diskstats),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
