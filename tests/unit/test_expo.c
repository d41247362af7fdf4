/* Unit tests of the exposition writer: exact output in the text format and OpenMetrics, number
 * formats, merging of sets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expo.h"
#include "util.h"

static char *render(struct mset *const *sets, size_t n)
{
        char *buf = NULL;
        size_t len = 0;

        assert_int_equal(expo_render_text(sets, n, &buf, &len), 0);
        assert_non_null(buf);
        assert_int_equal(strlen(buf), len);
        return buf;
}

static void test_format_double(void **state)
{
        static const struct {
                double v;
                const char *want;
        } cases[] = {
            {0.0, "0"},
            {1.0, "1"},
            {-1.0, "-1"},
            {0.1, "0.1"},
            {0.563, "0.563"},
            {1e-05, "1e-05"},
            {0.0025, "0.0025"},
            {1.45, "1.45"},
            {100.0, "100"},
            {1048576.0, "1048576"},
            {123456789012345.0, "123456789012345"},
            {1e21, "1e+21"},
            {1.5e300, "1.5e+300"},
            {0.30000000000000004, "0.30000000000000004"}, /* 0.1 + 0.2: needs 17 digits */
            {1.0 / 3.0, "0.3333333333333333"},            /* 16 digits */
            {2.0 / 3.0, "0.6666666666666666"},
            {9007199254740993.0, "9007199254740992"}, /* 2^53 + 1 is not a double */
            {18446744073709551615.0, "1.8446744073709552e+19"},
            {-2.5e-7, "-2.5e-07"},
        };
        char buf[40];
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                expo_format_double(cases[i].v, buf, sizeof buf);
                if (strcmp(buf, cases[i].want) != 0)
                        fail_msg("case %zu: got \"%s\", want \"%s\"", i, buf, cases[i].want);
                /* and it is exact */
                assert_true(strtod(buf, NULL) == cases[i].v);
        }
        assert_string_equal(expo_format_double(NAN, buf, sizeof buf), "NaN");
        assert_string_equal(expo_format_double(-NAN, buf, sizeof buf), "NaN");
        assert_string_equal(expo_format_double(INFINITY, buf, sizeof buf), "+Inf");
        assert_string_equal(expo_format_double(-INFINITY, buf, sizeof buf), "-Inf");
        /* returns its buffer */
        assert_ptr_equal(expo_format_double(1, buf, sizeof buf), buf);
}

static void test_format_double_roundtrip(void **state)
{
        uint64_t x = 0x243F6A8885A308D3ULL;
        char buf[40];
        (void)state;

        /* random bit patterns: every finite one prints in <= 17 digits and reads back exactly */
        for (int i = 0; i < 100000; i++) {
                double v;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                memcpy(&v, &x, sizeof v);
                if (!isfinite(v))
                        continue;
                expo_format_double(v, buf, sizeof buf);
                if (strtod(buf, NULL) != v)
                        fail_msg("%a printed as \"%s\"", v, buf);
                assert_null(strchr(buf, ' '));
        }
}

static void test_exact_output(void **state)
{
        struct mset *s = mset_new();
        struct mfamily *f;
        char *text;
        (void)state;

        f = mset_family(s, "diskpulse_disk_reads_completed_total",
                        "The total number of reads completed successfully.", MT_COUNTER);
        mfamily_add_u64(s, f, "", UINT64_MAX, "device", "sda", NULL);
        mfamily_add_u64(s, f, "", 0, "device", "nvme0n1", NULL);
        f = mset_family(s, "diskpulse_disk_utilization_ratio",
                        "Help with a \\ backslash,\na newline and \"quotes\".", MT_GAUGE);
        mfamily_add(s, f, "", 0.563, "device", "sda", NULL);
        mfamily_add(s, f, "", 0.1, "device", "sd\"b\\\n", NULL);
        mfamily_add(s, f, "", 1e-05, NULL);
        f = mset_family(s, "diskpulse_x_seconds", "Odd values.", MT_UNTYPED);
        mfamily_add(s, f, "", NAN, "v", "nan", NULL);
        mfamily_add(s, f, "", INFINITY, "v", "inf", NULL);
        mfamily_add(s, f, "", -INFINITY, "v", "-inf", NULL);
        f = mset_family(s, "diskpulse_sync_latency_seconds", "Latency.", MT_HISTOGRAM);
        mfamily_add(s, f, "_bucket", 3, "path", "/", "le", "1e-05", NULL);
        mfamily_add(s, f, "_bucket", 7, "path", "/", "le", "+Inf", NULL);
        mfamily_add(s, f, "_sum", 0.0007, "path", "/", NULL);
        mfamily_add_u64(s, f, "_count", 7, "path", "/", NULL);
        f = mset_family(s, "diskpulse_sync_recent_seconds", "Recent.", MT_SUMMARY);
        mfamily_add(s, f, "", 0.002, "quantile", "0.5", NULL);
        f = mset_family(s, "diskpulse_disk_info", "Facts.", MT_INFO);
        mfamily_add(s, f, "", 1, "device", "sda", "model", "caf\xe9", NULL);
        f = mset_family(s, "diskpulse_empty", "No samples.", MT_GAUGE);

        text = render(&s, 1);
        assert_string_equal(
            text, "# HELP diskpulse_disk_reads_completed_total The total number of reads completed "
                  "successfully.\n"
                  "# TYPE diskpulse_disk_reads_completed_total counter\n"
                  "diskpulse_disk_reads_completed_total{device=\"sda\"} 18446744073709551615\n"
                  "diskpulse_disk_reads_completed_total{device=\"nvme0n1\"} 0\n"
                  "# HELP diskpulse_disk_utilization_ratio Help with a \\\\ backslash,\\na newline "
                  "and \"quotes\".\n"
                  "# TYPE diskpulse_disk_utilization_ratio gauge\n"
                  "diskpulse_disk_utilization_ratio{device=\"sda\"} 0.563\n"
                  "diskpulse_disk_utilization_ratio{device=\"sd\\\"b\\\\\\n\"} 0.1\n"
                  "diskpulse_disk_utilization_ratio 1e-05\n"
                  "# HELP diskpulse_x_seconds Odd values.\n"
                  "# TYPE diskpulse_x_seconds untyped\n"
                  "diskpulse_x_seconds{v=\"nan\"} NaN\n"
                  "diskpulse_x_seconds{v=\"inf\"} +Inf\n"
                  "diskpulse_x_seconds{v=\"-inf\"} -Inf\n"
                  "# HELP diskpulse_sync_latency_seconds Latency.\n"
                  "# TYPE diskpulse_sync_latency_seconds histogram\n"
                  "diskpulse_sync_latency_seconds_bucket{path=\"/\",le=\"1e-05\"} 3\n"
                  "diskpulse_sync_latency_seconds_bucket{path=\"/\",le=\"+Inf\"} 7\n"
                  "diskpulse_sync_latency_seconds_sum{path=\"/\"} 0.0007\n"
                  "diskpulse_sync_latency_seconds_count{path=\"/\"} 7\n"
                  "# HELP diskpulse_sync_recent_seconds Recent.\n"
                  "# TYPE diskpulse_sync_recent_seconds summary\n"
                  "diskpulse_sync_recent_seconds{quantile=\"0.5\"} 0.002\n"
                  "# HELP diskpulse_disk_info Facts.\n"
                  "# TYPE diskpulse_disk_info gauge\n"
                  "diskpulse_disk_info{device=\"sda\",model=\"caf\xef\xbf\xbd\"} 1\n");
        /* diskpulse_empty has no samples: it is left out entirely */
        free(text);
        mset_free(s);
}

static void test_integer_values_exact(void **state)
{
        static const uint64_t values[] = {0,
                                          1,
                                          9,
                                          10,
                                          4294967295ULL,
                                          4294967296ULL,
                                          9007199254740993ULL,
                                          18446744073709551614ULL,
                                          UINT64_MAX};
        static const char *const want[] = {"0",
                                           "1",
                                           "9",
                                           "10",
                                           "4294967295",
                                           "4294967296",
                                           "9007199254740993",
                                           "18446744073709551614",
                                           "18446744073709551615"};
        struct mset *s = mset_new();
        struct mfamily *f = mset_family(s, "n_total", "n", MT_COUNTER);
        char *text, *p;
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(values); i++)
                mfamily_add_u64(s, f, "", values[i], NULL);
        text = render(&s, 1);
        p = strstr(text, "# TYPE n_total counter\n");
        assert_non_null(p);
        p = strchr(p, '\n') + 1;
        for (size_t i = 0; i < ARRAY_SIZE(values); i++) {
                char line[64];
                snprintf(line, sizeof line, "n_total %s\n", want[i]);
                if (strncmp(p, line, strlen(line)) != 0)
                        fail_msg("sample %zu: want \"%s\" at \"%.40s\"", i, line, p);
                p += strlen(line);
        }
        assert_int_equal(*p, 0);
        free(text);
        mset_free(s);
}

static void test_sets_merged(void **state)
{
        struct mset *a = mset_new(), *b = mset_new(), *c = mset_new();
        struct mfamily *f;
        char *text;
        (void)state;

        f = mset_family(a, "diskpulse_disk_writes_completed_total", "Writes.", MT_COUNTER);
        mfamily_add_u64(a, f, "", 1, "device", "sda", NULL);
        mset_gauge(a, "diskpulse_disk_devices", "Devices.", 2, NULL);

        /* b: the same counter (other help: the first wins), a new gauge */
        f = mset_family(b, "diskpulse_disk_writes_completed_total", "Other help.", MT_COUNTER);
        mfamily_add_u64(b, f, "", 2, "device", "sdb", NULL);
        mset_gauge(b, "diskpulse_collector_success", "Success.", 1, "collector", "diskstats", NULL);

        /* c: the same name with another type is dropped; same-type families still merge */
        f = mset_family(c, "diskpulse_disk_writes_completed_total", "Wrong.", MT_GAUGE);
        mfamily_add(c, f, "", 99, "device", "sdz", NULL);
        mset_gauge(c, "diskpulse_collector_success", "Again.", 0, "collector", "smart", NULL);
        mset_gauge(c, "diskpulse_disk_devices", "Devices.", 5, "x", "y", NULL);

        struct mset *sets[] = {a, b, c};
        text = render(sets, 3);
        assert_string_equal(text, "# HELP diskpulse_disk_writes_completed_total Writes.\n"
                                  "# TYPE diskpulse_disk_writes_completed_total counter\n"
                                  "diskpulse_disk_writes_completed_total{device=\"sda\"} 1\n"
                                  "diskpulse_disk_writes_completed_total{device=\"sdb\"} 2\n"
                                  "# HELP diskpulse_disk_devices Devices.\n"
                                  "# TYPE diskpulse_disk_devices gauge\n"
                                  "diskpulse_disk_devices 2\n"
                                  "diskpulse_disk_devices{x=\"y\"} 5\n"
                                  "# HELP diskpulse_collector_success Success.\n"
                                  "# TYPE diskpulse_collector_success gauge\n"
                                  "diskpulse_collector_success{collector=\"diskstats\"} 1\n"
                                  "diskpulse_collector_success{collector=\"smart\"} 0\n");
        free(text);

        /* each header appears once */
        text = render(sets, 3);
        assert_null(strstr(strstr(text, "# TYPE diskpulse_disk_devices") + 1,
                           "# TYPE diskpulse_disk_devices"));
        free(text);

        /* the order of the sets decides: c first makes the gauge win */
        struct mset *rev[] = {c, a};
        text = render(rev, 2);
        assert_non_null(strstr(text, "# TYPE diskpulse_disk_writes_completed_total gauge\n"
                                     "diskpulse_disk_writes_completed_total{device=\"sdz\"} 99\n"
                                     "# HELP"));
        assert_null(strstr(text, "device=\"sda\"} 1"));
        free(text);

        mset_free(a);
        mset_free(b);
        mset_free(c);
}

static void test_empty(void **state)
{
        struct mset *s = mset_new();
        char *text;
        (void)state;

        text = render(&s, 1);
        assert_string_equal(text, "");
        free(text);
        text = render(NULL, 0);
        assert_string_equal(text, "");
        free(text);
        mset_free(s);
}

static void test_write_text_to_stream(void **state)
{
        struct mset *s = mset_new();
        char buf[256] = {0};
        FILE *f = fmemopen(buf, sizeof buf, "w");
        (void)state;

        mset_gauge(s, "g", "G.", 0.5, NULL);
        assert_non_null(f);
        assert_int_equal(expo_write_text(f, &s, 1), 0);
        fclose(f);
        assert_string_equal(buf, "# HELP g G.\n# TYPE g gauge\ng 0.5\n");
        mset_free(s);
}

static void test_openmetrics(void **state)
{
        struct mset *a = mset_new(), *b = mset_new();
        struct mset *sets[2] = {a, b};
        struct mfamily *f;
        char *buf = NULL;
        size_t len = 0;
        (void)state;

        f = mset_family(a, "diskpulse_x_reads_total", "Reads \"done\"\\ here.", MT_COUNTER);
        mfamily_add_u64(a, f, "", 7, "device", "sda", NULL);
        mset_gauge(a, "diskpulse_x_info", "Info.", 1, "model", "a\"b", NULL);
        f = mset_family(a, "diskpulse_x_seconds", "Latency.", MT_HISTOGRAM);
        mfamily_add(a, f, "_bucket", 1, "le", "0.1", NULL);
        mfamily_add(a, f, "_bucket", 2, "le", "+Inf", NULL);
        mfamily_add(a, f, "_sum", 0.25, NULL);
        mfamily_add_u64(a, f, "_count", 2, NULL);
        f = mset_family(b, "diskpulse_x_reads_total", "Ignored.", MT_COUNTER);
        mfamily_add_u64(b, f, "", 9, "device", "sdb", NULL);
        f = mset_family(b, "total", "A counter called total.", MT_COUNTER);
        mfamily_add_u64(b, f, "", 1, NULL);

        assert_int_equal(expo_render(sets, 2, EXPO_FORMAT_OPENMETRICS, &buf, &len), 0);
        assert_string_equal(buf, "# HELP diskpulse_x_reads Reads \\\"done\\\"\\\\ here.\n"
                                 "# TYPE diskpulse_x_reads counter\n"
                                 "diskpulse_x_reads_total{device=\"sda\"} 7\n"
                                 "diskpulse_x_reads_total{device=\"sdb\"} 9\n"
                                 "# HELP diskpulse_x_info Info.\n"
                                 "# TYPE diskpulse_x_info gauge\n"
                                 "diskpulse_x_info{model=\"a\\\"b\"} 1\n"
                                 "# HELP diskpulse_x_seconds Latency.\n"
                                 "# TYPE diskpulse_x_seconds histogram\n"
                                 "diskpulse_x_seconds_bucket{le=\"0.1\"} 1\n"
                                 "diskpulse_x_seconds_bucket{le=\"+Inf\"} 2\n"
                                 "diskpulse_x_seconds_sum 0.25\n"
                                 "diskpulse_x_seconds_count 2\n"
                                 "# HELP total A counter called total.\n"
                                 "# TYPE total counter\n"
                                 "total 1\n"
                                 "# EOF\n");
        assert_int_equal(strlen(buf), len);
        free(buf);
        /* the text format keeps the full names and does not escape quotes in HELP */
        buf = render(sets, 2);
        assert_non_null(strstr(buf, "# HELP diskpulse_x_reads_total Reads \"done\"\\\\ here.\n"
                                    "# TYPE diskpulse_x_reads_total counter\n"));
        assert_null(strstr(buf, "# EOF"));
        free(buf);
        mset_free(a);
        mset_free(b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_format_double),
            cmocka_unit_test(test_format_double_roundtrip),
            cmocka_unit_test(test_exact_output),
            cmocka_unit_test(test_integer_values_exact),
            cmocka_unit_test(test_sets_merged),
            cmocka_unit_test(test_empty),
            cmocka_unit_test(test_write_text_to_stream),
            cmocka_unit_test(test_openmetrics),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
