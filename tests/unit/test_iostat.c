/* Unit tests of the iostat -x math: hand-computed values, wraps, resets, absent fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "iostat.h"

#define ALL17 ((uint32_t)((1u << DS_NFIELDS) - 1))
#define ALL11 ((uint32_t)((1u << 11) - 1))

static void assert_close(double got, double want, const char *what)
{
        double tol = 1e-12 * (fabs(want) > 1 ? fabs(want) : 1);
        if (!(fabs(got - want) <= tol))
                fail_msg("%s = %.17g, want %.17g", what, got, want);
}

#define CHECK(d, field, want) assert_close((d).field, (want), #field)

static void assert_all_zero(const struct iostat_derived *d)
{
        CHECK(*d, read_await, 0);
        CHECK(*d, write_await, 0);
        CHECK(*d, discard_await, 0);
        CHECK(*d, flush_await, 0);
        CHECK(*d, utilization, 0);
        CHECK(*d, queue_depth, 0);
        CHECK(*d, read_iops, 0);
        CHECK(*d, write_iops, 0);
        CHECK(*d, read_bytes_per_second, 0);
        CHECK(*d, write_bytes_per_second, 0);
}

/* A busy second of a disk (all 17 fields). */
static void busy_pair(uint64_t prev[DS_NFIELDS], uint64_t cur[DS_NFIELDS])
{
        static const uint64_t p[DS_NFIELDS] = {
            [DS_READS] = 1000,           [DS_READS_MERGED] = 10,       [DS_READ_SECTORS] = 80000,
            [DS_READ_MS] = 5000,         [DS_WRITES] = 2000,           [DS_WRITES_MERGED] = 50,
            [DS_WRITE_SECTORS] = 160000, [DS_WRITE_MS] = 20000,        [DS_IO_NOW] = 0,
            [DS_IO_MS] = 100000,         [DS_IO_WEIGHTED_MS] = 300000, [DS_DISCARDS] = 10,
            [DS_DISCARDS_MERGED] = 0,    [DS_DISCARD_SECTORS] = 8000,  [DS_DISCARD_MS] = 100,
            [DS_FLUSHES] = 500,          [DS_FLUSH_MS] = 1000,
        };
        memcpy(prev, p, sizeof p);
        memcpy(cur, p, sizeof p);
        cur[DS_READS] += 100;
        cur[DS_READS_MERGED] += 7;
        cur[DS_READ_SECTORS] += 2048; /* 1 MiB */
        cur[DS_READ_MS] += 250;
        cur[DS_WRITES] += 400;
        cur[DS_WRITE_SECTORS] += 8192; /* 4 MiB */
        cur[DS_WRITE_MS] += 1200;
        cur[DS_IO_NOW] = 3;
        cur[DS_IO_MS] += 563;
        cur[DS_IO_WEIGHTED_MS] += 1450;
        cur[DS_DISCARDS] += 5;
        cur[DS_DISCARD_SECTORS] += 4096;
        cur[DS_DISCARD_MS] += 40;
        cur[DS_FLUSHES] += 50;
        cur[DS_FLUSH_MS] += 75;
}

static void test_busy_second(void **state)
{
        uint64_t prev[DS_NFIELDS], cur[DS_NFIELDS];
        struct iostat_derived d;
        (void)state;

        busy_pair(prev, cur);
        iostat_derive(prev, cur, ALL17, USEC_PER_SEC, &d);
        /* iostat -x over 1 s:
         *   r/s      = 100 reads / 1 s                  = 100
         *   w/s      = 400 writes / 1 s                 = 400
         *   rkB/s    = 2048 sectors * 512 / 1024        = 1024 kB/s -> 1048576 B/s
         *   wkB/s    = 8192 sectors * 512 / 1024        = 4096 kB/s -> 4194304 B/s
         *   r_await  = 250 ms / 100 reads               = 2.5 ms    -> 0.0025 s
         *   w_await  = 1200 ms / 400 writes             = 3 ms      -> 0.003 s
         *   d_await  = 40 ms / 5 discards               = 8 ms      -> 0.008 s
         *   f_await  = 75 ms / 50 flushes               = 1.5 ms    -> 0.0015 s
         *   %util    = 563 ms busy / 1000 ms * 100      = 56.3 %    -> 0.563
         *   aqu-sz   = 1450 ms weighted / 1000 ms       = 1.45 */
        CHECK(d, read_iops, 100);
        CHECK(d, write_iops, 400);
        CHECK(d, read_bytes_per_second, 1048576);
        CHECK(d, write_bytes_per_second, 4194304);
        CHECK(d, read_await, 0.0025);
        CHECK(d, write_await, 0.003);
        CHECK(d, discard_await, 0.008);
        CHECK(d, flush_await, 0.0015);
        CHECK(d, utilization, 0.563);
        CHECK(d, queue_depth, 1.45);
}

static void test_busy_over_four_seconds(void **state)
{
        uint64_t prev[DS_NFIELDS], cur[DS_NFIELDS];
        struct iostat_derived d;
        (void)state;

        busy_pair(prev, cur);
        iostat_derive(prev, cur, ALL17, 4 * USEC_PER_SEC, &d);
        /* The same deltas over 4 s: rates / 4, awaits unchanged (per request).
         *   r/s 25, w/s 100, rkB/s 256 -> 262144 B/s, wkB/s 1024 -> 1048576 B/s
         *   %util = 563 / 4000 = 0.14075, aqu-sz = 1450 / 4000 = 0.3625 */
        CHECK(d, read_iops, 25);
        CHECK(d, write_iops, 100);
        CHECK(d, read_bytes_per_second, 262144);
        CHECK(d, write_bytes_per_second, 1048576);
        CHECK(d, read_await, 0.0025);
        CHECK(d, write_await, 0.003);
        CHECK(d, discard_await, 0.008);
        CHECK(d, flush_await, 0.0015);
        CHECK(d, utilization, 0.14075);
        CHECK(d, queue_depth, 0.3625);
}

static void test_sub_second_interval(void **state)
{
        uint64_t prev[DS_NFIELDS] = {0}, cur[DS_NFIELDS] = {0};
        struct iostat_derived d;
        (void)state;

        /* 250 ms: 10 reads of 8 sectors, 30 ms of reads, 100 ms busy, 120 ms queued.
         *   r/s = 10 / 0.25 = 40; rkB/s = 80 * 512 / 0.25 B/s = 163840 B/s
         *   r_await = 30 / 10 = 3 ms; %util = 100 / 250 = 0.4; aqu-sz = 120 / 250 = 0.48 */
        cur[DS_READS] = 10;
        cur[DS_READ_SECTORS] = 80;
        cur[DS_READ_MS] = 30;
        cur[DS_IO_MS] = 100;
        cur[DS_IO_WEIGHTED_MS] = 120;
        iostat_derive(prev, cur, ALL17, 250 * USEC_PER_MSEC, &d);
        CHECK(d, read_iops, 40);
        CHECK(d, read_bytes_per_second, 163840);
        CHECK(d, read_await, 0.003);
        CHECK(d, utilization, 0.4);
        CHECK(d, queue_depth, 0.48);
        CHECK(d, write_iops, 0);
        CHECK(d, write_await, 0);
}

static void test_idle_device(void **state)
{
        uint64_t prev[DS_NFIELDS], cur[DS_NFIELDS];
        struct iostat_derived d;
        (void)state;

        busy_pair(prev, cur);
        memcpy(cur, prev, sizeof cur);
        memset(&d, 0x7f, sizeof d);
        iostat_derive(prev, cur, ALL17, 10 * USEC_PER_SEC, &d);
        assert_all_zero(&d);
}

static void test_interval_zero(void **state)
{
        uint64_t prev[DS_NFIELDS], cur[DS_NFIELDS];
        struct iostat_derived d;
        (void)state;

        busy_pair(prev, cur);
        memset(&d, 0x7f, sizeof d);
        iostat_derive(prev, cur, ALL17, 0, &d);
        assert_all_zero(&d);
}

static void test_32bit_wrap(void **state)
{
        uint64_t prev[DS_NFIELDS] = {0}, cur[DS_NFIELDS] = {0};
        struct iostat_derived d;
        (void)state;

        /* 2^32 = 4294967296: 4294967000 -> 500 is 296 + 500 = 796 ms */
        assert_int_equal(iostat_delta(DS_READ_MS, 4294967000ULL, 500), 796);
        assert_int_equal(iostat_delta(DS_IO_MS, 4294967000ULL, 500), 796);
        assert_int_equal(iostat_delta(DS_IO_WEIGHTED_MS, 4294967295ULL, 0), 1);

        prev[DS_READS] = 1000;
        cur[DS_READS] = 1004;
        prev[DS_READ_MS] = 4294967000ULL;
        cur[DS_READ_MS] = 500;
        prev[DS_WRITES] = 50;
        cur[DS_WRITES] = 52;
        prev[DS_WRITE_MS] = 4294967290ULL;
        cur[DS_WRITE_MS] = 10; /* 16 ms */
        prev[DS_FLUSHES] = 7;
        cur[DS_FLUSHES] = 8;
        prev[DS_FLUSH_MS] = 4294967295ULL;
        cur[DS_FLUSH_MS] = 2; /* 3 ms */
        prev[DS_IO_MS] = 4294967000ULL;
        cur[DS_IO_MS] = 500;
        prev[DS_IO_WEIGHTED_MS] = 4294967000ULL;
        cur[DS_IO_WEIGHTED_MS] = 500;
        iostat_derive(prev, cur, ALL17, USEC_PER_SEC, &d);
        /* r_await = 796 ms / 4 = 199 ms; w_await = 16 / 2 = 8 ms; f_await = 3 ms;
         * %util = 796 / 1000 = 0.796; aqu-sz = 796 / 1000 = 0.796 */
        CHECK(d, read_await, 0.199);
        CHECK(d, write_await, 0.008);
        CHECK(d, flush_await, 0.003);
        CHECK(d, utilization, 0.796);
        CHECK(d, queue_depth, 0.796);
        CHECK(d, read_iops, 4);
        CHECK(d, write_iops, 2);
}

static void test_64bit_counter_going_back(void **state)
{
        uint64_t prev[DS_NFIELDS] = {0}, cur[DS_NFIELDS] = {0};
        struct iostat_derived d;
        (void)state;

        assert_int_equal(iostat_delta(DS_READS, 1000, 900), 0);
        assert_int_equal(iostat_delta(DS_READ_SECTORS, UINT64_MAX, 0), 0);
        assert_int_equal(iostat_delta(DS_WRITES, 5, 5), 0);
        assert_true(iostat_delta(DS_WRITES, 0, UINT64_MAX) == UINT64_MAX);
        /* a 32-bit field holding a value that cannot come from the kernel does not wrap */
        assert_int_equal(iostat_delta(DS_READ_MS, 5000000000ULL, 10), 0);

        prev[DS_READS] = 1000;
        cur[DS_READS] = 900;
        prev[DS_READ_SECTORS] = 80000;
        cur[DS_READ_SECTORS] = 100;
        prev[DS_READ_MS] = 100;
        cur[DS_READ_MS] = 200;
        prev[DS_WRITES] = 10;
        cur[DS_WRITES] = 20;
        prev[DS_WRITE_SECTORS] = 500;
        cur[DS_WRITE_SECTORS] = 400;
        prev[DS_WRITE_MS] = 10;
        cur[DS_WRITE_MS] = 60;
        iostat_derive(prev, cur, ALL17, USEC_PER_SEC, &d);
        CHECK(d, read_iops, 0);
        CHECK(d, read_await, 0);
        CHECK(d, read_bytes_per_second, 0);
        CHECK(d, write_bytes_per_second, 0);
        /* the writes did go forward: 10 writes, 50 ms -> 5 ms */
        CHECK(d, write_iops, 10);
        CHECK(d, write_await, 0.005);
}

static void test_utilization_clamped(void **state)
{
        uint64_t prev[DS_NFIELDS] = {0}, cur[DS_NFIELDS] = {0};
        struct iostat_derived d;
        (void)state;

        /* exactly busy the whole second */
        cur[DS_IO_MS] = 1000;
        iostat_derive(prev, cur, ALL17, USEC_PER_SEC, &d);
        CHECK(d, utilization, 1.0);

        /* the kernel's io_ticks can run ahead of the wall clock (timer slack) */
        cur[DS_IO_MS] = 1500;
        cur[DS_IO_WEIGHTED_MS] = 64000; /* aqu-sz is not a ratio: not clamped */
        iostat_derive(prev, cur, ALL17, USEC_PER_SEC, &d);
        CHECK(d, utilization, 1.0);
        CHECK(d, queue_depth, 64);
}

static void test_absent_fields(void **state)
{
        uint64_t prev[DS_NFIELDS], cur[DS_NFIELDS];
        struct iostat_derived d;
        (void)state;

        /* An 11-field kernel: discard and flush values in the arrays must be ignored. */
        busy_pair(prev, cur);
        iostat_derive(prev, cur, ALL11, USEC_PER_SEC, &d);
        CHECK(d, read_await, 0.0025);
        CHECK(d, write_await, 0.003);
        CHECK(d, discard_await, 0);
        CHECK(d, flush_await, 0);
        CHECK(d, utilization, 0.563);

        /* Old partition line: reads, sectors read, writes, sectors written only. */
        uint32_t old = (1u << DS_READS) | (1u << DS_READ_SECTORS) | (1u << DS_WRITES) |
                       (1u << DS_WRITE_SECTORS);
        iostat_derive(prev, cur, old, USEC_PER_SEC, &d);
        CHECK(d, read_iops, 100);
        CHECK(d, write_iops, 400);
        CHECK(d, read_bytes_per_second, 1048576);
        CHECK(d, write_bytes_per_second, 4194304);
        CHECK(d, read_await, 0); /* no read_ms */
        CHECK(d, write_await, 0);
        CHECK(d, utilization, 0);
        CHECK(d, queue_depth, 0);

        /* Nothing present */
        iostat_derive(prev, cur, 0, USEC_PER_SEC, &d);
        assert_all_zero(&d);

        /* await needs both the count and the time */
        iostat_derive(prev, cur, 1u << DS_READ_MS, USEC_PER_SEC, &d);
        CHECK(d, read_await, 0);
        iostat_derive(prev, cur, 1u << DS_READS, USEC_PER_SEC, &d);
        CHECK(d, read_await, 0);
        CHECK(d, read_iops, 100);
}

static void test_is_reset(void **state)
{
        uint64_t prev[DS_NFIELDS] = {0}, cur[DS_NFIELDS] = {0};
        (void)state;

        prev[DS_READS] = 1000;
        prev[DS_WRITES] = 2000;
        prev[DS_READ_SECTORS] = 80000;
        prev[DS_WRITE_SECTORS] = 160000;
        /* re-added: everything restarted near zero */
        cur[DS_READS] = 10;
        cur[DS_WRITES] = 5;
        cur[DS_READ_SECTORS] = 100;
        cur[DS_WRITE_SECTORS] = 40;
        assert_true(iostat_is_reset(prev, cur));

        /* re-added and nothing read since: a zero sector counter went back too */
        cur[DS_READS] = 0;
        cur[DS_READ_SECTORS] = 0;
        assert_true(iostat_is_reset(prev, cur));

        /* a sector counter that kept growing: not a reset */
        cur[DS_WRITE_SECTORS] = 160000;
        assert_false(iostat_is_reset(prev, cur));
        cur[DS_WRITE_SECTORS] = 40;

        /* discard sectors: 0 before is ignored, growth means not a reset */
        prev[DS_DISCARD_SECTORS] = 0;
        cur[DS_DISCARD_SECTORS] = 999;
        assert_true(iostat_is_reset(prev, cur));
        prev[DS_DISCARD_SECTORS] = 10;
        assert_false(iostat_is_reset(prev, cur));
        prev[DS_DISCARD_SECTORS] = 0;
        cur[DS_DISCARD_SECTORS] = 0;

        /* requests did not go back: not a reset, whatever the sectors do */
        memcpy(cur, prev, sizeof cur);
        assert_false(iostat_is_reset(prev, cur));
        cur[DS_READS] = prev[DS_READS] + 1;
        cur[DS_WRITES] = prev[DS_WRITES] - 1;
        cur[DS_READ_SECTORS] = 0;
        cur[DS_WRITE_SECTORS] = 0;
        assert_false(iostat_is_reset(prev, cur));

        /* flushes and discards count as requests */
        memset(prev, 0, sizeof(uint64_t) * DS_NFIELDS);
        memset(cur, 0, sizeof(uint64_t) * DS_NFIELDS);
        prev[DS_FLUSHES] = 100;
        prev[DS_WRITE_SECTORS] = 8;
        cur[DS_FLUSHES] = 3;
        cur[DS_WRITE_SECTORS] = 0;
        assert_true(iostat_is_reset(prev, cur));

        /* a fresh device */
        memset(prev, 0, sizeof(uint64_t) * DS_NFIELDS);
        assert_false(iostat_is_reset(prev, cur));
}

static uint64_t lcg(uint64_t *s)
{
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        return *s >> 11;
}

/* A value from a mix of small numbers, 32-bit edges and 64-bit edges. */
static uint64_t pick(uint64_t *s)
{
        static const uint64_t edges[] = {0,
                                         1,
                                         2,
                                         999,
                                         4294967295,
                                         4294967296,
                                         4294967000,
                                         UINT64_MAX,
                                         UINT64_MAX - 1,
                                         (uint64_t)1 << 63,
                                         1000000,
                                         12345678};
        uint64_t r = lcg(s);
        switch (r % 4) {
        case 0:
                return edges[(r >> 8) % ARRAY_SIZE(edges)];
        case 1:
                return (r >> 8) % 5000;
        case 2:
                return (r >> 8) & 0xFFFFFFFFu;
        default:
                return lcg(s) ^ (lcg(s) << 21);
        }
}

static void test_never_nan_or_negative(void **state)
{
        static const usec_t intervals[] = {
            0,         1, 999, USEC_PER_MSEC, USEC_PER_SEC, 10 * USEC_PER_SEC, 3600 * USEC_PER_SEC,
            UINT64_MAX};
        uint64_t seed = 0x5eed;
        (void)state;

        for (int iter = 0; iter < 20000; iter++) {
                uint64_t prev[DS_NFIELDS], cur[DS_NFIELDS];
                uint32_t present = (uint32_t)lcg(&seed) & ALL17;
                usec_t interval = intervals[lcg(&seed) % ARRAY_SIZE(intervals)];
                struct iostat_derived d;

                if (iter % 3 == 0)
                        present = ALL17;
                for (int f = 0; f < DS_NFIELDS; f++) {
                        prev[f] = pick(&seed);
                        cur[f] = (iter % 2) ? pick(&seed) : prev[f] + (lcg(&seed) % 1000);
                }
                iostat_derive(prev, cur, present, interval, &d);
                const double v[] = {d.read_await,
                                    d.write_await,
                                    d.discard_await,
                                    d.flush_await,
                                    d.utilization,
                                    d.queue_depth,
                                    d.read_iops,
                                    d.write_iops,
                                    d.read_bytes_per_second,
                                    d.write_bytes_per_second};
                for (size_t k = 0; k < ARRAY_SIZE(v); k++)
                        if (isnan(v[k]) || isinf(v[k]) || v[k] < 0)
                                fail_msg("iteration %d: value %zu = %g", iter, k, v[k]);
                if (d.utilization > 1.0)
                        fail_msg("iteration %d: utilization %g > 1", iter, d.utilization);
                if (interval == 0)
                        assert_all_zero(&d);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_busy_second),
            cmocka_unit_test(test_busy_over_four_seconds),
            cmocka_unit_test(test_sub_second_interval),
            cmocka_unit_test(test_idle_device),
            cmocka_unit_test(test_interval_zero),
            cmocka_unit_test(test_32bit_wrap),
            cmocka_unit_test(test_64bit_counter_going_back),
            cmocka_unit_test(test_utilization_clamped),
            cmocka_unit_test(test_absent_fields),
            cmocka_unit_test(test_is_reset),
            cmocka_unit_test(test_never_nan_or_negative),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
