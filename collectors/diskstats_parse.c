/* Pure parser of /proc/diskstats (Documentation/admin-guide/iostats.rst). */
#include "diskstats_parse.h"

#include <errno.h>
#include <string.h>

#define MAX_TOKENS (3 + DS_NFIELDS)

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

int ds_parse_line(const char *line, size_t len, struct ds_entry *ret)
{
        const char *tok[MAX_TOKENS];
        size_t tlen[MAX_TOKENS], n = 0, i = 0, counters;
        struct ds_entry e;
        uint64_t maj, min;
        int r;

        while (i < len) {
                const char *t;

                while (i < len && is_space(line[i]))
                        i++;
                if (i >= len)
                        break;
                t = line + i;
                while (i < len && !is_space(line[i]))
                        i++;
                if (n < MAX_TOKENS) {
                        tok[n] = t;
                        tlen[n] = (size_t)(line + i - t);
                } else {
                        /* Fields of kernels newer than this parser: numbers, ignored. */
                        for (const char *p = t; p < line + i; p++)
                                if (*p < '0' || *p > '9')
                                        return -EINVAL;
                }
                n++;
        }
        if (n < 3)
                return -EINVAL;
        counters = n - 3;
        if (counters != 4 && counters != 11 && counters != 15 && counters < 17)
                return -EINVAL;

        memset(&e, 0, sizeof(e));
        if ((r = parse_num(tok[0], tlen[0], &maj)) < 0 ||
            (r = parse_num(tok[1], tlen[1], &min)) < 0)
                return r;
        if (maj > 0xFFFFFFFFu || min > 0xFFFFFFFFu)
                return -ERANGE;
        e.major = (unsigned)maj;
        e.minor = (unsigned)min;
        if (!name_valid(tok[2], tlen[2]))
                return -EINVAL;
        memcpy(e.name, tok[2], tlen[2]);

        if (counters == 4) {
                /* Old partition lines: reads, sectors read, writes, sectors written. */
                static const enum ds_field map[4] = {DS_READS, DS_READ_SECTORS, DS_WRITES,
                                                     DS_WRITE_SECTORS};
                for (size_t k = 0; k < 4; k++) {
                        if ((r = parse_num(tok[3 + k], tlen[3 + k], &e.v[map[k]])) < 0)
                                return r;
                        e.present |= 1u << map[k];
                }
        } else {
                if (counters > DS_NFIELDS)
                        counters = DS_NFIELDS; /* the rest was checked above */
                for (size_t k = 0; k < counters; k++) {
                        if ((r = parse_num(tok[3 + k], tlen[3 + k], &e.v[k])) < 0)
                                return r;
                        e.present |= 1u << k;
                }
        }
        *ret = e;
        return 0;
}

int ds_parse(const char *buf, size_t len, int (*cb)(const struct ds_entry *e, void *userdata),
             void *userdata, unsigned *ret_bad)
{
        unsigned bad = 0;
        size_t i = 0;
        int r = 0;

        while (i < len) {
                const char *nl = memchr(buf + i, '\n', len - i);
                size_t l = nl ? (size_t)(nl - (buf + i)) : len - i;
                size_t advance = l + 1;
                struct ds_entry e;
                bool blank = true;

                for (size_t k = 0; k < l; k++)
                        if (!is_space(buf[i + k]) && buf[i + k] != '\r')
                                blank = false;
                if (!blank) {
                        if (l > 0 && buf[i + l - 1] == '\r')
                                l--;
                        if (ds_parse_line(buf + i, l, &e) < 0)
                                bad++;
                        else if ((r = cb(&e, userdata)) < 0)
                                break;
                }
                i += advance;
                if (!nl)
                        break;
        }
        if (ret_bad)
                *ret_bad = bad;
        return r < 0 ? r : 0;
}

bool ds_field_is_32bit(enum ds_field f)
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
