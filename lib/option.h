/* The entry of an option table: one flag and config-file key with its storage (an offset into
 * an options struct), default, checks, help and what SIGHUP does with it; and the value engine:
 * how a value of each type is parsed, copied, compared, freed, checked and written (one ops table
 * per type, option.c). The daemon's table (daemon/options_table.c) is made of them; in lib so
 * that a collector can declare the entries of its own options next to its code. The daemon's
 * options.c walks the tables (flags, config file, --help, the dump). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How an option's value is stored in its options struct, parsed and written. */
enum opt_type {
        OPT_BOOL,       /* bool; --no-NAME sets false */
        OPT_STRING,     /* char *, NULL: not set */
        OPT_LIST,       /* char ** and a size_t count: repeatable, each value checked */
        OPT_DURATION,   /* usec_t, positive: 500ms, 1m30s */
        OPT_UINT,       /* unsigned, min .. 65535 */
        OPT_SIZE,       /* uint64_t bytes, positive: 4096, 8k, 1M */
        OPT_ENUM,       /* an enum (int-sized), one of names[], its value the index */
        OPT_CUSTOM,     /* an array of custom->size elements and a size_t count: repeatable,
                           * each value parsed into an element by custom */
        OPT_COLLECTORS, /* a bool per name of subs (the daemon's: one per registered collector),
                         * --[no-]NAME.SUB; bit i of def is subs[i]'s default */
        OPT_FRAGMENT,   /* only in the daemon's table: where the options of the registered
                           * collector named name go (in --help, the dump, every loop); with
                           * OPT_CLI_ONLY, where its command_options go */
};

struct opt_def;

/* A type of value: how one value is parsed, copied, compared, freed, checked and written. One
 * const table per opt_type (opt_type_ops()); an OPT_CUSTOM option brings its own (opt_def.custom).
 * A repeatable option (one with a count_offset) holds an array of such values, OPT_COLLECTORS one
 * per name of subs, any other option one value in place. Only size, parse and format are needed;
 * a NULL operation means: the bytes are the value (copy, equal), nothing to free, no default
 * (zero), no default shown in --help, no range. */
struct opt_type_ops {
        size_t size; /* of a value (an element of a repeatable option) */
        /* Parses value into v (zeroed), given the n values so far of a repeatable option (vals;
         * NULL and 0 for any other). 0, or -EINVAL with the end of the message in why:
         * "\"VALUE\" (expected ...)" or "\"VALUE\" is ...". */
        int (*parse)(const struct opt_def *d, const char *value, const void *vals, size_t n,
                     void *v, char *why, size_t whysz);
        void (*copy)(void *dst, const void *src);
        bool (*equal)(const void *a, const void *b);
        void (*free)(void *v);
        /* The dump's text of v, in buf or static; NULL: none (a string not set). */
        const char *(*format)(const struct opt_def *d, const void *v, char *buf, size_t size);
        /* Sets v (zeroed) to d's default; false when there is none (a repeatable option then
         * starts empty). */
        bool (*set_default)(const struct opt_def *d, void *v);
        /* What --help writes after "(default " (the default, and a range), in buf; NULL: no
         * default shown. */
        const char *(*help)(const struct opt_def *d, char *buf, size_t size);
        /* The range, once flags and file are read: 0, or -EINVAL with "VALUE (expected ...)" in
         * why. */
        int (*check)(const struct opt_def *d, const void *v, char *why, size_t whysz);
};

/* What SIGHUP does with an option (the daemon's options_reload()). */
enum opt_reload {
        OPT_START,   /* read at start only; a new value is kept aside silently */
        OPT_RESTART, /* read at start only; a new value is reported as needing a restart */
        OPT_RELOAD,  /* applied at once, to the parts named in opt_def.parts */
};

/* opt_def.flags */
enum {
        OPT_CLI_ONLY = 1u << 0, /* not in the config file, not in the dump */
        OPT_PRESTART = 1u << 1, /* a fact the privileged parent gets from the pre-start child:
                                 * the parent's own parse must give the same (prestart.h) */
};

/* One option: its names, storage, default, checks, help and reload. Only name, type and
 * offset are needed; a zero field means "none". */
struct opt_def {
        const char *name;    /* the flag without "--" and the config file's key */
        enum opt_type type;  /* how the value at offset is stored */
        size_t offset;       /* of the value in its options struct */
        size_t count_offset; /* OPT_LIST, OPT_CUSTOM: of the size_t count */
        unsigned flags;      /* OPT_CLI_ONLY, OPT_PRESTART */
        /* The default: def for numbers, booleans and enums, def_str for a string or a list's one
         * value; def_env names an environment variable whose absolute value (its first
         * ':'-separated entry) is the string's default instead. */
        uint64_t def;
        const char *def_str, *def_env;
        /* Checks. min, max: the accepted range of an OPT_DURATION or OPT_SIZE (max 0: no upper
         * bound), checked once flags and file are read; of an OPT_UINT, which must have a max,
         * checked as it is parsed and shown in --help. check: a string's or list value's check,
         * which says why it refuses in why. allow_empty: an OPT_STRING may be "". */
        uint64_t min, max;
        int (*check)(const char *value, char *why, size_t whysz);
        bool allow_empty;
        const char *const *names;          /* OPT_ENUM: the values' names, NULL-terminated */
        const char *const *subs;           /* OPT_COLLECTORS: the switches, NULL-terminated */
        const struct opt_type_ops *custom; /* OPT_CUSTOM: its values' type */
        /* --help: "--NAME=ARG  HELP (default DEF, RANGE)"; help_default replaces what follows
         * "(default" (e.g. ": all"). RANGE is the one checked: "1s to 1h", "at least 1s" (min and
         * max of a number, a duration or a size). help_min, help_max: a bound checked elsewhere,
         * against another option (--diskstats.window's "--diskstats.interval"), shown in place
         * of min or max. */
        const char *arg, *help, *help_default;
        const char *help_min, *help_max;
        /* The dump's value for an OPT_STRING that is NULL; without it the line is left out. */
        const char *(*unset)(const void *opts);
        enum opt_reload reload;
        unsigned parts; /* OPT_RELOAD: the daemon's enum opt_part bits */
};

/* The value engine. base is the options struct that d's offsets are into. Pure; any thread, on
 * options it owns. */

/* The ops of d's type: d->custom for OPT_CUSTOM; NULL for OPT_FRAGMENT. */
const struct opt_type_ops *opt_type_ops(const struct opt_def *d);

/* True for an on/off option (OPT_BOOL, OPT_COLLECTORS): given alone, or with a value. */
bool opt_is_switch(const struct opt_def *d);

/* True for a switch that has a "no-" form (--no-NAME, --no-NAME=BOOL, "no-NAME = BOOL"): every
 * switch but the commands (OPT_BOOL with OPT_CLI_ONLY: --once, --check-config, --version,
 * --help), which are not settings to turn off. */
bool opt_is_negatable(const struct opt_def *d);

/* True for an option that takes several values (OPT_LIST, OPT_CUSTOM: given several times, on
 * the command line or on several lines of the config file). */
bool opt_is_repeatable(const struct opt_def *d);

/* Sets d's default in base, whose value of d is zero. */
void opt_set_default(const struct opt_def *d, void *base);

/* Parses one value of d into base: replaces a single value (of an OPT_COLLECTORS, the one of
 * subs[sub]; sub is 0 for any other), adds one to a repeatable option. A switch takes value
 * NULL (on, off when negated) or a boolean, whose opposite it gets when negated (--no-NAME=true
 * is --NAME=false); negated is only for switches. Returns 0, or -EINVAL with what follows
 * "invalid value for NAME: " in why (base left as it was). */
int opt_parse(const struct opt_def *d, void *base, size_t sub, const char *value, bool negated,
              char *why, size_t whysz);

/* Checks d's value in base against its range: 0, or -EINVAL with what follows "invalid value for
 * NAME: " in why. */
int opt_check(const struct opt_def *d, const void *base, char *why, size_t whysz);

/* Frees d's value in base: a string is NULL, a repeatable option empty afterwards (a number keeps
 * its value, a switch its state). */
void opt_clear(const struct opt_def *d, void *base);

/* True when a and b (two options structs) hold the same value of d. */
bool opt_equal(const struct opt_def *d, const void *a, const void *b);

/* Replaces d's value in dst by a copy of src's. */
void opt_copy(const struct opt_def *d, void *dst, const void *src);

/* Writes d's value in base as config-file lines, "NAME = VALUE" (one per value of a repeatable
 * option, "NAME.SUB = VALUE" per switch of an OPT_COLLECTORS; a string not set: d->unset's
 * value, else no line). */
void opt_print(const struct opt_def *d, const void *base, FILE *out);

/* --help's " (default ...)" of d in buf (the empty string when it shows none); returns buf. */
const char *opt_help_default(const struct opt_def *d, char *buf, size_t size);
