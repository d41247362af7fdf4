/* The canary baselines' state file format: records, their escaping, parsing and rendering. */
#include "canary_records.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "util.h"

int canary_disk_id(char *buf, size_t size, const char *wwn, const char *serial)
{
        int n;

        if (wwn && *wwn)
                n = snprintf(buf, size, "wwn:%s", wwn);
        else if (serial && *serial)
                n = snprintf(buf, size, "serial:%s", serial);
        else
                return -ENOENT;
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int canary_record_init(struct canary_record *rec, const char *disk, const char *mode,
                       const char *path)
{
        if (!disk || !mode || !path || !*disk || !*mode || !*path)
                return -EINVAL;
        memset(rec, 0, sizeof(*rec));
        if (!strscpy(rec->disk, disk, sizeof rec->disk) ||
            !strscpy(rec->mode, mode, sizeof rec->mode) ||
            !strscpy(rec->path, path, sizeof rec->path)) {
                memset(rec, 0, sizeof(*rec));
                return -ENAMETOOLONG;
        }
        return 0;
}

static bool plain_byte(unsigned char c)
{
        return c >= '!' && c <= '~';
}

/* A double in the C locale, the whole string: 0, -EINVAL or -ERANGE (overflow, underflow). */
static int parse_double(const char *s, double *ret)
{
        char *end;
        double v;

        if (!*s || !plain_byte((unsigned char)*s))
                return -EINVAL;
        errno = 0;
        v = strtod(s, &end);
        if (*end)
                return -EINVAL;
        if (errno == ERANGE)
                return -ERANGE;
        if (!isfinite(v))
                return -EINVAL;
        *ret = v;
        return 0;
}

enum {
        F_DISK,
        F_MODE,
        F_PATH,
        F_BASELINE,
        F_UPDATES,
        F_UPDATED,
        F_WARMUP,
        F_REGIME,
        F_REFERENCE,
        F_REFDAYS,
        F_DAYOBS,
        F_DAYS,
        F_N
};
static const char *const field_names[F_N] = {"disk",      "mode",    "path",   "baseline",
                                             "updates",   "updated", "warmup", "regime",
                                             "reference", "refdays", "dayobs", "days"};

static bool name_ok(const char *s, size_t len)
{
        if (len == 0)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                        return false;
        return true;
}

#define LIST_ITEM_MAX 64

/* The next item of a comma-separated list at *p, copied into item (LIST_ITEM_MAX bytes); *p
 * moves past it, to NULL after the last. Returns 0, -EINVAL for an empty item, -ERANGE for a
 * longer one. */
static int list_next(const char **p, char *item)
{
        const char *comma = strchr(*p, ',');
        size_t l = comma ? (size_t)(comma - *p) : strlen(*p);

        if (l == 0 || l >= LIST_ITEM_MAX)
                return l == 0 ? -EINVAL : -ERANGE;
        memcpy(item, *p, l);
        item[l] = 0;
        *p = comma ? comma + 1 : NULL;
        return 0;
}

/* "-" or up to max comma-separated latencies in seconds (each within the baseline's range) into
 * v; *n set on success. */
static int parse_list(const char *s, double *v, unsigned max, unsigned *n)
{
        unsigned k = 0;

        if (strcmp(s, "-") == 0) {
                *n = 0;
                return 0;
        }
        for (const char *p = s; p;) {
                char num[LIST_ITEM_MAX];
                int r = list_next(&p, num);

                if (r < 0)
                        return r;
                if (k >= max)
                        return -EINVAL;
                r = parse_double(num, &v[k]);
                if (r < 0)
                        return r;
                if (!canary_baseline_value_ok(v[k]))
                        return -ERANGE;
                k++;
        }
        *n = k;
        return 0;
}

/* "-" or up to CANARY_DAYS_KEPT "SECONDS:MEDIAN" pairs, comma-separated. */
static int parse_days(const char *s, struct canary_baseline_state *st)
{
        unsigned k = 0;

        if (strcmp(s, "-") == 0) {
                st->n_days = 0;
                return 0;
        }
        for (const char *p = s; p;) {
                char num[LIST_ITEM_MAX], *colon;
                uint64_t t;
                int r = list_next(&p, num);

                if (r < 0)
                        return r;
                if (k >= CANARY_DAYS_KEPT)
                        return -EINVAL;
                colon = strchr(num, ':');
                if (!colon)
                        return -EINVAL;
                *colon = 0;
                r = parse_u64(num, &t);
                if (r < 0)
                        return r;
                if (t > UINT64_MAX / USEC_PER_SEC)
                        return -ERANGE;
                r = parse_double(colon + 1, &st->days[k].v);
                if (r < 0)
                        return r;
                if (!canary_baseline_value_ok(st->days[k].v))
                        return -ERANGE;
                st->days[k].t = (usec_t)t * USEC_PER_SEC;
                k++;
        }
        st->n_days = k;
        return 0;
}

/* Up to 5 of the 6 observations of an older diskpulse's warm-up (6 hours, "warmup="): a full
 * one had made its baseline. */
#define CANARY_LEGACY_WARMUP 6

struct legacy_warmup {
        double warmup[CANARY_LEGACY_WARMUP];
        unsigned n;
};

static int parse_field(int f, const char *val, struct canary_record *rec,
                       struct legacy_warmup *legacy)
{
        struct canary_baseline_state *st = &rec->st;
        uint64_t u;
        int r;

        switch (f) {
        case F_DISK:
        case F_MODE:
        case F_PATH:
                return *val ? 0 : -EINVAL; /* copied by the caller */
        case F_BASELINE:
                r = parse_double(val, &st->value);
                if (r < 0)
                        return r;
                st->value += 0.0; /* "-0" is 0 */
                if (st->value != 0 && !canary_baseline_value_ok(st->value))
                        return -ERANGE;
                return 0;
        case F_UPDATES:
        case F_UPDATED:
                r = parse_u64(val, &u);
                if (r < 0)
                        return r;
                if (f == F_UPDATES)
                        st->updates = u;
                else
                        st->updated = u;
                return 0;
        case F_WARMUP:
                /* an older diskpulse's warm-up in progress: canary_record_parse_line() */
                return parse_list(val, legacy->warmup, CANARY_LEGACY_WARMUP - 1, &legacy->n);
        case F_REGIME:
                return canary_regime_from_string(val, &rec->regime);
        case F_REFERENCE:
                r = parse_double(val, &st->reference);
                if (r < 0)
                        return r;
                st->reference += 0.0;
                if (st->reference != 0 && !canary_baseline_value_ok(st->reference))
                        return -ERANGE;
                return 0;
        case F_REFDAYS:
                st->ref_final = strcmp(val, "final") == 0;
                if (st->ref_final) {
                        st->n_refdays = 0;
                        return 0;
                }
                return parse_list(val, st->refdays, CANARY_REF_DAYS - 1, &st->n_refdays);
        case F_DAYOBS:
                return parse_list(val, st->dayobs, CANARY_DAY_OBS - 1, &st->n_dayobs);
        case F_DAYS:
                return parse_days(val, st);
        default:
                return -EINVAL;
        }
}

int canary_record_parse_line(const char *line, size_t len, struct canary_record *ret)
{
        struct canary_record rec;
        struct legacy_warmup legacy = {0};
        unsigned seen = 0;
        size_t i = 0;
        _cleanup_free_ char *val = NULL;

        if (len > CANARY_LINE_MAX)
                return -ERANGE;
        memset(&rec, 0, sizeof rec);
        val = xmalloc(CANARY_LINE_MAX + 1);
        while (i < len) {
                size_t start, eq, end;
                int f = -1, r;

                if (line[i] == ' ' || line[i] == '\t') {
                        i++;
                        continue;
                }
                start = i;
                while (i < len && line[i] != ' ' && line[i] != '\t')
                        i++;
                end = i;
                for (eq = start; eq < end && line[eq] != '='; eq++)
                        ;
                if (eq == end || !name_ok(line + start, eq - start))
                        return -EINVAL;
                for (int k = 0; k < F_N; k++)
                        if (strlen(field_names[k]) == eq - start &&
                            memcmp(field_names[k], line + start, eq - start) == 0)
                                f = k;
                r = unescape_hex(line + eq + 1, end - eq - 1, val, CANARY_LINE_MAX + 1);
                if (r < 0)
                        return r;
                if (f < 0)
                        continue; /* a field of a later version */
                if (seen & (1u << f))
                        return -EINVAL;
                seen |= 1u << f;
                if (f == F_DISK && !strscpy(rec.disk, val, sizeof rec.disk))
                        return -ERANGE;
                if (f == F_MODE && !strscpy(rec.mode, val, sizeof rec.mode))
                        return -ERANGE;
                if (f == F_PATH && !strscpy(rec.path, val, sizeof rec.path))
                        return -ERANGE;
                r = parse_field(f, val, &rec, &legacy);
                if (r < 0)
                        return r;
        }
        if ((seen & 0x1f) != 0x1f) /* disk, mode, path, baseline, updates */
                return -EINVAL;
        if (legacy.n > 0) {
                /* the first hours of the warm-up, now the first day: inconsistent beside a
                 * baseline (made by a full warm-up) or a running day (one after it) */
                if (rec.st.value != 0 || rec.st.n_dayobs != 0)
                        return -EINVAL;
                memcpy(rec.st.dayobs, legacy.warmup, legacy.n * sizeof(legacy.warmup[0]));
                rec.st.n_dayobs = legacy.n;
        }
        if (canary_baseline_state_check(&rec.st) < 0)
                return -EINVAL;
        *ret = rec;
        return 0;
}

static bool same_key(const struct canary_record *a, const char *disk, const char *mode,
                     const char *path, enum canary_regime regime)
{
        return a->regime == regime && strcmp(a->disk, disk) == 0 && strcmp(a->mode, mode) == 0 &&
               strcmp(a->path, path) == 0;
}

struct canary_record *canary_records_find(const struct canary_records *r, const char *disk,
                                          const char *mode, const char *path,
                                          enum canary_regime regime)
{
        for (size_t i = 0; i < r->n; i++)
                if (same_key(&r->v[i], disk, mode, path, regime))
                        return &r->v[i];
        return NULL;
}

static bool is_blank(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (s[i] != ' ' && s[i] != '\t')
                        return false;
        return true;
}

static bool is_comment(const char *s, size_t len)
{
        size_t i = 0;

        while (i < len && (s[i] == ' ' || s[i] == '\t'))
                i++;
        return i < len && s[i] == '#';
}

/* The version of our header when we read it (1 to CANARY_STATE_VERSION), -EBADMSG for anything
 * else, -EPROTONOSUPPORT for another version. */
static int parse_header(const char *s, size_t len)
{
        const size_t hl = strlen(CANARY_STATE_HEADER);
        char ver[24];
        uint64_t v;
        size_t i;

        while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
                len--;
        if (len <= hl + 1 || memcmp(s, CANARY_STATE_HEADER, hl) != 0 || s[hl] != ' ')
                return -EBADMSG;
        i = hl + 1;
        if (len - i >= sizeof ver)
                return -EPROTONOSUPPORT;
        memcpy(ver, s + i, len - i);
        ver[len - i] = 0;
        if (parse_u64(ver, &v) < 0)
                return -EBADMSG;
        return v >= 1 && v <= CANARY_STATE_VERSION ? (int)v : -EPROTONOSUPPORT;
}

int canary_records_parse(const char *buf, size_t len, struct canary_records *ret)
{
        struct canary_records out = {0};
        int version = 0;
        unsigned lineno = 0;
        size_t i = 0;

        if (len > CANARY_STATE_MAX_BYTES)
                return -EFBIG;
        while (i < len) {
                const char *line = buf + i, *nl = memchr(line, '\n', len - i);
                const char *end = nl ? nl : buf + len;
                struct canary_record rec;
                size_t l;

                lineno++;
                i = (size_t)(end - buf) + (nl ? 1 : 0);
                if (end > line && end[-1] == '\r')
                        end--;
                l = (size_t)(end - line);
                if (is_blank(line, l) || is_comment(line, l))
                        continue;
                if (version == 0) {
                        version = parse_header(line, l);
                        if (version < 0) {
                                canary_records_free(&out);
                                return version;
                        }
                        continue;
                }
                if (canary_record_parse_line(line, l, &rec) < 0 ||
                    canary_records_find(&out, rec.disk, rec.mode, rec.path, rec.regime) ||
                    out.n >= CANARY_RECORDS_MAX) {
                        if (out.bad++ == 0)
                                out.first_bad = lineno;
                        continue;
                }
                if (version < 3)
                        canary_reference_migrate(&rec.st);
                GROW(out.v, out.cap, out.n + 1);
                out.v[out.n++] = rec;
        }
        out.version = version > 0 ? (unsigned)version : CANARY_STATE_VERSION;
        *ret = out;
        return 0;
}

void canary_records_free(struct canary_records *r)
{
        free(r->v);
        memset(r, 0, sizeof(*r));
}

static bool record_ok(const struct canary_record *rec)
{
        return rec->disk[0] && rec->mode[0] && rec->path[0] &&
               canary_regime_to_string(rec->regime) &&
               strnlen(rec->disk, sizeof rec->disk) < sizeof rec->disk &&
               strnlen(rec->mode, sizeof rec->mode) < sizeof rec->mode &&
               strnlen(rec->path, sizeof rec->path) < sizeof rec->path &&
               canary_baseline_state_check(&rec->st) == 0;
}

int canary_records_put_evict(struct canary_records *r, const struct canary_record *rec,
                             struct canary_record *ret_evicted)
{
        struct canary_record *slot;
        int evicted = 0;

        if (!record_ok(rec))
                return -EINVAL;
        slot = canary_records_find(r, rec->disk, rec->mode, rec->path, rec->regime);
        if (!slot && r->n >= CANARY_RECORDS_MAX) {
                slot = &r->v[0];
                for (size_t i = 1; i < r->n; i++)
                        if (r->v[i].st.updated < slot->st.updated)
                                slot = &r->v[i];
                if (ret_evicted)
                        *ret_evicted = *slot;
                evicted = 1;
        }
        if (!slot) {
                GROW(r->v, r->cap, r->n + 1);
                slot = &r->v[r->n++];
        }
        *slot = *rec;
        return evicted;
}

int canary_records_put(struct canary_records *r, const struct canary_record *rec)
{
        int k = canary_records_put_evict(r, rec, NULL);

        return k < 0 ? k : 0;
}

int canary_path_normalize(const char *path, char *buf, size_t size)
{
        size_t len = 1, in = path ? strlen(path) : 0;
        _cleanup_free_ char *n = NULL;

        if (in == 0 || path[0] != '/')
                return -EINVAL;
        /* the whole result first (never longer than path): a long component that a ".." takes
         * back does not count */
        n = xmalloc(in + 1);
        n[0] = '/';
        for (size_t i = 0; i < in;) {
                size_t j = i, k;

                while (j < in && path[j] == '/')
                        j++;
                i = j;
                while (i < in && path[i] != '/')
                        i++;
                k = i - j;
                if (k == 0 || (k == 1 && path[j] == '.'))
                        continue;
                if (k == 2 && path[j] == '.' && path[j + 1] == '.') {
                        /* up one: back to the '/' before the last component ("/" stays) */
                        while (len > 1 && n[len - 1] != '/')
                                len--;
                        if (len > 1)
                                len--;
                        continue;
                }
                if (len > 1)
                        n[len++] = '/';
                memcpy(n + len, path + j, k);
                len += k;
        }
        if (len >= size)
                return -ENAMETOOLONG;
        memcpy(buf, n, len);
        buf[len] = 0;
        return 0;
}

struct strbuf {
        char *p;
        size_t len, cap;
};

static void sb_putn(struct strbuf *b, const char *s, size_t n)
{
        GROW(b->p, b->cap, b->len + n + 1);
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
}

static void sb_puts(struct strbuf *b, const char *s)
{
        sb_putn(b, s, strlen(s));
}

static void sb_escaped(struct strbuf *b, const char *s)
{
        size_t n = escape_hex(s, NULL);

        GROW(b->p, b->cap, b->len + n + 1);
        escape_hex(s, b->p + b->len);
        b->len += n;
        b->p[b->len] = 0;
}

static void sb_double(struct strbuf *b, double v)
{
        char num[FORMAT_DOUBLE_MAX];

        sb_puts(b, format_double_shortest(v, num, sizeof num));
}

/* "-" or the n values comma-separated. */
static void sb_list(struct strbuf *b, const double *v, unsigned n)
{
        if (n == 0)
                sb_puts(b, "-");
        for (unsigned k = 0; k < n; k++) {
                if (k)
                        sb_puts(b, ",");
                sb_double(b, v[k]);
        }
}

int canary_records_format(const struct canary_records *r, char **ret, size_t *ret_len)
{
        struct strbuf b = {0};
        char num[128];

        for (size_t i = 0; i < r->n; i++)
                if (!record_ok(&r->v[i]))
                        return -EINVAL;
        snprintf(num, sizeof num, "%s %d\n", CANARY_STATE_HEADER, CANARY_STATE_VERSION);
        sb_puts(&b, num);
        for (size_t i = 0; i < r->n; i++) {
                const struct canary_record *rec = &r->v[i];

                sb_puts(&b, "disk=");
                sb_escaped(&b, rec->disk);
                sb_puts(&b, " mode=");
                sb_escaped(&b, rec->mode);
                sb_puts(&b, " path=");
                sb_escaped(&b, rec->path);
                sb_puts(&b, " regime=");
                sb_puts(&b, canary_regime_to_string(rec->regime));
                sb_puts(&b, " baseline=");
                sb_double(&b, rec->st.value);
                snprintf(num, sizeof num, " updates=%" PRIu64, rec->st.updates);
                sb_puts(&b, num);
                snprintf(num, sizeof num, " updated=%" PRIu64, (uint64_t)rec->st.updated);
                sb_puts(&b, num);
                sb_puts(&b, " reference=");
                sb_double(&b, rec->st.reference);
                sb_puts(&b, " refdays=");
                if (rec->st.ref_final)
                        sb_puts(&b, "final");
                else
                        sb_list(&b, rec->st.refdays, rec->st.n_refdays);
                sb_puts(&b, " dayobs=");
                sb_list(&b, rec->st.dayobs, rec->st.n_dayobs);
                sb_puts(&b, " days=");
                if (rec->st.n_days == 0)
                        sb_puts(&b, "-");
                for (unsigned k = 0; k < rec->st.n_days; k++) {
                        snprintf(num, sizeof num, "%s%" PRIu64 ":", k ? "," : "",
                                 (uint64_t)(rec->st.days[k].t / USEC_PER_SEC));
                        sb_puts(&b, num);
                        sb_double(&b, rec->st.days[k].v);
                }
                sb_puts(&b, "\n");
        }
        *ret = b.p;
        *ret_len = b.len;
        return 0;
}
