/* Unit tests of the /proc/self/stat parser and the process_* metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>

#include <cmocka.h>

#include "fsroot.h"
#include "process.h"

/* A line as a 6.1 kernel prints it (52 fields). Fields: pid (comm) state ppid pgrp session tty_nr
 * tpgid flags minflt cminflt majflt cmajflt utime=250 stime=130 cutime cstime priority nice
 * num_threads itrealvalue starttime vsize=123456789 rss=2048 rsslim ... */
#define TAIL                                                                                       \
        " S 1 12345 12345 0 -1 4194560 1234 0 5 0 250 130 0 0 20 0 3 0 987654 123456789 2048 "     \
        "18446744073709551615 94712345690112 94712345812345 140723456789008 0 0 0 0 4096 16386 0 " \
        "0 0 17 1 0 0 0 0 0 94712345900000 94712345910000 94712367890432 140723456793561 "         \
        "140723456793600 140723456793600 140723456794600 0\n"

static void test_parse_real_line(void **state)
{
        uint64_t ticks = 1, vsize = 1, rss = 1;
        (void)state;

        assert_int_equal(process_parse_stat("12345 (diskpulse)" TAIL, &ticks, &vsize, &rss), 0);
        assert_int_equal(ticks, 380); /* utime 250 + stime 130 */
        assert_int_equal(vsize, 123456789);
        assert_int_equal(rss, 2048);
}

static void test_parse_odd_comm(void **state)
{
        static const char *const lines[] = {
            "1 (with space)" TAIL,
            "1 (a) b) (c)" TAIL,
            "1 ())" TAIL,
            "1 ()" TAIL,
            "1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22)" TAIL,
            "1 (\xc3\xa9\n\t)" TAIL,
        };
        (void)state;

        for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
                uint64_t ticks = 0, vsize = 0, rss = 0;
                int r = process_parse_stat(lines[i], &ticks, &vsize, &rss);
                if (r != 0 || ticks != 380 || vsize != 123456789 || rss != 2048)
                        fail_msg("line %zu: r=%d ticks=%llu vsize=%llu rss=%llu", i, r,
                                 (unsigned long long)ticks, (unsigned long long)vsize,
                                 (unsigned long long)rss);
        }
}

static void test_parse_large_and_negative(void **state)
{
        uint64_t ticks = 0, vsize = 0, rss = 7;
        (void)state;

        /* 64-bit values; a negative rss (kernel prints it with %ld) counts as 0 */
        assert_int_equal(process_parse_stat("7 (big) R 1 1 1 0 -1 0 0 0 0 0 10000000000 "
                                            "20000000000 0 0 20 0 1 0 1 18446744073709551615 -3",
                                            &ticks, &vsize, &rss),
                         0);
        assert_true(ticks == 30000000000ULL);
        assert_true(vsize == UINT64_MAX);
        assert_int_equal(rss, 0);
}

static void test_parse_malformed(void **state)
{
        static const char *const bad[] = {
            "",
            "12345",
            "12345 (diskpulse",
            "12345 (diskpulse)",
            "12345 (diskpulse) S",
            "12345 (diskpulse) S 1 12345 12345 0 -1 4194560 1234 0 5 0 250 130",
            "12345 (diskpulse) S 1 12345 12345 0 -1 4194560 1234 0 5 0 250 130 0 0 20 0 3 0 "
            "987654 123456789",
            "12345 (diskpulse) S 1 12345 12345 0 -1 4194560 1234 0 5 0 x 130 0 0 20 0 3 0 "
            "987654 123456789 2048",
            "12345 (diskpulse) S 1 12345 12345 0 -1 4194560 1234 0 5 0 250 130 0 0 20 0 3 0 "
            "987654 vsize 2048",
            "no parenthesis S 1 12345 12345 0 -1 4194560 1234 0 5 0 250 130 0 0 20 0 3 0 "
            "987654 123456789 2048",
        };
        (void)state;

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                uint64_t ticks = 11, vsize = 22, rss = 33;
                int r = process_parse_stat(bad[i], &ticks, &vsize, &rss);
                if (r != -EINVAL)
                        fail_msg("\"%s\": got %d, want -EINVAL", bad[i], r);
                /* outputs untouched */
                assert_int_equal(ticks, 11);
                assert_int_equal(vsize, 22);
                assert_int_equal(rss, 33);
        }
}

static void test_parse_own_stat(void **state)
{
        char buf[1024];
        uint64_t ticks, vsize, rss;
        (void)state;

        assert_true(read_attr_at(AT_FDCWD, "/proc/self/stat", buf, sizeof buf) > 0);
        assert_int_equal(process_parse_stat(buf, &ticks, &vsize, &rss), 0);
        assert_true(vsize > 1024 * 1024);
        assert_true(rss > 0);
}

static void test_export(void **state)
{
        struct mset *s = mset_new();
        const struct mfamily *f;
        (void)state;

        process_export(s, 1700000000ULL * USEC_PER_SEC + 999999);
        f = mset_find(s, "process_start_time_seconds");
        assert_non_null(f);
        assert_int_equal(f->type, MT_GAUGE);
        assert_int_equal(f->n, 1);
        assert_true(f->samples[0].d == 1700000000.0);

        f = mset_find(s, "process_cpu_seconds_total");
        assert_non_null(f);
        assert_int_equal(f->type, MT_COUNTER);
        assert_true(f->samples[0].d >= 0);

        f = mset_find(s, "process_resident_memory_bytes");
        assert_non_null(f);
        assert_true(f->samples[0].d > 4096);
        f = mset_find(s, "process_virtual_memory_bytes");
        assert_non_null(f);
        assert_true(f->samples[0].d > mset_find(s, "process_resident_memory_bytes")->samples[0].d);

        f = mset_find(s, "process_open_fds");
        assert_non_null(f);
        /* at least stdin, stdout, stderr */
        assert_true(f->samples[0].d >= 3);
        f = mset_find(s, "process_max_fds");
        assert_non_null(f);
        assert_true(f->samples[0].d >= 3);
        mset_free(s);
}

static void test_export_open_fds_counts(void **state)
{
        struct mset *a = mset_new(), *b = mset_new();
        int fds[5];
        (void)state;

        process_export(a, 0);
        for (int i = 0; i < 5; i++) {
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                assert_true(fds[i] >= 0);
        }
        process_export(b, 0);
        /* exactly the five opened in between */
        assert_true(mset_find(b, "process_open_fds")->samples[0].d ==
                    mset_find(a, "process_open_fds")->samples[0].d + 5);
        for (int i = 0; i < 5; i++)
                close(fds[i]);
        mset_free(a);
        mset_free(b);
}

/* The count a scrape exports (the directory's size where the kernel gives one) is the count of
 * a listing, which older kernels fall back to. */
static void test_open_fds_size_matches_listing(void **state)
{
        struct mset *s = mset_new();
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        long listed;
        (void)state;

        assert_true(fd >= 0);
        process_export(s, 0);
        listed = process_fds_listed();
        assert_true(listed >= 1); /* the one just opened */
        assert_true(mset_find(s, "process_open_fds")->samples[0].d == (double)listed);
        close(fd);
        assert_int_equal(process_fds_listed(), listed - 1);
        mset_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_real_line),
            cmocka_unit_test(test_parse_odd_comm),
            cmocka_unit_test(test_parse_large_and_negative),
            cmocka_unit_test(test_parse_malformed),
            cmocka_unit_test(test_parse_own_stat),
            cmocka_unit_test(test_export),
            cmocka_unit_test(test_export_open_fds_counts),
            cmocka_unit_test(test_open_fds_size_matches_listing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
