/* Fuzz target of the biolatency reader and its parsers: arbitrary bytes as the devs and rows
 * maps' memory over up to four readings, and as the uevent text that names the devices (and as
 * a possible-CPU list). Checks that every exported series is a well-formed histogram (cumulative,
 * +Inf equal to _count), that the page renders, and that the parsers' results keep their
 * promises.
 *
 * Input: byte 0 max_devices - 1 (low 2 bits), byte 1 ncpu - 1 (low 2 bits), byte 2 readings - 1
 * (low 2 bits), byte 3 the uevent text's length L, then L bytes of it, then the maps' memory of
 * each reading in turn (devs then rows; missing bytes keep the last reading's). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biolatency.h"
#include "biolatency_collector.h"
#include "expo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct text {
        const char *p;
        size_t len;
};

/* Odd devices have no name; the others the uevent's DEVNAME, with the minor number after it
 * for every other one (so that names repeat and differ). */
static int name_fn(void *ud, uint32_t dev, char *name, size_t size)
{
        const struct text *t = ud;
        char buf[BIOLAT_NAME_MAX];
        int r;

        if (dev & 1)
                return -ENOENT;
        r = biolatency_parse_devname(t->p, t->len, buf, sizeof buf);
        if (r == 0) {
                size_t n = strlen(buf);
                if (n == 0 || n >= sizeof buf)
                        abort();
                for (size_t i = 0; i < n; i++)
                        if (buf[i] < '!' || buf[i] > '~' || buf[i] == '"' || buf[i] == '\\')
                                abort();
                if (dev & 2)
                        buf[n - 1] = (char)('0' + (dev >> 2) % 10);
                if (!strscpy(name, buf, size))
                        abort();
        } else if (r != -ENOENT && r != -EINVAL) {
                abort();
        }
        return r;
}

/* The histogram lines of a page: within a series the buckets never fall, +Inf equals _count,
 * and no series has a zero _count. Returns the series seen. */
static size_t check_histograms(const char *text)
{
        char series[512] = "";
        unsigned long long last = 0, inf = 0;
        size_t n = 0;

        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n'), *le = NULL, *sp;
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                char line[1024];

                if (len >= sizeof line)
                        abort();
                memcpy(line, p, len);
                line[len] = 0;
                p += len + (nl ? 1 : 0);
                if (strncmp(line, "diskpulse_io_", 13) != 0 || !(sp = strrchr(line, ' ')))
                        continue;
                if (strstr(line, "_bucket{") && (le = strstr(line, ",le=\""))) {
                        unsigned long long v = strtoull(sp + 1, NULL, 10);
                        size_t k = (size_t)(le - line);
                        if (k >= sizeof series)
                                abort();
                        if (strncmp(series, line, k) != 0 || series[k]) {
                                memcpy(series, line, k);
                                series[k] = 0;
                                last = 0;
                        }
                        if (v < last)
                                abort();
                        last = v;
                        if (strstr(le, "le=\"+Inf\""))
                                inf = v;
                } else if (strstr(line, "_count{")) {
                        unsigned long long v = strtoull(sp + 1, NULL, 10);
                        if (v == 0 || v != inf)
                                abort();
                        n++;
                }
        }
        return n;
}

/* Every exported (device, op, kind) is a histogram: nothing of a device the reader does not
 * export, counts that add up. */
static void check_reader(const struct biolat_reader *r)
{
        struct mset *set = mset_new();
        char *text = NULL;
        size_t len = 0;

        if (biolatency_reader_devices(r) > 4)
                abort();
        biolatency_export(r, set);
        if (expo_render_text(&set, 1, &text, &len) != 0 || !text || strlen(text) != len)
                abort();
        if (!strstr(text, "diskpulse_io_latency_up 1\n"))
                abort();
        if (check_histograms(text) > biolatency_reader_devices(r) * BIOLAT_OPS * BIOLAT_KINDS)
                abort();
        if (getenv("FUZZ_BIOLATENCY_PRINT"))
                fputs(text, stdout);
        free(text);
        mset_free(set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint32_t max, ncpu, ncpu_parsed = 0;
        unsigned rounds;
        size_t dl, rl, off, tlen;
        struct text t;
        uint8_t *devs, *rows;
        struct biolat_reader *r;
        int pr;

        if (size < 4)
                return 0;
        max = 1 + (data[0] & 3);
        ncpu = 1 + (data[1] & 3);
        rounds = 1 + (data[2] & 3);
        tlen = data[3];
        off = 4;
        if (tlen > size - off)
                tlen = size - off;
        t = (struct text){(const char *)data + off, tlen};
        off += tlen;

        pr = biolatency_parse_cpus(t.p, t.len, &ncpu_parsed);
        if (pr == 0 ? ncpu_parsed < 1 || ncpu_parsed > BIOLAT_MAX_CPUS
                    : pr != -EINVAL && pr != -ERANGE)
                abort();

        /* the same text as --biolatency.buckets and --biolatency.ops: a grid of what parses */
        struct biolat_config cfg;
        char why[256], *flag = malloc(t.len + 1);
        uint64_t ns[BIOLAT_MAX_CLASSIC];
        size_t nb = 0;
        unsigned ops = 0;

        /* copied with its length, not strndup: the input has no terminator, and a strict string
         * check (ASAN_OPTIONS=strict_string_checks=1) reads strndup's source to one */
        if (!flag)
                abort();
        memcpy(flag, t.p, t.len);
        flag[t.len] = 0;
        biolatency_config_default(&cfg, max, ncpu);
        if (biolatency_parse_buckets(flag, ns, &nb, why, sizeof why) == 0) {
                struct biolat_grid g;
                if (nb < 1 || nb > BIOLAT_MAX_CLASSIC || biolatency_grid(ns, nb, &g) != 0)
                        abort();
                cfg.nclassic = nb;
                memcpy(cfg.classic_ns, ns, nb * sizeof(ns[0]));
        } else if (!why[0]) {
                abort();
        }
        if (biolatency_parse_ops(flag, &ops, why, sizeof why) == 0) {
                if (ops >= 1u << BIOLAT_OPS)
                        abort();
                cfg.ops[BIOLAT_KIND_QUEUE] = ops;
        }
        free(flag);

        dl = biolatency_devs_size(max);
        rl = biolatency_rows_size(max, ncpu);
        devs = calloc(1, dl);
        rows = calloc(1, rl);
        if (!devs || !rows)
                abort();
        r = biolatency_reader_init_mem(devs, rows, &cfg);
        if (!r)
                abort();
        for (unsigned k = 0; k < rounds; k++) {
                size_t n = size - off < dl ? size - off : dl;
                memcpy(devs, data + off, n);
                off += n;
                n = size - off < rl ? size - off : rl;
                memcpy(rows, data + off, n);
                off += n;
                biolatency_reader_collect(r, name_fn, &t, NULL, (usec_t)k * BIOLAT_NAME_REFRESH);
                check_reader(r);
                if (k == 1)
                        biolatency_reader_forget(r, NULL);
        }
        biolatency_reader_free(r);
        free(devs);
        free(rows);
        return 0;
}
