/* Unit tests of the /proc/diskstats parser: every kernel format, limits, malformed lines, files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "diskstats_parse.h"
#include "util.h"

#define BITS(n) ((uint32_t)((1ULL << (n)) - 1))

static int parse(const char *line, struct ds_entry *e)
{
        return diskstats_parse_line(line, strlen(line), e);
}

/* Asserts that v[k] == first + k for the first n fields and 0 after. */
static void assert_sequence(const struct ds_entry *e, unsigned n, uint64_t first)
{
        for (unsigned k = 0; k < DS_NFIELDS; k++) {
                uint64_t want = k < n ? first + k : 0;
                if (e->v[k] != want)
                        fail_msg("field %u = %llu, want %llu", k, (unsigned long long)e->v[k],
                                 (unsigned long long)want);
        }
}

static void test_kernel_4_18_before_5_5_format_15_counters(void **state)
{
        struct ds_entry e;
        (void)state;

        /* 18 fields in total: major minor name + 15 counters (4.18 .. 5.4) */
        assert_int_equal(parse("   8       0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15", &e), 0);
        assert_int_equal(e.major, 8);
        assert_int_equal(e.minor, 0);
        assert_string_equal(e.name, "sda");
        assert_int_equal(e.present, BITS(15));
        assert_sequence(&e, 15, 1);
        assert_false(e.present & (1u << DS_FLUSHES));
        assert_false(e.present & (1u << DS_FLUSH_MS));
}

static void test_format_11_counters(void **state)
{
        struct ds_entry e;
        (void)state;

        /* 14 fields: kernels 2.6.25 .. 4.17 */
        assert_int_equal(
            parse(" 259       0 nvme0n1 100 101 102 103 104 105 106 107 108 109 110", &e), 0);
        assert_int_equal(e.major, 259);
        assert_int_equal(e.minor, 0);
        assert_string_equal(e.name, "nvme0n1");
        assert_int_equal(e.present, BITS(11));
        assert_sequence(&e, 11, 100);
        assert_int_equal(e.v[DS_IO_WEIGHTED_MS], 110);
        assert_false(e.present & (1u << DS_DISCARDS));
}

static void test_format_17_counters(void **state)
{
        struct ds_entry e;
        (void)state;

        /* 20 fields: kernel 5.5 and later, as printed by diskstats_show() */
        assert_int_equal(parse(" 253       3 dm-3 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", &e),
                         0);
        assert_int_equal(e.major, 253);
        assert_int_equal(e.minor, 3);
        assert_string_equal(e.name, "dm-3");
        assert_int_equal(e.present, BITS(17));
        assert_sequence(&e, 17, 1);
        assert_int_equal(e.v[DS_FLUSHES], 16);
        assert_int_equal(e.v[DS_FLUSH_MS], 17);
}

static void test_real_line(void **state)
{
        struct ds_entry e;
        (void)state;

        /* a line from a real 6.1 kernel */
        assert_int_equal(parse(" 259       0 nvme0n1 1210946 417410 87932618 229812 6042012 "
                               "5316935 268391048 6813408 0 2604920 7199813 84217 0 "
                               "412399288 10987 700217 145605",
                               &e),
                         0);
        assert_string_equal(e.name, "nvme0n1");
        assert_int_equal(e.v[DS_READS], 1210946);
        assert_int_equal(e.v[DS_READS_MERGED], 417410);
        assert_int_equal(e.v[DS_READ_SECTORS], 87932618);
        assert_int_equal(e.v[DS_READ_MS], 229812);
        assert_int_equal(e.v[DS_WRITES], 6042012);
        assert_int_equal(e.v[DS_WRITES_MERGED], 5316935);
        assert_int_equal(e.v[DS_WRITE_SECTORS], 268391048);
        assert_int_equal(e.v[DS_WRITE_MS], 6813408);
        assert_int_equal(e.v[DS_IO_NOW], 0);
        assert_int_equal(e.v[DS_IO_MS], 2604920);
        assert_int_equal(e.v[DS_IO_WEIGHTED_MS], 7199813);
        assert_int_equal(e.v[DS_DISCARDS], 84217);
        assert_int_equal(e.v[DS_DISCARDS_MERGED], 0);
        assert_int_equal(e.v[DS_DISCARD_SECTORS], 412399288);
        assert_int_equal(e.v[DS_DISCARD_MS], 10987);
        assert_int_equal(e.v[DS_FLUSHES], 700217);
        assert_int_equal(e.v[DS_FLUSH_MS], 145605);
}

static void test_old_partition_line(void **state)
{
        struct ds_entry e;
        (void)state;

        /* before 2.6.25 partitions had 4 counters: reads, sectors read, writes, sectors written */
        assert_int_equal(parse("   8    1 sda1 35486 38030 13 2", &e), 0);
        assert_int_equal(e.major, 8);
        assert_int_equal(e.minor, 1);
        assert_string_equal(e.name, "sda1");
        assert_int_equal(e.present, (1u << DS_READS) | (1u << DS_READ_SECTORS) | (1u << DS_WRITES) |
                                        (1u << DS_WRITE_SECTORS));
        assert_int_equal(e.v[DS_READS], 35486);
        assert_int_equal(e.v[DS_READ_SECTORS], 38030);
        assert_int_equal(e.v[DS_WRITES], 13);
        assert_int_equal(e.v[DS_WRITE_SECTORS], 2);
        assert_int_equal(e.v[DS_READS_MERGED], 0);
        assert_int_equal(e.v[DS_READ_MS], 0);
        assert_int_equal(e.v[DS_WRITES_MERGED], 0);
        assert_int_equal(e.v[DS_IO_MS], 0);
}

static void test_extra_fields_ignored(void **state)
{
        struct ds_entry e;
        (void)state;

        /* a future kernel with 3 more counters */
        assert_int_equal(parse("8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", &e),
                         0);
        assert_string_equal(e.name, "sdb");
        assert_int_equal(e.present, BITS(17));
        assert_sequence(&e, 17, 1);

        /* 8 more counters than today */
        assert_int_equal(parse("8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 "
                               "18 19 20 21 22 23 24 25",
                               &e),
                         0);
        assert_int_equal(e.present, BITS(17));
        assert_sequence(&e, 17, 1);
}

static void test_whitespace(void **state)
{
        struct ds_entry e;
        (void)state;

        /* leading and repeated spaces, tabs, trailing spaces */
        assert_int_equal(
            parse("\t  7   3  loop3\t1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17   ", &e), 0);
        assert_int_equal(e.major, 7);
        assert_int_equal(e.minor, 3);
        assert_string_equal(e.name, "loop3");
        assert_sequence(&e, 17, 1);
}

static void test_len_is_respected(void **state)
{
        /* The line is not NUL-terminated where len ends: what follows must be ignored. */
        const char buf[] = "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 999 999 999 999";
        size_t len = strlen("8 0 sda 1 2 3 4 5 6 7 8 9 10 11");
        struct ds_entry e;
        (void)state;

        assert_int_equal(diskstats_parse_line(buf, len, &e), 0);
        assert_int_equal(e.present, BITS(11));
        assert_sequence(&e, 11, 1);

        /* cutting inside the name */
        assert_int_equal(diskstats_parse_line(buf, 6, &e), -EINVAL);
}

static void test_u64_limits(void **state)
{
        struct ds_entry e;
        (void)state;

        assert_int_equal(parse("8 0 sda 18446744073709551615 0 18446744073709551615 4294967295 "
                               "0 0 0 4294967295 0 4294967295 4294967295",
                               &e),
                         0);
        assert_true(e.v[DS_READS] == UINT64_MAX);
        assert_true(e.v[DS_READ_SECTORS] == UINT64_MAX);
        assert_true(e.v[DS_READ_MS] == 4294967295ULL);
        assert_true(e.v[DS_IO_WEIGHTED_MS] == 4294967295ULL);

        /* leading zeros are still the same number */
        assert_int_equal(parse("8 0 sda 00000000000000000000000000018446744073709551615 "
                               "0 0 0 0 0 0 0 0 0 0",
                               &e),
                         0);
        assert_true(e.v[DS_READS] == UINT64_MAX);
}

static void test_overflow(void **state)
{
        struct ds_entry e;
        (void)state;

        /* 2^64 in any counter */
        assert_int_equal(parse("8 0 sda 18446744073709551616 0 0 0 0 0 0 0 0 0 0", &e), -ERANGE);
        assert_int_equal(parse("8 0 sda 0 0 0 0 0 0 0 0 0 0 18446744073709551616", &e), -ERANGE);
        assert_int_equal(parse("8 0 sda 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 99999999999999999999", &e),
                         -ERANGE);
        assert_int_equal(parse("8 1 sda1 0 18446744073709551616 0 0", &e), -ERANGE);
        /* major/minor past 32 bits */
        assert_int_equal(parse("4294967296 0 sda 0 0 0 0 0 0 0 0 0 0 0", &e), -ERANGE);
        assert_int_equal(parse("8 4294967296 sda 0 0 0 0 0 0 0 0 0 0 0", &e), -ERANGE);
        assert_int_equal(parse("4294967295 4294967295 sda 0 0 0 0 0 0 0 0 0 0 0", &e), 0);
        assert_true(e.major == 4294967295u && e.minor == 4294967295u);
}

static void test_malformed(void **state)
{
        static const char *const bad[] = {
            "",
            "   ",
            "8",
            "8 0",
            "8 0 sda",
            "8 0 sda 1",
            "8 0 sda 1 2 3",
            "8 0 sda 1 2 3 4 5",
            "8 0 sda 1 2 3 4 5 6 7 8 9 10",                   /* 10 counters */
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12",             /* 12 */
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13",          /* 13 */
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14",       /* 14 */
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16", /* 16 */
            "8 0 sda 1 2 3 x 5 6 7 8 9 10 11",                /* non-numeric */
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 1a",                /* trailing junk */
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 0x1",               /* hex */
            "8 0 sda 1 2 -3 4 5 6 7 8 9 10 11",               /* negative */
            "8 0 sda +1 2 3 4 5 6 7 8 9 10 11",               /* sign */
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 1.5",               /* decimal */
            "x 0 sda 1 2 3 4 5 6 7 8 9 10 11",                /* major */
            "8 -1 sda 1 2 3 4 5 6 7 8 9 10 11",               /* minor */
            "8 0 1 2 3 4 5 6 7 8 9 10 11",                    /* name missing */
            "8 0 sd\"a 1 2 3 4 5 6 7 8 9 10 11",              /* quote in name */
            "8 0 sd\\a 1 2 3 4 5 6 7 8 9 10 11",              /* backslash in name */
            "8 0 sd\x01 1 2 3 4 5 6 7 8 9 10 11",             /* control byte */
            "8 0 sd\xc3\xa9 1 2 3 4 5 6 7 8 9 10 11",         /* non-ASCII */
            "8 0 ../sda 1 2 3 4 5 6 7 8 9 10 11",             /* path in name */
            "8 0 sda\r 1 2 3 4 5 6 7 8 9 10 11",              /* CR in name */
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 11\r",              /* CR left in a line */
        };
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct ds_entry e;
                memset(&e, 0xA5, sizeof e);
                int r = parse(bad[i], &e);
                if (r != -EINVAL)
                        fail_msg("line %zu \"%s\": got %d, want -EINVAL", i, bad[i], r);
                /* output untouched on failure */
                for (size_t k = 0; k < sizeof e; k++)
                        assert_int_equal(((unsigned char *)&e)[k], 0xA5);
        }
}

static void test_name_length(void **state)
{
        char line[128], name[64];
        struct ds_entry e;
        (void)state;

        /* 31 characters is the longest name the kernel prints (DISK_NAME_LEN - 1) */
        memset(name, 'a', 31);
        name[31] = 0;
        snprintf(line, sizeof line, "8 0 %s 1 2 3 4 5 6 7 8 9 10 11", name);
        assert_int_equal(parse(line, &e), 0);
        assert_string_equal(e.name, name);
        assert_int_equal(strlen(e.name), 31);

        /* 32 does not fit */
        memset(name, 'b', 32);
        name[32] = 0;
        snprintf(line, sizeof line, "8 0 %s 1 2 3 4 5 6 7 8 9 10 11", name);
        assert_int_equal(parse(line, &e), -EINVAL);

        memset(name, 'c', 60);
        name[60] = 0;
        snprintf(line, sizeof line, "8 0 %s 1 2 3 4 5 6 7 8 9 10 11", name);
        assert_int_equal(parse(line, &e), -EINVAL);
}

/* diskstats_parse: collects what it delivers. */
struct collected {
        struct ds_entry e[16];
        size_t n;
        size_t stop_after; /* return -ECANCELED after this many, 0: never */
};

static int collect(const struct ds_entry *e, void *userdata)
{
        struct collected *c = userdata;

        if (c->n >= ARRAY_SIZE(c->e))
                return -ENOSPC;
        c->e[c->n++] = *e;
        if (c->stop_after && c->n >= c->stop_after)
                return -ECANCELED;
        return 0;
}

static void test_parse_file_mixed(void **state)
{
        const char file[] = "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"
                            "   8       1 sda1 1 2 3 4\n"
                            "this is not a diskstats line\n"
                            "\n"
                            "   8       2 sda2 1 2 3 4 5 6 7 8 9 10 11 12 13\n"
                            "   8      16 sdb 1 2 3 4 5 6 7 8 9 10 11\n"
                            "  \t \n"
                            "   8      17 sdb\"1 1 2 3 4 5 6 7 8 9 10 11\n"
                            " 259       0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"
                            " 259       1 nvme0n1p1 99999999999999999999 2 3 4\n";
        struct collected c = {.n = 0};
        unsigned bad = 1234;
        (void)state;

        assert_int_equal(diskstats_parse(file, strlen(file), collect, &c, &bad), 0);
        /* "not a line", sda2 (13 counters), sdb"1 (quote), nvme0n1p1 (overflow); blank lines
         * are not errors */
        assert_int_equal(bad, 4);
        assert_int_equal(c.n, 4);
        assert_string_equal(c.e[0].name, "sda");
        assert_int_equal(c.e[0].present, BITS(17));
        assert_string_equal(c.e[1].name, "sda1");
        assert_int_equal(c.e[1].minor, 1);
        assert_int_equal(c.e[1].v[DS_WRITE_SECTORS], 4);
        assert_string_equal(c.e[2].name, "sdb");
        assert_int_equal(c.e[2].minor, 16);
        assert_int_equal(c.e[2].present, BITS(11));
        assert_string_equal(c.e[3].name, "nvme0n1");
        assert_int_equal(c.e[3].major, 259);
        assert_int_equal(c.e[3].present, BITS(15));
}

static void test_parse_file_crlf_and_no_newline(void **state)
{
        const char file[] = "8 0 sda 1 2 3 4 5 6 7 8 9 10 11\r\n"
                            "\r\n"
                            "8 16 sdb 1 2 3 4 5 6 7 8 9 10 12\r\n"
                            "8 32 sdc 1 2 3 4 5 6 7 8 9 10 13";
        struct collected c = {.n = 0};
        unsigned bad = 99;
        (void)state;

        assert_int_equal(diskstats_parse(file, strlen(file), collect, &c, &bad), 0);
        assert_int_equal(bad, 0);
        assert_int_equal(c.n, 3);
        assert_string_equal(c.e[0].name, "sda");
        assert_int_equal(c.e[0].v[DS_IO_WEIGHTED_MS], 11);
        assert_string_equal(c.e[1].name, "sdb");
        assert_int_equal(c.e[1].v[DS_IO_WEIGHTED_MS], 12);
        /* the last line, without newline, is complete */
        assert_string_equal(c.e[2].name, "sdc");
        assert_int_equal(c.e[2].v[DS_IO_WEIGHTED_MS], 13);
        assert_int_equal(c.e[2].present, BITS(11));
}

static void test_parse_file_len_bounds(void **state)
{
        /* Only len bytes are read: the buffer has a good line past len. */
        const char file[] = "8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n8 16 sdb 1 2 3 4 5 6 7 8 9 10 11\n";
        size_t first = strlen("8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n");
        struct collected c = {.n = 0};
        unsigned bad = 99;
        (void)state;

        assert_int_equal(diskstats_parse(file, first, collect, &c, &bad), 0);
        assert_int_equal(c.n, 1);
        assert_int_equal(bad, 0);

        /* A cut in the middle of the second line makes it malformed, not read past. */
        c.n = 0;
        assert_int_equal(diskstats_parse(file, first + 10, collect, &c, &bad), 0);
        assert_int_equal(c.n, 1);
        assert_int_equal(bad, 1);
}

static void test_parse_file_empty(void **state)
{
        struct collected c = {.n = 0};
        unsigned bad = 99;
        (void)state;

        assert_int_equal(diskstats_parse("", 0, collect, &c, &bad), 0);
        assert_int_equal(bad, 0);
        assert_int_equal(c.n, 0);

        bad = 99;
        assert_int_equal(diskstats_parse("\n\n\r\n  \n", 7, collect, &c, &bad), 0);
        assert_int_equal(bad, 0);
        assert_int_equal(c.n, 0);

        /* ret_bad may be NULL */
        assert_int_equal(diskstats_parse("junk\n", 5, collect, &c, NULL), 0);
        assert_int_equal(c.n, 0);
}

static void test_parse_file_callback_stops(void **state)
{
        const char file[] = "8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n"
                            "8 16 sdb 1 2 3 4 5 6 7 8 9 10 11\n"
                            "8 32 sdc 1 2 3 4 5 6 7 8 9 10 11\n";
        struct collected c = {.n = 0, .stop_after = 2};
        unsigned bad = 99;
        (void)state;

        assert_int_equal(diskstats_parse(file, strlen(file), collect, &c, &bad), -ECANCELED);
        assert_int_equal(c.n, 2);
        assert_string_equal(c.e[1].name, "sdb");
}

static void test_field_is_32bit(void **state)
{
        (void)state;

        /* printed with %u by diskstats_show() */
        assert_true(diskstats_field_is_32bit(DS_READ_MS));
        assert_true(diskstats_field_is_32bit(DS_WRITE_MS));
        assert_true(diskstats_field_is_32bit(DS_IO_NOW));
        assert_true(diskstats_field_is_32bit(DS_IO_MS));
        assert_true(diskstats_field_is_32bit(DS_IO_WEIGHTED_MS));
        assert_true(diskstats_field_is_32bit(DS_DISCARD_MS));
        assert_true(diskstats_field_is_32bit(DS_FLUSH_MS));
        /* printed with %lu */
        assert_false(diskstats_field_is_32bit(DS_READS));
        assert_false(diskstats_field_is_32bit(DS_READS_MERGED));
        assert_false(diskstats_field_is_32bit(DS_READ_SECTORS));
        assert_false(diskstats_field_is_32bit(DS_WRITES));
        assert_false(diskstats_field_is_32bit(DS_WRITES_MERGED));
        assert_false(diskstats_field_is_32bit(DS_WRITE_SECTORS));
        assert_false(diskstats_field_is_32bit(DS_DISCARDS));
        assert_false(diskstats_field_is_32bit(DS_DISCARDS_MERGED));
        assert_false(diskstats_field_is_32bit(DS_DISCARD_SECTORS));
        assert_false(diskstats_field_is_32bit(DS_FLUSHES));

        unsigned n32 = 0;
        for (int f = 0; f < DS_NFIELDS; f++)
                n32 += diskstats_field_is_32bit((enum ds_field)f);
        assert_int_equal(n32, 7);
}

/* Numbers of every length, at every alignment and with every digit, against strtoull; and
 * tokens with a stray byte anywhere (the eight-at-a-time path must see it). */
static void test_numbers_every_length(void **state)
{
        uint64_t x = 0x9E3779B97F4A7C15ULL;
        char line[512], num[32];
        struct ds_entry e;
        (void)state;

        for (int i = 0; i < 20000; i++) {
                size_t len = (size_t)(i % 20) + 1, o;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                for (size_t k = 0; k < len; k++)
                        num[k] = (char)('0' + (x >> (k * 3 % 61)) % 10);
                num[len] = 0;
                if (len == 20)
                        num[0] = '1'; /* at most 1.8e19 */
                /* the number in field 1..17, padded to shift its alignment */
                o = (size_t)snprintf(line, sizeof line, "%*d 0 sda", 1 + i % 9, 8);
                for (int f = 0; f < DS_NFIELDS; f++)
                        o += (size_t)snprintf(line + o, sizeof line - o, " %s",
                                              f == i % DS_NFIELDS ? num : "7");
                errno = 0;
                unsigned long long want = strtoull(num, NULL, 10);
                int r = diskstats_parse_line(line, o, &e);
                if (errno == ERANGE) {
                        assert_int_equal(r, -ERANGE);
                        continue;
                }
                assert_int_equal(r, 0);
                if (e.v[i % DS_NFIELDS] != want)
                        fail_msg("%s parsed as %llu", num, (unsigned long long)e.v[i % DS_NFIELDS]);
                for (int f = 0; f < DS_NFIELDS; f++)
                        if (f != i % DS_NFIELDS)
                                assert_int_equal(e.v[f], 7);
        }
        /* a byte that is not a digit, at each place of a 17-digit token */
        for (size_t at = 0; at < 17; at++)
                for (const char *bad = "/:a\x80\xb0-"; *bad; bad++) {
                        size_t o;
                        memcpy(num, "12345678901234567", 18);
                        num[at] = *bad;
                        o = (size_t)snprintf(line, sizeof line,
                                             "8 0 sda %s 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", num);
                        assert_int_equal(diskstats_parse_line(line, o, &e), -EINVAL);
                }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_kernel_4_18_before_5_5_format_15_counters),
            cmocka_unit_test(test_format_11_counters),
            cmocka_unit_test(test_format_17_counters),
            cmocka_unit_test(test_real_line),
            cmocka_unit_test(test_old_partition_line),
            cmocka_unit_test(test_extra_fields_ignored),
            cmocka_unit_test(test_whitespace),
            cmocka_unit_test(test_len_is_respected),
            cmocka_unit_test(test_u64_limits),
            cmocka_unit_test(test_numbers_every_length),
            cmocka_unit_test(test_overflow),
            cmocka_unit_test(test_malformed),
            cmocka_unit_test(test_name_length),
            cmocka_unit_test(test_parse_file_mixed),
            cmocka_unit_test(test_parse_file_crlf_and_no_newline),
            cmocka_unit_test(test_parse_file_len_bounds),
            cmocka_unit_test(test_parse_file_empty),
            cmocka_unit_test(test_parse_file_callback_stops),
            cmocka_unit_test(test_field_is_32bit),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
