/* The canary collector with fake ops and a fake clock: statistics, hangs, errors, flush ratio,
 * baseline persistence, reconfiguration and prompt shutdown with a blocked probe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "canary.h"
#include "canary_collector.h"
#include "fake_clock.h"
#include "canary_stats.h"
#include "expo.h"
#include "metrics.h"
#include "render.h"
#include "statefile.h"

struct fake {
        struct fake_clock clk; /* the canary_ops' ud */
        const double *lat_ms;  /* per probe (cycled), or 1 ms */
        size_t n_lat;
        int open_err[8]; /* queued results of open() */
        size_t n_open_err, open_err_i;
        int probe_err_at; /* probe number (1-based) that fails with probe_err */
        int probe_err;
        int hang_at;        /* probe number that blocks until released */
        double hang_lat_ms; /* the latency it returns (0: as the others) */
        bool released, hanging;
        bool advance_clock;     /* a probe moves the clock by its latency */
        usec_t start_at[64];    /* the clock when probe i + 1 started */
        unsigned sleeps_at[64]; /* sleeps done when probe i + 1 started */
        unsigned opens, open_ok, closes, probes_started, probes_done;
        uint64_t flush;
        bool flush_advance, flush_nodata;
        const char *device;   /* NULL: resolve fails with -ENODEV */
        const char *below[3]; /* the disks below device (a dm or md device); none: device */
        const char *id;       /* disk id; NULL: unknown */
        int resolve_err[8];   /* queued results of resolve() (0: as device says) */
        size_t n_resolve_err, resolve_err_i;
        int dir_err[8]; /* queued results of check_dir() (then 0) */
        size_t n_dir_err, dir_err_i;
        unsigned dir_checks;
};

static struct fake fk;

static void fake_reset(void)
{
        fk = (struct fake){.device = "sda", .flush_advance = true};
        fake_clock_init(&fk.clk, 1000000);
}

static int f_open(void *ud, const char *dir, enum canary_mode mode, size_t size,
                  struct canary_file *ret)
{
        int r = 0;

        (void)ud, (void)dir, (void)size;
        pthread_mutex_lock(&fk.clk.lock);
        fk.opens++;
        if (fk.open_err_i < fk.n_open_err)
                r = fk.open_err[fk.open_err_i++];
        if (r == 0) {
                fk.open_ok++;
                *ret = (struct canary_file){.fd = 100, .mode = mode};
        }
        pthread_mutex_unlock(&fk.clk.lock);
        return r;
}

static int f_probe(void *ud, struct canary_file *f, usec_t *ret)
{
        int r = 0;
        unsigned n;

        (void)ud;
        assert_int_equal(f->fd, 100);
        pthread_mutex_lock(&fk.clk.lock);
        n = ++fk.probes_started;
        if (n <= 64) {
                fk.start_at[n - 1] = fk.clk.now;
                fk.sleeps_at[n - 1] = fk.clk.sleeps;
        }
        if ((int)n == fk.hang_at) {
                fk.hanging = true;
                pthread_cond_broadcast(&fk.clk.cond);
                while (!fk.released)
                        pthread_cond_wait(&fk.clk.cond, &fk.clk.lock);
                fk.hanging = false;
        }
        if ((int)n == fk.probe_err_at) {
                r = fk.probe_err;
        } else {
                double ms = fk.n_lat ? fk.lat_ms[(n - 1) % fk.n_lat] : 1.0;
                if ((int)n == fk.hang_at && fk.hang_lat_ms > 0)
                        ms = fk.hang_lat_ms;
                *ret = (usec_t)(ms * 1000);
                if (fk.advance_clock)
                        fk.clk.now += *ret;
        }
        if (fk.flush_advance)
                fk.flush++;
        fk.probes_done++;
        pthread_cond_broadcast(&fk.clk.cond);
        pthread_mutex_unlock(&fk.clk.lock);
        return r;
}

static void f_close(void *ud, struct canary_file *f)
{
        (void)ud;
        pthread_mutex_lock(&fk.clk.lock);
        fk.closes++;
        f->fd = -1;
        pthread_mutex_unlock(&fk.clk.lock);
}

static int f_flushes(void *ud, int sysfs_fd, const struct canary_backing *b, uint64_t *ret)
{
        (void)ud, (void)sysfs_fd, (void)b;
        pthread_mutex_lock(&fk.clk.lock);
        bool nodata = fk.flush_nodata;
        *ret = fk.flush;
        pthread_mutex_unlock(&fk.clk.lock);
        return nodata ? -ENODATA : 0;
}

static int f_resolve(void *ud, int sysfs_fd, const char *dir, struct canary_backing *ret)
{
        int r = 0;

        (void)ud, (void)sysfs_fd, (void)dir;
        pthread_mutex_lock(&fk.clk.lock);
        if (fk.resolve_err_i < fk.n_resolve_err)
                r = fk.resolve_err[fk.resolve_err_i++];
        pthread_mutex_unlock(&fk.clk.lock);
        if (r < 0)
                return r;
        if (!fk.device)
                return -ENODEV;
        memset(ret, 0, sizeof(*ret));
        strcpy(ret->device, fk.device);
        ret->n_disks = 1;
        strcpy(ret->disks[0].name, fk.device);
        for (size_t i = 0; i < 3 && fk.below[i]; i++) {
                ret->n_disks = i + 1;
                strcpy(ret->disks[i].name, fk.below[i]);
        }
        return 0;
}

static int f_disk_id(void *ud, const char *device, char *buf, size_t size)
{
        (void)ud;
        assert_true(strcmp(device, "sda") == 0 || strcmp(device, "md0") == 0);
        if (!fk.id)
                return -ENOENT;
        snprintf(buf, size, "%s", fk.id);
        return 0;
}

static int f_check_dir(void *ud, const char *dir, const struct canary_file *f)
{
        int r = 0;

        (void)ud, (void)dir;
        assert_int_equal(f->fd, 100);
        pthread_mutex_lock(&fk.clk.lock);
        fk.dir_checks++;
        if (fk.dir_err_i < fk.n_dir_err)
                r = fk.dir_err[fk.dir_err_i++];
        pthread_mutex_unlock(&fk.clk.lock);
        return r;
}

static const struct canary_ops fake_ops = {
    .open = f_open,
    .probe = f_probe,
    .close = f_close,
    .now = fake_clock_now,
    .sleep = fake_clock_sleep,
    .flushes = f_flushes,
    .resolve = f_resolve,
    .check_dir = f_check_dir,
    .ud = &fk.clk,
};

static const struct canary_target_config one_target[] = {{"/data", CANARY_MODE_FDATASYNC}};

static struct canary_config config(const struct canary_target_config *t, size_t n, int state_fd)
{
        return (struct canary_config){.targets = t,
                                      .n_targets = n,
                                      .interval = 10 * USEC_PER_SEC,
                                      .size = 4096,
                                      .timeout = 30 * USEC_PER_SEC,
                                      .state_dir_fd = state_fd,
                                      .sysfs_fd = 0, /* any fd: the fakes ignore it */
                                      .ops = &fake_ops,
                                      .disk_id = f_disk_id};
}

/* Waits (really, a few ms at most in practice) until pred holds, under fk.clk.lock. */
#define WAIT_FOR(pred)                                                                             \
        do {                                                                                       \
                struct timespec _ts;                                                               \
                clock_gettime(CLOCK_REALTIME, &_ts);                                               \
                _ts.tv_sec += 10;                                                                  \
                pthread_mutex_lock(&fk.clk.lock);                                                  \
                while (!(pred))                                                                    \
                        if (pthread_cond_timedwait(&fk.clk.cond, &fk.clk.lock, &_ts) == ETIMEDOUT) \
                                break;                                                             \
                bool _ok = (pred);                                                                 \
                pthread_mutex_unlock(&fk.clk.lock);                                                \
                assert_true(_ok);                                                                  \
        } while (0)

static void set_limit(unsigned limit)
{
        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.limit = limit;
        pthread_cond_broadcast(&fk.clk.cond);
        pthread_mutex_unlock(&fk.clk.lock);
}

static char *render(struct canary *c)
{
        struct mset *set = mset_new();

        canary_export(c, set);
        return test_render_set(set);
}

static void assert_line(const char *text, const char *line)
{
        char want[512];
        snprintf(want, sizeof want, "\n%s\n", line);
        if (!strstr(text, want)) {
                fprintf(stderr, "missing line: %s\nin:\n%s\n", line, text);
                fail();
        }
}

/* The value of the sample series (name and labels) in text; fails when absent. */
static double sample(const char *text, const char *series)
{
        char want[512];
        const char *p;

        snprintf(want, sizeof want, "\n%s ", series);
        p = strstr(text, want);
        if (!p) {
                fprintf(stderr, "missing sample: %s\nin:\n%s\n", series, text);
                fail();
        }
        return strtod(p + strlen(want), NULL);
}

static void assert_no(const char *text, const char *s)
{
        if (strstr(text, s)) {
                fprintf(stderr, "unexpected: %s\nin:\n%s\n", s, text);
                fail();
        }
}

static usec_t mono(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / 1000;
}

/* Ends a test: releases every fake, frees and waits until no prober thread is left. */
static void finish(struct canary *c)
{
        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.stopping = true;
        fk.released = true;
        pthread_cond_broadcast(&fk.clk.cond);
        pthread_mutex_unlock(&fk.clk.lock);
        canary_free(c);
        for (int i = 0; i < 5000 && canary_threads_running() > 0; i++)
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        assert_int_equal(canary_threads_running(), 0);
}

#define L  "path=\"/data\",device=\"sda\",mode=\"fdatasync\""
#define LI L ",regime=\"idle\""
#define LB L ",regime=\"busy\""

static void test_probes_feed_stats(void **state)
{
        static const double lat[] = {1, 2, 3, 4};
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;

        (void)state;
        fake_reset();
        fk.lat_ms = lat;
        fk.n_lat = 4;
        fk.clk.limit = 4;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 4);
        assert_int_equal(fk.probes_started, 4);
        t = render(c);
        assert_line(t, "diskpulse_sync_latency_seconds_bucket{" LI ",le=\"0.001\"} 1");
        assert_line(t, "diskpulse_sync_latency_seconds_bucket{" LI ",le=\"0.0025\"} 2");
        assert_line(t, "diskpulse_sync_latency_seconds_bucket{" LI ",le=\"0.005\"} 4");
        assert_line(t, "diskpulse_sync_latency_seconds_bucket{" LI ",le=\"+Inf\"} 4");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LI "} 4");
        assert_line(t, "diskpulse_sync_latency_seconds_sum{" LI "} 0.01");
        assert_line(t, "diskpulse_sync_last_seconds{" LI "} 0.004");
        assert_line(t, "diskpulse_sync_recent_seconds{" LI ",quantile=\"0.5\"} 0.0025");
        assert_line(t, "diskpulse_sync_recent_seconds_count{" LI "} 4");
        assert_line(t, "diskpulse_sync_inflight_seconds{" L "} 0");
        assert_line(t, "diskpulse_sync_stuck{" L "} 0");
        assert_line(t, "diskpulse_sync_flush_ratio{" L "} 1");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 4");
        assert_line(t, "diskpulse_sync_target_up{" L "} 1");
        assert_line(t, "diskpulse_sync_stuck_probes_total{" L "} 0");
        assert_no(t, "diskpulse_sync_errors_total{");
        assert_no(t, "diskpulse_sync_baseline_seconds{");
        /* bursts off: no busy regime, no ratio */
        assert_no(t, "regime=\"busy\"");
        assert_no(t, "diskpulse_sync_busy_idle_ratio{");
        free(t);
        assert_int_equal(fk.opens, 1);
        finish(c);
        assert_int_equal(fk.closes, 1);
}

/* --canary.baseline-period scales the recent window behind the ratios: at 1 s it is 83 ms, so
 * of 20 probes 10 ms apart the window holds its minimum of the newest 10 (all 20 at 1 h). */
static void test_recent_window_follows_period(void **state)
{
        (void)state;
        for (int k = 0; k < 2; k++) {
                struct canary_config cfg = config(one_target, 1, -1);
                struct canary *c;
                char *t;

                fake_reset();
                fk.clk.limit = 20;
                cfg.interval = 10 * USEC_PER_MSEC;
                cfg.baseline_period = k ? USEC_PER_SEC : 0;
                c = canary_new(&cfg);
                assert_int_equal(canary_start(c), 0);
                WAIT_FOR(fk.clk.sleeps >= 20);
                t = render(c);
                assert_line(t, k ? "diskpulse_sync_recent_samples{" LI "} 10"
                                 : "diskpulse_sync_recent_samples{" LI "} 20");
                free(t);
                finish(c);
        }
}

/* The directory is checked before each probe on an open file: gone counts its errno and closes
 * the file (no probe on it), replaced reopens without an error. */
static void test_directory_gone_or_replaced(void **state)
{
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;

        (void)state;
        fake_reset();
        /* probe 1 on open 1; check before probe 2: gone (ENOENT), open 2 + probe 2; check before
         * probe 3: replaced (ESTALE), open 3 + probe 3; then probe 4 on the same file */
        fk.dir_err[0] = -ENOENT;
        fk.dir_err[1] = -ESTALE;
        fk.n_dir_err = 2;
        fk.clk.limit = 5;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 5);
        assert_int_equal(fk.opens, 3);
        assert_int_equal(fk.closes, 2);
        assert_int_equal(fk.probes_started, 4);
        t = render(c);
        assert_line(t, "diskpulse_sync_errors_total{" L ",errno=\"ENOENT\"} 1");
        assert_no(t, "errno=\"ESTALE\"");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 4");
        assert_line(t, "diskpulse_sync_target_up{" L "} 1");
        free(t);
        finish(c);
}

/* The verdict of the target's disk in the status summary of the set t was rendered from. */
static void verdict_of(struct canary *c, const char *disk, char *buf, size_t size)
{
        struct mset *set = mset_new();
        struct summary *sum = summary_new();
        struct summary_disk *d;

        canary_export(c, set);
        canary_summarize(set, sum);
        d = summary_disk(sum, disk, false);
        if (d)
                summary_verdict(d, buf, size);
        else
                snprintf(buf, size, "(no row)");
        summary_free(sum);
        mset_free(set);
}

/* The directory moved away and back (one incident): its errors stay one series labelled with the
 * disk the path was on, remembered while the path cannot be resolved, and the disk's verdict
 * says the target is down; a path that resolves to no single device (a tmpfs mounted in its
 * place) has no device label. */
static void test_gone_keeps_device(void **state)
{
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t, verdict[256];

        (void)state;
        fake_reset();
        /* cycle 1: open + probe 1; 2: the check finds the directory gone (ENOENT); 3: resolve
         * and open fail (ENOENT); 4: back: resolved and opened, probe 2 */
        fk.dir_err[0] = -ENOENT;
        fk.n_dir_err = 1;
        fk.resolve_err[0] = 0;
        fk.resolve_err[1] = -ENOENT;
        fk.n_resolve_err = 2;
        fk.open_err[0] = 0;
        fk.open_err[1] = -ENOENT;
        fk.n_open_err = 2;
        fk.clk.limit = 3;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 3);
        t = render(c);
        assert_line(t, "diskpulse_sync_errors_total{" L ",errno=\"ENOENT\"} 2");
        assert_line(t, "diskpulse_sync_target_up{" L "} 0");
        assert_no(t, "device=\"\"");
        free(t);
        verdict_of(c, "sda", verdict, sizeof verdict);
        assert_string_equal(verdict, "canary target down");
        set_limit(4);
        WAIT_FOR(fk.clk.sleeps >= 4);
        t = render(c);
        assert_line(t, "diskpulse_sync_errors_total{" L ",errno=\"ENOENT\"} 2");
        assert_line(t, "diskpulse_sync_target_up{" L "} 1");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 2");
        assert_no(t, "device=\"\"");
        free(t);
        verdict_of(c, "sda", verdict, sizeof verdict);
        assert_string_equal(verdict, "ok");
        finish(c);

        /* a tmpfs in its place: no single device, no device label */
        fake_reset();
        fk.dir_err[0] = -ESTALE;
        fk.n_dir_err = 1;
        fk.clk.limit = 1;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 1);
        pthread_mutex_lock(&fk.clk.lock);
        fk.device = NULL;
        pthread_mutex_unlock(&fk.clk.lock);
        set_limit(2);
        WAIT_FOR(fk.clk.sleeps >= 2);
        t = render(c);
        assert_line(t, "diskpulse_sync_target_up{path=\"/data\",device=\"\",mode=\"fdatasync\"} 1");
        free(t);
        finish(c);
}

static void test_hang_is_stuck_not_blocking(void **state)
{
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;
        usec_t t0;

        (void)state;
        fake_reset();
        fk.hang_at = 2;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.hanging);

        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.now += 10 * USEC_PER_SEC;
        pthread_mutex_unlock(&fk.clk.lock);
        t = render(c);
        assert_line(t, "diskpulse_sync_inflight_seconds{" L "} 10");
        assert_line(t, "diskpulse_sync_stuck{" L "} 0");
        free(t);

        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.now += 21 * USEC_PER_SEC;
        pthread_mutex_unlock(&fk.clk.lock);
        t0 = mono();
        t = render(c);
        assert_true(mono() - t0 < 50 * USEC_PER_MSEC); /* export never waits for the probe */
        assert_line(t, "diskpulse_sync_inflight_seconds{" L "} 31");
        assert_line(t, "diskpulse_sync_stuck{" L "} 1");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 1");
        free(t);
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
        assert_int_equal(fk.probes_started, 2); /* no second probe piled on */

        set_limit(2);
        pthread_mutex_lock(&fk.clk.lock);
        fk.released = true;
        pthread_cond_broadcast(&fk.clk.cond);
        pthread_mutex_unlock(&fk.clk.lock);
        WAIT_FOR(fk.clk.sleeps >= 2);
        t = render(c);
        assert_line(t, "diskpulse_sync_inflight_seconds{" L "} 0");
        assert_line(t, "diskpulse_sync_stuck{" L "} 0");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 2");
        free(t);
        finish(c);
}

/* Each cycle: the spaced probe (idle), then at once the burst, the median of whose second
 * half (the first warms up) is the busy sample; every probe counts in probes_total and the flush ratio; no pause inside a burst, and
 * the next spaced probe starts a whole (jittered) interval after the burst ended. */
static void test_burst_feeds_busy(void **state)
{
        static const double lat[] = {4, 9, 7, 1, 3, 5, 6, 5, 2, 2, 6, 20, 30, 9, 7};
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;

        (void)state;
        fake_reset();
        fk.lat_ms = lat;
        fk.n_lat = 15;
        fk.advance_clock = true;
        fk.clk.limit = 3;
        cfg.burst = 4;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 3);
        assert_int_equal(fk.probes_started, 15);
        t = render(c);
        /* idle: 4, 5, 6 ms; busy: median(1, 3), median(2, 2), median(9, 7) (the whole bursts' medians
         * would be 5, 3.5 and 14.5) */
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LI "} 3");
        assert_true(fabs(sample(t, "diskpulse_sync_latency_seconds_sum{" LI "}") - 0.015) < 1e-12);
        assert_line(t, "diskpulse_sync_latency_seconds_bucket{" LI ",le=\"0.0025\"} 0");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LB "} 3");
        assert_true(fabs(sample(t, "diskpulse_sync_latency_seconds_sum{" LB "}") - 0.012) < 1e-12);
        assert_line(t, "diskpulse_sync_latency_seconds_bucket{" LB ",le=\"0.0025\"} 2");
        assert_line(t, "diskpulse_sync_latency_seconds_bucket{" LB ",le=\"0.01\"} 3");
        assert_line(t, "diskpulse_sync_last_seconds{" LI "} 0.006");
        assert_line(t, "diskpulse_sync_last_seconds{" LB "} 0.008");
        assert_line(t, "diskpulse_sync_recent_seconds{" LI ",quantile=\"0.5\"} 0.005");
        assert_line(t, "diskpulse_sync_recent_seconds{" LB ",quantile=\"0.5\"} 0.002");
        assert_line(t, "diskpulse_sync_busy_idle_ratio{" L "} 0.4");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 15");
        assert_line(t, "diskpulse_sync_flush_ratio{" L "} 1");
        assert_no(t, "diskpulse_sync_busy_idle_ratio{" LI);
        free(t);
        for (unsigned cyc = 0; cyc < 3; cyc++) {
                unsigned i = 5 * cyc;
                /* the burst: no sleep between its probes, each starts when the one before ended */
                for (unsigned k = 1; k < 5; k++) {
                        assert_int_equal(fk.sleeps_at[i + k], fk.sleeps_at[i]);
                        assert_true(fk.start_at[i + k] ==
                                    fk.start_at[i + k - 1] + (usec_t)(lat[i + k - 1] * 1000));
                }
                /* the next spaced probe: after one sleep of 9 to 11 s from the burst's end */
                if (cyc < 2) {
                        usec_t burst_end = fk.start_at[i + 4] + (usec_t)(lat[i + 4] * 1000);
                        usec_t gap = fk.start_at[i + 5] - burst_end;
                        assert_int_equal(fk.sleeps_at[i + 5], fk.sleeps_at[i] + 1);
                        assert_true(gap >= 9 * USEC_PER_SEC && gap <= 11 * USEC_PER_SEC);
                }
        }
        finish(c);
}

/* A probe that hangs past the timeout inside a burst is one stuck probe: the gauge and the
 * counter show it once while it hangs, the burst stops there (nothing piles on), its latency is
 * the cycle's busy sample, and the counter keeps the 1 after it returns. A stuck spaced probe
 * ends its cycle before the burst. */
static void test_stuck_in_burst_counts_once(void **state)
{
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;

        (void)state;
        fake_reset();
        fk.hang_at = 3; /* the second probe of the first burst */
        fk.hang_lat_ms = 31000;
        fk.clk.limit = 1;
        cfg.burst = 3;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.hanging);
        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.now += 31 * USEC_PER_SEC;
        pthread_mutex_unlock(&fk.clk.lock);
        for (int k = 0; k < 2; k++) { /* as often as it is scraped */
                t = render(c);
                assert_line(t, "diskpulse_sync_stuck{" L "} 1");
                assert_line(t, "diskpulse_sync_stuck_probes_total{" L "} 1");
                assert_line(t, "diskpulse_sync_inflight_seconds{" L "} 31");
                assert_line(t, "diskpulse_sync_probes_total{" L "} 2");
                free(t);
        }
        pthread_mutex_lock(&fk.clk.lock);
        fk.released = true;
        pthread_cond_broadcast(&fk.clk.cond);
        pthread_mutex_unlock(&fk.clk.lock);
        WAIT_FOR(fk.clk.sleeps >= 1);
        assert_int_equal(fk.probes_started, 3); /* the burst's third probe never started */
        t = render(c);
        assert_line(t, "diskpulse_sync_stuck{" L "} 0");
        assert_line(t, "diskpulse_sync_stuck_probes_total{" L "} 1");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 3");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LI "} 1");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LB "} 1");
        assert_line(t, "diskpulse_sync_last_seconds{" LB "} 31");
        assert_line(t, "diskpulse_sync_latency_seconds_bucket{" LB ",le=\"10\"} 0");
        assert_line(t, "diskpulse_sync_target_up{" L "} 1");
        free(t);

        /* the next cycle is whole again; then a stuck spaced probe: no burst after it */
        pthread_mutex_lock(&fk.clk.lock);
        fk.released = false;
        fk.hang_at = 8; /* cycle 2: probes 4-7; cycle 3 starts with probe 8 */
        pthread_mutex_unlock(&fk.clk.lock);
        set_limit(3);
        WAIT_FOR(fk.hanging);
        assert_int_equal(fk.probes_started, 8);
        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.now += 31 * USEC_PER_SEC;
        fk.released = true;
        pthread_cond_broadcast(&fk.clk.cond);
        pthread_mutex_unlock(&fk.clk.lock);
        WAIT_FOR(fk.clk.sleeps >= 3);
        assert_int_equal(fk.probes_started, 8);
        t = render(c);
        assert_line(t, "diskpulse_sync_stuck_probes_total{" L "} 2");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 8");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LI "} 3");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LB "} 2");
        assert_line(t, "diskpulse_sync_last_seconds{" LI "} 31");
        free(t);
        finish(c);
}

/* A failing probe inside a burst: its errno counted, the file closed and reopened, no busy
 * sample from the broken burst; the idle sample before it stays. */
static void test_error_in_burst(void **state)
{
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;

        (void)state;
        fake_reset();
        fk.probe_err_at = 3;
        fk.probe_err = -EIO;
        fk.clk.limit = 1;
        cfg.burst = 3;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 1);
        t = render(c);
        assert_line(t, "diskpulse_sync_errors_total{" L ",errno=\"EIO\"} 1");
        assert_line(t, "diskpulse_sync_target_up{" L "} 0");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 3");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LI "} 1");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LB "} 0");
        assert_no(t, "diskpulse_sync_flush_ratio{");
        free(t);
        assert_int_equal(fk.closes, 1);
        set_limit(2);
        WAIT_FOR(fk.clk.sleeps >= 2);
        t = render(c);
        assert_line(t, "diskpulse_sync_target_up{" L "} 1");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 7");
        assert_line(t, "diskpulse_sync_latency_seconds_count{" LB "} 1");
        free(t);
        assert_int_equal(fk.opens, 2);
        finish(c);
}

static void test_errors_reopen_and_recovery(void **state)
{
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;

        (void)state;
        fake_reset();
        fk.probe_err_at = 2;
        fk.probe_err = -EIO;
        /* open #1 succeeds; after the EIO: ENOSPC, EROFS, then success */
        fk.open_err[0] = 0;
        fk.open_err[1] = -ENOSPC;
        fk.open_err[2] = -EROFS;
        fk.n_open_err = 3;
        fk.clk.limit = 2;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);

        WAIT_FOR(fk.clk.sleeps >= 2); /* probe 1 fine, probe 2 EIO */
        t = render(c);
        assert_line(t, "diskpulse_sync_errors_total{" L ",errno=\"EIO\"} 1");
        assert_line(t, "diskpulse_sync_target_up{" L "} 0");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 2");
        free(t);
        assert_int_equal(fk.closes, 1); /* the poisoned file is closed */

        set_limit(3);
        WAIT_FOR(fk.clk.sleeps >= 3); /* open: ENOSPC */
        t = render(c);
        assert_line(t, "diskpulse_sync_errors_total{" L ",errno=\"ENOSPC\"} 1");
        assert_line(t, "diskpulse_sync_target_up{" L "} 0");
        free(t);

        set_limit(4);
        WAIT_FOR(fk.clk.sleeps >= 4); /* open: EROFS */
        t = render(c);
        assert_line(t, "diskpulse_sync_errors_total{" L ",errno=\"EROFS\"} 1");
        assert_line(t, "diskpulse_sync_target_up{" L "} 0");
        free(t);

        set_limit(5);
        WAIT_FOR(fk.clk.sleeps >= 5); /* a fresh open and a good probe */
        t = render(c);
        assert_line(t, "diskpulse_sync_target_up{" L "} 1");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 3");
        assert_line(t, "diskpulse_sync_errors_total{" L ",errno=\"EIO\"} 1");
        free(t);
        assert_int_equal(fk.opens, 4);
        assert_int_equal(fk.open_ok, 2);
        finish(c);
        assert_int_equal(fk.closes, 2);
}

static void test_flush_ratio(void **state)
{
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;

        (void)state;
        /* no flush reaches the disk: 0 */
        fake_reset();
        fk.flush_advance = false;
        fk.clk.limit = 3;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 3);
        t = render(c);
        assert_line(t, "diskpulse_sync_flush_ratio{" L "} 0");
        assert_line(t, "diskpulse_sync_backing_disk_info{" L ",disk=\"sda\"} 1");
        free(t);
        finish(c);

        /* an md device over two disks: both named, and the ratio still there */
        fake_reset();
        fk.device = "md0";
        fk.below[0] = "sda";
        fk.below[1] = "sdb";
        fk.clk.limit = 3;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 3);
        t = render(c);
#define LM "path=\"/data\",device=\"md0\",mode=\"fdatasync\""
        assert_line(t, "diskpulse_sync_backing_disk_info{" LM ",disk=\"sda\"} 1");
        assert_line(t, "diskpulse_sync_backing_disk_info{" LM ",disk=\"sdb\"} 1");
        assert_no(t, "diskpulse_sync_backing_disk_info{" L);
        assert_line(t, "diskpulse_sync_flush_ratio{" LM "} 1");
#undef LM
        free(t);
        finish(c);

        /* a kernel without flush accounting: no ratio */
        fake_reset();
        fk.flush_nodata = true;
        fk.clk.limit = 3;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 3);
        t = render(c);
        assert_no(t, "diskpulse_sync_flush_ratio{");
        assert_line(t, "diskpulse_sync_probes_total{" L "} 3");
        free(t);
        finish(c);

        /* no block device (tmpfs): device="" and no ratio */
        fake_reset();
        fk.device = NULL;
        fk.clk.limit = 2;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 2);
        t = render(c);
        assert_line(t, "diskpulse_sync_target_up{path=\"/data\",device=\"\",mode=\"fdatasync\"} 1");
        assert_no(t, "diskpulse_sync_flush_ratio{");
        assert_no(t, "diskpulse_sync_backing_disk_info{");
        free(t);
        finish(c);
}

/* Runs cycles every 10 min (fake), spaced probes of 2 ms and bursts of 1 ms, until both
 * baselines are warm (the first day: 24 hourly periods). */
static void warm_up(struct canary *c)
{
        static const double lat[] = {2, 1, 1, 1};
        char *t;

        fk.lat_ms = lat;
        fk.n_lat = 4;
        fk.clk.limit = 300;
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 300);
        t = render(c);
        assert_line(t, "diskpulse_sync_baseline_seconds{" LI "} 0.002");
        assert_line(t, "diskpulse_sync_baseline_seconds{" LB "} 0.001");
        /* 10 min after the last probe the window (5 min) still holds the last 10 probes: the
         * ratios rest on them; the reference is the first baseline (the first day's median) */
        assert_line(t, "diskpulse_sync_degradation_ratio{" LI "} 1");
        assert_line(t, "diskpulse_sync_degradation_ratio{" LB "} 1");
        assert_line(t, "diskpulse_sync_reference_seconds{" LI "} 0.002");
        assert_line(t, "diskpulse_sync_drift_ratio{" LB "} 1");
        assert_line(t, "diskpulse_sync_recent_samples{" LI "} 10");
        free(t);
}

static void test_baseline_round_trip(void **state)
{
        char dir[] = "/tmp/test_canary_collector.XXXXXX";
        struct canary_config cfg;
        struct canary *c;
        int dfd;
        char *t, *buf;
        size_t len;

        (void)state;
        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        cfg = config(one_target, 1, dfd);
        cfg.interval = 600 * USEC_PER_SEC;
        cfg.burst = 3;

        fake_reset();
        fk.id = "wwn:0x5000aaaa";
        c = canary_new(&cfg);
        warm_up(c);
        /* saved while running (rate-limited) */
        assert_int_equal(statefile_read(dfd, CANARY_STATE_FILE, 1 << 20, &buf, &len), 0);
        assert_non_null(strstr(buf, "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle "
                                    "baseline=0.002 "));
        assert_non_null(strstr(buf, "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=busy "
                                    "baseline=0.001 "));
        free(buf);
        finish(c);

        /* the same disk: both restored before the first probe */
        fake_reset();
        fk.id = "wwn:0x5000aaaa";
        fk.clk.limit = 1;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 1);
        t = render(c);
        assert_line(t, "diskpulse_sync_baseline_seconds{" LI "} 0.002");
        assert_line(t, "diskpulse_sync_baseline_seconds{" LB "} 0.001");
        free(t);
        finish(c);

        /* bursts turned off: the busy baseline is kept in the file, untouched */
        cfg.burst = 0;
        fake_reset();
        fk.id = "wwn:0x5000aaaa";
        fk.clk.limit = 1;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 1);
        t = render(c);
        assert_line(t, "diskpulse_sync_baseline_seconds{" LI "} 0.002");
        assert_no(t, "regime=\"busy\"");
        free(t);
        finish(c);
        assert_int_equal(statefile_read(dfd, CANARY_STATE_FILE, 1 << 20, &buf, &len), 0);
        assert_non_null(strstr(buf, " regime=busy baseline=0.001 "));
        free(buf);
        cfg.burst = 3;

        /* another disk behind the same path: a fresh warm-up */
        fake_reset();
        fk.id = "wwn:0x5000bbbb";
        fk.clk.limit = 1;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 1);
        t = render(c);
        assert_no(t, "diskpulse_sync_baseline_seconds{");
        free(t);
        finish(c);

        /* both records kept in the file */
        assert_int_equal(statefile_read(dfd, CANARY_STATE_FILE, 1 << 20, &buf, &len), 0);
        assert_non_null(strstr(buf, "disk=wwn:0x5000aaaa "));
        assert_non_null(strstr(buf, "disk=wwn:0x5000bbbb "));
        free(buf);

        /* an unknown disk: memory only, nothing written for it */
        fake_reset();
        fk.id = NULL;
        fk.clk.limit = 1;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 1);
        t = render(c);
        assert_no(t, "diskpulse_sync_baseline_seconds{");
        free(t);
        finish(c);

        assert_int_equal(unlinkat(dfd, CANARY_STATE_FILE, 0), 0);
        close(dfd);
        assert_int_equal(rmdir(dir), 0);
}

static ino_t file_ino(int dfd, const char *name)
{
        struct stat st;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        return st.st_ino;
}

/* canary_stop() writes the state file only when it lacks something: a file that is up to date
 * is not rewritten (no write, no fsync on the shutdown path), one whose last write failed is. */
static void test_stop_writes_only_unsaved(void **state)
{
        char dir[] = "/tmp/test_canary_collector.XXXXXX";
        struct canary_config cfg;
        struct canary *c;
        int dfd, fd;
        ino_t ino;
        char *buf;
        size_t len;

        (void)state;
        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        cfg = config(one_target, 1, dfd);

        /* a disk new to the file is recorded by the prober, after its first probe */
        fake_reset();
        fk.id = "wwn:0x5000aaaa";
        fk.clk.limit = 1;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 1);
        ino = file_ino(dfd, CANARY_STATE_FILE);
        assert_true(ino != 0);
        set_limit(4);
        WAIT_FOR(fk.clk.sleeps >= 4);
        finish(c);
        assert_true(file_ino(dfd, CANARY_STATE_FILE) == ino); /* the same file: not rewritten */

        /* the same disk again, nothing learnt: neither the probes nor the stop write */
        fake_reset();
        fk.id = "wwn:0x5000aaaa";
        fk.clk.limit = 3;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 3);
        finish(c);
        assert_true(file_ino(dfd, CANARY_STATE_FILE) == ino);

        /* a save that fails (a directory where the file goes: the rename is refused) is written
         * by the stop once the way is clear */
        assert_int_equal(unlinkat(dfd, CANARY_STATE_FILE, 0), 0);
        fake_reset();
        fk.id = "wwn:0x5000bbbb";
        fk.clk.limit = 1;
        c = canary_new(&cfg);
        assert_int_equal(mkdirat(dfd, CANARY_STATE_FILE, 0700), 0);
        fd = openat(dfd, CANARY_STATE_FILE "/x", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.clk.sleeps >= 1);
        assert_int_equal(unlinkat(dfd, CANARY_STATE_FILE "/x", 0), 0);
        assert_int_equal(unlinkat(dfd, CANARY_STATE_FILE, AT_REMOVEDIR), 0);
        finish(c);
        assert_int_equal(statefile_read(dfd, CANARY_STATE_FILE, 1 << 20, &buf, &len), 0);
        assert_non_null(strstr(buf, "disk=wwn:0x5000bbbb mode=fdatasync path=/data "));
        free(buf);

        assert_int_equal(unlinkat(dfd, CANARY_STATE_FILE, 0), 0);
        close(dfd);
        assert_int_equal(rmdir(dir), 0);
}

static void test_reconfigure(void **state)
{
        static const struct canary_target_config ab[] = {{"/data", CANARY_MODE_FDATASYNC},
                                                         {"/logs", CANARY_MODE_APPEND}};
        static const struct canary_target_config b_only[] = {{"/logs", CANARY_MODE_APPEND}};
        struct canary_config cfg = config(one_target, 1, -1);
        struct canary *c;
        char *t;

        (void)state;
        fake_reset();
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.probes_done >= 2);
        assert_int_equal(canary_threads_running(), 1);

        cfg = config(ab, 2, -1);
        assert_int_equal(canary_reconfigure(c, &cfg), 0);
        assert_int_equal(canary_threads_running(), 2);
        WAIT_FOR(fk.opens >= 2);
        WAIT_FOR(fk.probes_done >= 6);
        t = render(c);
        assert_non_null(strstr(t, "diskpulse_sync_probes_total{" L "}"));
        assert_non_null(strstr(t, "diskpulse_sync_probes_total{path=\"/logs\",device=\"sda\","
                                  "mode=\"append\"}"));
        free(t);

        cfg = config(b_only, 1, -1);
        assert_int_equal(canary_reconfigure(c, &cfg), 0);
        t = render(c);
        assert_no(t, "path=\"/data\"");
        assert_non_null(strstr(t, "path=\"/logs\""));
        free(t);
        for (int i = 0; i < 5000 && canary_threads_running() > 1; i++)
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        assert_int_equal(canary_threads_running(), 1);
        finish(c);
}

static void test_stop_fast_with_blocked_probe(void **state)
{
        static const struct canary_target_config two[] = {{"/data", CANARY_MODE_FDATASYNC},
                                                          {"/logs", CANARY_MODE_DSYNC}};
        struct canary_config cfg = config(two, 2, -1);
        struct canary_ops real_sleep = fake_ops;
        struct canary *c, *c2;
        usec_t t0, dt;

        (void)state;
        fake_reset();
        fk.hang_at = 3; /* inside a burst */
        cfg.burst = 3;
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        WAIT_FOR(fk.hanging);

        /* a second collector with the real (interruptible) sleep of 10 s */
        real_sleep.sleep = NULL;
        cfg.ops = &real_sleep;
        cfg.targets = one_target;
        cfg.n_targets = 1;
        c2 = canary_new(&cfg);
        assert_int_equal(canary_start(c2), 0);
        WAIT_FOR(fk.probes_done >= 3);
        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);

        t0 = mono();
        canary_free(c2);
        canary_free(c); /* one probe blocked in the "kernel": abandoned */
        dt = mono() - t0;
        assert_true(dt < 100 * USEC_PER_MSEC);
        assert_true(canary_threads_running() >= 1);
        assert_true(fk.hanging);

        finish(NULL); /* release the blocked probe: the thread cleans up after itself */
}

/* The real ops on a temporary directory: probes happen, the real sleep is interrupted. */
static void test_real_ops(void **state)
{
        char dir[] = "/var/tmp/test_canary_collector.XXXXXX";
        struct canary_target_config tc;
        struct canary_config cfg;
        struct canary *c;
        char *t = NULL;
        int sysfs = open("/sys", O_PATH | O_DIRECTORY | O_CLOEXEC);
        usec_t t0;

        (void)state;
        assert_non_null(mkdtemp(dir));
        tc = (struct canary_target_config){dir, CANARY_MODE_FDATASYNC};
        cfg = config(&tc, 1, -1);
        cfg.ops = NULL;
        cfg.disk_id = NULL;
        cfg.sysfs_fd = sysfs;
        cfg.interval = 20 * USEC_PER_MSEC;
        c = canary_new(&cfg);
        close(sysfs); /* the collector keeps its own copy */
        assert_int_equal(canary_start(c), 0);
        for (int i = 0; i < 1000; i++) {
                free(t);
                t = render(c);
                if (strstr(t, "diskpulse_sync_last_seconds{"))
                        break;
                nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
        }
        assert_non_null(strstr(t, "diskpulse_sync_last_seconds{"));
        assert_null(strstr(t, "diskpulse_sync_errors_total{"));
        free(t);
        t0 = mono();
        canary_free(c);
        assert_true(mono() - t0 < 100 * USEC_PER_MSEC);
        for (int i = 0; i < 5000 && canary_threads_running() > 0; i++)
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        assert_int_equal(canary_threads_running(), 0);
        assert_int_equal(rmdir(dir), 0); /* nothing left behind */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_probes_feed_stats),
            cmocka_unit_test(test_recent_window_follows_period),
            cmocka_unit_test(test_directory_gone_or_replaced),
            cmocka_unit_test(test_gone_keeps_device),
            cmocka_unit_test(test_hang_is_stuck_not_blocking),
            cmocka_unit_test(test_burst_feeds_busy),
            cmocka_unit_test(test_stuck_in_burst_counts_once),
            cmocka_unit_test(test_error_in_burst),
            cmocka_unit_test(test_errors_reopen_and_recovery),
            cmocka_unit_test(test_flush_ratio),
            cmocka_unit_test(test_baseline_round_trip),
            cmocka_unit_test(test_stop_writes_only_unsaved),
            cmocka_unit_test(test_reconfigure),
            cmocka_unit_test(test_stop_fast_with_blocked_probe),
            cmocka_unit_test(test_real_ops),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
