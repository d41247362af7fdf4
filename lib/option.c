/* The option value engine: one ops table per option type (how a value is parsed, copied,
 * compared, freed, checked and written, option.h), and the storage of a value in an options
 * struct (one in place, a repeatable option's array and count, a bool per switch), walked over
 * those ops. The messages are the flags' and config file's (SPEC §2). */
#include "option.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The message of a refused on/off value. */
static int bool_refuse(const char *value, char *why, size_t whysz)
{
        snprintf(why, whysz, "\"%s\" (expected true or false)", value);
        return -EINVAL;
}

static int bool_parse(const struct opt_def *d, const char *value, const void *vals, size_t n,
                      void *v, char *why, size_t whysz)
{
        (void)d, (void)vals, (void)n;
        return parse_bool(value, v) < 0 ? bool_refuse(value, why, whysz) : 0;
}

static const char *bool_format(const struct opt_def *d, const void *v, char *buf, size_t size)
{
        (void)d, (void)buf, (void)size;
        return *(const bool *)v ? "true" : "false";
}

static bool bool_default(const struct opt_def *d, void *v)
{
        *(bool *)v = d->def != 0;
        return true;
}

static const struct opt_type_ops bool_ops = {
    .size = sizeof(bool),
    .parse = bool_parse,
    .format = bool_format,
    .set_default = bool_default,
};

/* A string (OPT_STRING, and each value of an OPT_LIST): checked by d->check; a list's value
 * may be "", a single string only with allow_empty. */
static int string_parse(const struct opt_def *d, const char *value, const void *vals, size_t n,
                        void *v, char *why, size_t whysz)
{
        char reason[256];

        (void)vals, (void)n;
        if (!*value && !d->allow_empty && !d->count_offset) {
                snprintf(why, whysz, "empty");
                return -EINVAL;
        }
        if (d->check && d->check(value, reason, sizeof reason) < 0) {
                snprintf(why, whysz, "\"%s\" (%s)", value, reason);
                return -EINVAL;
        }
        *(char **)v = xstrdup(value);
        return 0;
}

static void string_copy(void *dst, const void *src)
{
        const char *s = *(char *const *)src;

        *(char **)dst = s ? xstrdup(s) : NULL;
}

static bool string_equal(const void *a, const void *b)
{
        const char *x = *(char *const *)a, *y = *(char *const *)b;

        return x == y || (x && y && strcmp(x, y) == 0);
}

static void string_free(void *v)
{
        free(*(char **)v);
}

static const char *string_format(const struct opt_def *d, const void *v, char *buf, size_t size)
{
        (void)d, (void)buf, (void)size;
        return *(char *const *)v;
}

/* def_env's absolute value, else def_str. systemd's StateDirectory= may list several, separated
 * by ':'; the first is ours. */
static bool string_default(const struct opt_def *d, void *v)
{
        const char *env = d->def_env ? getenv(d->def_env) : NULL;
        char **s = v;

        if (env && env[0] == '/') {
                *s = xstrdup(env);
                (*s)[strcspn(env, ":")] = 0;
        } else if (d->def_str) {
                *s = xstrdup(d->def_str);
        }
        return *s != NULL;
}

static const char *string_help(const struct opt_def *d, char *buf, size_t size)
{
        (void)buf, (void)size;
        return d->def_str;
}

static const struct opt_type_ops string_ops = {
    .size = sizeof(char *),
    .parse = string_parse,
    .copy = string_copy,
    .equal = string_equal,
    .free = string_free,
    .format = string_format,
    .set_default = string_default,
    .help = string_help,
};

/* Within d's min and max (max 0: no upper bound; neither: no range). */
static bool in_range(const struct opt_def *d, uint64_t u)
{
        return (!d->min && !d->max) || (u >= d->min && (!d->max || u <= d->max));
}

/* The default of a number (def), stored as its type. */
static bool usec_default(const struct opt_def *d, void *v)
{
        *(usec_t *)v = d->def;
        return true;
}

static int duration_parse(const struct opt_def *d, const char *value, const void *vals, size_t n,
                          void *v, char *why, size_t whysz)
{
        (void)d, (void)vals, (void)n;
        if (parse_duration(value, v) < 0 || *(usec_t *)v == 0) {
                snprintf(why, whysz,
                         "\"%s\" (expected a positive duration such as 500ms, 10s, 5m, 1h)", value);
                return -EINVAL;
        }
        return 0;
}

static const char *duration_format(const struct opt_def *d, const void *v, char *buf, size_t size)
{
        (void)d;
        return format_duration(*(const usec_t *)v, buf, size);
}

/* ", LO to HI", ", at least LO" or "" into buf: d's range as --help shows it, its bounds written
 * by text (help_min and help_max in place of theirs). */
static void range_help(const struct opt_def *d, const char *(*text)(uint64_t, char *, size_t),
                       char *buf, size_t size)
{
        char lb[64], hb[64];
        bool has_lo = d->min || d->help_min, has_hi = d->max || d->help_max;
        const char *lo, *hi;

        buf[0] = 0;
        if (!has_lo && !has_hi)
                return;
        lo = d->help_min ? d->help_min : text(d->min, lb, sizeof lb);
        hi = d->help_max ? d->help_max : text(d->max, hb, sizeof hb);
        if (has_hi)
                snprintf(buf, size, ", %s to %s", lo, hi);
        else
                snprintf(buf, size, ", at least %s", lo);
}

static const char *duration_text(uint64_t v, char *buf, size_t size)
{
        return format_duration(v, buf, size);
}

static const char *duration_help(const struct opt_def *d, char *buf, size_t size)
{
        char def[32], range[160];

        format_duration(d->def, def, sizeof def);
        range_help(d, duration_text, range, sizeof range);
        snprintf(buf, size, "%s%s", def, range);
        return buf;
}

/* min and max (0: none), the table's. */
static int duration_check(const struct opt_def *d, const void *v, char *why, size_t whysz)
{
        usec_t u = *(const usec_t *)v;
        char val[32], lo[32], hi[32];

        if (in_range(d, u))
                return 0;
        format_duration(u, val, sizeof val);
        format_duration(d->min, lo, sizeof lo);
        if (!d->max)
                snprintf(why, whysz, "%s (expected at least %s)", val, lo);
        else
                snprintf(why, whysz, "%s (expected %s to %s)", val, lo,
                         format_duration(d->max, hi, sizeof hi));
        return -EINVAL;
}

static const struct opt_type_ops duration_ops = {
    .size = sizeof(usec_t),
    .parse = duration_parse,
    .format = duration_format,
    .set_default = usec_default,
    .help = duration_help,
    .check = duration_check,
};

/* The one range of the option, from its table entry, checked as it is parsed: the same message
 * for a flag and a config line, and in --help. */
static int uint_parse(const struct opt_def *d, const char *value, const void *vals, size_t n,
                      void *v, char *why, size_t whysz)
{
        uint64_t u;

        (void)vals, (void)n;
        if (parse_u64(value, &u) < 0 || u < d->min || u > d->max) {
                snprintf(why, whysz, "\"%s\" (expected a number from %" PRIu64 " to %" PRIu64 ")",
                         value, d->min, d->max);
                return -EINVAL;
        }
        *(unsigned *)v = (unsigned)u;
        return 0;
}

static const char *uint_format(const struct opt_def *d, const void *v, char *buf, size_t size)
{
        (void)d;
        snprintf(buf, size, "%u", *(const unsigned *)v);
        return buf;
}

static bool uint_default(const struct opt_def *d, void *v)
{
        *(unsigned *)v = (unsigned)d->def;
        return true;
}

static const char *uint_help(const struct opt_def *d, char *buf, size_t size)
{
        snprintf(buf, size, "%" PRIu64 ", %" PRIu64 " to %" PRIu64, d->def, d->min, d->max);
        return buf;
}

static const struct opt_type_ops uint_ops = {
    .size = sizeof(unsigned),
    .parse = uint_parse,
    .format = uint_format,
    .set_default = uint_default,
    .help = uint_help,
};

static int size_parse(const struct opt_def *d, const char *value, const void *vals, size_t n,
                      void *v, char *why, size_t whysz)
{
        (void)d, (void)vals, (void)n;
        if (parse_size(value, v) < 0 || *(uint64_t *)v == 0) {
                snprintf(why, whysz, "\"%s\" (expected a size in bytes such as 4096, 8k or 1M)",
                         value);
                return -EINVAL;
        }
        return 0;
}

static const char *size_format(const struct opt_def *d, const void *v, char *buf, size_t size)
{
        (void)d;
        snprintf(buf, size, "%" PRIu64, *(const uint64_t *)v);
        return buf;
}

/* A size as the messages write it: 1 byte, 8k, 16M. */
static const char *size_text(uint64_t v, char *buf, size_t size)
{
        if (v && v % (1024 * 1024) == 0)
                snprintf(buf, size, "%" PRIu64 "M", v / (1024 * 1024));
        else if (v && v % 1024 == 0)
                snprintf(buf, size, "%" PRIu64 "k", v / 1024);
        else
                snprintf(buf, size, "%" PRIu64 " byte%s", v, v == 1 ? "" : "s");
        return buf;
}

static const char *size_help(const struct opt_def *d, char *buf, size_t size)
{
        char range[160];

        range_help(d, size_text, range, sizeof range);
        snprintf(buf, size, "%" PRIu64 "%s", d->def, range);
        return buf;
}

static int size_check(const struct opt_def *d, const void *v, char *why, size_t whysz)
{
        uint64_t u = *(const uint64_t *)v;
        char lo[32], hi[32];

        if (in_range(d, u))
                return 0;
        snprintf(why, whysz, "%" PRIu64 " (expected %s to %s)", u, size_text(d->min, lo, sizeof lo),
                 size_text(d->max, hi, sizeof hi));
        return -EINVAL;
}

static const struct opt_type_ops size_ops = {
    .size = sizeof(uint64_t),
    .parse = size_parse,
    .format = size_format,
    .set_default = usec_default, /* uint64_t too */
    .help = size_help,
    .check = size_check,
};

/* "a, b or c" of an enum's names. */
static const char *names_list(const char *const *names, char *buf, size_t size)
{
        size_t n = 0, o = 0;

        while (names[n])
                n++;
        buf[0] = 0;
        for (size_t i = 0; i < n && o < size; i++)
                o += (size_t)snprintf(buf + o, size - o, "%s%s",
                                      i == 0 ? "" : (i + 1 == n ? " or " : ", "), names[i]);
        return buf;
}

static int enum_parse(const struct opt_def *d, const char *value, const void *vals, size_t n,
                      void *v, char *why, size_t whysz)
{
        char list[256];

        (void)vals, (void)n;
        for (int i = 0; d->names[i]; i++)
                if (strcmp(value, d->names[i]) == 0) {
                        *(int *)v = i;
                        return 0;
                }
        snprintf(why, whysz, "\"%s\" (expected %s)", value,
                 names_list(d->names, list, sizeof list));
        return -EINVAL;
}

static const char *enum_format(const struct opt_def *d, const void *v, char *buf, size_t size)
{
        (void)buf, (void)size;
        return d->names[*(const int *)v];
}

static bool enum_default(const struct opt_def *d, void *v)
{
        *(int *)v = (int)d->def;
        return true;
}

static const char *enum_help(const struct opt_def *d, char *buf, size_t size)
{
        (void)buf, (void)size;
        return d->names[d->def];
}

static const struct opt_type_ops enum_ops = {
    .size = sizeof(int),
    .parse = enum_parse,
    .format = enum_format,
    .set_default = enum_default,
    .help = enum_help,
};

const struct opt_type_ops *opt_type_ops(const struct opt_def *d)
{
        /* OPT_COLLECTORS: a bool per switch; OPT_FRAGMENT: no value */
        static const struct opt_type_ops *const types[] = {
            [OPT_BOOL] = &bool_ops,         [OPT_STRING] = &string_ops,  [OPT_LIST] = &string_ops,
            [OPT_DURATION] = &duration_ops, [OPT_UINT] = &uint_ops,      [OPT_SIZE] = &size_ops,
            [OPT_ENUM] = &enum_ops,         [OPT_COLLECTORS] = &bool_ops};

        if (d->type == OPT_CUSTOM)
                return d->custom;
        return (size_t)d->type < ARRAY_SIZE(types) ? types[d->type] : NULL;
}

bool opt_is_switch(const struct opt_def *d)
{
        return opt_type_ops(d) == &bool_ops;
}

bool opt_is_negatable(const struct opt_def *d)
{
        return opt_is_switch(d) && !(d->type == OPT_BOOL && (d->flags & OPT_CLI_ONLY));
}

bool opt_is_repeatable(const struct opt_def *d)
{
        return d->count_offset != 0;
}

/* The storage. */

static void *at(const struct opt_def *d, const void *base)
{
        return (char *)base + d->offset;
}

static size_t *count_at(const struct opt_def *d, const void *base)
{
        return (size_t *)((char *)base + d->count_offset);
}

/* The values of d in base: their first, and their number in *n. */
static char *values(const struct opt_def *d, const void *base, size_t *n)
{
        if (d->count_offset) {
                *n = *count_at(d, base);
                return *(char **)at(d, base);
        }
        *n = 0;
        while (d->subs && d->subs[*n])
                (*n)++;
        if (!d->subs)
                *n = 1;
        return at(d, base);
}

void opt_set_default(const struct opt_def *d, void *base)
{
        const struct opt_type_ops *t = opt_type_ops(d);
        size_t n;
        char *v = values(d, base, &n);

        if (d->subs) {
                for (size_t i = 0; i < n; i++)
                        ((bool *)v)[i] = (d->def >> i) & 1;
        } else if (d->count_offset) {
                _cleanup_free_ void *one = xcalloc(1, t->size);
                char **arr = at(d, base);

                if (!t->set_default || !t->set_default(d, one))
                        return;
                *arr = xrealloc(*arr, (n + 1) * t->size);
                memcpy(*arr + n * t->size, one, t->size);
                (*count_at(d, base))++;
        } else if (t->set_default) {
                t->set_default(d, v);
        }
}

int opt_parse(const struct opt_def *d, void *base, size_t sub, const char *value, bool negated,
              char *why, size_t whysz)
{
        const struct opt_type_ops *t = opt_type_ops(d);
        _cleanup_free_ void *one = xcalloc(1, t->size);
        size_t n;
        char *v = values(d, base, &n);

        if (opt_is_switch(d) && negated && value) {
                bool b;

                /* --no-NAME=true is --NAME=false, as the config file's "no-NAME = true" */
                if (parse_bool(value, &b) < 0)
                        return bool_refuse(value, why, whysz);
                value = b ? "false" : "true";
        }
        if (opt_is_switch(d) && !value)
                value = negated ? "false" : "true";
        if (t->parse(d, value, d->count_offset ? v : NULL, d->count_offset ? n : 0, one, why,
                     whysz) < 0)
                return -EINVAL;
        if (d->count_offset) {
                char **arr = at(d, base);

                *arr = xrealloc(*arr, (n + 1) * t->size);
                memcpy(*arr + n * t->size, one, t->size);
                (*count_at(d, base))++;
                return 0;
        }
        if (t->free)
                t->free(v + sub * t->size);
        memcpy(v + sub * t->size, one, t->size);
        return 0;
}

int opt_check(const struct opt_def *d, const void *base, char *why, size_t whysz)
{
        const struct opt_type_ops *t = opt_type_ops(d);
        size_t n;
        const char *v = values(d, base, &n);

        for (size_t i = 0; t->check && i < n; i++)
                if (t->check(d, v + i * t->size, why, whysz) < 0)
                        return -EINVAL;
        return 0;
}

void opt_clear(const struct opt_def *d, void *base)
{
        const struct opt_type_ops *t = opt_type_ops(d);
        size_t n;
        char *v = values(d, base, &n);

        if (t->free)
                for (size_t i = 0; i < n; i++) {
                        t->free(v + i * t->size);
                        memset(v + i * t->size, 0, t->size);
                }
        if (d->count_offset) {
                free(v);
                *(void **)at(d, base) = NULL;
                *count_at(d, base) = 0;
        }
}

bool opt_equal(const struct opt_def *d, const void *a, const void *b)
{
        const struct opt_type_ops *t = opt_type_ops(d);
        size_t na, nb;
        const char *x = values(d, a, &na), *y = values(d, b, &nb);

        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (t->equal ? !t->equal(x + i * t->size, y + i * t->size)
                             : memcmp(x + i * t->size, y + i * t->size, t->size) != 0)
                        return false;
        return true;
}

void opt_copy(const struct opt_def *d, void *dst, const void *src)
{
        const struct opt_type_ops *t = opt_type_ops(d);
        size_t n, m;
        const char *s = values(d, src, &n);
        char *v;

        opt_clear(d, dst);
        if (d->count_offset) {
                *(void **)at(d, dst) = xcalloc(n + 1, t->size);
                *count_at(d, dst) = n;
        }
        v = values(d, dst, &m);
        for (size_t i = 0; i < n; i++)
                if (t->copy)
                        t->copy(v + i * t->size, s + i * t->size);
                else
                        memcpy(v + i * t->size, s + i * t->size, t->size);
}

void opt_print(const struct opt_def *d, const void *base, FILE *out)
{
        const struct opt_type_ops *t = opt_type_ops(d);
        size_t n;
        const char *v = values(d, base, &n);

        for (size_t i = 0; i < n; i++) {
                char buf[4200];
                const char *text = t->format(d, v + i * t->size, buf, sizeof buf);

                if (!text && !d->count_offset && !d->subs && d->unset)
                        text = d->unset(base);
                if (!text)
                        continue;
                if (d->subs)
                        fprintf(out, "%s.%s = %s\n", d->name, d->subs[i], text);
                else
                        fprintf(out, "%s = %s\n", d->name, text);
        }
}

const char *opt_help_default(const struct opt_def *d, char *buf, size_t size)
{
        const struct opt_type_ops *t = opt_type_ops(d);
        char text[512];
        const char *v;

        buf[0] = 0;
        if (d->help_default) {
                snprintf(buf, size, " (default%s)", d->help_default);
                return buf;
        }
        v = t && t->help ? t->help(d, text, sizeof text) : NULL;
        if (v)
                snprintf(buf, size, " (default %s%s%s%s)", d->def_env ? "$" : "",
                         d->def_env ? d->def_env : "", d->def_env ? " or " : "", v);
        return buf;
}
