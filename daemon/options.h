/* Flags and the config file (SPEC §2): one table, defaults < config file < command line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "canary_probe.h"
#include "log.h"
#include "namefilter.h"
#include "registry.h"
#include "smart.h"
#include "util.h"

#define DEFAULT_DEVICE_EXCLUDE "^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\\d+n\\d+p)\\d+$"

/* One --canary.path target. */
struct dp_canary_path {
        char *path; /* absolute */
        enum canary_mode mode;
};

struct dp_options {
        char **listen; /* --web.listen-address, repeatable */
        size_t n_listen;
        bool systemd_socket;
        unsigned max_connections; /* in total */
        unsigned max_per_address; /* per IPv4 address or IPv6 /64 */
        usec_t header_timeout, request_timeout, idle_timeout;
        char **allow_from; /* --web.allow-from, repeatable; none: every network */
        size_t n_allow_from;
        char *config_file;
        char *web_config_file; /* --web.config.file, NULL: none */
        char *procfs, *sysfs, *udev_data, *dev;
        char *device_include, *device_exclude; /* NULL: not set */
        usec_t ds_interval, ds_window;
        usec_t smart_interval, smart_timeout;
        enum smart_powermode_check smart_powermode;
        usec_t zygote_grace;           /* --helper.zygote-grace */
        struct dp_canary_path *canary; /* --canary.path, repeatable; none given: state dir */
        size_t n_canary;
        usec_t canary_interval, canary_timeout;
        usec_t canary_baseline_period; /* tests and evaluation only: the baseline's hour */
        unsigned canary_burst;         /* 0 .. CANARY_BURST_MAX */
        uint64_t canary_size;
        bool collector[COLLECTOR_MAX];
        char *state_dir;
        char *canary_reset_reference; /* --canary.reset-reference: the one-shot reset's path */
        enum log_level log_level;
        enum log_format log_format;
        bool once, check_config, version, help;
};

/* How an option's value is stored in struct dp_options, parsed and written. */
enum opt_type {
        OPT_BOOL,         /* bool; --no-NAME sets false */
        OPT_STRING,       /* char *, NULL: not set */
        OPT_LIST,         /* char ** and a size_t count: repeatable, each value checked */
        OPT_DURATION,     /* usec_t, positive: 500ms, 1m30s */
        OPT_UINT,         /* unsigned, min .. 65535 */
        OPT_SIZE,         /* uint64_t bytes, positive: 4096, 8k, 1M */
        OPT_ENUM,         /* an enum (int-sized), one of names[], its value the index */
        OPT_CANARY_PATHS, /* struct dp_canary_path * and a size_t count: DIR[:MODE] */
        OPT_COLLECTORS,   /* bool[COLLECTOR_MAX]: one --[no-]collector.NAME per collector */
};

/* What SIGHUP does with an option (see options_reload()). */
enum opt_reload {
        OPT_START,   /* read at start only; a new value is kept aside silently */
        OPT_RESTART, /* read at start only; a new value is reported as needing a restart */
        OPT_RELOAD,  /* applied at once, to the parts named in opt_def.parts */
};

/* The parts a reloaded option is applied to: bits of opt_def.parts. */
enum opt_part {
        OPT_PART_LOG = 1u << 0,       /* log level and format */
        OPT_PART_HTTP = 1u << 1,      /* connection limits, deadlines, allowed networks */
        OPT_PART_WEBCONFIG = 1u << 2, /* --web.config.file */
        OPT_PART_HELPER = 1u << 3,    /* the privileged helper's zygote */
        OPT_PART_DISKSTATS = 1u << 4,
        OPT_PART_SMART = 1u << 5,
        OPT_PART_CANARY = 1u << 6,
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
        size_t offset;       /* of the value in struct dp_options */
        size_t count_offset; /* OPT_LIST, OPT_CANARY_PATHS: of the size_t count */
        unsigned flags;      /* OPT_CLI_ONLY, OPT_PRESTART */
        /* The default: def for numbers, booleans and enums, def_str for a string or a list's one
         * value; def_env names an environment variable whose absolute value (its first
         * ':'-separated entry) is the string's default instead. */
        uint64_t def;
        const char *def_str, *def_env;
        /* Checks. min, max: the accepted range of an OPT_DURATION, OPT_UINT or OPT_SIZE (max 0:
         * no upper bound), checked once flags and file are read; an OPT_UINT is also refused
         * below min or above 65535 as it is parsed. check: a string's or list value's check,
         * which says why it refuses in why. allow_empty: an OPT_STRING may be "". */
        uint64_t min, max;
        int (*check)(const char *value, char *why, size_t whysz);
        bool allow_empty;
        const char *const *names; /* OPT_ENUM: the values' names, NULL-terminated */
        /* --help: "--NAME=ARG  HELP (default DEF)"; help_default replaces what follows
         * "(default" (e.g. ": all"); help_range adds the range: "(default 1m, 1s to 1h)". */
        const char *arg, *help, *help_default;
        bool help_range;
        /* The dump's value for an OPT_STRING that is NULL; without it the line is left out. */
        const char *(*unset)(const struct dp_options *o);
        enum opt_reload reload;
        unsigned parts; /* OPT_RELOAD: enum opt_part bits */
};

/* The option table, in the order of --help and the dump. */
extern const struct opt_def options_table[];
extern const size_t options_table_size;

/* Parses argv and the config file it names. On failure returns -EINVAL (or -errno when the
 * config file cannot be read) and writes a message naming the flag or line and the value into
 * err. The caller owns *ret: options_free(). */
int options_parse(int argc, char **argv, struct dp_options *ret, char *err, size_t errsz);
void options_free(struct dp_options *o);

/* Prints --help. */
void options_help(FILE *out);

/* Compiles the device name filters of o (Go RE2 patterns, lib/namefilter.h), the default
 * exclude when neither is set. Returns 0 and sets *ret (the caller frees it with
 * namefilter_free), or -EINVAL / -ENOMEM with the reason in err. */
int options_device_filter(const struct dp_options *o, struct namefilter **ret, char *err,
                          size_t errsz);

/* Lists the options as config-file lines (--check-config shows the effective config), in the
 * table's order, the collectors' switches before state.directory; cli-only ones are left out. */
void options_dump(const struct dp_options *o, FILE *out);

/* True when a and b hold the same value of the option d. */
bool options_equal(const struct opt_def *d, const struct dp_options *a, const struct dp_options *b);

/* True when a and b agree on every option whose flags include all of flags. */
bool options_same(const struct dp_options *a, const struct dp_options *b, unsigned flags);

/* SIGHUP: copies into cur the value in next of every OPT_RELOAD option (cur's old values are
 * freed; next is left as it is, for options_free()). Returns the number of OPT_RESTART options
 * whose value differs, which the caller reports as needing a restart; cur keeps those, and the
 * OPT_START ones. *ret_parts (may be NULL) gets the opt_part bits of the reloaded options whose
 * value changed. Main thread. */
size_t options_reload(struct dp_options *cur, const struct dp_options *next, unsigned *ret_parts);
