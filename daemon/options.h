/* Flags and the config file (SPEC §2): one table, defaults < config file < command line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
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

/* Lists the options as config-file lines (--check-config shows the effective config). */
void options_dump(const struct dp_options *o, FILE *out);
