/* Unit tests of lib/util.c: durations, sizes, integers, booleans, bounded string copies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <malloc.h>
#include <unistd.h>

#include "escape.h"
#include "scale.h"
#include "util.h"

static void test_parse_duration_good(void **state)
{
        static const struct {
                const char *s;
                usec_t want;
        } cases[] = {
            {"500ms", 500 * USEC_PER_MSEC},
            {"10s", 10 * USEC_PER_SEC},
            {"5m", 5 * 60 * USEC_PER_SEC},
            {"1h", 3600 * USEC_PER_SEC},
            {"1m30s", 90 * USEC_PER_SEC},
            {"1us", 1},
            {"0s", 0},
            {"1h1m1s1ms1us", 3661 * USEC_PER_SEC + USEC_PER_MSEC + 1},
            /* "m" must not swallow the "m" of "ms". */
            {"2ms", 2 * USEC_PER_MSEC},
            {"1d", 86400 * USEC_PER_SEC},
            {"007s", 7 * USEC_PER_SEC},
        };
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                usec_t u = 12345;
                int r = parse_duration(cases[i].s, &u);
                if (r != 0 || u != cases[i].want)
                        fail_msg("parse_duration(\"%s\") = %d, %llu; want 0, %llu", cases[i].s, r,
                                 (unsigned long long)u, (unsigned long long)cases[i].want);
        }
}

static void test_parse_duration_bad(void **state)
{
        static const struct {
                const char *s;
                int want;
        } cases[] = {
            {"", -EINVAL},
            {"10", -EINVAL},
            {"s", -EINVAL},
            {"-1s", -EINVAL},
            {"10x", -EINVAL},
            {"1.5s", -EINVAL},
            {" 1s", -EINVAL},
            {"1s ", -EINVAL},
            {"1m30", -EINVAL},
            {"ms", -EINVAL},
            {"1S", -EINVAL},
            /* 2^64 as a number */
            {"18446744073709551616us", -ERANGE},
            /* fits as a number, not once multiplied */
            {"18446744073709551615s", -ERANGE},
            {"5124095577h", -ERANGE}, /* 5124095577 h = 18446744077200000000 us > 2^64-1 */
            /* each part fits, the sum does not */
            {"18446744073709551615us1us", -ERANGE},
        };
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                usec_t u = 4242;
                int r = parse_duration(cases[i].s, &u);
                if (r != cases[i].want || u != 4242)
                        fail_msg("parse_duration(\"%s\") = %d (u=%llu); want %d, output untouched",
                                 cases[i].s, r, (unsigned long long)u, cases[i].want);
        }
        assert_int_equal(parse_duration(NULL, &(usec_t){0}), -EINVAL);
}

static void test_parse_duration_max(void **state)
{
        usec_t u = 0;
        (void)state;

        assert_int_equal(parse_duration("18446744073709551615us", &u), 0);
        assert_true(u == UINT64_MAX);
        /* 5124095576 h = 18446744073600000000 us, just under 2^64 */
        assert_int_equal(parse_duration("5124095576h", &u), 0);
        assert_true(u == 18446744073600000000ULL);
}

static void test_format_duration(void **state)
{
        static const struct {
                usec_t u;
                const char *want;
        } cases[] = {
            {0, "0s"},
            {1, "1us"},
            {1500, "1500us"},
            {250 * USEC_PER_MSEC, "250ms"},
            {10 * USEC_PER_SEC, "10s"},
            {90 * USEC_PER_SEC, "90s"},
            {120 * USEC_PER_SEC, "2m"},
            {3600 * USEC_PER_SEC, "1h"},
            {7200 * USEC_PER_SEC + USEC_PER_MSEC, "7200001ms"},
            {UINT64_MAX, "18446744073709551615us"},
        };
        char buf[32];
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                assert_string_equal(format_duration(cases[i].u, buf, sizeof buf), cases[i].want);
}

static void test_format_duration_roundtrip(void **state)
{
        static const usec_t values[] = {
            0,          1,          999,           1000,           1001,
            999999,     1000000,    1500000,       59000000,       60000000,
            61000000,   3599999999, 3600000000ULL, 86400000000ULL, 123456789012345ULL,
            UINT64_MAX,
        };
        char buf[32];
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(values); i++) {
                usec_t back = 1;
                format_duration(values[i], buf, sizeof buf);
                assert_int_equal(parse_duration(buf, &back), 0);
                if (back != values[i])
                        fail_msg("%llu -> \"%s\" -> %llu", (unsigned long long)values[i], buf,
                                 (unsigned long long)back);
        }
        /* A too small buffer is cut, still terminated. */
        assert_string_equal(format_duration(123456 * USEC_PER_SEC, buf, 4), "123");
}

/* A case of a parser of a uint64_t: its text, its result, and the value (when r is 0). */
struct u64_case {
        const char *s;
        int r;
        uint64_t want;
};

/* Runs parse (named name) on each case: its result, the value on success, the value untouched
 * on failure; and NULL is refused with -EINVAL. */
static void check_u64_parser(const char *name, int (*parse)(const char *, uint64_t *),
                             const struct u64_case *cases, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                uint64_t v = 777;
                int r = parse(cases[i].s, &v);
                uint64_t want = cases[i].r == 0 ? cases[i].want : 777;
                if (r != cases[i].r || v != want)
                        fail_msg("%s(\"%s\") = %d, %llu; want %d, %llu", name, cases[i].s, r,
                                 (unsigned long long)v, cases[i].r, (unsigned long long)want);
        }
        assert_int_equal(parse(NULL, &(uint64_t){0}), -EINVAL);
}

static void test_parse_size(void **state)
{
        static const struct u64_case cases[] = {
            {"0", 0, 0},
            {"4096", 0, 4096},
            {"4096B", 0, 4096},
            {"4K", 0, 4096},
            {"4k", 0, 4096},
            {"4KiB", 0, 4096},
            {"4KB", 0, 4096},
            {"1M", 0, 1048576},
            {"1MiB", 0, 1048576},
            {"2G", 0, 2147483648ULL},
            {"18446744073709551615", 0, UINT64_MAX},
            {"17179869183G", 0, 17179869183ULL << 30},
            {"", -EINVAL, 0},
            {"K", -EINVAL, 0},
            {"4X", -EINVAL, 0},
            {"4 K", -EINVAL, 0},
            {"-4", -EINVAL, 0},
            {"4Ki", 0, 4096},
            {"4iB", -EINVAL, 0},
            {"4KBB", -EINVAL, 0},
            {"18446744073709551616", -ERANGE, 0},
            {"17179869184G", -ERANGE, 0},
            {"16777216T", -EINVAL, 0},
            {"1234567890123456789012345678901234567890", -ERANGE, 0},
        };
        (void)state;

        check_u64_parser("parse_size", parse_size, cases, ARRAY_SIZE(cases));
}

static void test_parse_u64(void **state)
{
        static const struct u64_case cases[] = {
            {"0", 0, 0},
            {"42", 0, 42},
            {"0042", 0, 42},
            {"18446744073709551615", 0, UINT64_MAX},
            {"18446744073709551616", -ERANGE, 0},
            {"18446744073709551620", -ERANGE, 0},
            {"99999999999999999999", -ERANGE, 0},
            {"", -EINVAL, 0},
            {"-1", -EINVAL, 0},
            {"+1", -EINVAL, 0},
            {" 1", -EINVAL, 0},
            {"1 ", -EINVAL, 0},
            {"1a", -EINVAL, 0},
            {"0x10", -EINVAL, 0},
        };
        (void)state;

        check_u64_parser("parse_u64", parse_u64, cases, ARRAY_SIZE(cases));
}

static void test_parse_bool(void **state)
{
        static const char *const yes[] = {"1", "true", "yes", "on", "TRUE", "Yes", "ON"};
        static const char *const no[] = {"0", "false", "no", "off", "FALSE", "No", "Off"};
        static const char *const bad[] = {"", "2", "y", "n", "truee", " true", "enable", "-1"};
        bool b;
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                b = false;
                assert_int_equal(parse_bool(yes[i], &b), 0);
                assert_true(b);
        }
        for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
                b = true;
                assert_int_equal(parse_bool(no[i], &b), 0);
                assert_false(b);
        }
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                b = true;
                if (parse_bool(bad[i], &b) != -EINVAL)
                        fail_msg("parse_bool(\"%s\") accepted", bad[i]);
                assert_true(b);
        }
}

static void test_strscpy(void **state)
{
        char buf[8];
        (void)state;

        memset(buf, 'X', sizeof buf);
        assert_true(strscpy(buf, "abc", sizeof buf));
        assert_string_equal(buf, "abc");

        /* exactly size-1 fits */
        assert_true(strscpy(buf, "1234567", sizeof buf));
        assert_string_equal(buf, "1234567");

        /* one more is cut and still terminated */
        memset(buf, 'X', sizeof buf);
        assert_false(strscpy(buf, "12345678", sizeof buf));
        assert_string_equal(buf, "1234567");

        assert_false(strscpy(buf, "a much longer string", sizeof buf));
        assert_string_equal(buf, "a much ");

        assert_true(strscpy(buf, "", sizeof buf));
        assert_string_equal(buf, "");

        /* size 1: only the terminator */
        buf[0] = 'X';
        assert_false(strscpy(buf, "a", 1));
        assert_int_equal(buf[0], 0);
        assert_true(strscpy(buf, "", 1));

        /* size 0 writes nothing */
        buf[0] = 'Q';
        assert_false(strscpy(buf, "a", 0));
        assert_true(strscpy(buf, "", 0));
        assert_int_equal(buf[0], 'Q');
}

/* The reference values of FNV-1a 32 (draft-eastlake-fnv, test vectors). */
static void test_hash_fnv1a32(void **state)
{
        (void)state;
        assert_int_equal(hash_fnv1a32(""), 0x811c9dc5u);
        assert_int_equal(hash_fnv1a32("a"), 0xe40c292cu);
        assert_int_equal(hash_fnv1a32("foobar"), 0xbf9cf968u);
}

static void test_grow_array(void **state)
{
        int *a = NULL;
        size_t cap = 0;
        (void)state;

        GROW(a, cap, 1);
        assert_non_null(a);
        assert_true(cap >= 1);
        GROW(a, cap, 1000);
        assert_true(cap >= 1000);
        for (int i = 0; i < 1000; i++)
                a[i] = i;
        size_t before = cap;
        GROW(a, cap, 10);
        assert_int_equal(cap, before);
        assert_int_equal(a[999], 999);
        free(a);
}

static void test_clocks(void **state)
{
        usec_t a = now_monotonic(), b = now_monotonic();
        (void)state;

        assert_true(b >= a);
        /* after 2020-01-01 */
        assert_true(now_realtime() > 1577836800ULL * USEC_PER_SEC);
        assert_true(now_boottime() > 0);
}

static void test_format_double_shortest(void **state)
{
        static const struct {
                double v;
                const char *s;
        } cases[] = {
            {0, "0"},
            {0.1, "0.1"},
            {-2.5, "-2.5"},
            {1e21, "1e+21"},
            {0.30000000000000004, "0.30000000000000004"},
            {1.0 / 3, "0.3333333333333333"},
            {123456789012345678.0, "1.2345678901234568e+17"},
            {1.7976931348623157e308, "1.7976931348623157e+308"},
            {-1.7976931348623157e308, "-1.7976931348623157e+308"},
            {5e-324, "4.94065645841247e-324"},
        };
        char buf[FORMAT_DOUBLE_MAX], big[64];
        uint64_t rng = prng_seed(42);
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                assert_string_equal(format_double_shortest(cases[i].v, buf, sizeof buf),
                                    cases[i].s);
        /* every double reads back exactly, in the room promised */
        for (int i = 0; i < 100000; i++) {
                uint64_t bits = prng_next(&rng);
                double v;
                memcpy(&v, &bits, sizeof v);
                if (!isfinite(v))
                        continue;
                format_double_shortest(v, big, sizeof big);
                assert_true(strlen(big) < FORMAT_DOUBLE_MAX);
                assert_true(strtod(big, NULL) == v);
        }
}

static void test_prng(void **state)
{
        uint64_t s = prng_seed(0), t = prng_seed(1);
        (void)state;

        assert_true(s != 0);
        assert_int_equal(t, 1);
        /* xorshift64 (13, 7, 17) from 1: the published sequence */
        assert_true(prng_next(&t) == UINT64_C(1082269761));
        assert_true(prng_next(&t) == UINT64_C(1152992998833853505));
        for (int i = 0; i < 1000; i++) {
                double u = prng_unit(&s);
                assert_true(s != 0);
                assert_true(u >= 0 && u < 1);
        }
}

static void check_escape(size_t (*f)(const char *, char *), const char *in, const char *want)
{
        char out[256];
        size_t n = f(in, NULL);

        assert_int_equal(f(in, out), n);
        out[n] = 0;
        assert_string_equal(out, want);
}

static void test_escape(void **state)
{
        char out[64];
        (void)state;

        check_escape(escape_json, "a\"b\\c\nd\x01\x1f\x7f\xc3\xa9",
                     "a\\\"b\\\\c\\nd\\u0001\\u001f\x7f\xc3\xa9");
        check_escape(escape_logfmt, "a\"b\\c\nd\x01\t", "a\\\"b\\\\c\\nd\\x01\\x09");
        assert_true(escape_logfmt_needs_quotes(""));
        assert_true(escape_logfmt_needs_quotes("a b"));
        assert_true(escape_logfmt_needs_quotes("a=b"));
        assert_true(escape_logfmt_needs_quotes("a\""));
        assert_true(escape_logfmt_needs_quotes("a\tb"));
        assert_false(escape_logfmt_needs_quotes("/dev/sda1:fsync"));
        check_escape(escape_html, "<a href=\"x\">&'</a>",
                     "&lt;a href=&quot;x&quot;&gt;&amp;'&lt;/a&gt;");
        check_escape(escape_hex, "/srv/my db\\x\xff", "/srv/my\\x20db\\\\x\\xff");
        assert_int_equal(unescape_hex("/srv/my\\x20db\\\\x\\xff", 20, out, sizeof out), 0);
        assert_string_equal(out, "/srv/my db\\x\xff");
        assert_int_equal(unescape_hex("a b", 3, out, sizeof out), -EINVAL);
        assert_int_equal(unescape_hex("a\\x00", 5, out, sizeof out), -EINVAL);
        assert_int_equal(unescape_hex("a\\q", 3, out, sizeof out), -EINVAL);
        assert_int_equal(unescape_hex("abcd", 4, out, 4), -ERANGE);
        assert_int_equal(unescape_hex("abc", 3, out, 4), 0);
}

static long resident_kib(void)
{
        long size = 0, res = 0;
        FILE *f = fopen("/proc/self/statm", "re");

        assert_non_null(f);
        assert_int_equal(fscanf(f, "%ld %ld", &size, &res), 2);
        fclose(f);
        return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Frees n blocks of 16 KiB (heap, not mapped) made and written, with one more kept after them,
 * so that the freed space is inside the heap, where only a trim gives it back. Returns the block
 * kept. */
static char *free_inside_heap(size_t n)
{
        char **b = calloc(n, sizeof(*b));
        char *pin;

        assert_non_null(b);
        for (size_t i = 0; i < n; i++) {
                b[i] = malloc(16 * 1024);
                assert_non_null(b[i]);
                memset(b[i], 0x5a, 16 * 1024);
        }
        pin = malloc(16 * 1024);
        assert_non_null(pin);
        memset(pin, 0x5a, 16 * 1024);
        for (size_t i = 0; i < n; i++)
                free(b[i]);
        free(b);
        return pin;
}

static void test_malloc_give_back(void **state)
{
        char *pin;
        long before;
        (void)state;

        if (TEST_SANITIZED) {
                print_message("skipped: the sanitizer's allocator replaces glibc's heap, which "
                              "this trims\n");
                skip();
        }
        /* 512 KiB free: under the slack, left for the next round */
        pin = free_inside_heap(32);
        assert_true(mallinfo2().fordblks < MALLOC_GIVE_BACK_SLACK);
        before = resident_kib();
        malloc_give_back();
        assert_true(resident_kib() >= before - 16);
        free(pin);
        /* 32 MiB free, more than in use: handed back */
        pin = free_inside_heap(2048);
        before = resident_kib();
        malloc_give_back();
        assert_true(resident_kib() <= before - 16 * 1024);
        free(pin);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_duration_good),
            cmocka_unit_test(test_parse_duration_bad),
            cmocka_unit_test(test_parse_duration_max),
            cmocka_unit_test(test_format_duration),
            cmocka_unit_test(test_format_duration_roundtrip),
            cmocka_unit_test(test_parse_size),
            cmocka_unit_test(test_parse_u64),
            cmocka_unit_test(test_parse_bool),
            cmocka_unit_test(test_strscpy),
            cmocka_unit_test(test_hash_fnv1a32),
            cmocka_unit_test(test_grow_array),
            cmocka_unit_test(test_clocks),
            cmocka_unit_test(test_format_double_shortest),
            cmocka_unit_test(test_prng),
            cmocka_unit_test(test_escape),
            cmocka_unit_test(test_malloc_give_back),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
