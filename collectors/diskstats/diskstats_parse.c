/* Pure parser of /proc/diskstats (Documentation/admin-guide/iostats.rst). */
#include "diskstats_parse.h"

#include <errno.h>
#include <string.h>

#define MAX_TOKENS (3 + DS_NFIELDS)

static const uint32_t pow10_small[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};

static bool is_space(char c)
{
        return c == ' ' || c == '\t';
}

static int parse_num(const char *s, size_t n, uint64_t *ret)
{
        uint64_t v = 0;

        if (n == 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                unsigned d;
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                d = (unsigned)(s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

static bool name_valid(const char *s, size_t n)
{
        if (n == 0 || n >= DS_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c <= 0x20 || c >= 0x7F || c == '"' || c == '\\' || c == '/')
                        return false;
        }
        return true;
}

/* Eight bytes at p, the first in the lowest byte. */
static inline uint64_t load8(const char *p)
{
        uint64_t x;

        memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        x = __builtin_bswap64(x);
#endif
        return x;
}

/* How many of the eight bytes of x, from the lowest, are decimal digits: a byte is one when its
 * high nibble is 3 and its low nibble plus 6 does not carry into the high one. */
static inline unsigned digits8(uint64_t x)
{
        uint64_t high = (x & 0xF0F0F0F0F0F0F0F0ULL) ^ 0x3030303030303030ULL;
        uint64_t low =
            ((x & 0x0F0F0F0F0F0F0F0FULL) + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL;
        uint64_t bad = high | low;

        return bad ? (unsigned)__builtin_ctzll(bad) / 8 : 8;
}

/* The value of the n (1..8) digits at the low end of x: shifted up so that missing leading
 * digits are zeros, then combined in pairs, fours and eights (three multiplications). */
static inline uint64_t value8(uint64_t x, unsigned n)
{
        x = (x << (8 * (8 - n))) & 0x0F0F0F0F0F0F0F0FULL;
        x = (x * 10 + (x >> 8)) & 0x00FF00FF00FF00FFULL;
        x = (x * 100 + (x >> 16)) & 0x0000FFFF0000FFFFULL;
        return (x * 10000 + (x >> 32)) & 0xFFFFFFFFULL;
}

/* One token as a number: its digits up to a space or the end. Sets *err (first error only) to
 * -EINVAL for a token that is not all digits, -ERANGE past 64 bits. Returns the end of the
 * token. Eight digits at a time while eight bytes are left; up to 19 digits cannot overflow,
 * more take the checked way. */
static inline __attribute__((always_inline)) const char *scan_num(const char *p, const char *end,
                                                                  uint64_t *ret, int *err)
{
        const char *s = p;
        uint64_t v = 0;

        while (end - p >= 8) {
                uint64_t x = load8(p);
                unsigned n = digits8(x);
                if (n == 0)
                        break;
                v = v * (n == 8 ? 100000000u : pow10_small[n]) + value8(x, n);
                p += n;
                if (n < 8)
                        goto done;
        }
        while (p < end && (unsigned)(*p - '0') < 10)
                v = v * 10 + (unsigned)(*p++ - '0');
done:
        if (p < end && !is_space(*p)) {
                while (p < end && !is_space(*p))
                        p++;
                if (!*err)
                        *err = -EINVAL;
                return p;
        }
        if (p - s >= 20 || p == s) {
                int r = parse_num(s, (size_t)(p - s), &v);
                if (r < 0) {
                        if (!*err)
                                *err = r;
                        return p;
                }
        }
        *ret = v;
        return p;
}

int diskstats_parse_line(const char *line, size_t len, struct ds_entry *ret)
{
        const char *p = line, *end = line + len, *name = NULL;
        size_t n = 0, name_len = 0, counters;
        uint64_t maj = 0, min = 0, v[DS_NFIELDS];
        int err_maj = 0, err_min = 0, err_cnt = 0;
        bool extra_bad = false;

        for (;;) {
                while (p < end && is_space(*p))
                        p++;
                if (p >= end)
                        break;
                if (n == 0) {
                        p = scan_num(p, end, &maj, &err_maj);
                } else if (n == 1) {
                        p = scan_num(p, end, &min, &err_min);
                } else if (n == 2) {
                        name = p;
                        while (p < end && !is_space(*p))
                                p++;
                        name_len = (size_t)(p - name);
                } else if (n < MAX_TOKENS) {
                        p = scan_num(p, end, &v[n - 3], &err_cnt);
                } else {
                        /* Fields of kernels newer than this parser: numbers, ignored. */
                        for (; p < end && !is_space(*p); p++)
                                if (*p < '0' || *p > '9')
                                        extra_bad = true;
                }
                n++;
        }
        if (extra_bad || n < 3)
                return -EINVAL;
        counters = n - 3;
        if (counters != 4 && counters != 11 && counters != 15 && counters < 17)
                return -EINVAL;
        if (err_maj)
                return err_maj;
        if (err_min)
                return err_min;
        if (maj > 0xFFFFFFFFu || min > 0xFFFFFFFFu)
                return -ERANGE;
        if (!name_valid(name, name_len))
                return -EINVAL;
        if (err_cnt)
                return err_cnt;

        memset(ret, 0, sizeof(*ret));
        ret->major = (unsigned)maj;
        ret->minor = (unsigned)min;
        memcpy(ret->name, name, name_len);
        if (counters == 4) {
                /* Old partition lines: reads, sectors read, writes, sectors written. */
                ret->v[DS_READS] = v[0];
                ret->v[DS_READ_SECTORS] = v[1];
                ret->v[DS_WRITES] = v[2];
                ret->v[DS_WRITE_SECTORS] = v[3];
                ret->present = 1u << DS_READS | 1u << DS_READ_SECTORS | 1u << DS_WRITES |
                               1u << DS_WRITE_SECTORS;
        } else {
                if (counters > DS_NFIELDS)
                        counters = DS_NFIELDS; /* the rest was checked above */
                memcpy(ret->v, v, counters * sizeof(v[0]));
                ret->present = (uint32_t)((1ULL << counters) - 1);
        }
        return 0;
}

size_t diskstats_parse_chunk(const char *buf, size_t len, bool final,
                             int (*cb)(const struct ds_entry *e, void *userdata), void *userdata,
                             unsigned *bad, int *ret_err)
{
        size_t i = 0;

        *ret_err = 0;
        while (i < len) {
                const char *nl = memchr(buf + i, '\n', len - i);
                size_t l = nl ? (size_t)(nl - (buf + i)) : len - i;
                struct ds_entry e;
                bool blank = true;
                int r;

                if (!nl && !final)
                        break; /* the rest of the line comes with the next chunk */
                for (size_t k = 0; k < l && blank; k++)
                        if (!is_space(buf[i + k]) && buf[i + k] != '\r')
                                blank = false;
                if (!blank) {
                        if (l > 0 && buf[i + l - 1] == '\r')
                                l--;
                        if (diskstats_parse_line(buf + i, l, &e) < 0) {
                                (*bad)++;
                        } else if ((r = cb(&e, userdata)) < 0) {
                                *ret_err = r;
                                return i + (nl ? (size_t)(nl - (buf + i)) + 1 : len - i);
                        }
                }
                i = nl ? (size_t)(nl - buf) + 1 : len;
        }
        return i;
}

int diskstats_parse(const char *buf, size_t len,
                    int (*cb)(const struct ds_entry *e, void *userdata), void *userdata,
                    unsigned *ret_bad)
{
        unsigned bad = 0;
        int r;

        (void)diskstats_parse_chunk(buf, len, true, cb, userdata, &bad, &r);
        if (ret_bad)
                *ret_bad = bad;
        return r;
}

bool diskstats_field_is_32bit(enum ds_field f)
{
        switch (f) {
        case DS_READ_MS:
        case DS_WRITE_MS:
        case DS_IO_NOW:
        case DS_IO_MS:
        case DS_IO_WEIGHTED_MS:
        case DS_DISCARD_MS:
        case DS_FLUSH_MS:
                return true;
        default:
                return false;
        }
}
