/* The metric model: families of samples with pre-escaped label sets (Prometheus exposition
 * formats, prometheus.io/docs/instrumenting/exposition_formats). */
#include "metrics.h"

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
                size_t size = n > 16384 ? n : 16384;
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
        for (size_t i = 0; i < s->n; i++)
                free(s->fams[i].samples);
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
static size_t escape_value(const char *v, char *out)
{
        const unsigned char *p = (const unsigned char *)v;
        size_t n = strlen(v), o = 0;

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
                        total += strlen(k) + 4 + escape_value(v, NULL);
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
                o += escape_value(v, o);
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

void mfamily_add_raw(struct mset *s, struct mfamily *f, const char *suffix, const char *labels,
                     const char *extra_name, const char *extra_value, bool is_int, uint64_t u,
                     double d)
{
        char *l;

        if (extra_name && extra_value) {
                char *extra = mset_labels(s, extra_name, extra_value, NULL);
                size_t a = strlen(labels), b = strlen(extra);
                l = arena_alloc(s, a + b + 2);
                memcpy(l, labels, a);
                if (a)
                        l[a++] = ',';
                memcpy(l + a, extra, b + 1);
        } else {
                l = mset_strdup(s, labels);
        }
        add_sample(s, f, suffix, l, is_int, u, d);
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
