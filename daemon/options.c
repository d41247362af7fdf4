/* Flags and the config file (SPEC §2): defaults < config file < command line, driven by the
 * option table (options_table.c) with the registered collectors' fragments in place. argv, the
 * config file, --help and the dump are here; how a value of each type is parsed, checked,
 * copied, compared, freed and written is lib's value engine (option.h). */
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fsroot.h"

/* Flags are numbered: the entries, then one per collector (for "given on the command line" and
 * "list emptied" marks). */
#define N_ENTRIES options_count()
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

/* Applies one value of the option d (sub: which collector of OPT_COLLECTORS; negated: its
 * "no-" form, a switch's opposite). where: "" for a flag, "FILE:LINE: " for the config file. */
static int apply(struct dp_options *o, const struct opt_def *d, int sub, const char *value,
                 bool negated, const char *where, char *err, size_t errsz)
{
        const char *dashes = *where ? "" : "--";
        char why[4400];

        if (negated && !opt_is_negatable(d)) {
                fail(err, errsz, "%s%sno-%s: only on/off %s can be negated%s", where, dashes,
                     d->name, *where ? "options" : "flags",
                     opt_is_switch(d) ? " (this one is a command)" : "");
                return -EINVAL;
        }
        if (!value && !opt_is_switch(d)) {
                fail(err, errsz, "%s%s needs a value", where, d->name);
                return -EINVAL;
        }
        if (opt_parse(d, options_base(o, d), sub < 0 ? 0 : (size_t)sub, value, negated, why,
                      sizeof why) < 0) {
                fail(err, errsz, "%sinvalid value for %s%s%s%s: %s", where, negated ? "no-" : "",
                     d->name, sub < 0 ? "" : ".", sub < 0 ? "" : d->subs[sub], why);
                return -EINVAL;
        }
        return 0;
}

/* Finds a flag by name; sets *negated for "no-" forms and *sub to the collector of a
 * --collector.NAME. Returns its table index or -1. */
static int lookup(const char *name, size_t len, bool allow_no, bool *negated, int *sub)
{
        *negated = false;
        *sub = -1;
        for (int pass = 0; pass < 2; pass++) {
                for (size_t i = 0; i < N_ENTRIES; i++) {
                        const struct opt_def *d = options_entry(i);
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

/* Config file: "name = value" lines, '#' comments, repeated names for repeatable options only
 * (a second line of any other is refused with both line numbers: which one was meant is not
 * for the daemon to guess). */
static int parse_config(struct dp_options *o, const char *path, const bool *from_cli, char *err,
                        size_t errsz)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_free_ bool *reset = xcalloc(N_FLAGS, sizeof(bool));
        _cleanup_free_ unsigned *first = xcalloc(N_FLAGS, sizeof(unsigned)); /* its line */
        size_t len;
        char *line, why[128];
        unsigned lineno = 0;
        int r;

        /* a regular file only: a FIFO put in its place would block a reload forever */
        r = read_regular_at(AT_FDCWD, path, 1 << 20, &buf, &len, why, sizeof why);
        if (r < 0) {
                fail(err, errsz, "cannot read config file %s: %s", path, why);
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
                d = options_entry((size_t)idx);
                if (d->flags & OPT_CLI_ONLY) {
                        fail(err, errsz, "%s%s can only be given on the command line", where, key);
                        return -EINVAL;
                }
                f = flag_no(idx, sub);
                if (!opt_is_repeatable(d)) {
                        /* "NAME" and "no-NAME" are the same option */
                        if (first[f]) {
                                fail(err, errsz, "%s%s%s%s is given twice, on lines %u and %u",
                                     where, d->name, sub < 0 ? "" : ".",
                                     sub < 0 ? "" : d->subs[sub], first[f], lineno);
                                return -EINVAL;
                        }
                        first[f] = lineno;
                }
                if (from_cli[f])
                        continue; /* flags win */
                if (!reset[f]) {
                        /* values from a higher source replace a list's lower ones */
                        opt_clear(d, options_base(o, d));
                        reset[f] = true;
                }
                /* a flag's name, as the file's lines are: "no-NAME = true" is "NAME = false" */
                r = apply(o, d, sub, value, negated, where, err, errsz);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Every option's range, then the checks that involve several options. state_dir: the state
 * directory the collectors' defaults derive from (the running one on a reload). */
static int validate(struct dp_options *o, const char *state_dir, char *err, size_t errsz)
{
        char a[32], b[32], why[256];
        int r;

        for (size_t i = 0; i < N_ENTRIES; i++) {
                const struct opt_def *d = options_entry(i);

                if (opt_check(d, options_base(o, d), why, sizeof why) < 0) {
                        fail(err, errsz, "invalid value for %s: %s", d->name, why);
                        return -EINVAL;
                }
        }
        /* the collectors' own checks and what their options take from the daemon's (the
         * diskstats window, the canary's default target) */
        for (size_t c = 0; c < registry_count(); c++) {
                if (!collector_defs[c]->complete)
                        continue;
                r = collector_defs[c]->complete(o->collector_opts[c], state_dir, o->round_interval,
                                                err, errsz);
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

/* options_parse(), and for a reload with running, the options in force. */
static int parse(int argc, char **argv, const struct dp_options *running, struct dp_options *ret,
                 char *err, size_t errsz)
{
        _cleanup_free_ bool *from_cli = xcalloc(options_count() + registry_count(), sizeof(bool));
        struct dp_options o;
        int r;

        options_defaults(&o);
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
                d = options_entry((size_t)idx);
                if (eq)
                        value = eq + 1;
                else if (!opt_is_switch(d) && !negated) {
                        if (i + 1 >= argc) {
                                fail(err, errsz, "flag --%.*s needs a value", (int)nlen, arg);
                                goto fail;
                        }
                        value = argv[++i];
                }
                f = flag_no(idx, sub);
                if (!from_cli[f])
                        opt_clear(d, options_base(&o, d)); /* flags replace a list's defaults and
                                                       * file values */
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
        /* state.directory changes only on restart: what derives from it follows the running
         * one until then (the canary's default target stays with the state it writes) */
        r = validate(&o, running ? running->state_dir : o.state_dir, err, errsz);
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

int options_parse(int argc, char **argv, struct dp_options *ret, char *err, size_t errsz)
{
        return parse(argc, argv, NULL, ret, err, errsz);
}

int options_parse_reload(int argc, char **argv, const struct dp_options *running,
                         struct dp_options *ret, char *err, size_t errsz)
{
        return parse(argc, argv, running, ret, err, errsz);
}

static void help_line(const char *left, const struct opt_def *d, FILE *out)
{
        char def[1024];

        fprintf(out, "  %-44s %s%s\n", left, d->help, opt_help_default(d, def, sizeof def));
}

void options_help(FILE *out)
{
        fputs("Usage: diskpulse [FLAGS]\n\n"
              "Watches block devices and serves Prometheus metrics.\n\nFlags:\n",
              out);
        for (size_t i = 0; i < N_ENTRIES; i++) {
                const struct opt_def *d = options_entry(i);
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
                const struct opt_def *d = options_entry(i);

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
        for (size_t i = 0; i < N_ENTRIES; i++) {
                const struct opt_def *d = options_entry(i);

                if (d->flags & OPT_CLI_ONLY)
                        continue;
                opt_print(d, options_base(o, d), out);
        }
}
