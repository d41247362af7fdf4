/* Fuzz target of the /proc/diskstats parser, cross-checked line by line and by re-rendering. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diskstats_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OLD_MASK                                                                                   \
        ((1u << DS_READS) | (1u << DS_READ_SECTORS) | (1u << DS_WRITES) | (1u << DS_WRITE_SECTORS))

struct delivered {
        struct ds_entry *e;
        size_t n, cap;
};

static int on_entry(const struct ds_entry *e, void *userdata)
{
        struct delivered *d = userdata;

        if (d->n == d->cap) {
                d->cap = d->cap ? d->cap * 2 : 16;
                d->e = realloc(d->e, d->cap * sizeof(*d->e));
                if (!d->e)
                        abort();
        }
        d->e[d->n++] = *e;
        return 0;
}

/* Checks an entry's invariants and that its canonical line parses back to the same entry. */
static void check_entry(const struct ds_entry *e)
{
        char line[3 * 12 + DS_NAME_MAX + DS_NFIELDS * 21 + 8];
        struct ds_entry again;
        size_t len, o;
        unsigned count = 0;

        len = strnlen(e->name, DS_NAME_MAX);
        if (len == 0 || len >= DS_NAME_MAX)
                abort();
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)e->name[i];
                if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
                        abort();
        }
        for (int f = 0; f < DS_NFIELDS; f++) {
                if (e->present & (1u << f))
                        count++;
                else if (e->v[f] != 0)
                        abort(); /* an absent field is 0 */
        }
        if (e->present >> DS_NFIELDS)
                abort();
        if (e->present != OLD_MASK && e->present != (1u << count) - 1)
                abort();
        if (e->present != OLD_MASK && count != 11 && count != 15 && count != 17)
                abort();

        o = (size_t)snprintf(line, sizeof line, "%u %u %s", e->major, e->minor, e->name);
        if (e->present == OLD_MASK) {
                o += (size_t)snprintf(
                    line + o, sizeof line - o, " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
                    e->v[DS_READS], e->v[DS_READ_SECTORS], e->v[DS_WRITES], e->v[DS_WRITE_SECTORS]);
        } else {
                for (unsigned f = 0; f < count; f++)
                        o += (size_t)snprintf(line + o, sizeof line - o, " %" PRIu64, e->v[f]);
        }
        if (o >= sizeof line)
                abort();
        if (diskstats_parse_line(line, o, &again) != 0)
                abort();
        if (memcmp(&again, e, sizeof again) != 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *buf = (const char *)data;
        struct delivered d = {NULL, 0, 0};
        unsigned bad = 0, bad2 = 0;
        size_t k = 0, i = 0;

        if (diskstats_parse(buf, size, on_entry, &d, &bad) != 0)
                abort();

        /* The same input split here line by line gives the same entries in the same order. */
        while (i < size) {
                const char *nl = memchr(buf + i, '\n', size - i);
                size_t l = nl ? (size_t)(nl - (buf + i)) : size - i;
                int blank = 1;
                struct ds_entry e;

                for (size_t j = 0; j < l; j++)
                        if (buf[i + j] != ' ' && buf[i + j] != '\t' && buf[i + j] != '\r')
                                blank = 0;
                if (!blank) {
                        size_t ll = (l > 0 && buf[i + l - 1] == '\r') ? l - 1 : l;
                        int r = diskstats_parse_line(buf + i, ll, &e);
                        if (r == 0) {
                                if (k >= d.n || memcmp(&e, &d.e[k], sizeof e) != 0)
                                        abort();
                                k++;
                        } else if (r == -EINVAL || r == -ERANGE) {
                                bad2++;
                        } else {
                                abort();
                        }
                }
                if (!nl)
                        break;
                i += l + 1;
        }
        if (k != d.n || bad != bad2)
                abort();

        for (size_t j = 0; j < d.n; j++)
                check_entry(&d.e[j]);
        free(d.e);
        return 0;
}
