/* Flags and the config file (SPEC §2): one table, defaults < config file < command line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "log.h"
#include "namefilter.h"
#include "option.h"
#include "registry.h"
#include "util.h"

#define DEFAULT_DEVICE_EXCLUDE "^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\\d+n\\d+p)\\d+$"

/* --diskstats.sampling: when rounds run. */
enum round_sampling {
        ROUND_SAMPLING_SCRAPE, /* when scrapes need them: before expected ones, a window earlier, on
                             * demand (a page older than the interval), at least every minute */
        ROUND_SAMPLING_FIXED,  /* every --diskstats.interval */
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
        usec_t round_interval;                 /* --diskstats.interval: paces the round */
        enum round_sampling round_sampling;    /* --diskstats.sampling */
        usec_t zygote_grace;                   /* --helper.zygote-grace */
        bool collector[COLLECTOR_MAX];
        /* Each registered collector's options (its def's options_size bytes, NULL: none),
         * the storage of its def's option entries. */
        void *collector_opts[COLLECTOR_MAX];
        char *state_dir;
        enum log_level log_level;
        enum log_format log_format;
        bool once, check_config, version, help;
};

/* The parts a reloaded option is applied to: bits of opt_def.parts. */
enum opt_part {
        OPT_PART_LOG = 1u << 0,        /* log level and format */
        OPT_PART_HTTP = 1u << 1,       /* connection limits, deadlines, allowed networks */
        OPT_PART_WEBCONFIG = 1u << 2,  /* --web.config.file */
        OPT_PART_HELPER = 1u << 3,     /* the privileged helper's zygote */
        OPT_PART_SAMPLING = 1u << 4,   /* the round's pace: the tick, the sampler, host->interval */
        OPT_PART_FILTER = 1u << 5,     /* the device name filters, host->filter */
        OPT_PART_COLLECTOR0 = 1u << 6, /* then one bit per registered collector */
};
/* The part of the registered collector id: every reloaded option of its fragment has it. */
#define OPT_PART_COLLECTOR(id) (OPT_PART_COLLECTOR0 << (id))
/* Every collector's part (the --[no-]collector.NAME switches). */
#define OPT_PART_COLLECTORS (OPT_PART_COLLECTOR(COLLECTOR_MAX) - OPT_PART_COLLECTOR0)
_Static_assert(COLLECTOR_MAX <= 25, "a part bit per collector");

/* The daemon's option table, in the order of --help and the dump; its OPT_FRAGMENT entries
 * stand for the options of a registered collector. */
extern const struct opt_def options_table[];
extern const size_t options_table_size;

/* Every option: the daemon's table with each fragment replaced by its collector's entries (their
 * parts: the collector's OPT_PART bit). options_entry(i) for i < options_count(). */
size_t options_count(void);
const struct opt_def *options_entry(size_t i);

/* The options struct d's offsets are into: o, or the options blob of d's collector. */
void *options_base(const struct dp_options *o, const struct opt_def *d);

/* Sets o (its old content ignored) to every option's default, the collectors' blobs allocated;
 * the caller frees it with options_free(). */
void options_defaults(struct dp_options *o);

/* Parses argv and the config file it names. On failure returns -EINVAL (or -errno when the
 * config file cannot be read) and writes a message naming the flag or line and the value into
 * err. The caller owns *ret: options_free(). */
int options_parse(int argc, char **argv, struct dp_options *ret, char *err, size_t errsz);
/* The same for a reload (SIGHUP) of running, the options in force: what a collector derives from
 * an option read at start (the canary's default target from --state.directory) derives from
 * running's value, which stays until a restart, so that nothing of a new one takes effect
 * before. */
int options_parse_reload(int argc, char **argv, const struct dp_options *running,
                         struct dp_options *ret, char *err, size_t errsz);
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

/* True when a and b hold the same value of the option d (from options_entry()). */
bool options_equal(const struct opt_def *d, const struct dp_options *a, const struct dp_options *b);

/* True when a and b agree on every option whose flags include all of flags. */
bool options_same(const struct dp_options *a, const struct dp_options *b, unsigned flags);

/* SIGHUP: copies into cur the value in next of every OPT_RELOAD option (cur's old values are
 * freed; next is left as it is, for options_free()). Returns the number of OPT_RESTART options
 * whose value differs, which the caller reports as needing a restart; cur keeps those, and the
 * OPT_START ones. *ret_parts (may be NULL) gets the opt_part bits of the reloaded options whose
 * value changed. Main thread. */
size_t options_reload(struct dp_options *cur, const struct dp_options *next, unsigned *ret_parts);
