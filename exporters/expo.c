/* The exposition writer: metric sets -> Prometheus text format 0.0.4 or OpenMetrics 1.0. */
#include "expo.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const char *expo_format_double(double v, char *buf, size_t size)
{
        if (isnan(v))
                snprintf(buf, size, "NaN");
        else if (isinf(v))
                snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
        else {
                for (int prec = 15; prec <= 17; prec++) {
                        snprintf(buf, size, "%.*g", prec, v);
                        if (strtod(buf, NULL) == v)
                                break;
                }
        }
        return buf;
}

static void put_u64(FILE *out, uint64_t v)
{
        char b[24];
        size_t i = sizeof b;

        do {
                b[--i] = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        fwrite(b + i, 1, sizeof b - i, out);
}

static void put_help(FILE *out, const char *help, enum expo_format fmt)
{
        for (const char *p = help; *p; p++) {
                if (*p == '\\')
                        fputs("\\\\", out);
                else if (*p == '\n')
                        fputs("\\n", out);
                else if (*p == '"' && fmt == EXPO_FORMAT_OPENMETRICS)
                        fputs("\\\"", out);
                else
                        fputc(*p, out);
        }
}

/* The family name of the HELP and TYPE lines: OpenMetrics names a counter without the _total
 * of its samples. */
static void put_family_name(FILE *out, const struct mfamily *f, enum expo_format fmt)
{
        size_t len = strlen(f->name);

        if (fmt == EXPO_FORMAT_OPENMETRICS && f->type == MT_COUNTER && len > 6 &&
            strcmp(f->name + len - 6, "_total") == 0)
                len -= 6;
        fwrite(f->name, 1, len, out);
}

static const char *type_name(enum mtype t)
{
        switch (t) {
        case MT_COUNTER:
                return "counter";
        case MT_GAUGE:
        case MT_INFO:
                return "gauge";
        case MT_HISTOGRAM:
                return "histogram";
        case MT_SUMMARY:
                return "summary";
        default:
                return "untyped";
        }
}

static void put_samples(FILE *out, const struct mfamily *f)
{
        char num[40];

        for (size_t i = 0; i < f->n; i++) {
                const struct msample *s = &f->samples[i];
                fputs(f->name, out);
                fputs(s->suffix, out);
                if (s->labels[0]) {
                        fputc('{', out);
                        fputs(s->labels, out);
                        fputc('}', out);
                }
                fputc(' ', out);
                if (s->is_int)
                        put_u64(out, s->u);
                else
                        fputs(expo_format_double(s->d, num, sizeof num), out);
                fputc('\n', out);
        }
}

int expo_write_text(FILE *out, struct mset *const *sets, size_t n)
{
        return expo_write(out, sets, n, EXPO_FORMAT_TEXT);
}

int expo_write(FILE *out, struct mset *const *sets, size_t n, enum expo_format fmt)
{
        for (size_t i = 0; i < n; i++) {
                for (size_t j = 0; j < sets[i]->n; j++) {
                        const struct mfamily *f = &sets[i]->fams[j];
                        bool seen = false;

                        for (size_t k = 0; k < i && !seen; k++)
                                seen = mset_find(sets[k], f->name) != NULL;
                        if (seen)
                                continue;
                        /* A family without samples (no device has it) is left out. */
                        size_t total = f->n;
                        for (size_t k = i + 1; k < n; k++) {
                                const struct mfamily *g = mset_find(sets[k], f->name);
                                if (g && g->type == f->type)
                                        total += g->n;
                        }
                        if (total == 0)
                                continue;
                        fputs("# HELP ", out);
                        put_family_name(out, f, fmt);
                        fputc(' ', out);
                        put_help(out, f->help, fmt);
                        fputs("\n# TYPE ", out);
                        put_family_name(out, f, fmt);
                        fputc(' ', out);
                        fputs(type_name(f->type), out);
                        fputc('\n', out);
                        put_samples(out, f);
                        for (size_t k = i + 1; k < n; k++) {
                                const struct mfamily *g = mset_find(sets[k], f->name);
                                if (g && g->type == f->type)
                                        put_samples(out, g);
                        }
                }
        }
        if (fmt == EXPO_FORMAT_OPENMETRICS)
                fputs("# EOF\n", out);
        return ferror(out) ? -EIO : 0;
}

int expo_render_text(struct mset *const *sets, size_t n, char **ret_buf, size_t *ret_len)
{
        return expo_render(sets, n, EXPO_FORMAT_TEXT, ret_buf, ret_len);
}

int expo_render(struct mset *const *sets, size_t n, enum expo_format fmt, char **ret_buf,
                size_t *ret_len)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        int r;

        if (!f)
                return -errno;
        r = expo_write(f, sets, n, fmt);
        if (fclose(f) != 0 && r == 0)
                r = -EIO;
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}
