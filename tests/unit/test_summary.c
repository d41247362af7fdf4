/* The landing page's disk view: the quantile from classic buckets (histogram_quantile()'s
 * reading), the verdict, the text layout, the collectors' summarize functions on sets built by
 * hand, and which Accept header gets HTML. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "biolatency_collector.h"
#include "canary_collector.h"
#include "encoding.h"
#include "index.h"
#include "metrics.h"
#include "smart_collector.h"
#include "summary.h"

#define INF INFINITY

static void assert_near(double got, double want)
{
        if (!(fabs(got - want) <= 1e-12 * fmax(1, fabs(want))))
                fail_msg("got %.17g, want %.17g", got, want);
}

/* Worked by hand as Prometheus' bucketQuantile() does (promql/quantile.go): the first bucket
 * whose cumulative count reaches rank = q * total, linear from the bucket below's bound. */
static void test_quantile(void **state)
{
        static const double le[] = {0.1, 0.5, 1, INF};
        static const double cum[] = {10, 30, 40, 40};
        static const double inf_cum[] = {10, 30, 40, 50};
        static const double zero[] = {0, 0, 0, 0};
        static const double neg_le[] = {-1, 1, INF};
        static const double neg_cum[] = {5, 10, 10};

        (void)state;
        assert_near(summary_quantile(0.5, le, cum, 4), 0.3);   /* rank 20: 0.1 + 0.4 * 10/20 */
        assert_near(summary_quantile(0.99, le, cum, 4), 0.98); /* rank 39.6: 0.5 + 0.5 * 9.6/10 */
        assert_near(summary_quantile(0.25, le, cum, 4), 0.1); /* rank 10: the first bucket, whole */
        assert_near(summary_quantile(0.1, le, cum, 4), 0.04); /* rank 4: 0 + 0.1 * 4/10 */
        assert_near(summary_quantile(1, le, cum, 4), 1);
        /* a rank in +Inf: the highest finite bound */
        assert_near(summary_quantile(0.99, le, inf_cum, 4), 1);
        assert_near(summary_quantile(0.8, le, inf_cum, 4), 1);
        assert_near(summary_quantile(0.79, le, inf_cum, 4), 0.975); /* rank 39.5 */
        /* a first bound at or below 0 is returned as it is */
        assert_near(summary_quantile(0.2, neg_le, neg_cum, 3), -1);
        assert_true(isnan(summary_quantile(0.5, le, zero, 4)));
        assert_true(isnan(summary_quantile(-0.1, le, cum, 4)));
        assert_true(isnan(summary_quantile(1.5, le, cum, 4)));
        assert_true(isnan(summary_quantile(NAN, le, cum, 4)));
        assert_true(isnan(summary_quantile(0.5, le, cum, 0)));
}

static struct summary_disk *disk(struct summary *s, const char *name)
{
        struct summary_disk *d = summary_disk(s, name, true);

        assert_non_null(d);
        return d;
}

static const char *verdict(const struct summary_disk *d)
{
        static char buf[512];

        summary_verdict(d, buf, sizeof buf);
        return buf;
}

static void test_verdict(void **state)
{
        struct summary *s = summary_new();
        struct summary_disk *d;
        char small[12];

        (void)state;
        d = disk(s, "sda");
        assert_true(isnan(d->v[SUMMARY_READS]) && isnan(d->v[SUMMARY_LAT_P99]));
        assert_string_equal(verdict(d), "ok"); /* nothing known, nothing wrong */
        assert_ptr_equal(summary_disk(s, "sda", false), d);
        assert_null(summary_disk(s, "sdb", false));

        /* the critical facts first, each severity in the order found */
        summary_fact(d, SUMMARY_WARNING, "SMART unreadable");
        summary_fact(d, SUMMARY_CRITICAL, "probe stuck");
        summary_fact(d, SUMMARY_WARNING, "%.0f °C, hot", 61.0);
        summary_fact(d, SUMMARY_CRITICAL, "commit latency %.1fx its reference", 2.34);
        assert_string_equal(verdict(d), "probe stuck; commit latency 2.3x its reference; "
                                        "SMART unreadable; 61 °C, hot");
        /* cut to the buffer, terminated */
        summary_verdict(d, small, sizeof small);
        assert_string_equal(small, "probe stuck");

        /* flushes lost only on a write-back cache */
        d = disk(s, "sdb");
        d->flags = SUMMARY_DISK_NO_FLUSH;
        assert_string_equal(verdict(d), "ok");
        d->flags |= SUMMARY_DISK_WRITE_BACK;
        assert_string_equal(verdict(d), "write-back cache gets no flush from fdatasync");
        d->flags = SUMMARY_DISK_WRITE_BACK;
        assert_string_equal(verdict(d), "ok");

        /* DiskpulseDiskLatencyHigh: the average wait of reads and writes above 250 ms at 0.1
         * requests a second or more */
        d = disk(s, "sdc");
        d->v[SUMMARY_READS] = 1;
        d->v[SUMMARY_WRITES] = 3;
        d->v[SUMMARY_READ_AWAIT] = 0.1;
        d->v[SUMMARY_WRITE_AWAIT] = 0.3; /* (0.1 + 0.9) / 4 = 0.25: not above */
        d->v[SUMMARY_QUEUE_DEPTH] = 1;
        assert_string_equal(verdict(d), "ok");
        d->v[SUMMARY_WRITE_AWAIT] = 0.34; /* (0.1 + 1.02) / 4 = 0.28 */
        assert_string_equal(verdict(d), "requests wait 280 ms on average");
        d->v[SUMMARY_READS] = 0.01;
        d->v[SUMMARY_WRITES] = 0.08; /* 0.09 requests a second: too few */
        assert_string_equal(verdict(d), "ok");

        /* DiskpulseDiskSaturated: more than 4 requests queued with a wait above 50 ms */
        d = disk(s, "nvme0n1");
        d->v[SUMMARY_READS] = 100;
        d->v[SUMMARY_WRITES] = 100;
        d->v[SUMMARY_READ_AWAIT] = 0.05;
        d->v[SUMMARY_WRITE_AWAIT] = 0.07;
        d->v[SUMMARY_QUEUE_DEPTH] = 4.5;
        assert_string_equal(verdict(d), "saturated: 4.5 requests queued, 60 ms wait");
        d->v[SUMMARY_QUEUE_DEPTH] = 4;
        assert_string_equal(verdict(d), "ok");
        d->v[SUMMARY_QUEUE_DEPTH] = 12;
        d->v[SUMMARY_WRITE_AWAIT] = 0.03; /* 40 ms */
        assert_string_equal(verdict(d), "ok");
        summary_free(s);

        /* the view holds SUMMARY_MAX_DISKS devices */
        s = summary_new();
        for (int i = 0; i < SUMMARY_MAX_DISKS; i++) {
                char name[16];
                snprintf(name, sizeof name, "d%d", i);
                assert_non_null(summary_disk(s, name, true));
        }
        assert_null(summary_disk(s, "one-more", true));
        assert_non_null(summary_disk(s, "d7", true));
        summary_free(s);
}

/* The text layout, byte for byte: the disk view first, columns aligned (numbers and "-" to the
 * right), a control character in a cell shown as '?', the note wrapped. */
static void test_text(void **state)
{
        struct summary *s = summary_new();
        struct summary_table *t;
        struct summary_disk *d;
        size_t len;
        char *text;
        static const char want[] =
            "\n"
            "Devices\n"
            "device    r/s     w/s  r_await_ms  w_await_ms  aqu-sz  %util  p50_ms  p99_ms\n"
            "sda      12.5  1200.0        0.25        3.50    0.75   42.0   0.125   7.500\n"
            "nvme0n1     -       -           -           -       -      -       -       -\n"
            "and 3 more devices: see /metrics\n"
            "\n"
            "  r/s, w/s, r_await_ms, w_await_ms, aqu-sz, %util: as iostat -x prints them, over\n"
            "  --diskstats.window. p50_ms, p99_ms: block-layer device time (issued to completed) "
            "of reads and\n"
            "  writes together since the eBPF programs were attached, interpolated linearly inside "
            "a histogram\n"
            "  bucket as Prometheus' histogram_quantile() does; \"-\" without the biolatency "
            "collector or without\n"
            "  I/O.\n"
            "\n"
            "Verdicts\n"
            "device   verdict\n"
            "sda      SMART failing\n"
            "nvme0n1  ok\n"
            "and 3 more devices: see /metrics\n"
            "\n"
            "  Today's numbers against the alert rules' conditions, critical first; an alert also "
            "waits its\n"
            "  window and its \"for\" time.\n"
            "\n"
            "T\n"
            "name      n\n"
            "a?[31mb  10\n"
            "ccc       -\n";

        (void)state;
        t = summary_table(s, "T", (const char *const[]){"name", "n"}, 2, 0, NULL, false);
        summary_row(t, (const char *const[]){"a\033[31mb", "10"});
        summary_row(t, (const char *const[]){"ccc", "-"});
        d = disk(s, "sda");
        d->v[SUMMARY_READS] = 12.5;
        d->v[SUMMARY_WRITES] = 1200;
        d->v[SUMMARY_READ_AWAIT] = 0.00025;
        d->v[SUMMARY_WRITE_AWAIT] = 0.0035;
        d->v[SUMMARY_QUEUE_DEPTH] = 0.75;
        d->v[SUMMARY_UTIL] = 0.42;
        d->v[SUMMARY_LAT_P50] = 0.000125;
        d->v[SUMMARY_LAT_P99] = 0.0075;
        summary_fact(d, SUMMARY_CRITICAL, "SMART failing");
        disk(s, "nvme0n1");
        s->disks_more = 3;
        summary_finish(s);
        assert_int_equal(s->n, 3);
        assert_string_equal(s->tables[0].title, "Devices");
        assert_string_equal(s->tables[1].title, "Verdicts");
        text = summary_text(s, &len);
        assert_int_equal(len, strlen(text));
        if (strcmp(text, want) != 0)
                fail_msg("got:\n%s\nwant:\n%s", text, want);
        /* every line within 100 columns */
        for (const char *p = text, *nl; *p; p = nl + 1) {
                nl = strchr(p, '\n');
                assert_non_null(nl);
                assert_true(nl - p <= 100);
        }
        free(text);
        summary_free(s);
}

/* Terminal and bidi controls in a cell: C1 controls (U+0080-U+009F, U+009B a CSI for some
 * terminals) and every Bidi_Control character (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069) become one '?' each, as C0 controls do; each byte that is not part of valid
 * UTF-8 (a lone 0x9B, a cut or overlong sequence, a surrogate) becomes a '?'; other characters
 * (U+00A0, U+2029, U+202F, U+2065, U+00E9) keep their bytes; columns stay aligned. */
static void test_text_controls(void **state)
{
        static const struct {
                const char *in, *shown;
        } cases[] = {
            {"\xc2\x80", "?"},
            {"\xc2\x9b", "?"},
            {"\xc2\x9f", "?"},
            {"\xd8\x9c", "?"},
            {"\xe2\x80\x8e", "?"},
            {"\xe2\x80\x8f", "?"},
            {"\xe2\x80\xaa", "?"},
            {"\xe2\x80\xab", "?"},
            {"\xe2\x80\xac", "?"},
            {"\xe2\x80\xad", "?"},
            {"\xe2\x80\xae", "?"},
            {"\xe2\x81\xa6", "?"},
            {"\xe2\x81\xa7", "?"},
            {"\xe2\x81\xa8", "?"},
            {"\xe2\x81\xa9", "?"},
            {"\x1b", "?"},
            {"\x7f", "?"},
            {"\x9b", "?"},
            {"\xe2\x80", "??"},
            {"\xc0\xaf", "??"},
            {"\xed\xa0\x80", "???"},
            {"\xf4\x90\x80\x80", "????"},
            {"\xc2\xa0", "\xc2\xa0"},
            {"\xe2\x80\xa9", "\xe2\x80\xa9"},
            {"\xe2\x80\xaf", "\xe2\x80\xaf"},
            {"\xe2\x81\xa5", "\xe2\x81\xa5"},
            {"\xc3\xa9", "\xc3\xa9"},
            {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct summary *s = summary_new();
                struct summary_table *t;
                char in[32], shown[32], want[256], *text;
                size_t len, w = 0;

                snprintf(in, sizeof in, "a%sb", cases[i].in);
                snprintf(shown, sizeof shown, "a%sb", cases[i].shown);
                for (const char *p = shown; *p; p++)
                        w += ((unsigned char)*p & 0xc0) != 0x80;
                t = summary_table(s, "T", (const char *const[]){"name", "n"}, 2, 0, NULL, false);
                summary_row(t, (const char *const[]){in, "1"});
                summary_row(t, (const char *const[]){"xxxxxxxx", "2"});
                text = summary_text(s, &len);
                /* the first column 8 wide: the shown cell padded to it */
                snprintf(want, sizeof want, "\nT\nname      n\n%s%*s  1\nxxxxxxxx  2\n", shown,
                         (int)(8 - w), "");
                if (strcmp(text, want) != 0)
                        fail_msg("case %zu: got\n%s\nwant\n%s", i, text, want);
                free(text);
                summary_free(s);
        }
}

/* Adds a sample of family name (gauge) with the canary target's labels and more pairs. */
static void target(struct mset *set, const char *name, double v, const char *regime)
{
        struct mfamily *f = mset_family(set, name, "h", MT_GAUGE);

        mfamily_add(set, f, "", v, "path", "/srv/db", "device", "dm-0", "mode", "fdatasync",
                    "regime", regime, NULL);
}

static void test_canary_summarize(void **state)
{
        struct mset *set = mset_new();
        struct summary *s = summary_new();
        const struct summary_table *t;
        const struct summary_disk *d;
        struct mfamily *f;

        (void)state;
        target(set, "diskpulse_sync_target_up", 1, NULL);
        target(set, "diskpulse_sync_stuck", 0, NULL);
        target(set, "diskpulse_sync_flush_ratio", 0, NULL);
        f = mset_family(set, "diskpulse_sync_backing_disk_info", "h", MT_GAUGE);
        mfamily_add(set, f, "", 1, "path", "/srv/db", "device", "dm-0", "mode", "fdatasync", "disk",
                    "sda", NULL);
        mfamily_add(set, f, "", 1, "path", "/srv/db", "device", "dm-0", "mode", "fdatasync", "disk",
                    "sdb", NULL);
        f = mset_family(set, "diskpulse_sync_recent_seconds", "h", MT_SUMMARY);
        mfamily_add(set, f, "", 0.0023, "path", "/srv/db", "device", "dm-0", "mode", "fdatasync",
                    "regime", "idle", "quantile", "0.5", NULL);
        mfamily_add(set, f, "", 0.0009, "path", "/srv/db", "device", "dm-0", "mode", "fdatasync",
                    "regime", "busy", "quantile", "0.5", NULL);
        target(set, "diskpulse_sync_recent_samples", 10, "idle");
        target(set, "diskpulse_sync_recent_samples", 12, "busy");
        target(set, "diskpulse_sync_reference_seconds", 0.001, "idle");
        target(set, "diskpulse_sync_reference_seconds", 0.0005, "busy");
        target(set, "diskpulse_sync_drift_ratio", 2.3, "idle");
        target(set, "diskpulse_sync_drift_ratio", 1.8, "busy");
        target(set, "diskpulse_sync_degradation_ratio", 1.6, "busy");
        target(set, "diskpulse_sync_trend_factor", 1.31, "idle");
        target(set, "diskpulse_sync_trend_daily_medians", 20, "idle");
        target(set, "diskpulse_sync_trend_factor", 1.4, "busy");
        target(set, "diskpulse_sync_trend_daily_medians", 10, "busy"); /* too few days */

        disk(s, "sda")->flags = SUMMARY_DISK_WRITE_BACK; /* as diskstats would say */
        canary_summarize(set, s);
        assert_int_equal(s->n, 1);
        t = &s->tables[0];
        assert_string_equal(t->title, "Sync canary");
        assert_int_equal(t->nrows, 2);
        assert_string_equal(t->cols[5], "p50_5m_ms");
        {
                static const char *const want[2][9] = {
                    {"/srv/db", "dm-0", "fdatasync", "idle", "up", "2.300", "1.000", "2.30",
                     "1.31"},
                    {"/srv/db", "dm-0", "fdatasync", "busy", "up", "0.900", "0.500", "1.80",
                     "1.40"},
                };
                for (size_t i = 0; i < 2; i++)
                        for (size_t k = 0; k < 9; k++)
                                assert_string_equal(t->cells[i * t->ncols + k], want[i][k]);
        }
        d = summary_disk(s, "dm-0", false);
        assert_non_null(d);
        /* the warnings as found: idle's drift, its trend, busy's drift (busy's trend rests on
         * too few days, its degradation is left out beside its drift) */
        assert_string_equal(verdict(d), "commit latency 2.30x its reference; commit latency grows "
                                        "1.31x a month; commit latency 1.80x its reference (busy)");
        /* a drift of 2.30 is a warning, as DiskpulseSyncLatencyDoubled is: nothing pages */
        assert_int_equal(d->nfacts, 3);
        for (size_t i = 0; i < d->nfacts; i++)
                assert_int_equal(d->facts[i].severity, SUMMARY_WARNING);
        /* no flush reached the backing disks: the one with a write-back cache says so */
        assert_string_equal(verdict(summary_disk(s, "sda", false)),
                            "write-back cache gets no flush from fdatasync");
        assert_string_equal(verdict(summary_disk(s, "sdb", false)), "ok");
        summary_free(s);
        mset_free(set);

        /* stuck, and a target that is down */
        set = mset_new();
        s = summary_new();
        target(set, "diskpulse_sync_target_up", 0, NULL);
        target(set, "diskpulse_sync_stuck", 1, NULL);
        canary_summarize(set, s);
        assert_int_equal(s->tables[0].nrows, 1); /* no busy regime: bursts off */
        assert_string_equal(s->tables[0].cells[3], "idle");
        assert_string_equal(s->tables[0].cells[4], "stuck");
        assert_string_equal(s->tables[0].cells[5], "-");
        assert_string_equal(verdict(summary_disk(s, "dm-0", false)), "probe stuck");
        summary_free(s);
        mset_free(set);
        set = mset_new();
        s = summary_new();
        target(set, "diskpulse_sync_target_up", 0, NULL);
        target(set, "diskpulse_sync_stuck", 0, NULL);
        target(set, "diskpulse_sync_drift_ratio", 1.5, "idle"); /* not above 1.5 */
        target(set, "diskpulse_sync_degradation_ratio", 1.51, "idle");
        canary_summarize(set, s);
        assert_string_equal(s->tables[0].cells[4], "down");
        assert_string_equal(verdict(summary_disk(s, "dm-0", false)),
                            "canary target down; commit latency 1.51x its baseline");
        summary_free(s);
        mset_free(set);
}

static void dev_gauge(struct mset *set, const char *name, double v, const char *dev)
{
        mfamily_add(set, mset_family(set, name, "h", MT_GAUGE), "", v, "device", dev, NULL);
}

static void test_smart_summarize(void **state)
{
        struct mset *set = mset_new();
        struct summary *s = summary_new();

        (void)state;
        dev_gauge(set, "diskpulse_smart_up", 1, "sda");
        dev_gauge(set, "diskpulse_smart_healthy", 0, "sda");
        dev_gauge(set, "diskpulse_smart_temperature_celsius", 61, "sda"); /* ATA: no threshold */
        dev_gauge(set, "diskpulse_smart_up", 1, "nvme0n1");
        dev_gauge(set, "diskpulse_smart_healthy", 1, "nvme0n1");
        dev_gauge(set, "diskpulse_smart_available_spare_ratio", 0.05, "nvme0n1");
        dev_gauge(set, "diskpulse_smart_available_spare_threshold_ratio", 0.1, "nvme0n1");
        dev_gauge(set, "diskpulse_smart_temperature_celsius", 80, "nvme0n1");
        dev_gauge(set, "diskpulse_smart_temperature_warning_threshold_celsius", 75, "nvme0n1");
        dev_gauge(set, "diskpulse_smart_temperature_critical_threshold_celsius", 85, "nvme0n1");
        dev_gauge(set, "diskpulse_smart_wear_used_ratio", 1.02, "nvme0n1");
        dev_gauge(set, "diskpulse_smart_up", 0, "sdb");
        mfamily_add(set, mset_family(set, "diskpulse_smart_read_errors_total", "h", MT_COUNTER), "",
                    3, "device", "sdb", "reason", "timeout", NULL);
        dev_gauge(set, "diskpulse_smart_up", 0, "sdd"); /* not read yet: no failure counted */
        dev_gauge(set, "diskpulse_smart_up", 1, "sdc");
        dev_gauge(set, "diskpulse_smart_healthy", 1, "sdc");
        dev_gauge(set, "diskpulse_smart_temperature_celsius", 40, "sdc");
        dev_gauge(set, "diskpulse_smart_available_spare_ratio", 1, "sdc");
        dev_gauge(set, "diskpulse_smart_available_spare_threshold_ratio", 0, "sdc"); /* none */
        smart_summarize(set, s);
        assert_int_equal(s->n, 0);
        assert_string_equal(verdict(summary_disk(s, "sda", false)), "SMART failing; 61 °C, hot");
        assert_string_equal(verdict(summary_disk(s, "nvme0n1", false)),
                            "spare used up (5 %); 80 °C, hot; past its rated endurance (102 %)");
        assert_string_equal(verdict(summary_disk(s, "sdb", false)), "SMART unreadable");
        assert_string_equal(verdict(summary_disk(s, "sdc", false)), "ok");
        assert_string_equal(verdict(summary_disk(s, "sdd", false)), "ok");
        summary_free(s);
        mset_free(set);
}

/* Classic buckets of the device-time family for one device and op. */
static void buckets(struct mset *set, const char *dev, const char *op, const double *cum)
{
        static const char *const le[] = {"0.0001", "0.001", "0.01", "+Inf"};
        struct mfamily *f =
            mset_family(set, "diskpulse_io_device_latency_seconds", "h", MT_HISTOGRAM);

        for (size_t i = 0; i < 4; i++)
                mfamily_add(set, f, "_bucket", cum[i], "device", dev, "op", op, "le", le[i], NULL);
        mfamily_add(set, f, "_count", cum[3], "device", dev, "op", op, NULL);
}

static void test_biolatency_summarize(void **state)
{
        static const double rd[] = {10, 50, 60, 60}, wr[] = {0, 30, 38, 40}, fl[] = {0, 0, 0, 1000};
        struct mset *set = mset_new();
        struct summary *s = summary_new();
        const struct summary_disk *d;

        (void)state;
        disk(s, "sda");
        buckets(set, "sda", "read", rd);
        buckets(set, "sda", "write", wr);
        buckets(set, "sda", "flush", fl); /* neither read nor write: left out */
        buckets(set, "sdb", "write", wr);
        biolatency_summarize(set, s);
        /* sda: reads and writes together {10, 80, 98, 100}: p50 rank 50 in (0.0001, 0.001]:
         * 0.0001 + 0.0009 * 40/70; p99 rank 99 in +Inf: 0.01 */
        d = summary_disk(s, "sda", false);
        assert_near(d->v[SUMMARY_LAT_P50], 0.0001 + 0.0009 * 40.0 / 70.0);
        assert_near(d->v[SUMMARY_LAT_P99], 0.01);
        /* sdb: {0, 30, 38, 40}: p50 rank 20: 0.0001 + 0.0009 * 20/30; p99 rank 39.6: +Inf */
        d = summary_disk(s, "sdb", false);
        assert_near(d->v[SUMMARY_LAT_P50], 0.0001 + 0.0009 * 20.0 / 30.0);
        assert_near(d->v[SUMMARY_LAT_P99], 0.01);
        assert_true(isnan(d->v[SUMMARY_READS]));
        summary_free(s);
        mset_free(set);
}

static void test_accept_html(void **state)
{
        static const struct {
                const char *accept;
                bool html;
        } cases[] = {
            {NULL, false},
            {"", false},
            {"*/*", false}, /* curl */
            {"text/plain", false},
            {"text/html", true},
            {"TEXT/HTML", true},
            {"text/*", false},
            /* Firefox, Chromium */
            {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true},
            {"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
             "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
             true},
            {"text/plain, text/html", false}, /* equal: plain */
            {"text/plain;q=0.5, text/html", true},
            {"text/html;q=0.5, text/plain", false},
            {"text/html;q=0.5, */*", false}, /* text/plain gets any type's 1 */
            {"text/html;q=0", false},
            {"text/html;q=0, */*", false},
            {"text/*, text/plain;q=0.1", true}, /* text/html from the text range (1) over 0.1 */
            {"application/json", false},
            {"text/html;q=bad", false}, /* malformed: ignored */
        };

        (void)state;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                if (encoding_accept_html(cases[i].accept) != cases[i].html)
                        fail_msg("encoding_accept_html(\"%s\") != %d",
                                 cases[i].accept ? cases[i].accept : "(null)", cases[i].html);
}

/* The page: its type follows Accept; HTML escapes what the text shows as it is. */
static void test_index_page(void **state)
{
        struct summary *s = summary_new();
        struct summary_table *t =
            summary_table(s, "T<1>", (const char *const[]){"a&b"}, 1, 0, NULL, false);
        const char *type = NULL;
        size_t len;
        char *page;

        (void)state;
        summary_row(t, (const char *const[]){"<script>\"x\"</script>"});
        page = http_index_page(s, "*/*", "1.0", "abc", &len, &type);
        assert_string_equal(type, "text/plain; charset=utf-8");
        assert_int_equal(len, strlen(page));
        assert_non_null(strstr(page, "diskpulse 1.0 (revision abc)"));
        assert_non_null(strstr(page, "\nT<1>\na&b\n<script>\"x\"</script>\n"));
        assert_null(strstr(page, "<html"));
        free(page);
        page = http_index_page(s, "text/html", "1.0", "a<b", &len, &type);
        assert_string_equal(type, "text/html; charset=utf-8");
        assert_non_null(strstr(page, "<h2>T&lt;1&gt;</h2>"));
        assert_non_null(strstr(page, "<th>a&amp;b</th>"));
        assert_non_null(strstr(page, "<td>&lt;script&gt;&quot;x&quot;&lt;/script&gt;</td>"));
        assert_non_null(strstr(page, "(revision a&lt;b)"));
        assert_null(strstr(page, "<script>"));
        free(page);
        page = http_index_page(NULL, NULL, "1.0", "abc", &len, &type);
        assert_non_null(strstr(page, "no collection has finished yet"));
        free(page);
        summary_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_quantile),
            cmocka_unit_test(test_verdict),
            cmocka_unit_test(test_text),
            cmocka_unit_test(test_text_controls),
            cmocka_unit_test(test_canary_summarize),
            cmocka_unit_test(test_smart_summarize),
            cmocka_unit_test(test_biolatency_summarize),
            cmocka_unit_test(test_accept_html),
            cmocka_unit_test(test_index_page),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
