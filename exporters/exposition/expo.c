/* The exposition writer: metric sets -> Prometheus text format 0.0.4 or OpenMetrics 1.0, written
 * straight into the caller's buffer, piece by piece. */
#include "expo.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expo_proto.h"
#include "util.h"

const char *expo_format_double(double v, char *buf, size_t size)
{
        if (isnan(v))
                snprintf(buf, size, "NaN");
        else if (isinf(v))
                snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
        else
                format_double_shortest(v, buf, size);
        return buf;
}

/* Room a number takes at most: "-1.7976931348623157e+308" and 20 digits of a uint64_t. */
#define NUM_MAX 25

static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930"
    "31323334353637383940414243444546474849505152535455565758596061"
    "62636465666768697071727374757677787980818283848586878889909192"
    "93949596979899";

static char *put_u64(char *p, uint64_t v)
{
        char b[20];
        size_t i = sizeof b;

        while (v >= 100) {
                unsigned k = (unsigned)(v % 100) * 2;
                v /= 100;
                b[--i] = digit_pairs[k + 1];
                b[--i] = digit_pairs[k];
        }
        if (v >= 10) {
                b[--i] = digit_pairs[v * 2 + 1];
                b[--i] = digit_pairs[v * 2];
        } else {
                b[--i] = (char)('0' + v);
        }
        memcpy(p, b + i, sizeof b - i);
        return p + (sizeof b - i);
}

typedef unsigned __int128 u128;
typedef __int128 s128;

static u128 pow10_128(unsigned k)
{
        u128 v = 1;

        while (k--)
                v *= 10;
        return v;
}

/* Writes q (n digits, leading digit at decimal exponent ex) as %.{n}g writes it: fixed for
 * -4 <= ex < n, else d.ddde+XX; trailing zeros of the fraction dropped, and a point with
 * nothing after it. */
static char *put_g(char *p, uint64_t q, int n, int ex)
{
        char dig[20];
        int len = n, frac;

        for (int i = n - 1; i >= 0; i--, q /= 10)
                dig[i] = (char)('0' + q % 10);
        if (ex >= -4 && ex < n) {
                if (ex < 0) {
                        *p++ = '0';
                        frac = n;
                } else {
                        memcpy(p, dig, (size_t)ex + 1);
                        p += ex + 1;
                        frac = n - 1 - ex;
                }
                while (frac > 0 && dig[len - 1] == '0')
                        len--, frac--;
                if (frac > 0) {
                        *p++ = '.';
                        for (int z = ex + 1; z < 0; z++)
                                *p++ = '0';
                        memcpy(p, dig + len - frac, (size_t)frac);
                        p += frac;
                }
                return p;
        }
        while (len > 1 && dig[len - 1] == '0')
                len--;
        *p++ = dig[0];
        if (len > 1) {
                *p++ = '.';
                memcpy(p, dig + 1, (size_t)len - 1);
                p += len - 1;
        }
        *p++ = 'e';
        *p++ = ex < 0 ? '-' : '+';
        if (ex < 0)
                ex = -ex;
        if (ex >= 100)
                *p++ = (char)('0' + ex / 100);
        *p++ = (char)('0' + ex / 10 % 10);
        *p++ = (char)('0' + ex % 10);
        return p;
}

/* expo_format_double's answer without printf and strtod, for |d| between 10^-6 and 2^53 (what
 * rates, ratios and latencies are): the first of 15, 16 and 17 significant digits, rounded as
 * printf rounds (to nearest, ties to even, from the exact binary value), that reads back as d
 * (strtod: nearest, ties to even). All of it exact in 128-bit integers: d = m 2^-s, and
 * d 10^k = (m 10^k) >> s with the remainder kept. Returns NULL outside that range. */
static char *put_double_exact(char *p, double d)
{
        uint64_t bits, m;
        int exp2, s, ex, k;
        u128 P, t17, r, one, lim;

        memcpy(&bits, &d, sizeof bits);
        exp2 = (int)((bits >> 52) & 0x7FF);
        if (exp2 == 0 || exp2 == 0x7FF)
                return NULL; /* subnormal, infinite, NaN */
        m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
        s = 1075 - exp2; /* d = m / 2^s */
        if (s <= 0 || s > 100)
                return NULL;
        ex = (int)floor(log10(fabs(d)));
        for (int tries = 0;; tries++) {
                k = 16 - ex;
                if (k < 0 || k > 22 || tries > 2)
                        return NULL;
                P = (u128)m * pow10_128((unsigned)k);
                t17 = P >> s;
                if (t17 < 10000000000000000ULL)
                        ex--;
                else if (t17 >= 100000000000000000ULL)
                        ex++;
                else
                        break;
        }
        r = P & (((u128)1 << s) - 1);
        one = (u128)1 << s; /* a unit of the 17th digit, in the remainder's scale */
        lim = pow10_128((unsigned)k);
        if (signbit(d))
                *p++ = '-';
        for (int n = 15; n <= 17; n++) {
                uint64_t div = n == 15 ? 100 : n == 16 ? 10 : 1;
                uint64_t qf = (uint64_t)t17 / div, rem = (uint64_t)t17 % div, q;
                /* rounding: (rem + r/one) / div against 1/2 */
                u128 twice = 2 * ((u128)rem * one + r), whole = (u128)div * one;
                bool up = twice > whole || (twice == whole && (qf & 1));
                s128 a, diff;
                int nex = ex;

                q = qf + up;
                /* how far the decimal is from d, in units of 10^-k: q*div - t17 - r/one */
                a = (s128)((u128)q * div) - (s128)t17;
                diff = a * (s128)one - (s128)r; /* scaled by one */
                if (diff < 0)
                        diff = -diff;
                {
                        /* it reads back as d when within half the gap to the neighbour on its
                         * side (a quarter below a power of two), ties to an even mantissa */
                        u128 mult = a * (s128)one < (s128)r && m == (1ULL << 52) ? 4 : 2;
                        u128 lhs = mult * (u128)diff;
                        bool ok = lhs < lim || (lhs == lim && !(m & 1));
                        if (!ok && n < 17)
                                continue;
                }
                if (q == (n == 15   ? 1000000000000000ULL
                          : n == 16 ? 10000000000000000ULL
                                    : 100000000000000000ULL)) {
                        q /= 10; /* 9.99.. rounded up to 10.0.. */
                        nex++;
                }
                return put_g(p, q, n, nex);
        }
        return NULL; /* not reached: 17 digits always read back */
}

/* A double as expo_format_double prints it. Integers below 10^15 are printed by %.15g exactly
 * as their digits (at most 15 of them, no exponent), so they take the short way; most others
 * the exact integer way. */
static char *put_double(char *p, double d)
{
        char buf[40], *q;
        size_t l;

        if (d == 0.0) {
                if (signbit(d))
                        *p++ = '-';
                *p++ = '0';
                return p;
        }
        if (fabs(d) < 1e15 && d == (double)(int64_t)d) {
                int64_t i = (int64_t)d;
                if (i < 0) {
                        *p++ = '-';
                        return put_u64(p, (uint64_t)-i);
                }
                return put_u64(p, (uint64_t)i);
        }
        if ((q = put_double_exact(p, d)))
                return q;
        expo_format_double(d, buf, sizeof buf);
        l = strlen(buf);
        memcpy(p, buf, l);
        return p + l;
}

/* Milliseconds as seconds, as expo_format_double((double)ms / 1000) prints them. Below 10^15 the
 * exact decimal ms/1000 has at most 15 significant digits, so %.15g of the nearest double gives
 * it back (no exponent: it lies between 0.001 and 10^12), trailing zeros dropped. */
static char *put_millis(char *p, uint64_t ms)
{
        unsigned r;

        if (ms >= 1000000000000000ULL)
                return put_double(p, (double)ms / 1000.0);
        p = put_u64(p, ms / 1000);
        r = (unsigned)(ms % 1000);
        if (r) {
                *p++ = '.';
                *p++ = (char)('0' + r / 100);
                r %= 100;
                if (r) {
                        *p++ = (char)('0' + r / 10);
                        r %= 10;
                        if (r)
                                *p++ = (char)('0' + r);
                }
        }
        return p;
}

static char *put_cell(char *p, enum mcell cell, uint32_t scale, uint64_t v)
{
        uint64_t scaled;
        double d;

        switch (cell) {
        case MCELL_U64:
                return put_u64(p, v);
        case MCELL_SCALED:
                if (!__builtin_mul_overflow(v, (uint64_t)scale, &scaled))
                        return put_u64(p, scaled);
                return put_double(p, (double)v * (double)scale);
        case MCELL_MILLIS:
                return put_millis(p, v);
        case MCELL_DOUBLE:
                memcpy(&d, &v, sizeof d);
                return put_double(p, d);
        case MCELL_ONE:
        default:
                *p++ = '1';
                return p;
        }
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

/* The family name of the HELP and TYPE lines: OpenMetrics names a counter without the _total
 * of its samples. */
static size_t family_name_len(const struct mfamily *f, enum expo_format fmt)
{
        size_t len = strlen(f->name);

        if (fmt == EXPO_FORMAT_OPENMETRICS && f->type == MT_COUNTER && len > 6 &&
            strcmp(f->name + len - 6, "_total") == 0)
                len -= 6;
        return len;
}

/* One family of the page: its header is written when head is set, then its samples. */
struct item {
        const struct mfamily *f;
        bool head;
        size_t name_len;
        size_t line_max; /* room a sample line takes at most (table families) */
        /* A table family labelled by its rows' first label alone (a device's counters): the
         * line starts with `name{label="`, the same for every row. */
        char *prefix;
        size_t prefix_len;
};

struct expo_stream {
        enum expo_format fmt;
        struct item *items;
        size_t n, cur;
        size_t pos;   /* next sample (row of a table family) of items[cur] */
        bool started; /* the header of items[cur] is out */
        bool eof;     /* "# EOF" is out (or not wanted) */
        char *pend;   /* a piece that did not fit the caller's buffer */
        size_t pend_len, pend_off, pend_cap;
};

/* The order of the page: families of the same name from different sets are merged under one
 * header (the first set's help and type win; a later family of another type is dropped); a
 * family without samples in any set is left out. */
static void plan(struct expo_stream *st, struct mset *const *sets, size_t nsets)
{
        size_t total = 0, k = 0;
        const struct mfamily **all;
        uint32_t *hash;
        bool *used;

        for (size_t i = 0; i < nsets; i++)
                total += sets[i]->n;
        all = xcalloc(total ? total : 1, sizeof(*all));
        hash = xcalloc(total ? total : 1, sizeof(*hash));
        used = xcalloc(total ? total : 1, sizeof(*used));
        st->items = xcalloc(total ? total : 1, sizeof(*st->items));
        for (size_t i = 0; i < nsets; i++)
                for (size_t j = 0; j < sets[i]->n; j++, k++) {
                        all[k] = &sets[i]->fams[j];
                        hash[k] = hash_fnv1a32(all[k]->name);
                }
        for (size_t a = 0; a < total; a++) {
                size_t samples = 0, first = st->n;

                if (used[a])
                        continue;
                used[a] = true;
                st->items[st->n++] = (struct item){.f = all[a], .head = true};
                samples += all[a]->n;
                for (size_t b = a + 1; b < total; b++) {
                        if (used[b] || hash[b] != hash[a] || strcmp(all[b]->name, all[a]->name))
                                continue;
                        used[b] = true; /* a later family of the name: merged or dropped */
                        if (all[b]->type != all[a]->type)
                                continue;
                        st->items[st->n++] = (struct item){.f = all[b]};
                        samples += all[b]->n;
                }
                if (samples == 0)
                        st->n = first;
        }
        for (size_t i = 0; i < st->n; i++) {
                struct item *it = &st->items[i];
                const struct mfamily *f = it->f;
                it->name_len = strlen(f->name);
                if (f->table) {
                        const struct mrows *r = f->table->rows;
                        size_t l = it->name_len + 2 + r->max_row + NUM_MAX + 2;
                        for (size_t k2 = 0; k2 < r->nnames; k2++)
                                if (f->label_mask & (1u << k2))
                                        l += r->name_len[k2] + 4;
                        it->line_max = l;
                        if (f->label_mask == 1) {
                                it->prefix_len = it->name_len + 3 + r->name_len[0];
                                it->prefix = xmalloc(it->prefix_len);
                                memcpy(it->prefix, f->name, it->name_len);
                                it->prefix[it->name_len] = '{';
                                memcpy(it->prefix + it->name_len + 1, r->names[0], r->name_len[0]);
                                memcpy(it->prefix + it->prefix_len - 2, "=\"", 2);
                        }
                }
        }
        free(all);
        free(hash);
        free(used);
}

/* The protobuf page of the plan, whole, as the piece pending: protobuf-c packs a message at a
 * time, and a family's message is only known once all its samples are read. */
static void proto_page(struct expo_stream *st)
{
        const struct mfamily **fams = xcalloc(st->n ? st->n : 1, sizeof(*fams));
        bool *head = xcalloc(st->n ? st->n : 1, sizeof(*head));

        for (size_t i = 0; i < st->n; i++) {
                fams[i] = st->items[i].f;
                head[i] = st->items[i].head;
        }
        if (expo_proto_encode(fams, head, st->n, &st->pend, &st->pend_len) == 0)
                st->pend_cap = st->pend_len + 1;
        st->cur = st->n; /* nothing more after it */
        free(fams);
        free(head);
}

struct expo_stream *expo_stream_new(struct mset *const *sets, size_t n, enum expo_format fmt)
{
        struct expo_stream *st = xcalloc(1, sizeof(*st));

        st->fmt = fmt;
        st->eof = fmt != EXPO_FORMAT_OPENMETRICS;
        plan(st, sets, n);
        if (fmt == EXPO_FORMAT_PROTOBUF)
                proto_page(st);
        return st;
}

struct expo_stream *expo_stream_free(struct expo_stream *st)
{
        if (st) {
                for (size_t i = 0; i < st->n; i++)
                        free(st->items[i].prefix);
                free(st->items);
                free(st->pend);
                free(st);
        }
        return NULL;
}

static char *pend_room(struct expo_stream *st, size_t need)
{
        if (st->pend_cap < need) {
                st->pend = xrealloc(st->pend, need);
                st->pend_cap = need;
        }
        st->pend_len = st->pend_off = 0;
        return st->pend;
}

static size_t header_max(const struct mfamily *f)
{
        return 2 * (strlen(f->name) + 2 * strlen(f->help)) + 32;
}

static char *put_header(char *p, const struct mfamily *f, enum expo_format fmt)
{
        size_t nl = family_name_len(f, fmt);
        const char *t = type_name(f->type);

        memcpy(p, "# HELP ", 7);
        p += 7;
        memcpy(p, f->name, nl);
        p += nl;
        *p++ = ' ';
        for (const char *h = f->help; *h; h++) {
                if (*h == '\\') {
                        *p++ = '\\';
                        *p++ = '\\';
                } else if (*h == '\n') {
                        *p++ = '\\';
                        *p++ = 'n';
                } else if (*h == '"' && fmt == EXPO_FORMAT_OPENMETRICS) {
                        *p++ = '\\';
                        *p++ = '"';
                } else {
                        *p++ = *h;
                }
        }
        memcpy(p, "\n# TYPE ", 8);
        p += 8;
        memcpy(p, f->name, nl);
        p += nl;
        *p++ = ' ';
        memcpy(p, t, strlen(t));
        p += strlen(t);
        *p++ = '\n';
        return p;
}

static size_t sample_max(const struct item *it, const struct msample *s)
{
        return it->name_len + strlen(s->suffix) + strlen(s->labels) + NUM_MAX + 4;
}

static char *put_sample(char *p, const struct item *it, const struct msample *s)
{
        size_t l = strlen(s->suffix);

        memcpy(p, it->f->name, it->name_len);
        p += it->name_len;
        memcpy(p, s->suffix, l);
        p += l;
        if (s->labels[0]) {
                l = strlen(s->labels);
                *p++ = '{';
                memcpy(p, s->labels, l);
                p += l;
                *p++ = '}';
        }
        *p++ = ' ';
        p = s->is_int ? put_u64(p, s->u) : put_double(p, s->d);
        *p++ = '\n';
        return p;
}

/* A row of a table family (its room is it->line_max). */
static char *put_row(char *p, const struct item *it, size_t row)
{
        const struct mfamily *f = it->f;
        const struct mrows *r = f->table->rows;
        const char *v = r->data + r->off[row];
        bool first = true;

        if (it->prefix) {
                uint16_t vl;
                memcpy(p, it->prefix, it->prefix_len);
                p += it->prefix_len;
                memcpy(&vl, v, 2);
                memcpy(p, v + 2, vl);
                p += vl;
                memcpy(p, "\"} ", 3);
                p += 3;
                p = put_cell(p, f->cell, f->scale, mtable_cell(f->table, row, f->col));
                *p++ = '\n';
                return p;
        }
        memcpy(p, f->name, it->name_len);
        p += it->name_len;
        if (f->label_mask) {
                size_t last = 32 - (size_t)__builtin_clz(f->label_mask);
                *p++ = '{';
                for (size_t k = 0; k < last; k++) {
                        uint16_t vl;
                        memcpy(&vl, v, 2);
                        if (f->label_mask & (1u << k)) {
                                if (!first)
                                        *p++ = ',';
                                first = false;
                                memcpy(p, r->names[k], r->name_len[k]);
                                p += r->name_len[k];
                                *p++ = '=';
                                *p++ = '"';
                                memcpy(p, v + 2, vl);
                                p += vl;
                                *p++ = '"';
                        }
                        v += 2 + vl;
                }
                *p++ = '}';
        }
        *p++ = ' ';
        p = put_cell(p, f->cell, f->scale, mtable_cell(f->table, row, f->col));
        *p++ = '\n';
        return p;
}

size_t expo_stream_read(struct expo_stream *st, char *buf, size_t max)
{
        char *p = buf, *end = buf + max;

        for (;;) {
                if (st->pend_off < st->pend_len) {
                        size_t k = st->pend_len - st->pend_off;
                        if (k > (size_t)(end - p))
                                k = (size_t)(end - p);
                        memcpy(p, st->pend + st->pend_off, k);
                        p += k;
                        st->pend_off += k;
                        if (st->pend_off < st->pend_len)
                                return (size_t)(p - buf);
                }
                if (p == end)
                        return max;
                if (st->cur >= st->n) {
                        if (st->eof)
                                return (size_t)(p - buf);
                        st->eof = true;
                        if (end - p >= 6) {
                                memcpy(p, "# EOF\n", 6);
                                p += 6;
                        } else {
                                memcpy(pend_room(st, 6), "# EOF\n", 6);
                                st->pend_len = 6;
                        }
                        continue;
                }
                const struct item *it = &st->items[st->cur];
                const struct mfamily *f = it->f;
                if (it->head && !st->started) {
                        size_t need = header_max(f);
                        if ((size_t)(end - p) >= need) {
                                p = put_header(p, f, st->fmt);
                        } else {
                                char *q = pend_room(st, need);
                                st->pend_len = (size_t)(put_header(q, f, st->fmt) - q);
                        }
                        st->started = true;
                        continue;
                }
                if (f->table) {
                        const struct mtable *t = f->table;
                        size_t rows = t->rows->n;
                        uint32_t bit = 1u << f->col;
                        /* the hot loop: whole lines while they surely fit */
                        while (st->pos < rows && (size_t)(end - p) >= it->line_max) {
                                if (t->present[st->pos] & bit)
                                        p = put_row(p, it, st->pos);
                                st->pos++;
                        }
                        while (st->pos < rows && !(t->present[st->pos] & bit))
                                st->pos++;
                        if (st->pos < rows) {
                                char *q = pend_room(st, it->line_max);
                                st->pend_len = (size_t)(put_row(q, it, st->pos) - q);
                                st->pos++;
                                continue;
                        }
                } else {
                        while (st->pos < f->n) {
                                const struct msample *s = &f->samples[st->pos];
                                size_t need = sample_max(it, s);
                                st->pos++;
                                if ((size_t)(end - p) >= need) {
                                        p = put_sample(p, it, s);
                                } else {
                                        char *q = pend_room(st, need);
                                        st->pend_len = (size_t)(put_sample(q, it, s) - q);
                                        break;
                                }
                        }
                        if (st->pend_off < st->pend_len)
                                continue;
                }
                st->cur++;
                st->pos = 0;
                st->started = false;
        }
}

size_t expo_estimate(struct mset *const *sets, size_t n)
{
        size_t total = 0;

        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < sets[i]->n; j++) {
                        const struct mfamily *f = &sets[i]->fams[j];
                        size_t name = strlen(f->name);
                        total += 2 * name + strlen(f->help) + 24;
                        if (f->table) {
                                const struct mrows *r = f->table->rows;
                                size_t per = name + 14;
                                for (size_t k = 0; k < r->nnames; k++)
                                        if (f->label_mask & (1u << k)) {
                                                per += r->name_len[k] + 4;
                                                total += r->sum_len[k] * f->n / (r->n ? r->n : 1);
                                        }
                                total += per * f->n;
                        } else {
                                for (size_t k = 0; k < f->n; k++)
                                        total += name + strlen(f->samples[k].labels) + 16;
                        }
                }
        return total;
}

int expo_write_text(FILE *out, struct mset *const *sets, size_t n)
{
        return expo_write(out, sets, n, EXPO_FORMAT_TEXT);
}

int expo_write(FILE *out, struct mset *const *sets, size_t n, enum expo_format fmt)
{
        struct expo_stream *st = expo_stream_new(sets, n, fmt);
        char *buf = xmalloc(EXPO_CHUNK);
        size_t k;

        while ((k = expo_stream_read(st, buf, EXPO_CHUNK)) > 0)
                if (fwrite(buf, 1, k, out) != k)
                        break;
        free(buf);
        expo_stream_free(st);
        return ferror(out) ? -EIO : 0;
}

int expo_render_text(struct mset *const *sets, size_t n, char **ret_buf, size_t *ret_len)
{
        return expo_render(sets, n, EXPO_FORMAT_TEXT, ret_buf, ret_len);
}

int expo_render(struct mset *const *sets, size_t n, enum expo_format fmt, char **ret_buf,
                size_t *ret_len)
{
        struct expo_stream *st = expo_stream_new(sets, n, fmt);

        if (fmt == EXPO_FORMAT_PROTOBUF) {
                /* made whole already (NUL-terminated): taken over, not copied */
                *ret_len = st->pend_len;
                *ret_buf = st->pend ? st->pend : xcalloc(1, 1);
                st->pend = NULL;
                expo_stream_free(st);
                return 0;
        }
        /* Room for what the page is likely to take and a chunk more: pages not written are not
         * resident. The stream fills whatever room is left, and the buffer doubles only when it
         * is full, so a page that fits is never copied (asking for a whole chunk of room before
         * each read, the last one too, doubled every page longer than its estimate: a copy and,
         * past the heap's mmap threshold, a mapping made, shrunk and torn down every render). */
        size_t cap = expo_estimate(sets, n) + EXPO_CHUNK, len = 0, k;
        char *buf = xmalloc(cap);

        while ((k = expo_stream_read(st, buf + len, cap - len - 1)) > 0) {
                len += k;
                if (cap - len == 1) {
                        cap *= 2;
                        buf = xrealloc(buf, cap);
                }
        }
        expo_stream_free(st);
        buf = xrealloc(buf, len + 1);
        buf[len] = 0;
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}
