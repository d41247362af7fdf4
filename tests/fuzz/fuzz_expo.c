/* Fuzz target of the metric model and text exposition: renders sets and checks the grammar; the
 * protobuf page of the same sets decodes (protobuf-c) into one message per family of the text
 * page, each with the text page's name and as many samples as the text page has lines. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expo.h"
#include "metrics.h"
#include "prometheus_metrics.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SETS 3
#define MAX_OPS  256

struct reader {
        const uint8_t *p;
        size_t n;
};

static uint8_t byte(struct reader *r)
{
        if (!r->n)
                return 0;
        r->n--;
        return *r->p++;
}

/* Carves a string of up to max bytes (NUL bytes end it early) into buf. */
static void carve(struct reader *r, char *buf, size_t max)
{
        size_t len = byte(r) % (max + 1), o = 0;

        for (size_t i = 0; i < len && r->n; i++) {
                char c = (char)byte(r);
                if (c)
                        buf[o++] = c;
        }
        buf[o] = 0;
}

static uint64_t u64(struct reader *r)
{
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = v << 8 | byte(r);
        return v;
}

static double dbl(struct reader *r)
{
        static const double special[] = {0.0,
                                         -0.0,
                                         1.0,
                                         0.1,
                                         1e-05,
                                         0.563,
                                         NAN,
                                         INFINITY,
                                         -INFINITY,
                                         5e-324,
                                         1.7976931348623157e308};
        uint8_t k = byte(r);
        if (k < 128)
                return special[k % (sizeof special / sizeof special[0])];
        uint64_t bits = u64(r);
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
}

/* True when s is valid UTF-8 without control bytes other than newline. */
static bool clean_utf8(const char *s)
{
        const unsigned char *p = (const unsigned char *)s;

        while (*p) {
                size_t len;
                uint32_t cp;
                if (*p < 0x80) {
                        if ((*p < 0x20 && *p != '\n') || *p == 0x7f)
                                return false;
                        p++;
                        continue;
                }
                if ((*p & 0xe0) == 0xc0)
                        len = 2, cp = *p & 0x1f;
                else if ((*p & 0xf0) == 0xe0)
                        len = 3, cp = *p & 0x0f;
                else if ((*p & 0xf8) == 0xf0)
                        len = 4, cp = *p & 0x07;
                else
                        return false;
                for (size_t i = 1; i < len; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return false;
                        cp = cp << 6 | (p[i] & 0x3f);
                }
                if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
                    (len == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                p += len;
        }
        return true;
}

static bool name_char(char c, bool first, bool label)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
               (!label && c == ':') || (!first && c >= '0' && c <= '9');
}

/* Checks one sample line: name{label="value",...} value. Aborts when it is not valid. */
static void check_sample_line(const char *s, const char *end)
{
        const char *p = s;
        char num[64];

        if (p >= end || !name_char(*p, true, false))
                abort();
        while (p < end && name_char(*p, false, false))
                p++;
        if (p < end && *p == '{') {
                p++;
                while (p < end && *p != '}') {
                        const char *vstart;
                        char val[4096];
                        size_t vo = 0;

                        if (!name_char(*p, true, true))
                                abort();
                        while (p < end && name_char(*p, false, true))
                                p++;
                        if (p + 1 >= end || p[0] != '=' || p[1] != '"')
                                abort();
                        p += 2;
                        vstart = p;
                        while (p < end && *p != '"') {
                                if (*p == '\\') {
                                        if (p + 1 >= end || !strchr("\\\"n", p[1]))
                                                abort(); /* only three escapes exist */
                                        p += 2;
                                } else {
                                        if (*p == '\n')
                                                abort();
                                        p++;
                                }
                        }
                        if (p >= end)
                                abort(); /* unbalanced quote */
                        /* the raw value bytes are valid UTF-8 without control bytes */
                        for (const char *q = vstart; q < p && vo < sizeof val - 1; q++)
                                val[vo++] = *q;
                        val[vo] = 0;
                        if (vo < sizeof val - 1 && !clean_utf8(val))
                                abort();
                        p++; /* closing quote */
                        if (p < end && *p == ',')
                                p++;
                }
                if (p >= end)
                        abort();
                p++; /* '}' */
        }
        if (p >= end || *p != ' ')
                abort();
        p++;
        if ((size_t)(end - p) >= sizeof num || p == end)
                abort();
        memcpy(num, p, (size_t)(end - p));
        num[end - p] = 0;
        if (strcmp(num, "NaN") && strcmp(num, "+Inf") && strcmp(num, "-Inf")) {
                char *e;
                (void)strtod(num, &e);
                if (*e || strchr(num, ' '))
                        abort();
        }
}

static void check_text(const char *text, size_t len)
{
        const char *p = text, *end = text + len;

        if (len && text[len - 1] != '\n')
                abort();
        if (memchr(text, 0, len))
                abort();
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                if (!nl)
                        abort();
                if (*p == '#') {
                        if (strncmp(p, "# HELP ", 7) != 0 && strncmp(p, "# TYPE ", 7) != 0)
                                abort();
                        if (strncmp(p, "# TYPE ", 7) == 0) {
                                const char *sp = memrchr(p, ' ', (size_t)(nl - p));
                                static const char *const types[] = {"counter", "gauge", "histogram",
                                                                    "summary", "untyped"};
                                bool ok = false;
                                for (size_t i = 0; i < 5; i++)
                                        ok |= (size_t)(nl - sp - 1) == strlen(types[i]) &&
                                              strncmp(sp + 1, types[i], strlen(types[i])) == 0;
                                if (!ok)
                                        abort();
                        }
                } else {
                        check_sample_line(p, nl);
                }
                p = nl + 1;
        }
}

/* A family of a table of up to 8 rows with up to 3 labels of carved values, any cell kind and
 * label mask, rows without the column. */
static void add_table_family(struct reader *r, struct mset *s, uint8_t kind)
{
        static const char *const names[3] = {"device", "model", "mode"};
        char name[56], vals[8][3][48];
        size_t nlabels = 1 + byte(r) % 3, nrows = byte(r) % 8;
        struct mrows *rows = mrows_new(names, nlabels);
        struct mtable *t;

        carve(r, name, 48);
        if (!metric_name_valid(name, false))
                snprintf(name, sizeof name, "tab_%u", (unsigned)(kind & 0x7f));
        for (size_t i = 0; i < nrows; i++) {
                const char *v[3];
                for (size_t k = 0; k < nlabels; k++) {
                        carve(r, vals[i][k], 40);
                        v[k] = vals[i][k];
                }
                mrows_add(rows, v);
        }
        t = mtable_new(rows, 2);
        for (size_t i = 0; i < nrows; i++) {
                uint8_t f = byte(r);
                uint64_t v[2] = {u64(r), 0};
                double d = dbl(r);
                memcpy(&v[1], &d, sizeof d);
                if (f & 0x40)
                        v[0] = 0;
                mtable_add_row(t, i, f & 3, v);
        }
        if (!mset_find(s, name))
                mset_table_family(s, name, "A table.", (enum mtype)(byte(r) % 6), t, kind & 1,
                                  (kind & 1) ? MCELL_DOUBLE : (enum mcell)(byte(r) % 5),
                                  byte(r) & 7);
        mtable_unref(t);
        mrows_unref(rows);
}

/* The page read in pieces of size chunk is the page. */
static void check_pieces(struct mset *const *sets, size_t n, const char *whole, size_t len,
                         size_t chunk)
{
        struct expo_stream *st = expo_stream_new(sets, n, EXPO_FORMAT_TEXT);
        char *buf = malloc(len + chunk + 1);
        size_t got = 0, k;

        if (!buf)
                abort();
        while ((k = expo_stream_read(st, buf + got, chunk)) > 0) {
                if (k > chunk || got + k > len)
                        abort();
                got += k;
        }
        if (got != len || memcmp(buf, whole, len) != 0)
                abort();
        free(buf);
        expo_stream_free(st);
}

/* The samples a Metric stands for on the text page (a histogram's +Inf bucket is its count). */
static size_t proto_samples(const Io__Prometheus__Client__Metric *m)
{
        if (m->histogram)
                return m->histogram->n_bucket + 3;
        if (m->summary)
                return m->summary->n_quantile + 2;
        return 1;
}

static void check_protobuf(struct mset *const *sets, size_t nsets, const char *text)
{
        char *pb;
        size_t len, pos = 0;
        const char *t = text;

        if (expo_render(sets, nsets, EXPO_FORMAT_PROTOBUF, &pb, &len) != 0)
                abort();
        while (pos < len) {
                uint64_t size = 0;
                size_t samples = 0, lines = 0;
                for (int shift = 0;; shift += 7) {
                        if (pos >= len || shift > 63)
                                abort();
                        size |= (uint64_t)(pb[pos] & 0x7f) << shift;
                        if (!(pb[pos++] & 0x80))
                                break;
                }
                if (size > len - pos)
                        abort();
                Io__Prometheus__Client__MetricFamily *mf =
                    (Io__Prometheus__Client__MetricFamily *)protobuf_c_message_unpack(
                        &io__prometheus__client__metric_family__descriptor, NULL, size,
                        (const uint8_t *)pb + pos);
                pos += size;
                /* the text page's next family: "# HELP name ..." */
                t = strstr(t, "# HELP ");
                if (!mf || !t || strncmp(t + 7, mf->name, strlen(mf->name)) != 0 ||
                    t[7 + strlen(mf->name)] != ' ')
                        abort();
                t = strchr(t, '\n') + 1;
                t = strchr(t, '\n') + 1; /* past # TYPE */
                while (*t && *t != '#') {
                        lines++;
                        t = strchr(t, '\n') + 1;
                }
                for (size_t i = 0; i < mf->n_metric; i++)
                        samples += proto_samples(mf->metric[i]);
                /* a histogram's or summary's line without its le or quantile, or a
                 * histogram's without +Inf, is no sample of the protobuf page */
                if (samples != lines &&
                    !(mf->type == IO__PROMETHEUS__CLIENT__METRIC_TYPE__HISTOGRAM ||
                      mf->type == IO__PROMETHEUS__CLIENT__METRIC_TYPE__SUMMARY))
                        abort();
                protobuf_c_message_free_unpacked(&mf->base, NULL);
        }
        if (strstr(t, "# HELP "))
                abort(); /* a family of the text page is missing */
        free(pb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct reader r = {data, size};
        struct mset *sets[MAX_SETS];
        struct mfamily *fam[MAX_SETS] = {NULL};
        char fam_name[MAX_SETS][56]; /* fam[i]'s name: the pointer lasts until the next family */
        size_t cur = 0, nsets = 1 + byte(&r) % MAX_SETS;
        static const char *const suffixes[] = {"", "_bucket", "_sum", "_count"};
        char *text = NULL;
        size_t len = 0;

        for (size_t i = 0; i < nsets; i++)
                sets[i] = mset_new();

        for (int op = 0; op < MAX_OPS && r.n; op++) {
                struct mset *s = sets[cur];
                uint8_t kind = byte(&r);

                /* the low 3 bits choose the operation, the high ones are its flags */
                switch (kind & 7) {
                case 0: { /* a family */
                        char name[56], help[80];
                        carve(&r, name, 48);
                        carve(&r, help, 64);
                        if (!metric_name_valid(name, false))
                                snprintf(name, sizeof name, "fam_%u", (unsigned)(kind >> 3));
                        fam[cur] = mset_family(s, name, help, (enum mtype)(byte(&r) % 6));
                        snprintf(fam_name[cur], sizeof fam_name[cur], "%s", name);
                        if (!mset_find(s, name))
                                abort();
                        break;
                }
                case 1:
                case 2:
                case 5:
                case 6: { /* a sample with up to 3 label pairs */
                        char ln[3][24], lv[3][64];
                        const char *v[3];
                        const char *suffix = suffixes[byte(&r) % 4];
                        uint8_t nulls = byte(&r);
                        char got[256];

                        if (!fam[cur])
                                break;
                        for (int k = 0; k < 3; k++) {
                                carve(&r, ln[k], 16);
                                carve(&r, lv[k], 48);
                                if (!metric_name_valid(ln[k], true))
                                        snprintf(ln[k], sizeof ln[k], "l%d", k);
                                v[k] = (nulls >> k) & 1 ? NULL : lv[k];
                        }
                        if ((kind & 3) == 1)
                                mfamily_add(s, fam[cur], suffix, dbl(&r), ln[0], v[0], ln[1], v[1],
                                            ln[2], v[2], NULL);
                        else
                                mfamily_add_u64(s, fam[cur], suffix, u64(&r), ln[0], v[0], ln[1],
                                                v[1], ln[2], v[2], NULL);
                        /* the first present pair reads back, exactly when it was clean */
                        const struct msample *m = &fam[cur]->samples[fam[cur]->n - 1];
                        for (int k = 0; k < 3; k++) {
                                if (!v[k])
                                        continue;
                                if (!labels_get(m->labels, ln[k], got, sizeof got))
                                        abort();
                                if (clean_utf8(v[k]) && strcmp(got, v[k]) != 0)
                                        abort();
                                break;
                        }
                        break;
                }
                case 3:
                case 7: { /* a sample from rendered labels plus one extra pair */
                        char ev[64], en[24];
                        const char *base;
                        if (!fam[cur])
                                break;
                        carve(&r, en, 16);
                        carve(&r, ev, 48);
                        if (!metric_name_valid(en, true))
                                snprintf(en, sizeof en, "quantile");
                        base = mset_labels(s, "device", "sda", NULL);
                        mfamily_add_sample(
                            s, fam[cur],
                            &(struct msample_args){.labels = (kind & 0x80) ? base : "",
                                                   .extra_name = (kind & 0x20) ? NULL : en,
                                                   .extra_value = (kind & 0x40) ? NULL : ev,
                                                   .d = dbl(&r)});
                        break;
                }
                default: /* 4: switch to another set, or (high bit) a table's family */
                        if (kind & 0x80) {
                                add_table_family(&r, s, kind);
                                /* a new family may have moved the set's families */
                                if (fam[cur])
                                        fam[cur] = (struct mfamily *)mset_find(s, fam_name[cur]);
                                break;
                        }
                        cur = byte(&r) % nsets;
                        break;
                }
        }

        if (expo_render_text(sets, nsets, &text, &len) != 0)
                abort();
        check_text(text, len);
        check_protobuf(sets, nsets, text);
        check_pieces(sets, nsets, text, len, 1);
        check_pieces(sets, nsets, text, len, 1 + size % 97);
        free(text);
        /* OpenMetrics: the same samples, ending with "# EOF" */
        if (expo_render(sets, nsets, EXPO_FORMAT_OPENMETRICS, &text, &len) != 0 || len < 6 ||
            memcmp(text + len - 6, "# EOF\n", 6) != 0)
                abort();
        free(text);
        for (size_t i = 0; i < nsets; i++)
                mset_free(sets[i]);
        return 0;
}
