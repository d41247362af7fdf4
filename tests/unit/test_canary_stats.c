/* Unit tests of collectors/canary/canary_stats.c: histogram bounds and export, recent quantiles and
 * window expiry on a fake clock, bounded memory, the baseline's speed and guard, the ratio, and
 * the state records (round trip, garbage, keys). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "canary_records.h"
#include "canary_stats.h"
#include "expo.h"

#define SEC  USEC_PER_SEC
#define HOUR (3600 * SEC)
#define DAY  (24 * HOUR)
/* a wall clock far from 0, to see that it is stored and not used for periods */
#define REAL0 ((usec_t)1718000000 * SEC)

static void assert_close(double got, double want, double rel)
{
        if (!(fabs(got - want) <= rel * fabs(want)))
                fail_msg("got %.17g, want %.17g (relative tolerance %g)", got, want, rel);
}

static char *render(struct mset *s)
{
        char *text = NULL;
        size_t len = 0;

        assert_int_equal(expo_render_text(&s, 1, &text, &len), 0);
        return text;
}

/* ---- Histogram ---- */

static void test_hist_bounds(void **state)
{
        (void)state;

        assert_true(canary_hist_bound(0) == 1e-05);
        assert_string_equal(canary_hist_le(0), "1e-05");
        assert_true(canary_hist_bound(CANARY_HIST_NBOUNDS - 1) >= 10);
        assert_true(isinf(canary_hist_bound(CANARY_HIST_NBOUNDS)));
        assert_string_equal(canary_hist_le(CANARY_HIST_NBOUNDS), "+Inf");
        for (size_t i = 0; i < CANARY_HIST_NBOUNDS; i++) {
                double b = canary_hist_bound(i);
                char buf[40];

                /* the label is the bound, written as the exposition writes numbers (and as
                 * client_golang writes "le") */
                assert_true(strtod(canary_hist_le(i), NULL) == b);
                assert_string_equal(canary_hist_le(i), expo_format_double(b, buf, sizeof buf));
                if (i > 0) {
                        double prev = canary_hist_bound(i - 1);
                        assert_true(b > prev);
                        if (!(b / prev <= 2.5 * (1 + 1e-12)))
                                fail_msg("bounds %g and %g are more than x2.5 apart", prev, b);
                }
        }
        assert_int_equal(CANARY_HIST_NBOUNDS, 19);
}

static void test_hist_add(void **state)
{
        struct canary_hist h;
        (void)state;

        canary_hist_init(&h);
        /* le is inclusive */
        assert_int_equal(canary_hist_add(&h, 1e-05), 0);
        assert_int_equal(canary_hist_add(&h, 0), 0);
        assert_int_equal(h.counts[0], 2);
        assert_int_equal(canary_hist_add(&h, 1.0000001e-05), 0);
        assert_int_equal(h.counts[1], 1);
        assert_int_equal(canary_hist_add(&h, 10), 0);
        assert_int_equal(h.counts[CANARY_HIST_NBOUNDS - 1], 1);
        assert_int_equal(canary_hist_add(&h, 10.5), 0);
        assert_int_equal(canary_hist_add(&h, 1e9), 0);
        assert_int_equal(h.counts[CANARY_HIST_NBOUNDS], 2);
        assert_int_equal(h.count, 6);

        assert_int_equal(canary_hist_add(&h, NAN), -EINVAL);
        assert_int_equal(canary_hist_add(&h, -1e-6), -EINVAL);
        assert_int_equal(canary_hist_add(&h, INFINITY), -EINVAL);
        assert_int_equal(canary_hist_add(&h, 1.5e9), -ERANGE);
        assert_int_equal(h.count, 6);
        assert_close(h.sum, 1e-05 + 1.0000001e-05 + 10 + 10.5 + 1e9, 1e-15);
}

/* The native counterpart counts the same observations at schema 2, 0 in the zero bucket, and
 * is exported beside the classic buckets for the same series. */
static void test_hist_native(void **state)
{
        static const double obs[] = {0, 1e-3, 1e-3, 1.2e-3, 2.5e-3, 1, 1e9, 0x1p-30, 0x1.0001p-30};
        struct mset *s = mset_new();
        const struct mfamily *f;
        const struct mnative *nh;
        struct canary_hist h;
        uint64_t total = 0;
        (void)state;

        canary_hist_init(&h);
        for (size_t i = 0; i < sizeof obs / sizeof *obs; i++)
                assert_int_equal(canary_hist_add(&h, obs[i]), 0);
        assert_int_equal(h.native_zero, 2); /* 0 and 2^-30 */
        /* 1e-3 s: 2^-9.97; bucket ceil(4 * -9.966) = -39 holds (2^-10, 2^-9.75] */
        assert_int_equal(h.native[-39 - CANARY_NATIVE_MIN_INDEX], 2);
        assert_int_equal(h.native[-38 - CANARY_NATIVE_MIN_INDEX], 1); /* 1.2e-3: 2^-9.70 */
        assert_int_equal(h.native[-34 - CANARY_NATIVE_MIN_INDEX], 1); /* 2.5e-3: 2^-8.64 */
        assert_int_equal(h.native[0 - CANARY_NATIVE_MIN_INDEX], 1);   /* 1 = 2^0 */
        assert_int_equal(h.native[CANARY_NATIVE_NBUCKETS - 1], 1);    /* 1e9 */
        assert_int_equal(h.native[0], 1);                             /* just above 2^-30 */
        for (size_t i = 0; i < CANARY_NATIVE_NBUCKETS; i++)
                total += h.native[i];
        assert_int_equal(total + h.native_zero, h.count);

        canary_hist_export(&h, s, mset_labels(s, "path", "/x", NULL));
        f = mset_find(s, CANARY_FAMILY_LATENCY);
        assert_non_null(f);
        assert_null(mfamily_native(f, "path=\"/y\""));
        nh = mfamily_native(f, "path=\"/x\"");
        assert_non_null(nh);
        assert_int_equal(nh->schema, 2);
        assert_true(nh->zero_threshold == 0x1p-30);
        assert_int_equal(nh->zero_count, 2);
        assert_int_equal(nh->count, 9);
        assert_true(nh->sum == h.sum);
        assert_int_equal(nh->offset, CANARY_NATIVE_MIN_INDEX);
        assert_int_equal(nh->n, CANARY_NATIVE_NBUCKETS);
        assert_int_equal(nh->counts[-39 - CANARY_NATIVE_MIN_INDEX], 2);
        mset_free(s);

        /* only the buckets from the first to the last counted are attached */
        s = mset_new();
        canary_hist_init(&h);
        assert_int_equal(canary_hist_add(&h, 1e-3), 0);
        assert_int_equal(canary_hist_add(&h, 1), 0);
        canary_hist_export(&h, s, "");
        nh = mfamily_native(mset_find(s, CANARY_FAMILY_LATENCY), "");
        assert_non_null(nh);
        assert_int_equal(nh->offset, -39);
        assert_int_equal(nh->n, 40);
        assert_int_equal(nh->counts[0], 1);
        assert_int_equal(nh->counts[39], 1);
        assert_int_equal(nh->zero_count, 0);
        mset_free(s);
}

static void test_hist_export_text(void **state)
{
        struct mset *s = mset_new();
        const char *labels;
        struct canary_hist h;
        char sum[40], *text;
        (void)state;

        canary_hist_init(&h);
        labels = mset_labels(s, "path", "/var/lib/pg", "device", "sda", "mode", "fdatasync", NULL);
        assert_int_equal(canary_hist_add(&h, 0.000007), 0); /* le 1e-05 */
        assert_int_equal(canary_hist_add(&h, 0.0003), 0);   /* le 0.0005 */
        assert_int_equal(canary_hist_add(&h, 0.0005), 0);   /* le 0.0005 (inclusive) */
        assert_int_equal(canary_hist_add(&h, 0.0042), 0);   /* le 0.005 */
        assert_int_equal(canary_hist_add(&h, 0.25), 0);     /* le 0.25 */
        assert_int_equal(canary_hist_add(&h, 12), 0);       /* +Inf */
        canary_hist_export(&h, s, labels);
        text = render(s);
        expo_format_double(h.sum, sum, sizeof sum);
        assert_close(h.sum, 12.2550070, 1e-12);

        char want[4096];
        const char *L = "path=\"/var/lib/pg\",device=\"sda\",mode=\"fdatasync\"";
        int o = snprintf(want, sizeof want,
                         "# HELP diskpulse_sync_latency_seconds Latency of one canary probe (a "
                         "small write and fdatasync, or the mode's equivalent).\n"
                         "# TYPE diskpulse_sync_latency_seconds histogram\n");
        static const unsigned cum[] = {1, 1, 1, 1, 1, 3, 3, 3, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 6};
        static const char *const le[] = {"1e-05",  "2.5e-05", "5e-05",  "0.0001", "0.00025",
                                         "0.0005", "0.001",   "0.0025", "0.005",  "0.01",
                                         "0.025",  "0.05",    "0.1",    "0.25",   "0.5",
                                         "1",      "2.5",     "5",      "10",     "+Inf"};
        for (size_t i = 0; i < ARRAY_SIZE(cum); i++)
                o += snprintf(want + o, sizeof want - (size_t)o,
                              "diskpulse_sync_latency_seconds_bucket{%s,le=\"%s\"} %u\n", L, le[i],
                              cum[i]);
        o += snprintf(want + o, sizeof want - (size_t)o,
                      "diskpulse_sync_latency_seconds_sum{%s} %s\n"
                      "diskpulse_sync_latency_seconds_count{%s} 6\n",
                      L, sum, L);
        assert_true((size_t)o < sizeof want);
        assert_string_equal(text, want);
        free(text);
        mset_free(s);
}

/* ---- Recent window ---- */

static void test_quantile_definition(void **state)
{
        static const double one[] = {0.005};
        static const double even[] = {1, 2, 3, 4};
        static const double odd[] = {1, 2, 3, 4, 5};
        static const double ties[] = {2, 2, 2, 7};
        (void)state;

        assert_true(canary_quantile_sorted(one, 1, 0.5) == 0.005);
        assert_true(canary_quantile_sorted(one, 1, 0.99) == 0.005);
        assert_true(canary_quantile_sorted(one, 1, 0) == 0.005);
        /* numpy.percentile([1,2,3,4], [50,90,99]) = 2.5, 3.7, 3.97 */
        assert_close(canary_quantile_sorted(even, 4, 0.5), 2.5, 1e-15);
        assert_close(canary_quantile_sorted(even, 4, 0.9), 3.7, 1e-15);
        assert_close(canary_quantile_sorted(even, 4, 0.99), 3.97, 1e-15);
        /* numpy.percentile([1,2,3,4,5], [50,90,99]) = 3, 4.6, 4.96 */
        assert_true(canary_quantile_sorted(odd, 5, 0.5) == 3);
        assert_close(canary_quantile_sorted(odd, 5, 0.9), 4.6, 1e-15);
        assert_close(canary_quantile_sorted(odd, 5, 0.99), 4.96, 1e-15);
        /* ties: numpy.percentile([2,2,2,7], [50,90,99]) = 2, 5.5, 6.85 */
        assert_true(canary_quantile_sorted(ties, 4, 0.5) == 2);
        assert_close(canary_quantile_sorted(ties, 4, 0.9), 5.5, 1e-15);
        assert_close(canary_quantile_sorted(ties, 4, 0.99), 6.85, 1e-15);
        assert_true(canary_quantile_sorted(ties, 4, 0) == 2);
        assert_true(canary_quantile_sorted(ties, 4, 1) == 7);
}

static void test_recent_quantiles(void **state)
{
        static const double qs[] = {0.5, 0.9, 0.99};
        struct canary_recent w;
        double v[3] = {-1, -1, -1}, bad = 1.5;
        (void)state;

        assert_int_equal(canary_recent_init(&w, 0, 10), -EINVAL);
        assert_int_equal(canary_recent_init(&w, SEC, 0), -EINVAL);
        assert_int_equal(canary_recent_init(&w, SEC, CANARY_RECENT_MAX_SAMPLES + 1), -EINVAL);
        assert_int_equal(canary_recent_init(&w, CANARY_RECENT_WINDOW, CANARY_RECENT_MAX_SAMPLES),
                         0);
        /* empty: no data, output untouched */
        assert_int_equal(canary_recent_quantiles(&w, 0, qs, 3, v), -ENODATA);
        assert_true(v[0] == -1);
        assert_int_equal(canary_recent_median(&w, 0, v), -ENODATA);

        /* one sample */
        assert_int_equal(canary_recent_add(&w, 0.004, 10 * SEC), 0);
        assert_int_equal(canary_recent_quantiles(&w, 10 * SEC, qs, 3, v), 0);
        assert_true(v[0] == 0.004 && v[1] == 0.004 && v[2] == 0.004);

        /* unsorted input, odd count: 0.004 0.001 0.003 0.002 0.005 */
        assert_int_equal(canary_recent_add(&w, 0.001, 20 * SEC), 0);
        assert_int_equal(canary_recent_add(&w, 0.003, 30 * SEC), 0);
        assert_int_equal(canary_recent_add(&w, 0.002, 40 * SEC), 0);
        assert_int_equal(canary_recent_add(&w, 0.005, 50 * SEC), 0);
        assert_int_equal(canary_recent_quantiles(&w, 50 * SEC, qs, 3, v), 0);
        assert_true(v[0] == 0.003);
        assert_close(v[1], 0.0046, 1e-12);
        assert_close(v[2], 0.00496, 1e-12);
        /* even count: + 0.006 -> median (0.003 + 0.004) / 2 */
        assert_int_equal(canary_recent_add(&w, 0.006, 60 * SEC), 0);
        assert_int_equal(canary_recent_median(&w, 60 * SEC, v), 0);
        assert_close(v[0], 0.0035, 1e-12);

        assert_int_equal(canary_recent_quantiles(&w, 60 * SEC, &bad, 1, v), -EINVAL);
        assert_int_equal(canary_recent_add(&w, NAN, 70 * SEC), -EINVAL);
        assert_int_equal(canary_recent_add(&w, -1, 70 * SEC), -EINVAL);
        assert_int_equal(canary_recent_add(&w, 2e9, 70 * SEC), -ERANGE);
        assert_int_equal(canary_recent_count(&w, 70 * SEC), 6);
        assert_int_equal(w.count, 6);
        canary_recent_done(&w);
        canary_recent_done(&w); /* twice is fine */
}

static void test_recent_expiry(void **state)
{
        struct canary_recent w;
        double m;
        (void)state;

        assert_int_equal(canary_recent_init(&w, 300 * SEC, 100), 0);
        assert_int_equal(w.min, CANARY_RECENT_MIN_SAMPLES);
        w.min = 0; /* the window's age alone (the newest kept however old: test_recent_min) */
        assert_int_equal(canary_recent_add(&w, 0.001, 1000 * SEC), 0);
        assert_int_equal(canary_recent_add(&w, 0.002, 1100 * SEC), 0);
        assert_int_equal(canary_recent_add(&w, 0.003, 1200 * SEC), 0);
        /* a sample is in the window while now - t < window */
        assert_int_equal(canary_recent_count(&w, 1300 * SEC - 1), 3);
        assert_int_equal(canary_recent_count(&w, 1300 * SEC), 2);
        assert_int_equal(canary_recent_median(&w, 1300 * SEC, &m), 0);
        assert_close(m, 0.0025, 1e-12);
        assert_int_equal(canary_recent_count(&w, 1400 * SEC), 1);
        assert_int_equal(canary_recent_median(&w, 1400 * SEC, &m), 0);
        assert_true(m == 0.003);
        assert_int_equal(canary_recent_count(&w, 1500 * SEC), 0);
        assert_int_equal(canary_recent_median(&w, 1500 * SEC, &m), -ENODATA);
        /* a query earlier than the samples sees them all */
        assert_int_equal(canary_recent_count(&w, 0), 3);

        /* a sample stamped before the newest counts as the newest */
        assert_int_equal(canary_recent_add(&w, 0.009, 1150 * SEC), 0);
        assert_int_equal(canary_recent_count(&w, 1499 * SEC), 2);
        assert_int_equal(canary_recent_median(&w, 1499 * SEC, &m), 0);
        assert_close(m, 0.006, 1e-12);
        /* adding forgets what expired: at 2000 s only the new one is held */
        assert_int_equal(canary_recent_add(&w, 0.004, 2000 * SEC), 0);
        assert_int_equal(w.n, 1);
        /* cumulative count and sum are not windowed */
        assert_int_equal(w.count, 5);
        assert_close(w.sum, 0.019, 1e-12);
        canary_recent_done(&w);
}

/* The quantiles rest on at least CANARY_RECENT_MIN_SAMPLES probes whatever the cadence: at one
 * probe every 10 minutes a 5-minute window would hold one. */
static void test_recent_min(void **state)
{
        struct canary_recent w, few;
        double m, q[3];
        static const double qs[3] = {0.5, 0.9, 0.99};
        (void)state;

        assert_int_equal(canary_recent_init(&w, 300 * SEC, 100), 0);
        for (int i = 1; i <= 25; i++)
                assert_int_equal(canary_recent_add(&w, 0.001 * i, (usec_t)i * 600 * SEC), 0);
        /* 25 probes 10 minutes apart: the last 10 (16..25 ms) are kept, older ones forgotten */
        assert_int_equal(canary_recent_count(&w, 25 * 600 * SEC), 10);
        assert_int_equal(w.n, 11); /* the 11th oldest goes at the next add */
        assert_int_equal(canary_recent_median(&w, 25 * 600 * SEC, &m), 0);
        assert_close(m, 0.0205, 1e-12);
        /* hours later, still the same 10 */
        assert_int_equal(canary_recent_count(&w, 100 * 600 * SEC), 10);
        assert_int_equal(canary_recent_quantiles(&w, 100 * 600 * SEC, qs, 3, q), 0);
        assert_close(q[0], 0.0205, 1e-12);
        assert_close(q[1], 0.0241, 1e-12);
        assert_close(q[2], 0.02491, 1e-12);
        /* fast probes: the age decides, more than the minimum are held */
        for (int i = 0; i < 100; i++)
                assert_int_equal(canary_recent_add(&w, 0.002, 20000 * SEC + (usec_t)i * SEC), 0);
        assert_int_equal(canary_recent_count(&w, 20099 * SEC), 100);
        assert_int_equal(canary_recent_count(&w, 20399 * SEC), 10);
        canary_recent_done(&w);

        /* a window that may hold fewer than the minimum keeps what it may */
        assert_int_equal(canary_recent_init(&few, 300 * SEC, 4), 0);
        assert_int_equal(few.min, 4);
        for (int i = 1; i <= 6; i++)
                assert_int_equal(canary_recent_add(&few, 0.001 * i, (usec_t)i * 600 * SEC), 0);
        assert_int_equal(canary_recent_count(&few, 7200 * SEC), 4);
        canary_recent_done(&few);
}

static void test_recent_bounded_memory(void **state)
{
        struct canary_recent w;
        usec_t t = 0;
        double m;
        size_t peak = 0;
        (void)state;

        assert_int_equal(canary_recent_init(&w, CANARY_RECENT_WINDOW, CANARY_RECENT_MAX_SAMPLES),
                         0);
        /* every 100 ms for an hour: the window holds exactly 5 min = 3000 samples */
        for (int i = 0; i < 36000; i++) {
                t += 100 * USEC_PER_MSEC;
                assert_int_equal(canary_recent_add(&w, 0.001 + (i % 7) * 1e-6, t), 0);
                if (w.cap > peak)
                        peak = w.cap;
        }
        assert_int_equal(canary_recent_count(&w, t), 3000);
        assert_int_equal(w.dropped, 0);
        assert_true(peak <= CANARY_RECENT_MAX_SAMPLES);
        assert_true(w.cap >= 3000 && w.cap <= CANARY_RECENT_MAX_SAMPLES);

        /* every 10 ms: capped at 4096, the oldest dropped early, still exact over them:
         * values 0..n-1 in order, the window holds the last 4096 */
        for (int i = 0; i < 60000; i++) {
                t += 10 * USEC_PER_MSEC;
                assert_int_equal(canary_recent_add(&w, (double)i * 1e-6, t), 0);
        }
        assert_int_equal(canary_recent_count(&w, t), CANARY_RECENT_MAX_SAMPLES);
        assert_int_equal(w.cap, CANARY_RECENT_MAX_SAMPLES);
        assert_true(w.dropped > 0);
        assert_int_equal(canary_recent_median(&w, t, &m), 0);
        /* the last 4096 values are 55904..59999: median 57951.5 us */
        assert_close(m, 57951.5e-6, 1e-12);

        /* back to every 10 s: the memory shrinks again */
        for (int i = 0; i < 120; i++) {
                t += 10 * SEC;
                assert_int_equal(canary_recent_add(&w, 0.002, t), 0);
        }
        assert_int_equal(canary_recent_count(&w, t), 30);
        assert_true(w.cap <= 64);
        canary_recent_done(&w);
}

static void test_recent_export_empty_and_full(void **state)
{
        struct canary_recent w;
        struct mset *s = mset_new();
        char *text;
        (void)state;

        assert_int_equal(canary_recent_init(&w, CANARY_RECENT_WINDOW, 16), 0);
        canary_recent_export(&w, s, "path=\"/x\"", 0);
        text = render(s);
        /* empty: no quantile lines (absent, not 0), sum and count 0 */
        assert_string_equal(text,
                            "# HELP diskpulse_sync_recent_seconds Quantiles of the canary probe "
                            "latency over the recent window (the last 5 minutes unless "
                            "configured, and at least the last 10 probes); _sum and _count since "
                            "start.\n"
                            "# TYPE diskpulse_sync_recent_seconds summary\n"
                            "diskpulse_sync_recent_seconds_sum{path=\"/x\"} 0\n"
                            "diskpulse_sync_recent_seconds_count{path=\"/x\"} 0\n"
                            "# HELP diskpulse_sync_recent_samples Probes in the recent window, "
                            "which its quantiles and ratios rest on.\n"
                            "# TYPE diskpulse_sync_recent_samples gauge\n"
                            "diskpulse_sync_recent_samples{path=\"/x\"} 0\n");
        free(text);
        mset_free(s);

        s = mset_new();
        assert_int_equal(canary_recent_add(&w, 0.5, SEC), 0);
        assert_int_equal(canary_recent_add(&w, 0.25, 2 * SEC), 0);
        assert_int_equal(canary_recent_add(&w, 1, 3 * SEC), 0);
        canary_recent_export(&w, s, "path=\"/x\"", 3 * SEC);
        text = render(s);
        assert_non_null(strstr(text, "diskpulse_sync_recent_seconds{path=\"/x\",quantile=\"0.5\"} "
                                     "0.5\n"
                                     "diskpulse_sync_recent_seconds{path=\"/x\",quantile=\"0.9\"} "
                                     "0.9\n"
                                     "diskpulse_sync_recent_seconds{path=\"/x\",quantile=\"0.99\"} "
                                     "0.99\n"
                                     "diskpulse_sync_recent_seconds_sum{path=\"/x\"} 1.75\n"
                                     "diskpulse_sync_recent_seconds_count{path=\"/x\"} 3\n"));
        assert_non_null(strstr(text, "diskpulse_sync_recent_samples{path=\"/x\"} 3\n"));
        free(text);
        mset_free(s);
        /* after the window's age: the newest probes stay (fewer than the minimum were taken) */
        s = mset_new();
        canary_recent_export(&w, s, "", 400 * SEC);
        text = render(s);
        assert_non_null(strstr(text, "diskpulse_sync_recent_seconds{quantile=\"0.5\"} 0.5\n"));
        assert_non_null(strstr(text, "diskpulse_sync_recent_seconds_count 3\n"));
        assert_non_null(strstr(text, "diskpulse_sync_recent_samples 3\n"));
        free(text);
        mset_free(s);
        /* a window that keeps no minimum empties: quantiles gone, sum and count stay (counters) */
        w.min = 0;
        s = mset_new();
        canary_recent_export(&w, s, "", 400 * SEC);
        text = render(s);
        assert_null(strstr(text, "quantile=\""));
        assert_non_null(strstr(text, "diskpulse_sync_recent_seconds_count 3\n"));
        free(text);
        mset_free(s);
        canary_recent_done(&w);
}

/* ---- Baseline ---- */

/* A fake prober: one probe every interval on both clocks. */
struct clock {
        usec_t mono, real, interval;
        int applied;
};

static void probe(struct canary_stats *s, struct clock *c, double v)
{
        int r = canary_stats_add(s, v, c->mono, c->real);
        assert_true(r == 0 || r == 1);
        c->applied += r;
        c->mono += c->interval;
        c->real += c->interval;
}

/* Probes with value v until `hours` more observations were applied. */
static void hours_of(struct canary_stats *s, struct clock *c, double v, int hours)
{
        int until = c->applied + hours;

        while (c->applied < until)
                probe(s, c, v);
}

static double baseline_of(const struct canary_stats *s)
{
        double b = 0;
        assert_true(canary_baseline_get(&s->baseline, &b));
        return b;
}

static void start(struct canary_stats *s, struct clock *c, usec_t interval)
{
        assert_int_equal(canary_stats_init(s, CANARY_RECENT_WINDOW, CANARY_RECENT_MAX_SAMPLES), 0);
        *c = (struct clock){.mono = 5 * SEC, .real = REAL0, .interval = interval};
}

static void test_baseline_warmup(void **state)
{
        struct canary_stats s;
        struct clock c;
        double b;
        (void)state;

        start(&s, &c, 10 * SEC);
        /* an observation per hour: the probe after 1 h of probing ends the period */
        for (int i = 0; i < 360; i++)
                probe(&s, &c, 0.001);
        assert_int_equal(c.applied, 0);
        probe(&s, &c, 0.001);
        assert_int_equal(c.applied, 1);
        assert_int_equal(s.baseline.st.n_dayobs, 1);
        assert_true(s.baseline.st.updated == REAL0 + 360 * 10 * SEC);
        assert_false(canary_baseline_get(&s.baseline, &b));

        /* the rest of the first day: 8 more hours of 1 ms, 11 bad ones (9 ms, a night's backup
         * and more), 3 of 1.2 ms; absent until the day's 24th hour */
        hours_of(&s, &c, 0.001, 8);
        hours_of(&s, &c, 0.009, 11);
        hours_of(&s, &c, 0.0012, 3);
        assert_int_equal(s.baseline.st.n_dayobs, 23);
        assert_false(canary_baseline_get(&s.baseline, &b));
        assert_false(canary_reference_get(&s.baseline, &b));
        hours_of(&s, &c, 0.0012, 1);
        /* the day's median: 9 hours of 1 ms, 4 of 1.2, 11 of 9: (1.2 + 1.2) / 2, the 11 bad
         * hours left out; the first daily median and the provisional reference as well */
        assert_close(baseline_of(&s), 0.0012, 1e-12);
        assert_int_equal(s.baseline.st.n_dayobs, 0);
        assert_int_equal(s.baseline.st.updates, 24);
        assert_int_equal(s.baseline.st.n_days, 1);
        assert_true(s.baseline.st.days[0].v == baseline_of(&s));
        assert_true(canary_reference_get(&s.baseline, &b) && b == baseline_of(&s));
        canary_stats_done(&s);
}

/* The degradation ratio at c->mono, false when there is none yet. */
static bool ratio_of(const struct canary_stats *s, const struct clock *c, double *ret)
{
        double med, base;

        return canary_baseline_get(&s->baseline, &base) &&
               canary_recent_median(&s->recent, c->mono, &med) == 0 &&
               canary_degradation_ratio(med, base, ret) == 0;
}

/* A healthy disk with a daily load cycle (1 ms, +-20 %, busiest at 14:00, the detection
 * table's), probed every 3 minutes from a start at each hour of the day in turn: the baseline is
 * the level of a whole day, never of the hours the probing happened to start in, so the
 * degradation ratio stays within the cycle's own swing (0.8 to 1.2) on every day from the
 * first baseline on. Learnt from the first 6 hours it was 0.82 ms after a start at midnight (a
 * ratio of 1.46 on the first afternoon, 1.5 with a little noise) and 1.17 ms after a start at
 * noon (0.68 at night). */
static void test_baseline_daily_cycle(void **state)
{
        (void)state;

        for (int start_hour = 0; start_hour < 24; start_hour += 3) {
                struct canary_stats s;
                struct clock c;
                double lo = INFINITY, hi = 0, first = 0, r;

                start(&s, &c, 180 * SEC);
                while (c.mono < 10 * DAY) {
                        double hour = fmod((double)c.mono / HOUR + start_hour, 24);

                        probe(&s, &c, 0.001 * (1 + 0.2 * sin(2 * M_PI * (hour - 8) / 24)));
                        if (first == 0)
                                (void)canary_baseline_get(&s.baseline, &first);
                        if (ratio_of(&s, &c, &r)) {
                                lo = r < lo ? r : lo;
                                hi = r > hi ? r : hi;
                        }
                }
                if (!(first > 0.00098 && first < 0.00102 && hi < 1.22 && lo > 0.78))
                        fail_msg("probing from %02d:00: first baseline %.3g ms (want the day's "
                                 "1 ms within 2 %%), degradation ratio %.3f to %.3f (want "
                                 "within the cycle's 0.8 to 1.2, +-0.02)",
                                 start_hour, first * 1e3, lo, hi);
                canary_stats_done(&s);
        }
}

/* Warm-up at value v: the first day. */
static void warm(struct canary_stats *s, struct clock *c, double v)
{
        hours_of(s, c, v, CANARY_BASELINE_WARMUP);
        assert_true(baseline_of(s) == v);
}

static void test_baseline_converges(void **state)
{
        struct canary_stats s;
        struct clock c;
        (void)state;

        start(&s, &c, 30 * SEC);
        warm(&s, &c, 0.001);
        /* a stable 1.2 ms (inside the band): half of the log distance in 7 days */
        hours_of(&s, &c, 0.0012, 7 * 24);
        assert_close(baseline_of(&s), 0.0012 * pow(1 / 1.2, 0.5), 1e-9); /* 1.0954 ms */
        hours_of(&s, &c, 0.0012, 7 * 24);
        assert_close(baseline_of(&s), 0.0012 * pow(1 / 1.2, 0.25), 1e-9); /* 1.1467 ms */
        /* after 30 days 2^(-720/168) = 5.1 % of the log distance is left (95 % in 30.3) */
        hours_of(&s, &c, 0.0012, 16 * 24);
        assert_close(log(0.0012 / baseline_of(&s)) / log(1.2), pow(2, -720.0 / 168), 1e-9);
        hours_of(&s, &c, 0.0012, 8);
        assert_true(log(0.0012 / baseline_of(&s)) / log(1.2) < 0.05);
        assert_int_equal(s.baseline.st.updates, CANARY_BASELINE_WARMUP + 30 * 24 + 8);
        canary_stats_done(&s);
}

static void test_baseline_refuses_degradation(void **state)
{
        struct canary_stats s;
        struct clock c;
        struct mset *set;
        double before, after, ratio = 0;
        (void)state;

        start(&s, &c, 10 * SEC);
        warm(&s, &c, 0.001);
        hours_of(&s, &c, 0.001, 24);
        before = baseline_of(&s);
        assert_true(before == 0.001);

        /* a day at 3x: +1 % (the cap per day of probing), far within 10 % */
        hours_of(&s, &c, 0.003, 24);
        after = baseline_of(&s);
        assert_close(after / before, 1.01, 1e-9);
        assert_true(after / before <= 1.10);
        /* the ratio shows the degradation in full */
        assert_int_equal(canary_recent_median(&s.recent, c.mono, &ratio), 0);
        assert_int_equal(canary_degradation_ratio(ratio, after, &ratio), 0);
        assert_close(ratio, 3 / 1.01, 1e-9);
        set = mset_new();
        canary_stats_export(&s, set, "", c.mono);
        assert_true(mset_find(set, CANARY_FAMILY_DEGRADATION)->samples[0].d > 2.9);
        mset_free(set);

        /* a week at 3x: +7.2 % */
        hours_of(&s, &c, 0.003, 6 * 24);
        assert_close(baseline_of(&s) / before, pow(1.01, 7), 1e-9);
        /* a 100x outage for a day moves it no more than a 3x day */
        after = baseline_of(&s);
        hours_of(&s, &c, 0.1, 24);
        assert_close(baseline_of(&s) / after, 1.01, 1e-9);
        canary_stats_done(&s);
}

static void test_baseline_learns_improvement(void **state)
{
        struct canary_stats s;
        struct clock c;
        double b60, want;
        (void)state;

        start(&s, &c, 30 * SEC);
        warm(&s, &c, 0.010);
        /* the disk becomes 10x faster: half-life 1 day until within 1.5x */
        hours_of(&s, &c, 0.001, 60);
        b60 = baseline_of(&s);
        assert_true(b60 > 0.0015);
        assert_close(b60, 0.001 * exp(log(10) * pow(2, -60.0 / 24)), 1e-9);
        hours_of(&s, &c, 0.001, 1);
        assert_true(baseline_of(&s) < 0.0015);
        /* then the normal rule: after 3 days in all */
        hours_of(&s, &c, 0.001, 11);
        want = 0.001 * exp(log(10) * pow(2, -61.0 / 24) * pow(2, -11.0 / 168));
        assert_close(baseline_of(&s), want, 1e-9);
        /* a small improvement inside the band is learnt at the normal speed */
        canary_stats_done(&s);

        start(&s, &c, 30 * SEC);
        warm(&s, &c, 0.001);
        hours_of(&s, &c, 0.0008, 7 * 24);
        assert_close(baseline_of(&s), 0.0008 * pow(1 / 0.8, 0.5), 1e-9);
        canary_stats_done(&s);
}

static void test_baseline_rule(void **state)
{
        const double a = 1 - pow(2, -1.0 / 168);
        (void)state;

        /* the band edges */
        assert_close(canary_baseline_next(1, 1.5), exp(a * log(1.5)), 1e-12);
        assert_close(canary_baseline_next(1, 1 / 1.5), exp(a * log(1 / 1.5)), 1e-12);
        assert_close(canary_baseline_next(1, 1.51), pow(1.01, 1.0 / 24), 1e-12);
        assert_close(canary_baseline_next(1, 1e6), pow(1.01, 1.0 / 24), 1e-12);
        assert_close(canary_baseline_next(1, 0.5), exp((1 - pow(2, -1.0 / 24)) * log(0.5)), 1e-12);
        assert_true(canary_baseline_next(0.002, 0.002) == 0.002);
        /* never below the floor */
        assert_true(canary_baseline_next(1e-6, 1e-9) == 1e-6);
}

static void test_baseline_periods(void **state)
{
        struct canary_baseline b;
        int applied = 0;
        (void)state;

        /* sparse probes, every 20 min: a period needs 6 probes, so it runs on over a second hour
         * and its median counts for both hours, each stamped with its hour's end */
        canary_baseline_init(&b);
        for (int i = 0; i < 6; i++)
                assert_int_equal(canary_baseline_add(&b, 0.002, (usec_t)i * 1200 * SEC, REAL0), 0);
        assert_int_equal(canary_baseline_add(&b, 0.002, 6 * 1200 * SEC, REAL0 + HOUR), 1);
        assert_int_equal(b.st.n_dayobs, 2);
        assert_true(b.st.dayobs[0] == 0.002 && b.st.dayobs[1] == 0.002);
        assert_true(b.st.updates == 2 && b.st.updated == REAL0 + HOUR);
        assert_true(b.period_start == 2 * HOUR && b.period_end == 3 * HOUR);

        /* 100 ms probes: 36000 in an hour, at most 1024 kept, evenly: median of the kept ones
         * (every 64th of i = 0..35999, values 1 ms + (i mod 1000) us) */
        canary_baseline_init(&b);
        for (int i = 0; i <= 36000 && !applied; i++) {
                int r = canary_baseline_add(&b, 0.001 + (i % 1000) * 1e-6,
                                            (usec_t)i * 100 * USEC_PER_MSEC, REAL0);
                assert_true(r == 0 || r == 1);
                applied = r;
                if (!applied)
                        assert_true(b.period_kept <= CANARY_PERIOD_KEEP);
        }
        assert_int_equal(applied, 1);
        assert_close(b.st.dayobs[0], 0.0015, 0.02);

        /* a value of 0 counts as 1 us; bad values leave b unchanged */
        canary_baseline_init(&b);
        assert_int_equal(canary_baseline_add(&b, NAN, 0, 0), -EINVAL);
        assert_false(b.period_open);
        assert_int_equal(canary_baseline_observe(&b, 0, REAL0), 0);
        assert_true(b.st.dayobs[0] == CANARY_BASELINE_FLOOR);
        assert_int_equal(canary_baseline_observe(&b, -1, REAL0), -EINVAL);
        assert_int_equal(b.st.updates, 1);
}

static void test_degradation_ratio(void **state)
{
        double r = -1;
        (void)state;

        assert_int_equal(canary_degradation_ratio(0.002, 0.001, &r), 0);
        assert_true(r == 2);
        assert_int_equal(canary_degradation_ratio(0.0005, 0.001, &r), 0);
        assert_true(r == 0.5);
        assert_int_equal(canary_degradation_ratio(0, 0.001, &r), 0);
        assert_true(r == 0 && !signbit(r));
        r = -1;
        assert_int_equal(canary_degradation_ratio(0.002, 0, &r), -ENODATA);
        assert_int_equal(canary_degradation_ratio(0.002, NAN, &r), -ENODATA);
        assert_int_equal(canary_degradation_ratio(0.002, INFINITY, &r), -ENODATA);
        assert_int_equal(canary_degradation_ratio(0.002, 1e-9, &r), -ENODATA);
        assert_int_equal(canary_degradation_ratio(NAN, 0.001, &r), -EINVAL);
        assert_int_equal(canary_degradation_ratio(-1, 0.001, &r), -EINVAL);
        assert_true(r == -1);
        /* the largest possible: 1e9 s over the 1 us floor, finite */
        assert_int_equal(canary_degradation_ratio(1e9, 1e-6, &r), 0);
        assert_true(isfinite(r));
}

/* Labels live in a set's arena: made anew for each set. */
static const char *target_labels(struct mset *set)
{
        return mset_labels(set, "path", "/srv", "device", "nvme0n1", "mode", "fdatasync", NULL);
}

static void test_stats_export(void **state)
{
        struct canary_stats s;
        struct clock c;
        struct mset *set;
        const char *labels;
        char *text;
        (void)state;

        start(&s, &c, 10 * SEC);
        set = mset_new();
        labels = target_labels(set);
        /* nothing probed: histogram of zeros and the summary's sum and count only */
        canary_stats_export(&s, set, labels, c.mono);
        assert_non_null(mset_find(set, CANARY_FAMILY_LATENCY));
        assert_int_equal(mset_find(set, CANARY_FAMILY_LAST)->n, 0);
        assert_int_equal(mset_find(set, CANARY_FAMILY_RECENT)->n, 2);
        assert_int_equal(mset_find(set, CANARY_FAMILY_BASELINE)->n, 0);
        assert_null(mset_find(set, CANARY_FAMILY_DEGRADATION));
        mset_free(set);

        /* warming up: last and quantiles, no baseline, no ratio (23 hours into the day) */
        hours_of(&s, &c, 0.001, CANARY_BASELINE_WARMUP - 1);
        probe(&s, &c, 0.004);
        set = mset_new();
        labels = target_labels(set);
        canary_stats_export(&s, set, labels, c.mono);
        text = render(set);
        assert_non_null(strstr(text, "diskpulse_sync_last_seconds{path=\"/srv\",device=\"nvme0n1\","
                                     "mode=\"fdatasync\"} 0.004\n"));
        assert_non_null(strstr(text, "quantile=\"0.5\"} 0.001\n"));
        assert_null(strstr(text, "diskpulse_sync_baseline_seconds{"));
        assert_null(strstr(text, "diskpulse_sync_degradation_ratio"));
        free(text);
        mset_free(set);

        /* warmed up: baseline 1 ms, ratio 1 */
        hours_of(&s, &c, 0.001, 1);
        set = mset_new();
        labels = target_labels(set);
        canary_stats_export(&s, set, labels, c.mono);
        text = render(set);
        assert_non_null(strstr(text, "diskpulse_sync_baseline_seconds{path=\"/srv\",device="
                                     "\"nvme0n1\",mode=\"fdatasync\"} 0.001\n"));
        assert_non_null(strstr(text, "diskpulse_sync_degradation_ratio{path=\"/srv\",device="
                                     "\"nvme0n1\",mode=\"fdatasync\"} 1\n"));
        free(text);
        mset_free(set);

        /* 10 minutes without probes: the ratio rests on the last probes, baseline stays */
        set = mset_new();
        labels = target_labels(set);
        canary_stats_export(&s, set, labels, c.mono + 600 * SEC);
        assert_int_equal(mset_find(set, CANARY_FAMILY_BASELINE)->n, 1);
        assert_int_equal(mset_find(set, CANARY_FAMILY_DEGRADATION)->n, 1);
        mset_free(set);
        /* a window that keeps no minimum: empty, the ratio absent */
        s.recent.min = 0;
        set = mset_new();
        labels = target_labels(set);
        canary_stats_export(&s, set, labels, c.mono + 600 * SEC);
        assert_int_equal(mset_find(set, CANARY_FAMILY_BASELINE)->n, 1);
        assert_int_equal(mset_find(set, CANARY_FAMILY_DEGRADATION)->n, 0);
        assert_int_equal(mset_find(set, CANARY_FAMILY_DRIFT)->n, 0);
        mset_free(set);

        assert_int_equal(canary_stats_add(&s, NAN, c.mono, c.real), -EINVAL);
        assert_int_equal(canary_stats_add(&s, 2e9, c.mono, c.real), -ERANGE);
        assert_true(s.last == 0.001);
        canary_stats_done(&s);
}

/* ---- State records ---- */

static void test_record_roundtrip_restart(void **state)
{
        struct canary_stats s, s2;
        struct clock c, c2;
        struct canary_records recs = {0}, back;
        struct canary_record rec;
        char *text;
        size_t len;
        (void)state;

        /* mid-warm-up */
        start(&s, &c, 10 * SEC);
        hours_of(&s, &c, 0.00123456789, 2);
        hours_of(&s, &c, 0.000987654321, 1);
        assert_int_equal(canary_record_init(&rec, "wwn:0x5002538e40a1b2c3", "fdatasync",
                                            "/var/lib/postgresql/15/main"),
                         0);
        rec.st = s.baseline.st;
        assert_int_equal(canary_records_put(&recs, &rec), 0);

        /* after warm-up, a value with all 17 digits */
        start(&s2, &c2, 10 * SEC);
        warm(&s2, &c2, 0.001);
        hours_of(&s2, &c2, 0.0012345, 5);
        assert_int_equal(canary_record_init(&rec, "serial:Samsung_SSD_860_EVO_S3Z", "dsync",
                                            "/srv/with space/and\\backslash/\xc3\xa9t\xc3\xa9"),
                         0);
        rec.st = s2.baseline.st;
        assert_int_equal(canary_records_put(&recs, &rec), 0);

        assert_int_equal(canary_records_format(&recs, &text, &len), 0);
        assert_int_equal(strlen(text), len);
        assert_non_null(strstr(text, "path=/srv/with\\x20space/and\\\\backslash/\\xc3\\xa9t"));
        assert_int_equal(canary_records_parse(text, len, &back), 0);
        assert_int_equal(back.n, 2);
        assert_int_equal(back.bad, 0);

        /* the restarted daemon finds its records by key and restores the exact values */
        const struct canary_record *r1 =
            canary_records_find(&back, "wwn:0x5002538e40a1b2c3", "fdatasync",
                                "/var/lib/postgresql/15/main", CANARY_REGIME_IDLE);
        const struct canary_record *r2 = canary_records_find(
            &back, "serial:Samsung_SSD_860_EVO_S3Z", "dsync",
            "/srv/with space/and\\backslash/\xc3\xa9t\xc3\xa9", CANARY_REGIME_IDLE);
        assert_non_null(r1);
        assert_non_null(r2);
        assert_true(r1->st.value == 0);
        assert_int_equal(r1->st.n_dayobs, 3);
        for (unsigned i = 0; i < 3; i++)
                assert_true(r1->st.dayobs[i] == s.baseline.st.dayobs[i]);
        assert_true(r1->st.updates == 3 && r1->st.updated == s.baseline.st.updated);
        assert_true(r2->st.value == s2.baseline.st.value); /* bit for bit */
        assert_true(r2->st.updates == CANARY_BASELINE_WARMUP + 5 &&
                    r2->st.updated == s2.baseline.st.updated);

        struct canary_stats restored;
        struct clock c3 = c2;
        assert_int_equal(canary_stats_init(&restored, CANARY_RECENT_WINDOW, 64), 0);
        assert_int_equal(canary_baseline_restore(&restored.baseline, &r2->st), 0);
        assert_true(baseline_of(&restored) == baseline_of(&s2));
        /* both go on identically from the next full hour (the restarted one lost its period) */
        c3.applied = 0;
        hours_of(&restored, &c3, 0.002, 3);
        c2.applied = 0;
        hours_of(&s2, &c2, 0.002, 3);
        assert_true(baseline_of(&restored) == baseline_of(&s2));
        /* ... and so does a warm-up, to its end (3 hours of the day were restored) */
        struct canary_stats w;
        struct clock cw = c;
        assert_int_equal(canary_stats_init(&w, CANARY_RECENT_WINDOW, 64), 0);
        assert_int_equal(canary_baseline_restore(&w.baseline, &r1->st), 0);
        cw.applied = 0;
        hours_of(&w, &cw, 0.0011, CANARY_BASELINE_WARMUP - 3);
        c.applied = 0;
        hours_of(&s, &c, 0.0011, CANARY_BASELINE_WARMUP - 3);
        assert_true(baseline_of(&w) == baseline_of(&s));

        /* a record formats to the same text again */
        char *text2;
        size_t len2;
        assert_int_equal(canary_records_format(&back, &text2, &len2), 0);
        assert_int_equal(len2, len);
        assert_memory_equal(text2, text, len);
        free(text2);
        free(text);
        canary_records_free(&back);
        canary_records_free(&recs);
        canary_stats_done(&s);
        canary_stats_done(&s2);
        canary_stats_done(&restored);
        canary_stats_done(&w);
}

static void test_records_garbage(void **state)
{
        static const char file[] =
            "# diskpulse canary baselines\n"
            "\n"
            "diskpulse-canary-baselines 1\r\n"
            "disk=wwn:1 mode=fdatasync path=/a baseline=0.001 updates=7 updated=5 warmup=-\n"
            "garbage\n"
            "disk=wwn:2 mode=fdatasync path=/a baseline=abc updates=7\n"              /* number */
            "disk=wwn:3 mode=fdatasync path=/a updates=7\n"                           /* missing */
            "disk=wwn:4 mode=fdatasync path=/a baseline=0.001 baseline=1 updates=7\n" /* twice */
            "disk=wwn:5 mode=fdatasync path=/a baseline=0.001 updates=-1\n"           /* sign */
            "disk=wwn:6 mode=fdatasync path=/a baseline=0.001 updates=1 warmup=0.001\n" /* both */
            "disk=wwn:7 mode=fdatasync path=/a baseline=0 updates=6 "
            "warmup=0.001,0.001,0.001,0.001,0.001,0.001\n"                         /* 6 */
            "disk=wwn:8 mode=fdatasync path=/a baseline=1e-400 updates=1\n"        /* under */
            "disk=wwn:9 mode=fdatasync path=/a baseline=inf updates=1\n"           /* inf */
            "disk=wwn:10 mode=fdatasync path=/a\\x00b baseline=0.001 updates=1\n"  /* NUL */
            "disk=wwn:11 mode=fdatasync path=/a\\q baseline=0.001 updates=1\n"     /* escape */
            "disk=wwn:12 mode=fdatasync path=/a\\x4 baseline=0.001 updates=1\n"    /* short */
            "disk=wwn:13 mode=fdatasync path=/\xc3\xa9 baseline=0.001 updates=1\n" /* raw */
            "disk=wwn:14 mode=fdatasync path= baseline=0.001 updates=1\n"          /* empty */
            "disk=wwn:15 mode=fdatasync path=/a baseline=2e-7 updates=1\n"         /* floor */
            "disk=wwn:1 mode=fdatasync path=/a baseline=0.002 updates=8\n"         /* dup */
            "   # a comment\n"
            "disk=wwn:16 mode=fdatasync\tpath=/b  baseline=-0 updates=2 future_field=x "
            "warmup=0.0011,0.0012\n"
            "disk=wwn:17 mode=fdatasync path=/c baseline=0.003 updates=9 Bad=1\n" /* name */
            "=x disk=wwn:18 mode=fdatasync path=/c baseline=0.003 updates=9\n"
            "disk=wwn:20 mode=fdatasync path=/a baseline=0 updates=3 warmup=0.001 "
            "dayobs=0.001,0.001\n" /* an older warm-up beside a running day */
            "disk=wwn:19 mode=fdatasync path=/c baseline=0.003 updates=9"; /* no newline */
        struct canary_records recs;
        const struct canary_record *r;
        (void)state;

        assert_int_equal(canary_records_parse(file, sizeof file - 1, &recs), 0);
        assert_int_equal(recs.n, 3);
        assert_int_equal(recs.bad, 19);
        r = canary_records_find(&recs, "wwn:1", "fdatasync", "/a", CANARY_REGIME_IDLE);
        assert_non_null(r);
        assert_true(r->st.value == 0.001 && r->st.updates == 7 && r->st.updated == 5);
        r = canary_records_find(&recs, "wwn:16", "fdatasync", "/b", CANARY_REGIME_IDLE);
        assert_non_null(r);
        assert_true(r->st.value == 0 && !signbit(r->st.value));
        /* an older diskpulse's warm-up goes on as the first hours of the first day */
        assert_int_equal(r->st.n_dayobs, 2);
        assert_true(r->st.dayobs[1] == 0.0012 && r->st.updated == 0);
        assert_non_null(
            canary_records_find(&recs, "wwn:19", "fdatasync", "/c", CANARY_REGIME_IDLE));
        canary_records_free(&recs);
        canary_records_free(&recs);
}

/* Version 2 keys records by regime as well; version 1 files (no regime) are read as idle. */
static void test_records_regimes(void **state)
{
        static const char v1[] =
            "diskpulse-canary-baselines 1\n"
            "disk=wwn:1 mode=fdatasync path=/a baseline=0.001 updates=7 updated=5 warmup=-\n";
        static const char v2[] =
            "diskpulse-canary-baselines 2\n"
            "disk=wwn:1 mode=fdatasync path=/a regime=idle baseline=0.001 updates=7\n"
            "disk=wwn:1 mode=fdatasync path=/a regime=busy baseline=0.0004 updates=7\n"
            "disk=wwn:1 mode=fdatasync path=/a baseline=0.002 updates=8\n" /* idle dup */
            "disk=wwn:1 mode=fdatasync path=/a regime=busy baseline=0.003 updates=8\n" /* dup */
            "disk=wwn:2 mode=fdatasync path=/a regime=lazy baseline=0.001 updates=1\n" /* bad */
            "disk=wwn:3 mode=fdatasync path=/a regime= baseline=0.001 updates=1\n"     /* empty */
            "disk=wwn:4 mode=fdatasync path=/a regime=busy regime=busy baseline=0.001 "
            "updates=1\n"; /* twice */
        struct canary_records recs, back;
        const struct canary_record *r;
        enum canary_regime g;
        char *text;
        size_t len;
        (void)state;

        assert_string_equal(canary_regime_to_string(CANARY_REGIME_IDLE), "idle");
        assert_string_equal(canary_regime_to_string(CANARY_REGIME_BUSY), "busy");
        assert_null(canary_regime_to_string(_CANARY_REGIME_MAX));
        assert_int_equal(canary_regime_from_string("busy", &g), 0);
        assert_int_equal(g, CANARY_REGIME_BUSY);
        assert_int_equal(canary_regime_from_string("Busy", &g), -EINVAL);
        assert_int_equal(canary_regime_from_string(NULL, &g), -EINVAL);

        assert_int_equal(canary_records_parse(v1, sizeof v1 - 1, &recs), 0);
        assert_int_equal(recs.n, 1);
        assert_int_equal(recs.bad, 0);
        assert_null(canary_records_find(&recs, "wwn:1", "fdatasync", "/a", CANARY_REGIME_BUSY));
        r = canary_records_find(&recs, "wwn:1", "fdatasync", "/a", CANARY_REGIME_IDLE);
        assert_non_null(r);
        assert_true(r->st.value == 0.001 && r->st.updates == 7);
        /* written back as version 3, the regime spelt out, the baseline the final reference */
        assert_int_equal(canary_records_format(&recs, &text, &len), 0);
        assert_string_equal(text, "diskpulse-canary-baselines 3\n"
                                  "disk=wwn:1 mode=fdatasync path=/a regime=idle baseline=0.001 "
                                  "updates=7 updated=5 reference=0.001 refdays=final "
                                  "dayobs=- days=-\n");
        free(text);
        canary_records_free(&recs);

        assert_int_equal(canary_records_parse(v2, sizeof v2 - 1, &recs), 0);
        assert_int_equal(recs.n, 2);
        assert_int_equal(recs.bad, 5);
        r = canary_records_find(&recs, "wwn:1", "fdatasync", "/a", CANARY_REGIME_IDLE);
        assert_non_null(r);
        assert_true(r->st.value == 0.001);
        r = canary_records_find(&recs, "wwn:1", "fdatasync", "/a", CANARY_REGIME_BUSY);
        assert_non_null(r);
        assert_true(r->st.value == 0.0004);
        /* put replaces only the record of the same regime */
        struct canary_record rec = *r;
        rec.st.value = 0.0005;
        assert_int_equal(canary_records_put(&recs, &rec), 0);
        assert_int_equal(recs.n, 2);
        assert_true(
            canary_records_find(&recs, "wwn:1", "fdatasync", "/a", CANARY_REGIME_IDLE)->st.value ==
            0.001);
        rec.regime = _CANARY_REGIME_MAX;
        assert_int_equal(canary_records_put(&recs, &rec), -EINVAL);
        assert_int_equal(canary_records_format(&recs, &text, &len), 0);
        assert_int_equal(canary_records_parse(text, len, &back), 0);
        assert_int_equal(back.n, 2);
        assert_int_equal(back.bad, 0);
        assert_true(
            canary_records_find(&back, "wwn:1", "fdatasync", "/a", CANARY_REGIME_BUSY)->st.value ==
            0.0005);
        free(text);
        canary_records_free(&back);
        canary_records_free(&recs);
}

/* The burst median and the busy/idle ratio. */
static void test_median_and_busy_idle_ratio(void **state)
{
        double three[] = {0.003, 0.001, 0.002}, four[] = {4, 1, 3, 2}, one[] = {7};
        struct canary_stats idle, busy;
        double v;
        (void)state;

        assert_true(canary_median(three, 3) == 0.002);
        assert_true(canary_median(four, 4) == 2.5);
        assert_true(canary_median(one, 1) == 7);

        assert_int_equal(canary_stats_init(&idle, CANARY_RECENT_WINDOW, 64), 0);
        assert_int_equal(canary_stats_init(&busy, CANARY_RECENT_WINDOW, 64), 0);
        assert_int_equal(canary_busy_idle_ratio(&idle, &busy, 10 * SEC, &v), -ENODATA);
        assert_int_equal(canary_stats_add(&idle, 0.004, 10 * SEC, 1), 0);
        assert_int_equal(canary_busy_idle_ratio(&idle, &busy, 10 * SEC, &v), -ENODATA);
        assert_int_equal(canary_stats_add(&busy, 0.001, 10 * SEC, 1), 0);
        assert_int_equal(canary_stats_add(&idle, 0.002, 20 * SEC, 1), 0);
        assert_int_equal(canary_stats_add(&busy, 0.002, 20 * SEC, 1), 0);
        v = -1;
        assert_int_equal(canary_busy_idle_ratio(&idle, &busy, 20 * SEC, &v), 0);
        assert_true(fabs(v - 0.0015 / 0.003) < 1e-12);
        /* the idle window expires first (no minimum kept): no ratio */
        idle.recent.min = 0;
        assert_int_equal(canary_busy_idle_ratio(&idle, &busy, 20 * SEC + CANARY_RECENT_WINDOW, &v),
                         -ENODATA);
        /* an idle median of 0 (a clock that did not move): no ratio, not Inf */
        struct canary_stats z;
        assert_int_equal(canary_stats_init(&z, CANARY_RECENT_WINDOW, 64), 0);
        assert_int_equal(canary_stats_add(&z, 0, 10 * SEC, 1), 0);
        assert_int_equal(canary_busy_idle_ratio(&z, &busy, 20 * SEC, &v), -ENODATA);
        canary_stats_done(&z);
        canary_stats_done(&idle);
        canary_stats_done(&busy);
}

/* ---- Reference and trend ---- */

#define DAY_US (86400 * SEC)

/* Applies hourly observations of value v for `days` days (real time moves an hour each). */
static void days_of(struct canary_baseline *b, usec_t *real, double v, int days)
{
        for (int h = 0; h < days * CANARY_DAY_OBS; h++) {
                *real += 3600 * SEC;
                assert_int_equal(canary_baseline_observe(b, v, *real), 0);
        }
}

static double reference_of(const struct canary_baseline *b)
{
        double r = 0;
        assert_true(canary_reference_get(b, &r));
        return r;
}

/* The as-new figure: the first baseline, then the median of the first 7 daily medians, then
 * fixed; a creep moves the baseline, never the reference. */
static void test_reference(void **state)
{
        struct canary_baseline b;
        usec_t real = REAL0;
        double r;
        (void)state;

        canary_baseline_init(&b);
        /* the first day is the warm-up: 12 hours of 1 ms, 11 of 3 ms, no reference yet */
        for (int h = 0; h < CANARY_BASELINE_WARMUP - 1; h++)
                assert_int_equal(
                    canary_baseline_observe(&b, h < 12 ? 0.001 : 0.003, real += 3600 * SEC), 0);
        assert_false(canary_reference_get(&b, &r));
        assert_int_equal(b.st.n_dayobs, CANARY_DAY_OBS - 1);
        /* its 24th hour closes it: its median is the first baseline, the provisional reference
         * and the first daily median */
        assert_int_equal(canary_baseline_observe(&b, 0.003, real += 3600 * SEC), 0);
        assert_int_equal(b.st.n_days, 1);
        assert_close(reference_of(&b), 0.002, 1e-15);
        assert_true(canary_baseline_get(&b, &r) && r == reference_of(&b));
        assert_true(b.st.days[0].t == real && b.st.days[0].v == r);
        assert_int_equal(b.st.n_dayobs, 0);
        /* days of 2, 4, 1, 3, 10, 2, 2 ms: the median of the 7 is 2 ms, then final */
        days_of(&b, &real, 0.004, 1);
        assert_close(reference_of(&b), 0.003, 1e-15);
        days_of(&b, &real, 0.001, 1);
        days_of(&b, &real, 0.003, 1);
        days_of(&b, &real, 0.010, 1);
        days_of(&b, &real, 0.002, 1);
        assert_false(b.st.ref_final);
        assert_int_equal(b.st.n_refdays, 6);
        days_of(&b, &real, 0.002, 1);
        assert_true(b.st.ref_final);
        assert_int_equal(b.st.n_refdays, 0);
        assert_true(reference_of(&b) == 0.002);
        /* 60 days of a creep of 1 % a day: 1.8x; the reference learns nothing of it */
        for (int d = 1; d <= 60; d++)
                days_of(&b, &real, 0.002 * pow(1.01, d), 1);
        assert_true(reference_of(&b) == 0.002);
        double base;
        assert_close(0.002 * pow(1.01, 60) / reference_of(&b), pow(1.01, 60), 1e-12);
        /* a faster week is taken only when more than 1.5x faster (a firmware fix, a drive
         * emptied): a week at 1.5 ms is not */
        days_of(&b, &real, 0.0015, 7);
        assert_true(reference_of(&b) == 0.002);
        days_of(&b, &real, 0.001, 3);
        assert_true(reference_of(&b) == 0.002); /* 4 of the last 7 days still 1.5 ms */
        days_of(&b, &real, 0.001, 1);
        assert_true(reference_of(&b) == 0.001);

        /* the operator's reset: the baseline is the provisional reference, 7 days refine it */
        canary_reference_reset(&b.st);
        assert_false(b.st.ref_final);
        assert_int_equal(b.st.n_days, 0);
        assert_true(canary_baseline_get(&b, &base));
        assert_true(reference_of(&b) == base);
        days_of(&b, &real, 0.005, 7);
        assert_true(b.st.ref_final);
        assert_true(reference_of(&b) == 0.005);

        /* a reset while warming up: no reference until the warm-up ends, and the warm-up's
         * hours so far kept */
        canary_baseline_init(&b);
        assert_int_equal(canary_baseline_observe(&b, 0.001, real), 0);
        canary_reference_reset(&b.st);
        assert_false(canary_reference_get(&b, &r));
        assert_int_equal(canary_baseline_state_check(&b.st), 0);
        assert_int_equal(b.st.n_dayobs, 1);
        days_of(&b, &real, 0.001, 1);
        assert_true(canary_baseline_get(&b, &r) && reference_of(&b) == r && r == 0.001);
        assert_int_equal(b.st.n_dayobs, 1); /* the day began an hour into the first */
}

/* Theil-Sen in log space: exact on a clean exponential, indifferent to spikes and to a week of
 * maintenance load, and it needs time between days. */
static void test_trend(void **state)
{
        struct canary_day d[CANARY_DAYS_KEPT];
        struct canary_baseline b;
        usec_t real = REAL0;
        double f;
        unsigned days;
        (void)state;

        for (int i = 0; i < CANARY_DAYS_KEPT; i++)
                d[i] =
                    (struct canary_day){.t = REAL0 + (usec_t)i * DAY_US, .v = 0.001 * pow(1.01, i)};
        assert_int_equal(canary_trend_fit(d, CANARY_DAYS_KEPT, DAY_US, &f), 0);
        assert_close(f, pow(1.01, 30), 1e-9);
        /* 7 days 5x slower (maintenance) and 3 single 50x spikes: within 2 % */
        for (int i = 10; i < 17; i++)
                d[i].v *= 5;
        d[3].v *= 50;
        d[22].v *= 50;
        d[27].v *= 50;
        assert_int_equal(canary_trend_fit(d, CANARY_DAYS_KEPT, DAY_US, &f), 0);
        assert_true(fabs(f / pow(1.01, 30) - 1) < 0.02);
        /* flat: 1 */
        for (int i = 0; i < CANARY_DAYS_KEPT; i++)
                d[i].v = 0.004;
        assert_int_equal(canary_trend_fit(d, CANARY_DAYS_KEPT, DAY_US, &f), 0);
        assert_true(f == 1);
        /* days closer than half a day (a clock set back) give no pair */
        d[1].t = d[0].t;
        assert_int_equal(canary_trend_fit(d, 2, DAY_US, &f), -ENODATA);
        assert_int_equal(canary_trend_fit(d, 1, DAY_US, &f), -ENODATA);

        /* through the baseline: none before 3 days, then per day; at most 30 days kept */
        canary_baseline_init(&b);
        days_of(&b, &real, 0.001, 1); /* the warm-up: the first day */
        assert_int_equal(b.st.n_days, 1);
        days_of(&b, &real, 0.001, 1);
        assert_int_equal(b.st.n_days, 2);
        assert_false(canary_trend_get(&b, &f, &days));
        for (int i = 1; i <= 40; i++)
                days_of(&b, &real, 0.001 * pow(1.02, i), 1);
        assert_int_equal(b.st.n_days, CANARY_DAYS_KEPT);
        assert_true(canary_trend_get(&b, &f, &days));
        assert_int_equal(days, CANARY_DAYS_KEPT);
        /* the days of probing are the days of input (the first is the warm-up): 2 % a day */
        assert_close(f, pow(1.02, 30), 1e-9);
        /* restored from a state: the same trend */
        struct canary_baseline b2;
        double f2;
        assert_int_equal(canary_baseline_restore(&b2, &b.st), 0);
        assert_true(canary_trend_get(&b2, &f2, &days));
        assert_true(f2 == f);
}

/* A clock gone wrong: days out of order are never fitted, a clock set back mid-run does not
 * reorder the days, and a state from a clock that ran ahead loses only its future days. */
static void test_trend_clock(void **state)
{
        struct canary_day d[CANARY_DAYS_KEPT], ordered[CANARY_DAYS_KEPT];
        struct canary_baseline_state st;
        struct canary_clock_fix fix;
        struct canary_baseline b;
        usec_t real = REAL0, back;
        double f, g;
        unsigned days, n = 0;
        (void)state;

        /* 12 days growing 2 % a day, with 3 hand-edited days out of order (a 100x value at an
         * earlier time each): fitted as the 12 in order alone */
        for (int i = 0; i < 15; i++) {
                bool odd = i == 4 || i == 8 || i == 11;
                d[i] = (struct canary_day){.t = REAL0 + (usec_t)(i + 1) * DAY_US,
                                           .v = 0.001 * pow(1.02, i)};
                if (odd)
                        d[i] = (struct canary_day){.t = REAL0 + (usec_t)(i - 2) * DAY_US, .v = 0.1};
                else
                        ordered[n++] = d[i];
        }
        assert_int_equal(canary_trend_fit(d, 15, DAY_US, &f), 0);
        assert_int_equal(canary_trend_fit(ordered, n, DAY_US, &g), 0);
        assert_true(f == g);
        assert_close(f, pow(1.02, 30), 1e-9);

        /* a clock set back by 10 days after 5 days: the next days come after the last one, a
         * day apart, and the trend goes on as before */
        canary_baseline_init(&b);
        for (int i = 1; i <= 5; i++) /* the first is the warm-up */
                days_of(&b, &real, 0.001 * pow(1.02, i), 1);
        back = real - 10 * DAY_US;
        for (int i = 6; i <= 10; i++)
                days_of(&b, &back, 0.001 * pow(1.02, i), 1);
        assert_int_equal(b.st.n_days, 10);
        for (unsigned i = 1; i < b.st.n_days; i++)
                assert_true(b.st.days[i].t > b.st.days[i - 1].t);
        assert_true(b.st.days[9].t - b.st.days[8].t == DAY_US);
        assert_true(canary_trend_get(&b, &f, &days));
        assert_close(f, pow(1.02, 30), 0.02);

        /* a state written a year ahead: its future days and updated go, the rest stays */
        st = b.st;
        st.updated = REAL0 + 400 * DAY_US;
        for (unsigned i = 6; i < st.n_days; i++)
                st.days[i].t += 365 * DAY_US;
        real = REAL0 + 8 * DAY_US; /* the clock now: right */
        assert_true(canary_baseline_state_clock(&st, real, CANARY_CLOCK_TOLERANCE, &fix));
        assert_int_equal(fix.future_days, 4);
        assert_int_equal(fix.unordered_days, 0);
        assert_true(fix.future_updated);
        assert_true(fix.latest == REAL0 + 400 * DAY_US);
        assert_true(st.updated == real);
        assert_int_equal(st.n_days, 6);
        assert_true(st.reference == b.st.reference && st.value == b.st.value);
        assert_int_equal(canary_baseline_state_check(&st), 0);
        /* within the tolerance: nothing to do */
        st = b.st;
        assert_false(canary_baseline_state_clock(&st, st.days[st.n_days - 1].t - DAY_US / 2,
                                                 CANARY_CLOCK_TOLERANCE, &fix));
        assert_int_equal(st.n_days, b.st.n_days);
        /* days out of order in a file: dropped, counted */
        st = b.st;
        st.days[3].t = st.days[1].t;
        assert_true(
            canary_baseline_state_clock(&st, real + 30 * DAY_US, CANARY_CLOCK_TOLERANCE, &fix));
        assert_int_equal(fix.unordered_days, 1);
        assert_int_equal(fix.future_days, 0);
        assert_int_equal(st.n_days, b.st.n_days - 1);
}

/* --canary.baseline-period (tests and evaluation): an "hour" of 1 s makes a day of 24 s, and
 * the trend is per 30 such days; restore keeps the period. */
static void test_short_period(void **state)
{
        struct canary_stats s;
        struct canary_baseline b2;
        usec_t t = 0;
        double f, ref;
        unsigned days;
        (void)state;

        assert_int_equal(canary_stats_init(&s, CANARY_RECENT_WINDOW, 64), 0);
        canary_baseline_set_period(&s.baseline, SEC);
        /* 10 probes a second: 7 days of 24 s at 2 ms, the first the warm-up */
        for (; t < (7 * 24 + 1) * SEC; t += SEC / 10)
                assert_true(canary_stats_add(&s, 0.002, t, REAL0 + t) >= 0);
        assert_true(s.baseline.st.ref_final);
        assert_true(canary_reference_get(&s.baseline, &ref) && ref == 0.002);
        /* 20 days growing 2 % a day */
        for (int d = 1; d <= 20; d++)
                for (usec_t end = t + 24 * SEC; t < end; t += SEC / 10)
                        assert_true(canary_stats_add(&s, 0.002 * pow(1.02, d), t, REAL0 + t) >= 0);
        assert_true(canary_trend_get(&s.baseline, &f, &days));
        assert_true(days >= 25);
        assert_true(fabs(f / pow(1.02, 30) - 1) < 0.05);
        assert_true(canary_reference_get(&s.baseline, &ref) && ref == 0.002);
        /* restored into a baseline with the same period: the same trend */
        canary_baseline_init(&b2);
        canary_baseline_set_period(&b2, SEC);
        assert_int_equal(canary_baseline_restore(&b2, &s.baseline.st), 0);
        assert_true(b2.period_len == SEC);
        double f2;
        assert_true(canary_trend_get(&b2, &f2, &days) && f2 == f);
        canary_stats_done(&s);
}

/* Probes every `spacing` from mono `first` (+-10 % jitter when jitter) until at least `obs`
 * observations were applied; fails unless the probe that applied them came at most one spacing
 * after `first` + that many periods (N periods last N x period). */
static void check_observations(usec_t period, usec_t first, usec_t spacing, bool jitter,
                               uint64_t obs)
{
        struct canary_baseline b;
        usec_t t = first, end;
        uint64_t rng = 12345;

        canary_baseline_init(&b);
        canary_baseline_set_period(&b, period);
        for (;;) {
                assert_true(canary_baseline_add(&b, 0.002, t, REAL0 + t) >= 0);
                if (b.st.updates >= obs)
                        break;
                t += jitter ? spacing * 9 / 10 + prng_next(&rng) % (spacing / 5) : spacing;
        }
        end = first + b.st.updates * period;
        if (t < end || t >= end + (jitter ? spacing * 11 / 10 : spacing))
                fail_msg("%llu periods of %llu us with a probe every %llu us ended at %llu us",
                         (unsigned long long)b.st.updates, (unsigned long long)period,
                         (unsigned long long)spacing, (unsigned long long)(t - first));
}

/* The hours lie on a grid: N of them last N hours whatever the spacing of the probes (they used
 * to end at the first probe after them: 24 periods of 1 s with a probe every 0.15 s lasted
 * 25.2 s, and with one every 0.4 s, 6 probes to a period, 57.6 s). */
static void test_period_grid(void **state)
{
        static const usec_t spacing[] = {SEC / 10, 150 * USEC_PER_MSEC, 170 * USEC_PER_MSEC,
                                         400 * USEC_PER_MSEC, 700 * USEC_PER_MSEC};
        (void)state;

        for (size_t i = 0; i < sizeof spacing / sizeof spacing[0]; i++) {
                check_observations(SEC, 0, spacing[i], false, 24);
                check_observations(SEC, 0, spacing[i], true, 24);
        }
        /* the default hour: probes every 3 minutes +-10 %, and every 10 minutes +-10 % (6 an
         * hour or 5: then two hours make one period and count twice) */
        check_observations(HOUR, 7 * SEC, 180 * SEC, true, 240);
        check_observations(HOUR, 7 * SEC, 600 * SEC, true, 240);
}

/* Each period's observation is stamped with the wall clock at its end, so the days lie 24
 * periods apart on the wall clock too; a gap without probes counts for nothing. */
static void test_period_stamps(void **state)
{
        struct canary_baseline b;
        usec_t t;
        (void)state;

        canary_baseline_init(&b);
        canary_baseline_set_period(&b, SEC);
        for (t = 0; b.st.updates < 3; t += 170 * USEC_PER_MSEC)
                assert_true(canary_baseline_add(&b, 0.002, t, REAL0 + t) >= 0);
        /* the 3rd ended at 3 s, applied by the probe at 3.06 s */
        assert_true(t - 170 * USEC_PER_MSEC == 3060 * USEC_PER_MSEC);
        assert_true(b.st.updated == REAL0 + 3 * SEC);
        assert_true(b.period_start == 3 * SEC && b.period_end == 4 * SEC);
        /* 10 s without probes: the next period starts on the grid, the gap is not an hour */
        for (int i = 0; i < 5; i++)
                assert_int_equal(
                    canary_baseline_add(&b, 0.002,
                                        3060 * USEC_PER_MSEC + (usec_t)i * 100 * USEC_PER_MSEC,
                                        REAL0 + 3 * SEC),
                    0);
        assert_int_equal(canary_baseline_add(&b, 0.002, 13500 * USEC_PER_MSEC, REAL0 + 13 * SEC),
                         1);
        assert_true(b.st.updates == 4 && b.st.updated == REAL0 + 13 * SEC - 9500 * USEC_PER_MSEC);
        assert_true(b.period_start == 13 * SEC && b.period_end == 14 * SEC);
        /* 4 probes, a gap of 5 s, 2 probes: one period of the two hours that held probes */
        canary_baseline_init(&b);
        canary_baseline_set_period(&b, SEC);
        for (int i = 0; i < 4; i++)
                assert_int_equal(
                    canary_baseline_add(&b, 0.002, (usec_t)i * 200 * USEC_PER_MSEC, REAL0), 0);
        assert_int_equal(canary_baseline_add(&b, 0.002, 6200 * USEC_PER_MSEC, REAL0), 0);
        assert_true(b.period_end == 7 * SEC && b.period_hours == 2);
        assert_int_equal(canary_baseline_add(&b, 0.002, 6500 * USEC_PER_MSEC, REAL0), 0);
        assert_int_equal(canary_baseline_add(&b, 0.002, 7100 * USEC_PER_MSEC, REAL0 + 7 * SEC), 1);
        assert_true(b.st.updates == 2);
}

/* What --help says of --canary.baseline-period: no hour is shorter than the time between two
 * probes. At 1 s hours and the default 3-minute cycle, each probe is an hour of its own: the
 * first day (the warm-up) closes after 24 of them, with the 25th probe (the one that applies
 * the 4th period of 6), and the next 24 probes, 72 minutes, later, not 24 seconds; at a probe
 * every DUR/6 a day takes its 24 scaled hours. */
static void test_period_no_shorter_than_spacing(void **state)
{
        struct canary_baseline b;
        usec_t t = 0, t1;
        unsigned probes = 0;
        (void)state;

        canary_baseline_init(&b);
        canary_baseline_set_period(&b, SEC);
        for (; b.st.n_days == 0; t += 180 * SEC, probes++)
                assert_true(canary_baseline_add(&b, 0.002, t, REAL0 + t) >= 0);
        assert_int_equal(probes, 25);
        assert_int_equal(b.st.updates, 24);
        for (probes = 0; b.st.n_days == 1; t += 180 * SEC, probes++)
                assert_true(canary_baseline_add(&b, 0.002, t, REAL0 + t) >= 0);
        assert_int_equal(probes, 24); /* 72 minutes */
        assert_int_equal(b.st.updates, 48);
        canary_baseline_init(&b);
        canary_baseline_set_period(&b, SEC);
        for (t = 0; b.st.n_days == 0; t += SEC / 6)
                assert_true(canary_baseline_add(&b, 0.002, t, REAL0 + t) >= 0);
        t1 = t;
        for (; b.st.n_days == 1; t += SEC / 6)
                assert_true(canary_baseline_add(&b, 0.002, t, REAL0 + t) >= 0);
        assert_true(t - t1 >= 23 * SEC && t - t1 <= 25 * SEC);
}

/* --canary.baseline-period scales the recent window behind the ratios: 5 min x period / 1 h. */
static void test_recent_window_scaled(void **state)
{
        (void)state;
        assert_true(canary_recent_window_for(0) == CANARY_RECENT_WINDOW);
        assert_true(canary_recent_window_for(HOUR) == 5 * 60 * SEC);
        assert_true(canary_recent_window_for(SEC) == 5 * 60 * SEC / 3600); /* 83.333 ms */
        assert_true(canary_recent_window_for(60 * SEC) == 5 * SEC);
        assert_true(canary_recent_window_for(1) == 1);
}

/* Version 3 round trip of every field; a version 2 file's baseline becomes the final
 * reference; bad lists refuse the line. */
static void test_records_reference(void **state)
{
        static const char v2[] = "diskpulse-canary-baselines 2\n"
                                 "disk=wwn:1 mode=fdatasync path=/a regime=idle baseline=0.003 "
                                 "updates=900 updated=5 warmup=-\n"
                                 "disk=wwn:1 mode=fdatasync path=/b regime=idle baseline=0 "
                                 "updates=2 updated=5 warmup=0.001,0.002\n";
        static const char *const bad[] = {
            "refdays=0.001,0.001,0.001,0.001,0.001,0.001,0.001", /* 7: would be final */
            "refdays=0.001,,0.001",
            "refdays=0",
            "dayobs=0.001,x",
            "days=100:0.001,5",
            "days=100:",
            ":0.001",
            "days=18446744073710:0.001", /* seconds beyond the microsecond clock */
            "days=1:0.001,2:0.001,3:0.001,4:0.001,5:0.001,6:0.001,7:0.001,8:0.001,9:0.001,"
            "10:0.001,11:0.001,12:0.001,13:0.001,14:0.001,15:0.001,16:0.001,17:0.001,18:0.001,"
            "19:0.001,20:0.001,21:0.001,22:0.001,23:0.001,24:0.001,25:0.001,26:0.001,27:0.001,"
            "28:0.001,29:0.001,30:0.001,31:0.001", /* 31 */
            "reference=-1",
            "reference=nan",
            "refdays=final refdays=final",
        };
        struct canary_records recs, back;
        struct canary_record rec, *r;
        char *text, line[1024];
        size_t len;
        (void)state;

        assert_int_equal(canary_records_parse(v2, sizeof v2 - 1, &recs), 0);
        assert_int_equal(recs.n, 2);
        r = canary_records_find(&recs, "wwn:1", "fdatasync", "/a", CANARY_REGIME_IDLE);
        assert_true(r->st.reference == 0.003 && r->st.ref_final);
        r = canary_records_find(&recs, "wwn:1", "fdatasync", "/b", CANARY_REGIME_IDLE);
        assert_true(r->st.reference == 0 && !r->st.ref_final && r->st.n_dayobs == 2);
        assert_true(r->st.dayobs[0] == 0.001 && r->st.dayobs[1] == 0.002);
        canary_records_free(&recs);

        /* every field through format and parse */
        assert_int_equal(canary_record_init(&rec, "serial:X Y", "fdatasync", "/p q"), 0);
        rec.st.value = 0.0021;
        rec.st.updates = 321;
        rec.st.updated = 1718000000123456;
        rec.st.reference = 0.0017;
        rec.st.n_refdays = 2;
        rec.st.refdays[0] = 0.0016;
        rec.st.refdays[1] = 0.0018;
        rec.st.n_dayobs = 3;
        rec.st.dayobs[0] = 0.002;
        rec.st.dayobs[1] = 0.0022;
        rec.st.dayobs[2] = 1.0 / 3;
        rec.st.n_days = 2;
        rec.st.days[0] = (struct canary_day){.t = 1717000000 * SEC, .v = 0.0016};
        rec.st.days[1] = (struct canary_day){.t = 1717086400 * SEC, .v = 0.0018};
        recs = (struct canary_records){0};
        assert_int_equal(canary_records_put(&recs, &rec), 0);
        assert_int_equal(canary_records_format(&recs, &text, &len), 0);
        assert_non_null(strstr(text, " reference=0.0017 refdays=0.0016,0.0018 "
                                     "dayobs=0.002,0.0022,0.3333333333333333 "
                                     "days=1717000000:0.0016,1717086400:0.0018\n"));
        assert_int_equal(canary_records_parse(text, len, &back), 0);
        assert_int_equal(back.n, 1);
        assert_memory_equal(&back.v[0].st, &rec.st, sizeof rec.st);
        free(text);
        canary_records_free(&back);
        canary_records_free(&recs);

        /* a record inconsistent in its lists is refused by put */
        rec.st.ref_final = true; /* with refdays: inconsistent */
        recs = (struct canary_records){0};
        assert_int_equal(canary_records_put(&recs, &rec), -EINVAL);
        canary_records_free(&recs);

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                snprintf(line, sizeof line, "disk=wwn:1 mode=m path=/ baseline=0.001 updates=1 %s",
                         bad[i]);
                assert_int_not_equal(canary_record_parse_line(line, strlen(line), &rec), 0);
        }
}

static void test_records_header_and_limits(void **state)
{
        struct canary_records recs = {.bad = 42};
        struct canary_record rec;
        char *big;
        (void)state;

        /* empty and blank files have no records */
        assert_int_equal(canary_records_parse("", 0, &recs), 0);
        assert_int_equal(recs.n, 0);
        assert_int_equal(recs.bad, 0);
        canary_records_free(&recs);
        assert_int_equal(canary_records_parse("\n# only a comment\n  \n", 21, &recs), 0);
        assert_int_equal(recs.n, 0);
        canary_records_free(&recs);

        recs.bad = 42;
        assert_int_equal(canary_records_parse("garbage\n", 8, &recs), -EBADMSG);
        assert_int_equal(recs.bad, 42); /* untouched */
        assert_int_equal(canary_records_parse("diskpulse-canary-baselines\n", 27, &recs), -EBADMSG);
        assert_int_equal(canary_records_parse("diskpulse-canary-baselines x\n", 29, &recs),
                         -EBADMSG);
        assert_int_equal(
            canary_records_parse("disk=wwn:1 mode=m path=/ baseline=0 updates=0\n", 46, &recs),
            -EBADMSG);
        assert_int_equal(canary_records_parse("diskpulse-canary-baselines 4\n", 29, &recs),
                         -EPROTONOSUPPORT);
        assert_int_equal(canary_records_parse("diskpulse-canary-baselines 0\n", 29, &recs),
                         -EPROTONOSUPPORT);
        big = calloc(1, CANARY_STATE_MAX_BYTES + 1);
        assert_non_null(big);
        assert_int_equal(canary_records_parse(big, CANARY_STATE_MAX_BYTES + 1, &recs), -EFBIG);
        free(big);

        /* keys */
        assert_int_equal(canary_record_init(&rec, "", "fdatasync", "/"), -EINVAL);
        assert_int_equal(canary_record_init(&rec, "wwn:1", "fdatasync", NULL), -EINVAL);
        char longpath[CANARY_PATH_MAX + 1];
        memset(longpath, 'a', sizeof longpath - 1);
        longpath[sizeof longpath - 1] = 0;
        assert_int_equal(canary_record_init(&rec, "wwn:1", "fdatasync", longpath), -ENAMETOOLONG);
        longpath[CANARY_PATH_MAX - 1] = 0; /* 1023 bytes: fits */
        assert_int_equal(canary_record_init(&rec, "wwn:1", "fdatasync", longpath), 0);

        /* the longest record, escaped everywhere, every list full of the longest numbers,
         * parses back */
        char longdisk[CANARY_DISK_ID_MAX], longmode[CANARY_MODE_MAX];
        memset(longpath, 0x01, CANARY_PATH_MAX - 1);
        memset(longdisk, 0x01, sizeof longdisk - 1);
        longdisk[sizeof longdisk - 1] = 0;
        memset(longmode, 0x01, sizeof longmode - 1);
        longmode[sizeof longmode - 1] = 0;
        assert_int_equal(canary_record_init(&rec, longdisk, longmode, longpath), 0);
        rec.st.value = 1e9;
        rec.st.updates = UINT64_MAX;
        rec.st.updated = UINT64_MAX;
        rec.st.reference = 1.2345678901234567e-06;
        rec.st.n_refdays = CANARY_REF_DAYS - 1;
        for (unsigned i = 0; i < rec.st.n_refdays; i++)
                rec.st.refdays[i] = 1.2345678901234567e-06;
        rec.st.n_dayobs = CANARY_DAY_OBS - 1;
        for (unsigned i = 0; i < rec.st.n_dayobs; i++)
                rec.st.dayobs[i] = 1.2345678901234567e-06;
        rec.st.n_days = CANARY_DAYS_KEPT;
        for (unsigned i = 0; i < CANARY_DAYS_KEPT; i++)
                rec.st.days[i] = (struct canary_day){.t = UINT64_MAX / USEC_PER_SEC * USEC_PER_SEC,
                                                     .v = 1.2345678901234567e-06};
        recs = (struct canary_records){0};
        assert_int_equal(canary_records_put(&recs, &rec), 0);
        char *text;
        size_t len;
        struct canary_records back;
        assert_int_equal(canary_records_format(&recs, &text, &len), 0);
        assert_int_equal(canary_records_parse(text, len, &back), 0);
        assert_int_equal(back.n, 1);
        assert_string_equal(back.v[0].path, longpath);
        assert_true(back.v[0].st.updates == UINT64_MAX);
        assert_memory_equal(&back.v[0].st, &rec.st, sizeof rec.st);
        printf("longest record line: %zu bytes of %d\n",
               len - strlen("diskpulse-canary-baselines 3\n") - 1, CANARY_LINE_MAX);
        canary_records_free(&back);
        free(text);

        /* an invalid record is refused */
        rec.st.value = NAN;
        assert_int_equal(canary_records_put(&recs, &rec), -EINVAL);
        recs.v[0].st.n_dayobs = CANARY_DAY_OBS; /* a whole day not closed: inconsistent */
        assert_int_equal(canary_records_format(&recs, &text, &len), -EINVAL);
        canary_records_free(&recs);

        /* a line too long */
        char *line = malloc(CANARY_LINE_MAX + 2);
        assert_non_null(line);
        memset(line, 'a', CANARY_LINE_MAX + 1);
        assert_int_equal(canary_record_parse_line(line, CANARY_LINE_MAX + 1, &rec), -ERANGE);
        free(line);
}

static void test_records_keys(void **state)
{
        struct canary_records recs = {0};
        struct canary_record rec;
        char id[64];
        (void)state;

        assert_int_equal(canary_disk_id(id, sizeof id, "0x5002538e40a1b2c3", "S3Z"), 0);
        assert_string_equal(id, "wwn:0x5002538e40a1b2c3");
        assert_int_equal(canary_disk_id(id, sizeof id, "", "Samsung_SSD_S3Z"), 0);
        assert_string_equal(id, "serial:Samsung_SSD_S3Z");
        assert_int_equal(canary_disk_id(id, sizeof id, NULL, NULL), -ENOENT);
        assert_int_equal(canary_disk_id(id, sizeof id, "", ""), -ENOENT);
        assert_int_equal(canary_disk_id(id, 8, "0x5002538e40a1b2c3", NULL), -ENAMETOOLONG);

        assert_int_equal(canary_record_init(&rec, "wwn:A", "fdatasync", "/srv"), 0);
        rec.st.value = 0.001;
        rec.st.updates = 10;
        assert_int_equal(canary_records_put(&recs, &rec), 0);
        /* the key has no kernel name: sdb renamed sdc finds it */
        assert_non_null(
            canary_records_find(&recs, "wwn:A", "fdatasync", "/srv", CANARY_REGIME_IDLE));
        /* a replaced disk (another WWN), another mode or path: not found, start fresh */
        assert_null(canary_records_find(&recs, "wwn:B", "fdatasync", "/srv", CANARY_REGIME_IDLE));
        assert_null(canary_records_find(&recs, "wwn:A", "direct", "/srv", CANARY_REGIME_IDLE));
        assert_null(canary_records_find(&recs, "wwn:A", "fdatasync", "/srv2", CANARY_REGIME_IDLE));
        /* put replaces by key */
        rec.st.value = 0.002;
        assert_int_equal(canary_records_put(&recs, &rec), 0);
        assert_int_equal(recs.n, 1);
        assert_true(recs.v[0].st.value == 0.002);

        /* full: the least recently updated record makes room */
        for (unsigned i = 1; i < CANARY_RECORDS_MAX; i++) {
                snprintf(id, sizeof id, "wwn:%u", i);
                assert_int_equal(canary_record_init(&rec, id, "fdatasync", "/srv"), 0);
                rec.st.updated = 1000 + i;
                assert_int_equal(canary_records_put(&recs, &rec), 0);
        }
        recs.v[0].st.updated = 5000; /* wwn:A recently used */
        assert_int_equal(recs.n, CANARY_RECORDS_MAX);
        assert_int_equal(canary_record_init(&rec, "wwn:new", "fdatasync", "/srv"), 0);
        rec.st.updated = 9000;
        assert_int_equal(canary_records_put(&recs, &rec), 0);
        assert_int_equal(recs.n, CANARY_RECORDS_MAX);
        assert_null(canary_records_find(&recs, "wwn:1", "fdatasync", "/srv", CANARY_REGIME_IDLE));
        assert_non_null(
            canary_records_find(&recs, "wwn:A", "fdatasync", "/srv", CANARY_REGIME_IDLE));
        assert_non_null(
            canary_records_find(&recs, "wwn:new", "fdatasync", "/srv", CANARY_REGIME_IDLE));

        /* a file with more records than the limit: the excess is counted as bad */
        char *text;
        size_t len;
        struct canary_records back;
        assert_int_equal(canary_records_format(&recs, &text, &len), 0);
        char *more = realloc(text, len + 200);
        assert_non_null(more);
        text = more;
        len += (size_t)sprintf(text + len, "disk=wwn:extra mode=m path=/ baseline=0 updates=0\n");
        assert_int_equal(canary_records_parse(text, len, &back), 0);
        assert_int_equal(back.n, CANARY_RECORDS_MAX);
        assert_int_equal(back.bad, 1);
        canary_records_free(&back);
        free(text);
        canary_records_free(&recs);
}

static void test_baseline_restore_checks(void **state)
{
        struct canary_baseline b;
        struct canary_baseline_state st = {0};
        double v;
        (void)state;

        canary_baseline_init(&b);
        st.value = 0.001;
        st.n_dayobs = CANARY_DAY_OBS; /* a whole day would have closed */
        assert_int_equal(canary_baseline_restore(&b, &st), -EINVAL);
        assert_false(canary_baseline_get(&b, &v));
        st.value = 0;
        assert_int_equal(canary_baseline_restore(&b, &st), -EINVAL);
        st.n_dayobs = 2;
        st.dayobs[0] = 0.001;
        st.dayobs[1] = NAN;
        assert_int_equal(canary_baseline_restore(&b, &st), -EINVAL);
        st.dayobs[1] = 0.002;
        st.updates = 2;
        assert_int_equal(canary_baseline_restore(&b, &st), 0);
        assert_false(canary_baseline_get(&b, &v)); /* in warm-up, two hours into it */
        assert_int_equal(b.st.n_dayobs, 2);
        st.value = 1e-7;
        st.n_dayobs = 0;
        assert_int_equal(canary_baseline_restore(&b, &st), -EINVAL);
        st.value = 0.5;
        assert_int_equal(canary_baseline_restore(&b, &st), 0);
        assert_true(canary_baseline_get(&b, &v) && v == 0.5);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hist_bounds),
            cmocka_unit_test(test_hist_add),
            cmocka_unit_test(test_hist_native),
            cmocka_unit_test(test_hist_export_text),
            cmocka_unit_test(test_quantile_definition),
            cmocka_unit_test(test_recent_quantiles),
            cmocka_unit_test(test_recent_expiry),
            cmocka_unit_test(test_recent_min),
            cmocka_unit_test(test_recent_bounded_memory),
            cmocka_unit_test(test_recent_export_empty_and_full),
            cmocka_unit_test(test_baseline_warmup),
            cmocka_unit_test(test_baseline_daily_cycle),
            cmocka_unit_test(test_baseline_converges),
            cmocka_unit_test(test_baseline_refuses_degradation),
            cmocka_unit_test(test_baseline_learns_improvement),
            cmocka_unit_test(test_baseline_rule),
            cmocka_unit_test(test_baseline_periods),
            cmocka_unit_test(test_degradation_ratio),
            cmocka_unit_test(test_stats_export),
            cmocka_unit_test(test_record_roundtrip_restart),
            cmocka_unit_test(test_records_garbage),
            cmocka_unit_test(test_records_regimes),
            cmocka_unit_test(test_median_and_busy_idle_ratio),
            cmocka_unit_test(test_reference),
            cmocka_unit_test(test_trend),
            cmocka_unit_test(test_trend_clock),
            cmocka_unit_test(test_short_period),
            cmocka_unit_test(test_period_grid),
            cmocka_unit_test(test_period_stamps),
            cmocka_unit_test(test_period_no_shorter_than_spacing),
            cmocka_unit_test(test_recent_window_scaled),
            cmocka_unit_test(test_records_reference),
            cmocka_unit_test(test_records_header_and_limits),
            cmocka_unit_test(test_records_keys),
            cmocka_unit_test(test_baseline_restore_checks),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
