/* Flags and the config file (SPEC §2): defaults < config file < command line, driven by the
 * option table (options_table.c). Parsing flags and file, defaults, checks, --help, the dump,
 * freeing, the reload and the comparison of two parses are written here once, by storage type,
 * over the table. Over 800 lines and one file because all of them share the storage helpers
 * (field(), clear_value(), format_value()) that nothing else should see. */
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fsroot.h"

/* Every option (options_entry()): the daemon's table with each OPT_FRAGMENT replaced by the
 * entries of its collector, whose values are in that collector's options blob (owner: its
 * registry id; -1: the daemon's own, in struct dp_options). d is first: an opt_def of this
 * array tells its entry. */
struct entry {
        struct opt_def d;
        int owner;
};

static struct entry *entries;
static size_t n_entries;

static const struct collector_def *fragment_of(const struct opt_def *d, int *id)
{
        for (int c = 0; c < (int)registry_count(); c++)
                if (strcmp(collector_defs[c]->name, d->name) == 0) {
                        *id = c;
                        return collector_defs[c];
                }
        return NULL;
}

/* The options of collector id, or (cmd) its one-shot commands' flags. */
static void add_fragment(int id, int cmd)
{
        const struct collector_def *c = collector_defs[id];
        size_t n = cmd ? c->n_command_options : c->n_options;

        for (size_t k = 0; k < n; k++) {
                struct entry *e = &entries[n_entries++];
                *e = (struct entry){.d = cmd ? c->command_options[k] : c->options[k], .owner = id};
                if (e->d.reload == OPT_RELOAD)
                        e->d.parts |= OPT_PART_COLLECTOR(id);
        }
}

/* Built once, at the first use (main thread, before any other). A collector whose fragment has
 * no mark in the table gets its options before the collectors' switches (its commands' flags,
 * marked by an OPT_CLI_ONLY fragment, before those). */
static void entries_init(void)
{
        /* [1]: the commands' flags; 1: the table marks them, 2: placed */
        unsigned char mark[2][REGISTRY_MAX] = {{0}};
        size_t n = options_table_size;
        int id;

        if (entries)
                return;
        for (size_t c = 0; c < registry_count(); c++)
                n += collector_defs[c]->n_options + collector_defs[c]->n_command_options;
        entries = xcalloc(n, sizeof(*entries));
        for (size_t i = 0; i < options_table_size; i++)
                if (options_table[i].type == OPT_FRAGMENT && fragment_of(&options_table[i], &id))
                        mark[!!(options_table[i].flags & OPT_CLI_ONLY)][id] = 1;
        for (size_t i = 0; i < options_table_size; i++) {
                const struct opt_def *d = &options_table[i];
                int cmd = !!(d->flags & OPT_CLI_ONLY);

                if (d->type == OPT_COLLECTORS)
                        for (int k = 1; k >= 0; k--)
                                for (int c = 0; c < (int)registry_count(); c++)
                                        if (!mark[k][c]) {
                                                add_fragment(c, k);
                                                mark[k][c] = 2;
                                        }
                if (d->type != OPT_FRAGMENT)
                        entries[n_entries++] = (struct entry){.d = *d, .owner = -1};
                else if (fragment_of(d, &id) && mark[cmd][id] == 1) {
                        add_fragment(id, cmd);
                        mark[cmd][id] = 2;
                }
        }
}

size_t options_count(void)
{
        entries_init();
        return n_entries;
}

const struct opt_def *options_entry(size_t i)
{
        entries_init();
        return &entries[i].d;
}

/* Flags are numbered: the entries, then one per collector (for "given on the command line" and
 * "list emptied" marks). */
#define N_ENTRIES n_entries
#define N_FLAGS   (N_ENTRIES + registry_count())

static void fail(char *err, size_t errsz, const char *fmt, ...) _printf_(3, 4);
static void fail(char *err, size_t errsz, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errsz, fmt, ap);
        va_end(ap);
}

int options_device_filter(const struct dp_options *o, struct namefilter **ret, char *err,
                          size_t errsz)
{
        const char *exclude = o->device_exclude;

        /* node_exporter's rule: the default exclude applies only when no include is given. */
        if (!exclude && !o->device_include)
                exclude = DEFAULT_DEVICE_EXCLUDE;
        return namefilter_new(o->device_include, exclude, ret, err, errsz);
}

/* The struct d's offsets are into: o, or its owner's options blob. */
static void *base_of(const struct dp_options *o, const struct opt_def *d)
{
        const struct entry *e = (const struct entry *)d;

        return e->owner < 0 ? (void *)o : o->collector_opts[e->owner];
}

static void *field(const struct dp_options *o, const struct opt_def *d)
{
        return (char *)base_of(o, d) + d->offset;
}

static size_t *count_of(const struct dp_options *o, const struct opt_def *d)
{
        return (size_t *)((char *)base_of(o, d) + d->count_offset);
}

/* Element k of an OPT_CUSTOM array. */
static void *elem_of(const struct dp_options *o, const struct opt_def *d, size_t k)
{
        return *(char **)field(o, d) + k * d->custom->size;
}

static void set_string(char **dst, const char *v)
{
        free(*dst);
        *dst = v ? xstrdup(v) : NULL;
}

static void list_add(const struct dp_options *o, const struct opt_def *d, const char *v)
{
        char ***list = field(o, d);
        size_t *n = count_of(o, d);

        *list = xrealloc(*list, (*n + 1) * sizeof(char *));
        (*list)[(*n)++] = xstrdup(v);
}

/* Parses one more element of the OPT_CUSTOM option d. */
static int custom_add(struct dp_options *o, const struct opt_def *d, const char *value,
                      const char *where, char *err, size_t errsz)
{
        char why[4400];
        void **arr = field(o, d);
        size_t *n = count_of(o, d);
        void *elem = xcalloc(1, d->custom->size);

        if (d->custom->parse(value, *arr, *n, elem, why, sizeof why) < 0) {
                fail(err, errsz, "%sinvalid value for %s: %s", where, d->name, why);
                free(elem);
                return -EINVAL;
        }
        *arr = xrealloc(*arr, (*n + 1) * d->custom->size);
        memcpy((char *)*arr + *n * d->custom->size, elem, d->custom->size);
        (*n)++;
        free(elem);
        return 0;
}

/* Frees the value of d in o and sets it to nothing (a number keeps its value). */
static void clear_value(struct dp_options *o, const struct opt_def *d)
{
        switch (d->type) {
        case OPT_STRING:
                set_string(field(o, d), NULL);
                break;
        case OPT_LIST: {
                char ***list = field(o, d);
                for (size_t i = 0; i < *count_of(o, d); i++)
                        free((*list)[i]);
                free(*list);
                *list = NULL;
                *count_of(o, d) = 0;
                break;
        }
        case OPT_CUSTOM:
                for (size_t i = 0; i < *count_of(o, d); i++)
                        d->custom->free(elem_of(o, d, i));
                free(*(void **)field(o, d));
                *(void **)field(o, d) = NULL;
                *count_of(o, d) = 0;
                break;
        default:
                break;
        }
}

/* The size of a value stored in place (every type but strings and lists). */
static size_t scalar_size(const struct opt_def *d)
{
        switch (d->type) {
        case OPT_BOOL:
                return sizeof(bool);
        case OPT_DURATION:
                return sizeof(usec_t);
        case OPT_UINT:
                return sizeof(unsigned);
        case OPT_SIZE:
                return sizeof(uint64_t);
        case OPT_ENUM:
                return sizeof(int);
        case OPT_COLLECTORS:
                return sizeof(bool[REGISTRY_MAX]);
        default:
                return 0;
        }
}

static bool str_equal(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}

bool options_equal(const struct opt_def *d, const struct dp_options *a, const struct dp_options *b)
{
        switch (d->type) {
        case OPT_STRING:
                return str_equal(*(char **)field(a, d), *(char **)field(b, d));
        case OPT_LIST: {
                char **x = *(char **const *)field(a, d), **y = *(char **const *)field(b, d);
                if (*count_of(a, d) != *count_of(b, d))
                        return false;
                for (size_t i = 0; i < *count_of(a, d); i++)
                        if (strcmp(x[i], y[i]) != 0)
                                return false;
                return true;
        }
        case OPT_CUSTOM:
                if (*count_of(a, d) != *count_of(b, d))
                        return false;
                for (size_t i = 0; i < *count_of(a, d); i++)
                        if (!d->custom->equal(elem_of(a, d, i), elem_of(b, d, i)))
                                return false;
                return true;
        default:
                return memcmp(field(a, d), field(b, d), scalar_size(d)) == 0;
        }
}

bool options_same(const struct dp_options *a, const struct dp_options *b, unsigned flags)
{
        entries_init();
        for (size_t i = 0; i < N_ENTRIES; i++)
                if ((entries[i].d.flags & flags) == flags && !options_equal(&entries[i].d, a, b))
                        return false;
        return true;
}

/* Replaces the value of d in dst by a copy of src's. */
static void copy_value(struct dp_options *dst, const struct dp_options *src,
                       const struct opt_def *d)
{
        switch (d->type) {
        case OPT_STRING:
                set_string(field(dst, d), *(char **)field(src, d));
                break;
        case OPT_LIST:
                clear_value(dst, d);
                for (size_t i = 0; i < *count_of(src, d); i++)
                        list_add(dst, d, (*(char **const *)field(src, d))[i]);
                break;
        case OPT_CUSTOM:
                clear_value(dst, d);
                *(void **)field(dst, d) = xcalloc(*count_of(src, d) + 1, d->custom->size);
                for (size_t i = 0; i < *count_of(src, d); i++)
                        d->custom->copy(elem_of(dst, d, i), elem_of(src, d, i));
                *count_of(dst, d) = *count_of(src, d);
                break;
        default:
                memcpy(field(dst, d), field(src, d), scalar_size(d));
                break;
        }
}

size_t options_reload(struct dp_options *cur, const struct dp_options *next, unsigned *ret_parts)
{
        unsigned parts = 0;
        size_t restart = 0;

        entries_init();

        for (size_t i = 0; i < N_ENTRIES; i++) {
                const struct opt_def *d = &entries[i].d;

                if (options_equal(d, cur, next))
                        continue;
                if (d->reload == OPT_RELOAD) {
                        copy_value(cur, next, d);
                        parts |= d->parts;
                } else if (d->reload == OPT_RESTART) {
                        restart++;
                }
        }
        if (ret_parts)
                *ret_parts = parts;
        return restart;
}

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

/* Applies one value of the option d (sub: which collector of OPT_COLLECTORS). */
static int apply(struct dp_options *o, const struct opt_def *d, int sub, const char *value,
                 bool negated, const char *where, char *err, size_t errsz)
{
        void *p = field(o, d);
        char why[256];
        int r;

        if (d->type == OPT_BOOL || d->type == OPT_COLLECTORS) {
                bool coll = d->type == OPT_COLLECTORS, b = !negated;
                if (value && (negated || parse_bool(value, &b) < 0)) {
                        fail(err, errsz,
                             "%sinvalid value for %s%s: \"%s\" (expected true or false)", where,
                             coll ? "collector." : "", coll ? collector_defs[sub]->name : d->name,
                             value);
                        return -EINVAL;
                }
                ((bool *)p)[coll ? sub : 0] = b;
                return 0;
        }
        if (negated) {
                fail(err, errsz, "%s--no-%s: only on/off flags can be negated", where, d->name);
                return -EINVAL;
        }
        if (!value) {
                fail(err, errsz, "%s%s needs a value", where, d->name);
                return -EINVAL;
        }
        switch (d->type) {
        case OPT_STRING:
        case OPT_LIST:
                if (d->type == OPT_STRING && !*value && !d->allow_empty) {
                        fail(err, errsz, "%sinvalid value for %s: empty", where, d->name);
                        return -EINVAL;
                }
                if (d->check && d->check(value, why, sizeof why) < 0) {
                        fail(err, errsz, "%sinvalid value for %s: \"%s\" (%s)", where, d->name,
                             value, why);
                        return -EINVAL;
                }
                if (d->type == OPT_STRING)
                        set_string(p, value);
                else
                        list_add(o, d, value);
                return 0;
        case OPT_DURATION: {
                usec_t u;
                r = parse_duration(value, &u);
                if (r < 0 || u == 0) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (expected a positive duration such "
                             "as 500ms, 10s, 5m, 1h)",
                             where, d->name, value);
                        return -EINVAL;
                }
                *(usec_t *)p = u;
                return 0;
        }
        case OPT_UINT: {
                uint64_t v;
                /* The one range of the option, from its table entry: the same message for a
                 * flag and a config line, and in --help. */
                if (parse_u64(value, &v) < 0 || v < d->min || v > d->max) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (expected a number from %" PRIu64
                             " to %" PRIu64 ")",
                             where, d->name, value, d->min, d->max);
                        return -EINVAL;
                }
                *(unsigned *)p = (unsigned)v;
                return 0;
        }
        case OPT_SIZE: {
                uint64_t v;
                if (parse_size(value, &v) < 0 || v == 0) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (expected a size in bytes such as "
                             "4096, 8k or 1M)",
                             where, d->name, value);
                        return -EINVAL;
                }
                *(uint64_t *)p = v;
                return 0;
        }
        case OPT_ENUM:
                for (int i = 0; d->names[i]; i++)
                        if (strcmp(value, d->names[i]) == 0) {
                                *(int *)p = i;
                                return 0;
                        }
                fail(err, errsz, "%sinvalid value for %s: \"%s\" (expected %s)", where, d->name,
                     value, names_list(d->names, why, sizeof why));
                return -EINVAL;
        case OPT_CUSTOM:
                return custom_add(o, d, value, where, err, errsz);
        default:
                return -EINVAL;
        }
}

/* Finds a flag by name; sets *negated for "no-" forms and *sub to the collector of a
 * --collector.NAME. Returns its table index or -1. */
static int lookup(const char *name, size_t len, bool allow_no, bool *negated, int *sub)
{
        *negated = false;
        *sub = -1;
        for (int pass = 0; pass < 2; pass++) {
                for (size_t i = 0; i < N_ENTRIES; i++) {
                        const struct opt_def *d = &entries[i].d;
                        size_t l = strlen(d->name);

                        if (d->type != OPT_COLLECTORS) {
                                if (l == len && strncmp(d->name, name, len) == 0)
                                        return (int)i;
                                continue;
                        }
                        if (len <= l + 1 || strncmp(d->name, name, l) != 0 || name[l] != '.')
                                continue;
                        for (int c = 0; c < (int)registry_count(); c++)
                                if (strlen(collector_defs[c]->name) == len - l - 1 &&
                                    strncmp(collector_defs[c]->name, name + l + 1, len - l - 1) ==
                                        0) {
                                        *sub = c;
                                        return (int)i;
                                }
                }
                if (!allow_no || len < 3 || strncmp(name, "no-", 3) != 0)
                        return -1;
                name += 3;
                len -= 3;
                *negated = true;
        }
        return -1;
}

/* The flag's number: its entry, or one per collector past the entries. */
static size_t flag_no(int idx, int sub)
{
        return sub >= 0 ? N_ENTRIES + (size_t)sub : (size_t)idx;
}

static char *trim(char *s)
{
        char *e;
        while (*s == ' ' || *s == '\t')
                s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
                *--e = 0;
        return s;
}

/* Config file: "name = value" lines, '#' comments, repeated names for repeatable options. */
static int parse_config(struct dp_options *o, const char *path, const bool *from_cli, char *err,
                        size_t errsz)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_free_ bool *reset = xcalloc(N_FLAGS, sizeof(bool));
        size_t len;
        char *line;
        unsigned lineno = 0;
        int r;

        r = read_file_at(AT_FDCWD, path, 1 << 20, &buf, &len);
        if (r < 0) {
                fail(err, errsz, "cannot read config file %s: %s", path, strerror(-r));
                return r;
        }
        if (strlen(buf) != len) {
                fail(err, errsz, "config file %s: contains a NUL byte", path);
                return -EINVAL;
        }
        for (char *next = buf; next && next < buf + len;) {
                char *nl = strchr(next, '\n');
                char where[300], *eq, *key, *value;
                const struct opt_def *d;
                bool negated;
                int idx, sub;
                size_t f;

                if (nl)
                        *nl = 0;
                line = next;
                next = nl ? nl + 1 : NULL;
                lineno++;
                snprintf(where, sizeof where, "%s:%u: ", path, lineno);
                key = trim(line);
                if (!*key || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (!eq) {
                        fail(err, errsz, "%sexpected \"name = value\", got \"%s\"", where, key);
                        return -EINVAL;
                }
                *eq = 0;
                value = trim(eq + 1);
                key = trim(key);
                if (strncmp(key, "--", 2) == 0)
                        key += 2;
                if (value[0] == '"' && strlen(value) >= 2 && value[strlen(value) - 1] == '"') {
                        value[strlen(value) - 1] = 0;
                        value++;
                }
                idx = lookup(key, strlen(key), true, &negated, &sub);
                if (idx < 0) {
                        fail(err, errsz, "%sunknown option \"%s\"", where, key);
                        return -EINVAL;
                }
                d = &entries[idx].d;
                if (negated) {
                        /* a flag's name, as the file's lines are: "no-NAME = true" is "NAME =
                         * false" */
                        bool b;

                        if (d->type != OPT_BOOL && d->type != OPT_COLLECTORS) {
                                fail(err, errsz, "%s%s: only on/off options can be negated", where,
                                     key);
                                return -EINVAL;
                        }
                        if (parse_bool(value, &b) < 0) {
                                fail(err, errsz,
                                     "%sinvalid value for %s: \"%s\" (expected true or false)",
                                     where, key, value);
                                return -EINVAL;
                        }
                        value = b ? "false" : "true";
                }
                if (d->flags & OPT_CLI_ONLY) {
                        fail(err, errsz, "%s%s can only be given on the command line", where, key);
                        return -EINVAL;
                }
                f = flag_no(idx, sub);
                if (from_cli[f])
                        continue; /* flags win */
                if (!reset[f]) {
                        /* values from a higher source replace a list's lower ones */
                        clear_value(o, d);
                        reset[f] = true;
                }
                r = apply(o, d, sub, value, false, where, err, errsz);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void set_defaults(struct dp_options *o)
{
        memset(o, 0, sizeof(*o));
        for (size_t c = 0; c < registry_count(); c++)
                if (collector_defs[c]->options_size)
                        o->collector_opts[c] = xcalloc(1, collector_defs[c]->options_size);
        for (size_t i = 0; i < N_ENTRIES; i++) {
                const struct opt_def *d = &entries[i].d;
                void *p = field(o, d);

                switch (d->type) {
                case OPT_BOOL:
                        *(bool *)p = d->def != 0;
                        break;
                case OPT_STRING: {
                        const char *env = d->def_env ? getenv(d->def_env) : NULL;
                        /* systemd's StateDirectory= may list several, separated by ':'; the
                         * first is ours. */
                        if (env && env[0] == '/') {
                                *(char **)p = xstrdup(env);
                                (*(char **)p)[strcspn(env, ":")] = 0;
                        } else if (d->def_str)
                                *(char **)p = xstrdup(d->def_str);
                        break;
                }
                case OPT_LIST:
                        if (d->def_str)
                                list_add(o, d, d->def_str);
                        break;
                case OPT_DURATION:
                        *(usec_t *)p = d->def;
                        break;
                case OPT_UINT:
                        *(unsigned *)p = (unsigned)d->def;
                        break;
                case OPT_SIZE:
                        *(uint64_t *)p = d->def;
                        break;
                case OPT_ENUM:
                        *(int *)p = (int)d->def;
                        break;
                case OPT_COLLECTORS:
                        for (size_t c = 0; c < registry_count(); c++)
                                ((bool *)p)[c] = collector_defs[c]->default_enabled;
                        break;
                case OPT_CUSTOM:
                case OPT_FRAGMENT:
                        break; /* none (canary.path: the state directory, in validate()) */
                }
        }
}

/* A size as the messages write it: 1 byte, 8k, 16M. */
static const char *format_size(uint64_t v, char *buf, size_t size)
{
        if (v && v % (1024 * 1024) == 0)
                snprintf(buf, size, "%" PRIu64 "M", v / (1024 * 1024));
        else if (v && v % 1024 == 0)
                snprintf(buf, size, "%" PRIu64 "k", v / 1024);
        else
                snprintf(buf, size, "%" PRIu64 " byte%s", v, v == 1 ? "" : "s");
        return buf;
}

/* The range of one option (its min and max), once flags and file are read. */
static int check_range(const struct dp_options *o, const struct opt_def *d, char *err, size_t errsz)
{
        char v[32], lo[32], hi[32];
        void *p = field(o, d);

        if (!d->min && !d->max)
                return 0;
        switch (d->type) {
        case OPT_DURATION: {
                usec_t u = *(usec_t *)p;
                if (u >= d->min && (!d->max || u <= d->max))
                        return 0;
                format_duration(u, v, sizeof v);
                format_duration(d->min, lo, sizeof lo);
                if (!d->max) {
                        fail(err, errsz, "invalid value for %s: %s (expected at least %s)", d->name,
                             v, lo);
                        return -EINVAL;
                }
                format_duration(d->max, hi, sizeof hi);
                break;
        }
        case OPT_SIZE: {
                uint64_t u = *(uint64_t *)p;
                if (u >= d->min && (!d->max || u <= d->max))
                        return 0;
                snprintf(v, sizeof v, "%" PRIu64, u);
                format_size(d->min, lo, sizeof lo);
                format_size(d->max, hi, sizeof hi);
                break;
        }
        default:
                return 0;
        }
        fail(err, errsz, "invalid value for %s: %s (expected %s to %s)", d->name, v, lo, hi);
        return -EINVAL;
}

/* Every option's range, then the checks that involve several options. */
static int validate(struct dp_options *o, char *err, size_t errsz)
{
        char a[32], b[32];
        int r;

        for (size_t i = 0; i < N_ENTRIES; i++) {
                r = check_range(o, &entries[i].d, err, errsz);
                if (r < 0)
                        return r;
        }
        /* the collectors' own checks and what their options take from the daemon's (the
         * diskstats window, the canary's default target) */
        for (size_t c = 0; c < registry_count(); c++) {
                if (!collector_defs[c]->complete)
                        continue;
                r = collector_defs[c]->complete(o->collector_opts[c], o->state_dir,
                                                o->round_interval, err, errsz);
                if (r < 0)
                        return r;
        }
        if (o->request_timeout < o->header_timeout || o->request_timeout > 3600 * USEC_PER_SEC) {
                fail(err, errsz,
                     "invalid value for web.request-timeout: %s (expected web.read-header-timeout "
                     "%s to 1h)",
                     format_duration(o->request_timeout, a, sizeof a),
                     format_duration(o->header_timeout, b, sizeof b));
                return -EINVAL;
        }
        return 0;
}

int options_parse(int argc, char **argv, struct dp_options *ret, char *err, size_t errsz)
{
        _cleanup_free_ bool *from_cli = xcalloc(options_count() + registry_count(), sizeof(bool));
        struct dp_options o;
        int r;

        set_defaults(&o);
        for (int i = 1; i < argc; i++) {
                const char *arg = argv[i], *eq, *value = NULL;
                const struct opt_def *d;
                char where[16] = "";
                bool negated;
                size_t nlen, f;
                int idx, sub;

                if (strcmp(arg, "-h") == 0)
                        arg = "--help";
                if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
                        fail(err, errsz, "unexpected argument \"%s\" (flags start with --)", arg);
                        goto fail;
                }
                arg += 2;
                eq = strchr(arg, '=');
                nlen = eq ? (size_t)(eq - arg) : strlen(arg);
                idx = lookup(arg, nlen, true, &negated, &sub);
                if (idx < 0) {
                        fail(err, errsz, "unknown flag --%.*s (see --help)", (int)nlen, arg);
                        goto fail;
                }
                d = &entries[idx].d;
                if (eq)
                        value = eq + 1;
                else if (d->type != OPT_BOOL && d->type != OPT_COLLECTORS && !negated) {
                        if (i + 1 >= argc) {
                                fail(err, errsz, "flag --%.*s needs a value", (int)nlen, arg);
                                goto fail;
                        }
                        value = argv[++i];
                }
                f = flag_no(idx, sub);
                if (!from_cli[f])
                        clear_value(&o, d); /* flags replace a list's defaults and file values */
                from_cli[f] = true;
                r = apply(&o, d, sub, value, negated, where, err, errsz);
                if (r < 0)
                        goto fail;
        }
        if (o.help || o.version) {
                *ret = o;
                return 0;
        }
        if (o.config_file) {
                r = parse_config(&o, o.config_file, from_cli, err, errsz);
                if (r < 0)
                        goto fail_r;
        }
        r = validate(&o, err, errsz);
        if (r < 0)
                goto fail_r;
        *ret = o;
        return 0;
fail:
        r = -EINVAL;
fail_r:
        options_free(&o);
        return r;
}

void options_free(struct dp_options *o)
{
        entries_init();
        for (size_t i = 0; i < N_ENTRIES; i++)
                if (base_of(o, &entries[i].d))
                        clear_value(o, &entries[i].d);
        for (size_t c = 0; c < registry_count(); c++)
                free(o->collector_opts[c]);
        memset(o, 0, sizeof(*o));
}

/* The text of a value as the dump and --help write it; NULL when d has none in o. */
static const char *format_value(const struct dp_options *o, const struct opt_def *d, char *buf,
                                size_t size)
{
        void *p = field(o, d);

        switch (d->type) {
        case OPT_BOOL:
                return *(bool *)p ? "true" : "false";
        case OPT_STRING:
                return *(char **)p ? *(char **)p : (d->unset ? d->unset(base_of(o, d)) : NULL);
        case OPT_DURATION:
                return format_duration(*(usec_t *)p, buf, size);
        case OPT_UINT:
                snprintf(buf, size, "%u", *(unsigned *)p);
                return buf;
        case OPT_SIZE:
                snprintf(buf, size, "%" PRIu64, *(uint64_t *)p);
                return buf;
        case OPT_ENUM:
                return d->names[*(int *)p];
        default:
                return NULL; /* lists: one line per value */
        }
}

/* "(default ...)" of --help, or nothing. */
static void help_default(const struct opt_def *d, FILE *out)
{
        char buf[32], lo[32], hi[32];
        const char *v = NULL;

        if (d->help_default) {
                fprintf(out, " (default%s)", d->help_default);
                return;
        }
        switch (d->type) {
        case OPT_BOOL:
        case OPT_COLLECTORS:
        case OPT_CUSTOM:
        case OPT_FRAGMENT:
                return;
        case OPT_STRING:
        case OPT_LIST:
                v = d->def_str;
                break;
        case OPT_DURATION:
                v = format_duration(d->def, buf, sizeof buf);
                break;
        case OPT_UINT:
        case OPT_SIZE:
                snprintf(buf, sizeof buf, "%" PRIu64, d->def);
                v = buf;
                break;
        case OPT_ENUM:
                v = d->names[d->def];
                break;
        }
        if (!v)
                return;
        fprintf(out, " (default ");
        if (d->def_env)
                fprintf(out, "$%s or ", d->def_env);
        fputs(v, out);
        if (d->type == OPT_UINT)
                fprintf(out, ", %" PRIu64 " to %" PRIu64, d->min, d->max);
        if (d->help_range && d->type == OPT_DURATION)
                fprintf(out, ", %s to %s", format_duration(d->min, lo, sizeof lo),
                        format_duration(d->max, hi, sizeof hi));
        fputs(")", out);
}

static void help_line(const char *left, const struct opt_def *d, FILE *out)
{
        fprintf(out, "  %-44s %s", left, d->help);
        help_default(d, out);
        fputs("\n", out);
}

void options_help(FILE *out)
{
        entries_init();
        fputs("Usage: diskpulse [FLAGS]\n\n"
              "Watches block devices and serves Prometheus metrics.\n\nFlags:\n",
              out);
        for (size_t i = 0; i < N_ENTRIES; i++) {
                const struct opt_def *d = &entries[i].d;
                char left[80];

                if (d->type == OPT_COLLECTORS)
                        continue;
                if (d->type == OPT_BOOL)
                        snprintf(left, sizeof left, "--%s", d->name);
                else
                        snprintf(left, sizeof left, "--%s=%s", d->name, d->arg);
                help_line(left, d, out);
        }
        /* the collectors' switches close the list */
        for (size_t i = 0; i < N_ENTRIES; i++) {
                const struct opt_def *d = &entries[i].d;

                if (d->type != OPT_COLLECTORS)
                        continue;
                for (size_t c = 0; c < registry_count(); c++) {
                        char left[80];
                        snprintf(left, sizeof left, "--[no-]%s.%s", d->name,
                                 collector_defs[c]->name);
                        fprintf(out, "  %-44s %s (default %s)\n", left, collector_defs[c]->help,
                                collector_defs[c]->default_enabled ? "on" : "off");
                }
        }
        fputs("\nDurations take ms, s, m, h (e.g. 500ms, 1m30s). Every flag can be set in the "
              "--config.file\nas \"name = value\" (without the leading --); flags win.\n",
              out);
}

void options_dump(const struct dp_options *o, FILE *out)
{
        entries_init();
        for (size_t i = 0; i < N_ENTRIES; i++) {
                const struct opt_def *d = &entries[i].d;
                char buf[32];
                const char *v;

                if (d->flags & OPT_CLI_ONLY)
                        continue;
                switch (d->type) {
                case OPT_LIST:
                        for (size_t k = 0; k < *count_of(o, d); k++)
                                fprintf(out, "%s = %s\n", d->name,
                                        (*(char **const *)field(o, d))[k]);
                        break;
                case OPT_CUSTOM: {
                        char text[4200];
                        for (size_t k = 0; k < *count_of(o, d); k++)
                                fprintf(out, "%s = %s\n", d->name,
                                        d->custom->format(elem_of(o, d, k), text, sizeof text));
                        break;
                }
                case OPT_COLLECTORS:
                        for (size_t c = 0; c < registry_count(); c++)
                                fprintf(out, "%s.%s = %s\n", d->name, collector_defs[c]->name,
                                        ((bool *)field(o, d))[c] ? "true" : "false");
                        break;
                default:
                        v = format_value(o, d, buf, sizeof buf);
                        if (v)
                                fprintf(out, "%s = %s\n", d->name, v);
                        break;
                }
        }
}
