/* Unit tests of the exposition writer: exact output in the text format and OpenMetrics, number
 * formats, merging of sets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expo.h"
#include "util.h"

/* Every realloc of the linked code goes through this (the test is linked with -Wl,--wrap=realloc,
 * tests/CMakeLists.txt): while watching, the calls that ask for more than the block holds are
 * counted (a page's buffer grown). */
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);

static bool watching;
static int grown;

void *__wrap_realloc(void *p, size_t n)
{
        if (watching && p && n > malloc_usable_size(p))
                grown++;
        return __real_realloc(p, n);
}

static uint64_t rng(uint64_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        return *x;
}

/* A set with a table (escaped label values, every kind of cell, rows without some columns)
 * and, in want, the same families built sample by sample. */
static void table_and_generic(struct mset *got, struct mset *want)
{
        static const char *const names[] = {"device", "model", "mode"};
        static const char *const rows[][3] = {
            {"sda", "Disk \"one\"\\", "write back"},
            {"nvme0n1", "caf\xe9\n", ""},
            {"dm-0", "", NULL},
            {"md0", "m", "write through"},
        };
        static const uint64_t u[] = {0, 1, UINT64_MAX, 12345678901234567ULL};
        static const double dv[] = {0.0, -0.0, 0.001, 2.5e-7, NAN, 1e21, 123456789012345.0, -3};
        struct mrows *r = mrows_new(names, 3);
        struct mtable *t;
        struct mfamily *f[7];
        uint64_t cells[7][4];

        for (size_t i = 0; i < 4; i++)
                assert_int_equal(mrows_add(r, rows[i]), i);
        t = mtable_new(r, 7);
        for (size_t i = 0; i < 4; i++) {
                uint64_t v[7];
                /* row 2 has no column 1 and 3, row 3 no column 6 */
                uint32_t present = i == 2 ? 0x75 : i == 3 ? 0x3F : 0x7F;
                v[0] = u[i];
                v[1] = i == 3 ? UINT64_MAX / 512 + 1 : u[i] / 1000;    /* sectors, one too many */
                v[2] = i == 1 ? 1000000000000000ULL : u[i] % 10000007; /* ms, one past 1e15 */
                v[3] = mtable_double(dv[i]);
                v[4] = mtable_double(dv[i + 4]);
                v[5] = 7;              /* ONE */
                v[6] = i == 1 ? 0 : 5; /* a cell 0 takes no room */
                for (size_t c = 0; c < 7; c++)
                        cells[c][i] = (present >> c) & 1 ? v[c] : 0;
                mtable_add_row(t, i, present, v);
        }
        f[0] = mset_table_family(got, "t_u64_total", "u64.", MT_COUNTER, t, 0, MCELL_U64, 1);
        f[1] = mset_table_family(got, "t_bytes_total", "bytes.", MT_COUNTER, t, 1, MCELL_SCALED, 1);
        mfamily_scale(f[1], 512); /* sectors in the table, bytes on the page */
        f[2] = mset_table_family(got, "t_seconds_total", "ms.", MT_COUNTER, t, 2, MCELL_MILLIS, 3);
        f[3] = mset_table_family(got, "t_a", "d.", MT_GAUGE, t, 3, MCELL_DOUBLE, 1);
        f[4] = mset_table_family(got, "t_b", "d.", MT_GAUGE, t, 4, MCELL_DOUBLE, 0);
        f[5] = mset_table_family(got, "t_info", "info.", MT_GAUGE, t, 5, MCELL_ONE, 7);
        f[6] = mset_table_family(got, "t_mode_info", "mode.", MT_GAUGE, t, 6, MCELL_U64, 5);
        mtable_unref(t);
        mrows_unref(r);
        assert_int_equal(f[1]->n, 3);
        assert_int_equal(f[6]->n, 3);
        {
                struct mfamily *g[7];
                g[0] = mset_family(want, "t_u64_total", "u64.", MT_COUNTER);
                g[1] = mset_family(want, "t_bytes_total", "bytes.", MT_COUNTER);
                g[2] = mset_family(want, "t_seconds_total", "ms.", MT_COUNTER);
                g[3] = mset_family(want, "t_a", "d.", MT_GAUGE);
                g[4] = mset_family(want, "t_b", "d.", MT_GAUGE);
                g[5] = mset_family(want, "t_info", "info.", MT_GAUGE);
                g[6] = mset_family(want, "t_mode_info", "mode.", MT_GAUGE);
                for (size_t i = 0; i < 4; i++) {
                        const char *dev = rows[i][0], *model = rows[i][1], *mode = rows[i][2];
                        uint32_t present = i == 2 ? 0x75 : i == 3 ? 0x3F : 0x7F;
                        double d;
                        mfamily_add_u64(want, g[0], "", cells[0][i], "device", dev, NULL);
                        if (present & 2) {
                                if (cells[1][i] <= UINT64_MAX / 512)
                                        mfamily_add_u64(want, g[1], "", cells[1][i] * 512, "device",
                                                        dev, NULL);
                                else
                                        mfamily_add(want, g[1], "", (double)cells[1][i] * 512.0,
                                                    "device", dev, NULL);
                        }
                        mfamily_add(want, g[2], "", (double)cells[2][i] / 1000.0, "device", dev,
                                    "model", model, NULL);
                        if (present & 8) {
                                memcpy(&d, &cells[3][i], 8);
                                mfamily_add(want, g[3], "", d, "device", dev, NULL);
                        }
                        memcpy(&d, &cells[4][i], 8);
                        mfamily_add(want, g[4], "", d, NULL);
                        mfamily_add(want, g[5], "", 1, "device", dev, "model", model, "mode",
                                    mode ? mode : "", NULL);
                        if (present & 0x40)
                                mfamily_add_u64(want, g[6], "", cells[6][i], "device", dev, "mode",
                                                mode ? mode : "", NULL);
                }
        }
}

static char *read_all(struct mset *const *sets, size_t n, enum expo_format fmt, size_t chunk)
{
        struct expo_stream *st = expo_stream_new(sets, n, fmt);
        size_t cap = 1 << 16, len = 0, k;
        char *buf = xmalloc(cap);

        while ((k = expo_stream_read(st, buf + len, chunk)) > 0) {
                assert_true(k <= chunk);
                len += k;
                if (cap - len < chunk + 1) {
                        cap *= 2;
                        buf = xrealloc(buf, cap);
                }
        }
        assert_int_equal(expo_stream_read(st, buf + len, chunk), 0); /* and it stays at the end */
        buf[len] = 0;
        expo_stream_free(st);
        return buf;
}

static char *render(struct mset *const *sets, size_t n)
{
        char *buf = NULL;
        size_t len = 0;

        assert_int_equal(expo_render_text(sets, n, &buf, &len), 0);
        assert_non_null(buf);
        assert_int_equal(strlen(buf), len);
        return buf;
}

/* A set of n samples of one family named "v", each value printed in 24 characters
 * ("-1.2345678901234567e-300"): some 10 bytes a line more than expo_estimate() allows. */
static struct mset *long_values(int n)
{
        struct mset *s = mset_new();
        struct mfamily *f = mset_family(s, "v", "h", MT_GAUGE);

        for (int i = 0; i < n; i++)
                mfamily_add(s, f, "", -1.2345678901234567e-300 * (1 + i % 7), NULL);
        return s;
}

/* The page rendered whole is the page streamed, and its buffer grows only when the page does not
 * fit the estimate and a chunk more: a page a little longer than its estimate was copied into a
 * buffer twice the size (past the heap's mmap threshold, a mapping made, shrunk and torn down at
 * every render). */
static void test_render_grows_only_when_full(void **state)
{
        static const struct {
                int samples;
                int most_grown;
        } cases[] = {
            {2, 0},    /* a few bytes past the estimate */
            {3000, 0}, /* some 30 KiB past it: within the chunk */
            {20000, 3},
        };
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct mset *s = long_values(cases[i].samples);
                char *text, *streamed = read_all(&s, 1, EXPO_FORMAT_TEXT, 4096);
                size_t len;

                watching = true;
                grown = 0;
                assert_int_equal(expo_render(&s, 1, EXPO_FORMAT_TEXT, &text, &len), 0);
                watching = false;
                assert_true(len > expo_estimate(&s, 1)); /* the case meant */
                assert_int_equal(len, strlen(streamed));
                assert_string_equal(text, streamed);
                if (grown > cases[i].most_grown)
                        fail_msg("%d samples (%zu bytes, estimate %zu): grown %d times, want <= %d",
                                 cases[i].samples, len, expo_estimate(&s, 1), grown,
                                 cases[i].most_grown);
                if (cases[i].most_grown > 0)
                        assert_true(grown > 0); /* and the growing path ran */
                free(text);
                free(streamed);
                mset_free(s);
        }
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

static void test_table_families_as_generic(void **state)
{
        struct mset *got = mset_new(), *want = mset_new();
        (void)state;

        table_and_generic(got, want);
        for (int fmt = 0; fmt < _EXPO_FORMAT_MAX; fmt++) {
                char *a, *b;
                size_t la, lb;
                assert_int_equal(expo_render(&got, 1, (enum expo_format)fmt, &a, &la), 0);
                assert_int_equal(expo_render(&want, 1, (enum expo_format)fmt, &b, &lb), 0);
                assert_int_equal(la, lb); /* the protobuf page holds NULs: compared whole */
                assert_memory_equal(a, b, la);
                free(a);
                free(b);
        }
        mset_free(got);
        mset_free(want);
}

static void test_stream_in_pieces(void **state)
{
        struct mset *t = mset_new(), *g = mset_new(), *small = mset_new();
        struct mset *sets[3] = {t, g, small};
        static const size_t chunks[] = {1, 2, 7, 64, 100, 4096};
        (void)state;

        table_and_generic(t, g);
        mset_gauge(small, "t_a", "merged into the table's.", 9, "x", "y", NULL);
        mset_gauge(small, "z_last", "the end.", 1, NULL);
        /* the text formats (the protobuf page, binary, is test_expo_proto's) */
        for (int fmt = 0; fmt <= EXPO_FORMAT_OPENMETRICS; fmt++) {
                char *whole;
                size_t len;
                assert_int_equal(expo_render(sets, 3, (enum expo_format)fmt, &whole, &len), 0);
                assert_non_null(strstr(whole, "t_a{x=\"y\"} 9\n"));
                for (size_t i = 0; i < ARRAY_SIZE(chunks); i++) {
                        char *p = read_all(sets, 3, (enum expo_format)fmt, chunks[i]);
                        if (strcmp(p, whole) != 0)
                                fail_msg("format %d in pieces of %zu differs", fmt, chunks[i]);
                        free(p);
                }
                /* the estimate is near the size */
                assert_true(expo_estimate(sets, 3) > len / 2 && expo_estimate(sets, 3) < len * 2);
                free(whole);
        }
        mset_free(t);
        mset_free(g);
        mset_free(small);
}

static void test_millis_and_integers_as_printf(void **state)
{
        uint64_t x = 0x2545F4914F6CDD1DULL;
        struct mrows *r;
        struct mtable *tab;
        static const char *const names[] = {"k"};
        const char *v[1] = {"v"};
        char want[64], got[128];
        (void)state;

        /* the short ways (ms as seconds, integral doubles) print what the printf way prints */
        r = mrows_new(names, 1);
        mrows_add(r, v);
        for (int i = 0; i < 200000; i++) {
                struct mset *s = mset_new();
                uint64_t ms = rng(&x) >> (rng(&x) % 64);
                double d = (double)(int64_t)(rng(&x) >> (rng(&x) % 64)) * (i % 2 ? -1 : 1);
                uint64_t cells[2] = {ms, mtable_double(d)};
                char *text;
                size_t len;

                if (i < 3000)
                        ms = (uint64_t)i; /* every small value */
                cells[0] = ms;
                tab = mtable_new(r, 2);
                mtable_add_row(tab, 0, 3, cells);
                mset_table_family(s, "m", "h", MT_GAUGE, tab, 0, MCELL_MILLIS, 0);
                mset_table_family(s, "n", "h", MT_GAUGE, tab, 1, MCELL_DOUBLE, 0);
                mtable_unref(tab);
                assert_int_equal(expo_render(&s, 1, EXPO_FORMAT_TEXT, &text, &len), 0);
                snprintf(got, sizeof got, "%s", strstr(text, "\nm ") + 3);
                *strchr(got, '\n') = 0;
                expo_format_double((double)ms / 1000.0, want, sizeof want);
                if (strcmp(got, want) != 0)
                        fail_msg("ms %llu: \"%s\", want \"%s\"", (unsigned long long)ms, got, want);
                snprintf(got, sizeof got, "%s", strstr(text, "\nn ") + 3);
                *strchr(got, '\n') = 0;
                expo_format_double(d, want, sizeof want);
                if (strcmp(got, want) != 0)
                        fail_msg("%.17g: \"%s\", want \"%s\"", d, got, want);
                free(text);
                mset_free(s);
        }
        mrows_unref(r);
}

/* Every double the exact integer way prints, in every decade it takes, as the printf way. */
static void test_doubles_as_printf(void **state)
{
        static const char *const names[] = {"i"};
        uint64_t x = 0x123456789ABCDEFULL;
        char want[64];
        (void)state;

        for (int batch = 0; batch < 400; batch++) {
                struct mrows *r = mrows_new(names, 1);
                struct mtable *t;
                struct mset *s = mset_new();
                double v[1000];
                char *text, *p, idx[16];
                size_t len;

                for (int i = 0; i < 1000; i++) {
                        const char *vals[1] = {idx};
                        uint64_t bits = rng(&x);
                        snprintf(idx, sizeof idx, "%d", i);
                        mrows_add(r, vals);
                        switch (i % 5) {
                        case 0: /* any bits with an exponent from 2^-60 to 2^60 */
                                bits = (bits & 0x800FFFFFFFFFFFFFULL) |
                                       ((uint64_t)(1023 - 60 + (int)(rng(&x) % 121)) << 52);
                                memcpy(&v[i], &bits, 8);
                                break;
                        case 1: /* rates: counts over a slightly uneven interval */
                                v[i] = (double)(rng(&x) % 100000000) /
                                       (10.0 + (double)(rng(&x) % 2000) / 1e4);
                                break;
                        case 2: /* latencies: ms over requests, in seconds */
                                v[i] = (double)(rng(&x) % 100000) / (double)(1 + rng(&x) % 5000) /
                                       1000.0;
                                break;
                        case 3: /* short decimals, ties and powers of two */
                                v[i] = (double)(int64_t)(rng(&x) % 2000001 - 1000000) /
                                       (double)(1ULL << (rng(&x) % 40));
                                break;
                        default: /* near powers of ten */
                                v[i] = pow(10.0, (double)(int)(rng(&x) % 40) - 20.0) *
                                       (1.0 + ((double)(rng(&x) % 3) - 1.0) * 1e-16);
                        }
                }
                t = mtable_new(r, 1);
                for (int i = 0; i < 1000; i++)
                        mtable_add_row(t, (size_t)i, 1, (const uint64_t[]){mtable_double(v[i])});
                mset_table_family(s, "d", "h", MT_GAUGE, t, 0, MCELL_DOUBLE, 1);
                mtable_unref(t);
                mrows_unref(r);
                assert_int_equal(expo_render(&s, 1, EXPO_FORMAT_TEXT, &text, &len), 0);
                p = strstr(text, "\nd{");
                for (int i = 0; i < 1000; i++) {
                        char *sp = strchr(p + 1, ' '), *nl = strchr(sp, '\n');
                        expo_format_double(v[i], want, sizeof want);
                        if ((size_t)(nl - sp - 1) != strlen(want) ||
                            memcmp(sp + 1, want, strlen(want)) != 0)
                                fail_msg("%a: \"%.*s\", want \"%s\"", v[i], (int)(nl - sp - 1),
                                         sp + 1, want);
                        p = nl;
                }
                free(text);
                mset_free(s);
        }
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
            cmocka_unit_test(test_table_families_as_generic),
            cmocka_unit_test(test_stream_in_pieces),
            cmocka_unit_test(test_millis_and_integers_as_printf),
            cmocka_unit_test(test_doubles_as_printf),
            cmocka_unit_test(test_render_grows_only_when_full),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
