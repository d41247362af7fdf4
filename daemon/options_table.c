/* The option table: every flag and config-file key of diskpulse, one entry each, with its
 * storage, default, checks, help and what SIGHUP does with it (options.h says what each field
 * means). Adding an option is adding an entry here and its field in struct dp_options; parsing,
 * checking, --help, the dump, the reload and the pre-start comparison follow from it
 * (options.c, options_entries.c, lib/option.c). */
#include "options.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "cidr.h"
#include "listen.h"
#include "namefilter.h"
/* OPT_ENUM values are read and written as int. */
_Static_assert(sizeof(enum log_level) == sizeof(int), "enum log_level is int-sized");
_Static_assert(sizeof(enum log_format) == sizeof(int), "enum log_format is int-sized");
_Static_assert(sizeof(enum round_sampling) == sizeof(int), "enum round_sampling is int-sized");

static const char *const log_level_names[] = {[LOG_LEVEL_DEBUG] = "debug",
                                              [LOG_LEVEL_INFO] = "info",
                                              [LOG_LEVEL_WARN] = "warn",
                                              [LOG_LEVEL_ERROR] = "error",
                                              [LOG_LEVEL_ERROR + 1] = NULL};
static const char *const round_sampling_names[] = {[ROUND_SAMPLING_SCRAPE] = "scrape",
                                                   [ROUND_SAMPLING_FIXED] = "fixed",
                                                   [ROUND_SAMPLING_FIXED + 1] = NULL};
static const char *const log_format_names[] = {
    [LOG_FORMAT_LOGFMT] = "logfmt", [LOG_FORMAT_JSON] = "json", [LOG_FORMAT_JSON + 1] = NULL};
static int check_listen(const char *value, char *why, size_t whysz)
{
        char host[256], port[8];

        if (listen_parse(value, host, sizeof host, port, sizeof port) < 0) {
                snprintf(why, whysz, "expected [HOST]:PORT, e.g. :9477 or [::1]:9477");
                return -EINVAL;
        }
        return 0;
}

static int check_cidr(const char *value, char *why, size_t whysz)
{
        struct cidr c;
        const char *reason;

        if (cidr_parse(value, &c, &reason) < 0) {
                snprintf(why, whysz,
                         "%s; expected an address or ADDR/PREFIX such as 10.0.0.0/8 or "
                         "2001:db8::/32",
                         reason);
                return -EINVAL;
        }
        return 0;
}

/* A device filter: compiled once to be checked (the collectors compile their own). */
static int check_regex(const char *value, char *why, size_t whysz)
{
        return namefilter_check(value, why, whysz);
}

/* node_exporter's rule: the default exclude applies only when no include is given. */
static const char *exclude_unset(const void *opts)
{
        const struct dp_options *o = opts;

        return o->device_include ? "" : DEFAULT_DEVICE_EXCLUDE;
}

#define OFF(f) offsetof(struct dp_options, f)
#define SEC    USEC_PER_SEC
#define MSEC   USEC_PER_MSEC

const struct opt_def options_table[] = {
    {.name = "web.listen-address",
     .type = OPT_LIST,
     .offset = OFF(listen),
     .count_offset = OFF(n_listen),
     .flags = OPT_PRESTART,
     .def_str = ":9477",
     .check = check_listen,
     .arg = "[HOST]:PORT",
     .help = "address to serve metrics on; repeatable",
     .reload = OPT_RESTART},
    {.name = "web.systemd-socket",
     .type = OPT_BOOL,
     .offset = OFF(systemd_socket),
     .flags = OPT_PRESTART,
     .help = "use the sockets passed by systemd (also used whenever LISTEN_FDS is set)",
     .reload = OPT_RESTART},
    {.name = "web.max-connections",
     .type = OPT_UINT,
     .offset = OFF(max_connections),
     .def = 512,
     .min = 1,
     .max = 65535,
     .arg = "N",
     .help = "connections open at once, all addresses together; beyond it a new connection "
             "takes the place of a waiting one of an address holding more, or is reset",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_HTTP},
    {.name = "web.max-connections-per-address",
     .type = OPT_UINT,
     .offset = OFF(max_per_address),
     .def = 16,
     .min = 1,
     .max = 65535,
     .arg = "N",
     .help = "connections open at once from one IPv4 address or IPv6 /64; beyond it a new one "
             "takes the place of the address's own that has waited over a second for its "
             "request, or is reset",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_HTTP},
    {.name = "web.read-header-timeout",
     .type = OPT_DURATION,
     .offset = OFF(header_timeout),
     .def = 5 * SEC,
     .min = 100 * MSEC,
     .max = 3600 * SEC,
     .arg = "DUR",
     .help = "a request's headers must be complete this long after its start",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_HTTP},
    /* at least web.read-header-timeout, at most 1h: checked with it, in validate() */
    {.name = "web.request-timeout",
     .type = OPT_DURATION,
     .offset = OFF(request_timeout),
     .def = 30 * SEC,
     .arg = "DUR",
     .help = "a request must be answered this long after its start",
     .help_min = "--web.read-header-timeout",
     .help_max = "1h",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_HTTP},
    {.name = "web.idle-timeout",
     .type = OPT_DURATION,
     .offset = OFF(idle_timeout),
     .def = 120 * SEC,
     .min = 100 * MSEC,
     .max = 3600 * SEC,
     .arg = "DUR",
     .help = "a kept-alive connection may wait this long for its next request",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_HTTP},
    {.name = "web.allow-from",
     .type = OPT_LIST,
     .offset = OFF(allow_from),
     .count_offset = OFF(n_allow_from),
     .check = check_cidr,
     .arg = "CIDR",
     .help = "serve only clients in this network (ADDR or ADDR/PREFIX); repeatable",
     .help_default = ": all",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_HTTP},
    {.name = "web.config.file",
     .type = OPT_STRING,
     .offset = OFF(web_config_file),
     .arg = "FILE",
     .help = "TLS, basic auth and response headers: an exporter-toolkit web config (YAML)",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_WEBCONFIG},
    {.name = "config.file",
     .type = OPT_STRING,
     .offset = OFF(config_file),
     .flags = OPT_CLI_ONLY,
     .arg = "FILE",
     .help = "config file of \"name = value\" lines; every flag can be set there, flags win"},
    {.name = "path.procfs",
     .type = OPT_STRING,
     .offset = OFF(procfs),
     .def_str = "/proc",
     .arg = "DIR",
     .help = "procfs root",
     .reload = OPT_RESTART},
    {.name = "path.sysfs",
     .type = OPT_STRING,
     .offset = OFF(sysfs),
     .def_str = "/sys",
     .arg = "DIR",
     .help = "sysfs root",
     .reload = OPT_RESTART},
    {.name = "path.udev.data",
     .type = OPT_STRING,
     .offset = OFF(udev_data),
     .def_str = "/run/udev/data",
     .arg = "DIR",
     .help = "udev database",
     .reload = OPT_RESTART},
    /* the helper's device directory, fixed when it is forked (not reported on SIGHUP) */
    {.name = "path.dev",
     .type = OPT_STRING,
     .offset = OFF(dev),
     .flags = OPT_PRESTART,
     .def_str = "/dev",
     .arg = "DIR",
     .help = "device nodes"},
    {.name = "collector.diskstats.device-include",
     .type = OPT_STRING,
     .offset = OFF(device_include),
     .check = check_regex,
     .allow_empty = true,
     .arg = "RE",
     .help = "monitor only devices whose name matches (Go RE2 syntax, as node_exporter)",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_FILTER},
    {.name = "collector.diskstats.device-exclude",
     .type = OPT_STRING,
     .offset = OFF(device_exclude),
     .check = check_regex,
     .allow_empty = true,
     .arg = "RE",
     .help = "skip devices whose name matches",
     .help_default = ": partitions, loop, ram, fd",
     .unset = exclude_unset,
     .reload = OPT_RELOAD,
     .parts = OPT_PART_FILTER},
    {.name = "diskstats.interval",
     .type = OPT_DURATION,
     .offset = OFF(round_interval),
     .def = 1 * SEC,
     .min = 10 * MSEC,
     .max = 3600 * SEC,
     .arg = "DUR",
     .help = "sampling period of /proc/diskstats (fixed sampling); with scrape sampling, the "
             "oldest a page is served: an older one is sampled anew first",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_SAMPLING},
    {.name = "diskstats.sampling",
     .type = OPT_ENUM,
     .offset = OFF(round_sampling),
     .def = ROUND_SAMPLING_SCRAPE,
     .names = round_sampling_names,
     .arg = "MODE",
     .help = "scrape: sample when scrapes need it (before each expected scrape and a window "
             "earlier, on demand, at least every minute); fixed: every --diskstats.interval",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_SAMPLING},
    /* --diskstats.window (collectors/diskstats) */
    {.name = "diskstats", .type = OPT_FRAGMENT},
    /* --smart.* (collectors/smart) */
    {.name = "smart", .type = OPT_FRAGMENT},
    {.name = "helper.zygote-grace",
     .type = OPT_DURATION,
     .offset = OFF(zygote_grace),
     .def = 60 * SEC,
     .min = 1 * SEC,
     .max = 3600 * SEC,
     .arg = "DUR",
     .help = "once the privileged zygote is lost, exit with status 75 after this long, so that "
             "the service manager restarts diskpulse",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_HELPER},
    /* --canary.* (collectors/canary) */
    {.name = "canary", .type = OPT_FRAGMENT},
    /* --[no-]collector.NAME for every collector of the registry; last in --help */
    /* a fact of the pre-start child: the helper keeps only what the enabled ones need */
    {.name = "collector",
     .type = OPT_COLLECTORS,
     .offset = OFF(collector),
     .flags = OPT_PRESTART,
     .reload = OPT_RELOAD,
     .parts = OPT_PART_COLLECTORS},
    {.name = "state.directory",
     .type = OPT_STRING,
     .offset = OFF(state_dir),
     .def_str = "/var/lib/diskpulse",
     .def_env = "STATE_DIRECTORY", /* systemd's StateDirectory= */
     .arg = "DIR",
     .help = "persisted state",
     .reload = OPT_RESTART},
    {.name = "log.level",
     .type = OPT_ENUM,
     .offset = OFF(log_level),
     .def = LOG_LEVEL_INFO,
     .names = log_level_names,
     .arg = "LEVEL",
     .help = "debug, info, warn or error",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_LOG},
    {.name = "log.format",
     .type = OPT_ENUM,
     .offset = OFF(log_format),
     .def = LOG_FORMAT_LOGFMT,
     .names = log_format_names,
     .arg = "FORMAT",
     .help = "logfmt or json",
     .reload = OPT_RELOAD,
     .parts = OPT_PART_LOG},
    {.name = "once",
     .type = OPT_BOOL,
     .offset = OFF(once),
     .flags = OPT_CLI_ONLY | OPT_PRESTART,
     .help = "collect one round, print the metrics to stdout and exit"},
    /* --canary.reset-reference and the canary's other one-shot commands (collectors/canary) */
    {.name = "canary", .type = OPT_FRAGMENT, .flags = OPT_CLI_ONLY},
    {.name = "check-config",
     .type = OPT_BOOL,
     .offset = OFF(check_config),
     .flags = OPT_CLI_ONLY,
     .help = "check flags and config file, print the effective config and exit"},
    {.name = "version",
     .type = OPT_BOOL,
     .offset = OFF(version),
     .flags = OPT_CLI_ONLY,
     .help = "print the version and exit"},
    {.name = "help",
     .type = OPT_BOOL,
     .offset = OFF(help),
     .flags = OPT_CLI_ONLY,
     .help = "print this help and exit"},
};

const size_t options_table_size = ARRAY_SIZE(options_table);
