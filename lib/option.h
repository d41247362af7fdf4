/* The entry of an option table: one flag and config-file key with its storage (an offset into
 * an options struct), default, checks, help and what SIGHUP does with it. The daemon's table
 * (daemon/options_table.c) is made of them; in lib so that a collector can declare the entries
 * of its own options next to its code. The daemon's options.c walks the tables. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
        OPT_COLLECTORS, /* the daemon's bool per registered collector: --[no-]collector.NAME */
        OPT_FRAGMENT,   /* only in the daemon's table: where the options of the registered
                           * collector named name go (in --help, the dump, every loop); with
                           * OPT_CLI_ONLY, where its command_options go */
};

struct opt_def;

/* How an OPT_CUSTOM option's elements are parsed, copied, compared, freed and written. */
struct opt_custom {
        size_t size; /* of an element */
        /* Parses value into elem (zeroed), given the n elements so far. 0, or -EINVAL with
         * the end of the message in why: "\"VALUE\" (expected ...)" or "\"VALUE\" is ...". */
        int (*parse)(const char *value, const void *elems, size_t n, void *elem, char *why,
                     size_t whysz);
        void (*copy)(void *dst, const void *src);
        bool (*equal)(const void *a, const void *b);
        void (*free)(void *elem);
        /* The dump's text of an element, in buf. */
        const char *(*format)(const void *elem, char *buf, size_t size);
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
        const char *const *names;        /* OPT_ENUM: the values' names, NULL-terminated */
        const struct opt_custom *custom; /* OPT_CUSTOM */
        /* --help: "--NAME=ARG  HELP (default DEF)"; help_default replaces what follows
         * "(default" (e.g. ": all"); help_range adds the range: "(default 1m, 1s to 1h)". */
        const char *arg, *help, *help_default;
        bool help_range;
        /* The dump's value for an OPT_STRING that is NULL; without it the line is left out. */
        const char *(*unset)(const void *opts);
        enum opt_reload reload;
        unsigned parts; /* OPT_RELOAD: the daemon's enum opt_part bits */
};
