/* The metric model: families of samples with pre-escaped label sets (Prometheus exposition
 * formats, prometheus.io/docs/instrumenting/exposition_formats). */
#include "metrics.h"

#include <math.h>
#include <string.h>

#include "util.h"

struct arena_chunk {
        struct arena_chunk *next;
        size_t used, size;
        char data[];
};

static void *arena_alloc(struct mset *s, size_t n)
{
        struct arena_chunk *c = s->arena;

        n = (n + 7) & ~(size_t)7;
        if (!c || c->size - c->used < n) {
                /* Small sets (most are) take little; a big one grows by 16 KiB chunks. */
                size_t size = c ? (c->size < 8192 ? c->size * 2 : 16384) : 1024;
                if (size < n)
                        size = n;
                c = xmalloc(sizeof(*c) + size);
                c->next = s->arena;
                c->used = 0;
                c->size = size;
                s->arena = c;
        }
        void *p = c->data + c->used;
        c->used += n;
        return p;
}

char *mset_strdup(struct mset *s, const char *str)
{
        size_t l = strlen(str);
        char *p = arena_alloc(s, l + 1);
        memcpy(p, str, l + 1);
        return p;
}

struct mset *mset_new(void)
{
        return xcalloc(1, sizeof(struct mset));
}

struct mset *mset_free(struct mset *s)
{
        if (!s)
                return NULL;
        for (struct arena_chunk *c = s->arena, *n; c; c = n) {
                n = c->next;
                free(c);
        }
        for (size_t i = 0; i < s->n; i++) {
                free(s->fams[i].samples);
                free(s->fams[i].natives);
                mtable_unref(s->fams[i].table);
        }
        free(s->fams);
        free(s);
        return NULL;
}

const struct mfamily *mset_find(const struct mset *s, const char *name)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->fams[i].name, name) == 0)
                        return &s->fams[i];
        return NULL;
}

struct mfamily *mset_family(struct mset *s, const char *name, const char *help, enum mtype type)
{
        struct mfamily *f = (struct mfamily *)mset_find(s, name);

        if (f)
                return f;
        GROW(s->fams, s->cap, s->n + 1);
        f = &s->fams[s->n++];
        memset(f, 0, sizeof(*f));
        f->name = mset_strdup(s, name);
        f->help = mset_strdup(s, help);
        f->type = type;
        return f;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
        size_t len;
        uint32_t cp;

        if (p[0] < 0x80)
                return 1;
        if ((p[0] & 0xE0) == 0xC0)
                len = 2, cp = p[0] & 0x1F;
        else if ((p[0] & 0xF0) == 0xE0)
                len = 3, cp = p[0] & 0x0F;
        else if ((p[0] & 0xF8) == 0xF0)
                len = 4, cp = p[0] & 0x07;
        else
                return 0;
        if (len > n)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xC0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                return 0;
        return len;
}

/* Escaped length of a label value, or writes it when out != NULL. Invalid UTF-8 and control
 * bytes other than newline become U+FFFD; `\`, `"` and newline are escaped. */
static size_t escape_n(const char *v, size_t n, char *out)
{
        const unsigned char *p = (const unsigned char *)v;
        size_t o = 0;

        for (size_t i = 0; i < n;) {
                size_t l = utf8_len(p + i, n - i);
                const char *rep = NULL;
                size_t rl = 0;

                if (l == 1 && p[i] == '\\')
                        rep = "\\\\", rl = 2;
                else if (l == 1 && p[i] == '"')
                        rep = "\\\"", rl = 2;
                else if (l == 1 && p[i] == '\n')
                        rep = "\\n", rl = 2;
                else if (l == 0 || (l == 1 && (p[i] < 0x20 || p[i] == 0x7F)))
                        rep = "\xEF\xBF\xBD", rl = 3, l = 1;
                if (rep) {
                        if (out)
                                memcpy(out + o, rep, rl);
                        o += rl;
                } else {
                        if (out)
                                memcpy(out + o, p + i, l);
                        o += l;
                }
                i += l;
        }
        return o;
}

size_t metric_escape_value(const char *v, char *out)
{
        return escape_n(v, strlen(v), out);
}

char *mset_labelsv(struct mset *s, va_list ap)
{
        va_list aq;
        size_t total = 1;
        char *buf, *o;

        va_copy(aq, ap);
        for (;;) {
                const char *k = va_arg(aq, const char *), *v;
                if (!k)
                        break;
                v = va_arg(aq, const char *);
                if (v)
                        total += strlen(k) + 4 + metric_escape_value(v, NULL);
        }
        va_end(aq);

        o = buf = arena_alloc(s, total);
        for (;;) {
                const char *k = va_arg(ap, const char *), *v;
                if (!k)
                        break;
                v = va_arg(ap, const char *);
                if (!v)
                        continue;
                if (o != buf)
                        *o++ = ',';
                size_t kl = strlen(k);
                memcpy(o, k, kl);
                o += kl;
                *o++ = '=';
                *o++ = '"';
                o += metric_escape_value(v, o);
                *o++ = '"';
        }
        *o = 0;
        return buf;
}

char *mset_labels(struct mset *s, ...)
{
        va_list ap;
        char *r;

        va_start(ap, s);
        r = mset_labelsv(s, ap);
        va_end(ap);
        return r;
}

static void add_sample(struct mset *s, struct mfamily *f, const char *suffix, char *labels,
                       bool is_int, uint64_t u, double d)
{
        struct msample *m;

        (void)s;
        GROW(f->samples, f->cap, f->n + 1);
        m = &f->samples[f->n++];
        m->suffix = suffix ? suffix : "";
        m->labels = labels;
        m->is_int = is_int;
        m->u = u;
        m->d = d;
}

void mfamily_add(struct mset *s, struct mfamily *f, const char *suffix, double value, ...)
{
        va_list ap;
        char *labels;

        va_start(ap, value);
        labels = mset_labelsv(s, ap);
        va_end(ap);
        add_sample(s, f, suffix, labels, false, 0, value);
}

void mfamily_add_u64(struct mset *s, struct mfamily *f, const char *suffix, uint64_t value, ...)
{
        va_list ap;
        char *labels;

        va_start(ap, value);
        labels = mset_labelsv(s, ap);
        va_end(ap);
        add_sample(s, f, suffix, labels, true, value, (double)value);
}

void mfamily_add_sample(struct mset *s, struct mfamily *f, const struct msample_args *a)
{
        const char *labels = a->labels ? a->labels : "";
        char *l;

        if (a->extra_name && a->extra_value) {
                char *extra = mset_labels(s, a->extra_name, a->extra_value, NULL);
                size_t n = strlen(labels), m = strlen(extra);
                l = arena_alloc(s, n + m + 2);
                memcpy(l, labels, n);
                if (n)
                        l[n++] = ',';
                memcpy(l + n, extra, m + 1);
        } else {
                l = mset_strdup(s, labels);
        }
        add_sample(s, f, a->suffix, l, a->is_int, a->u, a->is_int ? (double)a->u : a->d);
}

void mset_gauge(struct mset *s, const char *name, const char *help, double v, ...)
{
        struct mfamily *f = mset_family(s, name, help, MT_GAUGE);
        va_list ap;
        char *labels;

        va_start(ap, v);
        labels = mset_labelsv(s, ap);
        va_end(ap);
        add_sample(s, f, "", labels, false, 0, v);
}

bool labels_get(const char *labels, const char *name, char *buf, size_t size)
{
        size_t nl = strlen(name);
        const char *p = labels;

        while (*p) {
                const char *eq = strchr(p, '=');
                bool match;
                size_t o = 0;

                if (!eq || eq[1] != '"')
                        return false;
                match = (size_t)(eq - p) == nl && strncmp(p, name, nl) == 0;
                p = eq + 2;
                while (*p && *p != '"') {
                        char c = *p++;
                        if (c == '\\' && *p) {
                                c = *p++;
                                if (c == 'n')
                                        c = '\n';
                        }
                        if (match && o + 1 < size)
                                buf[o++] = c;
                }
                if (match) {
                        if (size)
                                buf[o] = 0;
                        return true;
                }
                if (*p == '"')
                        p++;
                if (*p == ',')
                        p++;
        }
        return false;
}

int labels_next(const char **pos, const char **ret_name, size_t *ret_name_len, char *value,
                size_t size, size_t *ret_value_len)
{
        const char *p = *pos, *name = p;
        size_t o = 0;

        if (!*p)
                return 0;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
               (p > name && *p >= '0' && *p <= '9'))
                p++;
        if (p == name || p[0] != '=' || p[1] != '"')
                return -EINVAL;
        *ret_name = name;
        *ret_name_len = (size_t)(p - name);
        for (p += 2; *p != '"'; p++) {
                char c = *p;

                if (!c)
                        return -EINVAL;
                if (c == '\\') {
                        c = *++p;
                        if (c == 'n')
                                c = '\n';
                        else if (c != '\\' && c != '"')
                                return -EINVAL;
                }
                if (o + 1 >= size)
                        return -ENOBUFS;
                value[o++] = c;
        }
        p++;
        if (*p == ',')
                p++;
        else if (*p)
                return -EINVAL;
        value[o] = 0;
        *ret_value_len = o;
        *pos = p;
        return 1;
}

void mfamily_add_native(struct mset *s, struct mfamily *f, const char *labels,
                        const struct mnative *h)
{
        struct mnative_series *ns;
        uint64_t *counts;

        GROW(f->natives, f->natives_cap, f->nnatives + 1);
        ns = &f->natives[f->nnatives++];
        ns->labels = mset_strdup(s, labels ? labels : "");
        ns->h = *h;
        counts = arena_alloc(s, (h->n ? h->n : 1) * sizeof(*counts));
        if (h->n)
                memcpy(counts, h->counts, h->n * sizeof(*counts));
        ns->h.counts = counts;
}

const struct mnative *mfamily_native(const struct mfamily *f, const char *labels)
{
        for (size_t i = 0; i < f->nnatives; i++)
                if (strcmp(f->natives[i].labels, labels) == 0)
                        return &f->natives[i].h;
        return NULL;
}

int32_t mnative_index(double v, int32_t schema)
{
        int exp;
        double frac = frexp(fabs(v), &exp); /* v = frac * 2^exp, frac in [0.5, 1) */

        if (schema > 0) {
                /* the bounds of one power of two: 2^(k / 2^schema - 1), k < 2^schema; the
                 * first not below frac */
                int32_t per = 1 << schema, lo = 0, hi = per;

                while (lo < hi) {
                        int32_t mid = (lo + hi) / 2;
                        if (exp2((double)mid / per - 1) >= frac)
                                hi = mid;
                        else
                                lo = mid + 1;
                }
                return lo + (exp - 1) * per;
        }
        /* a power of two is the upper bound of the bucket below */
        int32_t key = exp - (frac == 0.5);
        return (key + (1 << -schema) - 1) >> -schema;
}

bool metric_name_valid(const char *name, bool label)
{
        if (!name || !*name)
                return false;
        for (const char *p = name; *p; p++) {
                char c = *p;
                bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                             (!label && c == ':');
                if (!alpha && (p == name || c < '0' || c > '9'))
                        return false;
        }
        return true;
}

/* Tables. */

struct mrows *mrows_new(const char *const *names, size_t n)
{
        struct mrows *r = xcalloc(1, sizeof(*r));

        if (n > MROWS_MAX_LABELS)
                abort();
        refcount_init(&r->refs);
        r->nnames = n;
        for (size_t k = 0; k < n; k++) {
                size_t l = strlen(names[k]);
                if (l > 255)
                        abort();
                r->names[k] = names[k];
                r->name_len[k] = (unsigned char)l;
        }
        return r;
}

static char *rows_reserve(struct mrows *r, size_t need)
{
        if (r->dcap - r->len < need) {
                size_t cap = r->dcap ? r->dcap : 4096;
                while (cap - r->len < need)
                        cap *= 2;
                r->data = xrealloc(r->data, cap);
                r->dcap = cap;
        }
        return r->data + r->len;
}

static void rows_begin(struct mrows *r)
{
        GROW(r->off, r->cap, r->n + 1);
        if (r->len > UINT32_MAX)
                abort();
        r->off[r->n] = (uint32_t)r->len;
}

static size_t rows_end(struct mrows *r)
{
        const char *p = r->data + r->off[r->n];
        size_t bytes = 0;

        for (size_t k = 0; k < r->nnames; k++) {
                uint16_t l;
                memcpy(&l, p, 2);
                r->sum_len[k] += l;
                bytes += l;
                p += 2 + l;
        }
        if (bytes > r->max_row)
                r->max_row = bytes;
        return r->n++;
}

size_t mrows_add(struct mrows *r, const char *const *values)
{
        rows_begin(r);
        for (size_t k = 0; k < r->nnames; k++) {
                const char *v = values[k] ? values[k] : "";
                /* escaped, at most 3 bytes a byte: a longer value is cut to fit 16 bits */
                size_t l = strnlen(v, UINT16_MAX / 3);
                char *p = rows_reserve(r, 2 + 3 * l);
                size_t e = escape_n(v, l, p + 2);
                uint16_t e16 = (uint16_t)e;

                memcpy(p, &e16, 2);
                r->len += 2 + e;
        }
        return rows_end(r);
}

void mrows_truncate(struct mrows *r, size_t n)
{
        while (r->n > n) {
                const char *p;
                r->n--;
                p = r->data + r->off[r->n];
                for (size_t k = 0; k < r->nnames; k++) {
                        uint16_t l;
                        memcpy(&l, p, 2);
                        r->sum_len[k] -= l;
                        p += 2 + l;
                }
                r->len = r->off[r->n];
        }
}

const char *mrows_value(const struct mrows *r, size_t row, size_t k, size_t *ret_len)
{
        const char *p = r->data + r->off[row];
        uint16_t l;

        for (;;) {
                memcpy(&l, p, 2);
                if (k == 0)
                        break;
                p += 2 + l;
                k--;
        }
        *ret_len = l;
        return p + 2;
}

static size_t row_bytes(const struct mrows *r, size_t row)
{
        return (row + 1 < r->n ? r->off[row + 1] : r->len) - r->off[row];
}

bool mrows_row_equal(const struct mrows *ra, size_t a, const struct mrows *rb, size_t b)
{
        size_t la = row_bytes(ra, a), lb = row_bytes(rb, b);

        return la == lb && memcmp(ra->data + ra->off[a], rb->data + rb->off[b], la) == 0;
}

size_t mrows_copy_row(struct mrows *r, const struct mrows *src, size_t row)
{
        size_t l = row_bytes(src, row);

        rows_begin(r);
        memcpy(rows_reserve(r, l), src->data + src->off[row], l);
        r->len += l;
        return rows_end(r);
}

static void mrows_destroy(struct mrows *r)
{
        free(r->off);
        free(r->data);
        free(r);
}

REFCOUNT_DEFINE(, struct mrows, mrows, refs, mrows_destroy)

struct mtable *mtable_new(struct mrows *rows, size_t cols)
{
        struct mtable *t = xcalloc(1, sizeof(*t));
        size_t n = rows->n ? rows->n : 1;

        if (cols > MTABLE_MAX_COLS || cols == 0)
                abort();
        refcount_init(&t->refs);
        t->rows = mrows_ref(rows);
        t->cols = cols;
        t->present = xcalloc(n, sizeof(*t->present));
        t->nonzero = xcalloc(n, sizeof(*t->nonzero));
        t->off = xcalloc(n, sizeof(*t->off));
        return t;
}

void mtable_add_row(struct mtable *t, size_t row, uint32_t present, const uint64_t *v)
{
        uint32_t nz = 0;

        if (row != t->added || row >= t->rows->n || t->count)
                abort(); /* rows out of order: a bug of the caller */
        if (t->cap - t->ncells < t->cols) {
                /* room for the rows left, as full as this one could be */
                size_t cap = t->cap ? t->cap * 2 : (t->rows->n - row) * t->cols / 2 + t->cols;
                t->cells = xrealloc(t->cells, cap * sizeof(*t->cells));
                t->cap = cap;
        }
        if (t->ncells > UINT32_MAX)
                abort();
        t->off[row] = (uint32_t)t->ncells;
        for (size_t c = 0; c < t->cols; c++)
                if ((present >> c) & 1 && v[c]) {
                        nz |= 1u << c;
                        t->cells[t->ncells++] = v[c];
                }
        t->present[row] = present & (uint32_t)((1ULL << t->cols) - 1);
        t->nonzero[row] = nz;
        t->added++;
}

uint64_t mtable_double(double v)
{
        uint64_t bits;

        memcpy(&bits, &v, sizeof bits);
        return bits;
}

double mtable_get_double(const struct mtable *t, size_t row, size_t col)
{
        uint64_t bits = mtable_cell(t, row, col);
        double v;

        memcpy(&v, &bits, sizeof v);
        return v;
}

static void mtable_destroy(struct mtable *t)
{
        mrows_unref(t->rows);
        free(t->cells);
        free(t->present);
        free(t->nonzero);
        free(t->off);
        free(t->count);
        free(t);
}

REFCOUNT_DEFINE(, struct mtable, mtable, refs, mtable_destroy)

struct mfamily *mset_table_family(struct mset *s, const char *name, const char *help,
                                  enum mtype type, struct mtable *t, unsigned col, enum mcell cell,
                                  uint32_t label_mask)
{
        struct mfamily *f;
        size_t n = 0;

        if (mset_find(s, name) || col >= t->cols)
                abort();
        f = mset_family(s, name, help, type);
        if (!t->count) {
                /* the table is complete: give back the room it did not need; and it serves
                 * several rounds: count once */
                for (size_t i = t->added; i < t->rows->n; i++)
                        t->off[i] = (uint32_t)t->ncells;
                t->added = t->rows->n;
                if (t->cap > t->ncells) {
                        t->cells =
                            xrealloc(t->cells, (t->ncells ? t->ncells : 1) * sizeof(*t->cells));
                        t->cap = t->ncells;
                }
                t->count = xcalloc(t->cols, sizeof(*t->count));
                for (size_t i = 0; i < t->rows->n; i++)
                        for (size_t c = 0; c < t->cols; c++)
                                t->count[c] += (t->present[i] >> c) & 1;
        }
        n = t->count[col];
        f->table = mtable_ref(t);
        f->col = col;
        f->cell = cell;
        f->label_mask = label_mask & ((1u << t->rows->nnames) - 1);
        f->n = n;
        return f;
}

void mfamily_scale(struct mfamily *f, uint32_t factor)
{
        f->cell = MCELL_SCALED;
        f->scale = factor;
}

/* The value of a table cell as a sample. */
static void cell_value(const struct mfamily *f, size_t row, struct msample *ret)
{
        uint64_t v = mtable_cell(f->table, row, f->col);

        ret->is_int = false;
        ret->u = 0;
        switch (f->cell) {
        case MCELL_U64:
                ret->is_int = true;
                ret->u = v;
                ret->d = (double)v;
                break;
        case MCELL_SCALED:
                ret->is_int = !__builtin_mul_overflow(v, (uint64_t)f->scale, &ret->u);
                if (!ret->is_int)
                        ret->u = 0;
                ret->d = (double)v * (double)f->scale;
                break;
        case MCELL_MILLIS:
                ret->d = (double)v / 1000.0;
                break;
        case MCELL_DOUBLE:
                memcpy(&ret->d, &v, sizeof ret->d);
                break;
        case MCELL_ONE:
                ret->d = 1.0;
                break;
        }
}

size_t mtable_row_labels(const struct mtable *t, size_t row, uint32_t mask, char *buf, size_t size)
{
        const struct mrows *r = t->rows;
        size_t o = 0;

        if (size == 0)
                return 0;
        for (size_t k = 0; k < r->nnames; k++) {
                size_t vl;
                const char *v;

                if (!(mask & (1u << k)))
                        continue;
                v = mrows_value(r, row, k, &vl);
                if (o + (o ? 1 : 0) + r->name_len[k] + 3 + vl >= size)
                        break;
                if (o)
                        buf[o++] = ',';
                memcpy(buf + o, r->names[k], r->name_len[k]);
                o += r->name_len[k];
                buf[o++] = '=';
                buf[o++] = '"';
                memcpy(buf + o, v, vl);
                o += vl;
                buf[o++] = '"';
        }
        buf[o] = 0;
        return o;
}

bool mfamily_next(const struct mfamily *f, size_t *pos, struct msample *ret, char *buf, size_t size)
{
        if (!f->table) {
                if (*pos >= f->n)
                        return false;
                *ret = f->samples[(*pos)++];
                return true;
        }
        while (*pos < f->table->rows->n && !((f->table->present[*pos] >> f->col) & 1))
                (*pos)++;
        if (*pos >= f->table->rows->n)
                return false;
        ret->suffix = "";
        mtable_row_labels(f->table, *pos, f->label_mask, buf, size);
        ret->labels = buf;
        cell_value(f, *pos, ret);
        (*pos)++;
        return true;
}
