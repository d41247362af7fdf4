/* Flags and the config file: one table, defaults < config file < command line. */
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "canary.h"
#include "cidr.h"
#include "fsroot.h"
#include "listen.h"

enum opt_kind {
        OPT_BOOL,
        OPT_STRING,
        OPT_STRV,
        OPT_DURATION,
        OPT_UINT,
        OPT_COUNT, /* 0 .. 65535 */
        OPT_LOGLEVEL,
        OPT_LOGFMT,
        OPT_REGEX,
        OPT_POWERMODE,
        OPT_CANARY_PATH,
        OPT_SIZE,
        OPT_CIDR
};

struct opt_def {
        const char *name;
        enum opt_kind kind;
        size_t offset;
        bool cli_only;
        const char *arg;
        const char *help;
};

#define OFF(f) offsetof(struct dp_options, f)

static const struct opt_def opts[] = {
    {"web.listen-address", OPT_STRV, OFF(listen), false, "[HOST]:PORT",
     "address to serve metrics on; repeatable (default :9477)"},
    {"web.systemd-socket", OPT_BOOL, OFF(systemd_socket), false, NULL,
     "use the sockets passed by systemd (also used whenever LISTEN_FDS is set)"},
    {"web.max-connections", OPT_UINT, OFF(max_connections), false, "N",
     "connections open at once, all addresses together; more are refused (default 512)"},
    {"web.max-connections-per-address", OPT_UINT, OFF(max_per_address), false, "N",
     "connections open at once from one IPv4 address or IPv6 /64 (default 16)"},
    {"web.read-header-timeout", OPT_DURATION, OFF(header_timeout), false, "DUR",
     "a request's headers must be complete this long after its start (default 5s)"},
    {"web.request-timeout", OPT_DURATION, OFF(request_timeout), false, "DUR",
     "a request must be answered this long after its start (default 30s)"},
    {"web.idle-timeout", OPT_DURATION, OFF(idle_timeout), false, "DUR",
     "a kept-alive connection may wait this long for its next request (default 2m)"},
    {"web.allow-from", OPT_CIDR, OFF(allow_from), false, "CIDR",
     "serve only clients in this network (ADDR or ADDR/PREFIX); repeatable (default: all)"},
    {"web.config.file", OPT_STRING, OFF(web_config_file), false, "FILE",
     "TLS, basic auth and response headers: an exporter-toolkit web config (YAML)"},
    {"config.file", OPT_STRING, OFF(config_file), true, "FILE",
     "config file of \"name = value\" lines; every flag can be set there, flags win"},
    {"path.procfs", OPT_STRING, OFF(procfs), false, "DIR", "procfs root (default /proc)"},
    {"path.sysfs", OPT_STRING, OFF(sysfs), false, "DIR", "sysfs root (default /sys)"},
    {"path.udev.data", OPT_STRING, OFF(udev_data), false, "DIR",
     "udev database (default /run/udev/data)"},
    {"path.dev", OPT_STRING, OFF(dev), false, "DIR", "device nodes (default /dev)"},
    {"collector.diskstats.device-include", OPT_REGEX, OFF(device_include), false, "RE",
     "monitor only devices whose name matches (Go RE2 syntax, as node_exporter)"},
    {"collector.diskstats.device-exclude", OPT_REGEX, OFF(device_exclude), false, "RE",
     "skip devices whose name matches (default: partitions, loop, ram, fd)"},
    {"diskstats.interval", OPT_DURATION, OFF(ds_interval), false, "DUR",
     "sampling period of /proc/diskstats (default 1s)"},
    {"diskstats.window", OPT_DURATION, OFF(ds_window), false, "DUR",
     "window of the derived, iostat-like gauges (default 10s)"},
    {"smart.interval", OPT_DURATION, OFF(smart_interval), false, "DUR",
     "how often each device's SMART data is read (default 10m)"},
    {"smart.timeout", OPT_DURATION, OFF(smart_timeout), false, "DUR",
     "a SMART read taking longer counts as timed out (default 10s)"},
    {"smart.powermode-check", OPT_POWERMODE, OFF(smart_powermode), false, "MODE",
     "never, standby or sleep: do not wake disks in that power mode (default standby)"},
    {"helper.zygote-grace", OPT_DURATION, OFF(zygote_grace), false, "DUR",
     "once the privileged zygote is lost, exit with status 75 after this long, so that the "
     "service manager restarts diskpulse (default 1m, 1s to 1h)"},
    {"canary.path", OPT_CANARY_PATH, OFF(canary), false, "DIR[:MODE]",
     "probe the filesystem of DIR; MODE fdatasync (default), append, dsync or direct; "
     "repeatable (default: the state directory)"},
    {"canary.interval", OPT_DURATION, OFF(canary_interval), false, "DUR",
     "time between two probe cycles of a canary target, +-10% jitter (default 3m)"},
    {"canary.burst", OPT_COUNT, OFF(canary_burst), false, "N",
     "back-to-back probes after each spaced one, their median the busy regime; 0: none "
     "(default 16)"},
    {"canary.size", OPT_SIZE, OFF(canary_size), false, "BYTES",
     "bytes written by each probe; k, M suffixes (default 4096)"},
    {"canary.timeout", OPT_DURATION, OFF(canary_timeout), false, "DUR",
     "a probe running longer is stuck; no new probe starts until it returns (default 30s)"},
    {"canary.baseline-period", OPT_DURATION, OFF(canary_baseline_period), false, "DUR",
     "for tests and evaluation only: the baseline's hour lasts DUR (1s to 1h), so its day is "
     "24 of them and the reference and trend come that much sooner; read at start "
     "(default 1h)"},
    {"state.directory", OPT_STRING, OFF(state_dir), false, "DIR",
     "persisted state (default $STATE_DIRECTORY or /var/lib/diskpulse)"},
    {"log.level", OPT_LOGLEVEL, OFF(log_level), false, "LEVEL",
     "debug, info, warn or error (default info)"},
    {"log.format", OPT_LOGFMT, OFF(log_format), false, "FORMAT", "logfmt or json (default logfmt)"},
    {"once", OPT_BOOL, OFF(once), true, NULL,
     "collect one round, print the metrics to stdout and exit"},
    {"canary.reset-reference", OPT_STRING, OFF(canary_reset_reference), true, "PATH",
     "forget the reference, daily medians and trend of the canary target PATH (every disk, mode "
     "and regime of it) in the state directory's file and exit; while diskpulse is stopped"},
    {"check-config", OPT_BOOL, OFF(check_config), true, NULL,
     "check flags and config file, print the effective config and exit"},
    {"version", OPT_BOOL, OFF(version), true, NULL, "print the version and exit"},
    {"help", OPT_BOOL, OFF(help), true, NULL, "print this help and exit"},
};

#define N_OPTS (ARRAY_SIZE(opts) + COLLECTOR_MAX)

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

static void set_string(char **dst, const char *v)
{
        free(*dst);
        *dst = xstrdup(v);
}

/* --canary.path=DIR[:MODE]: DIR absolute; the part after the last ':' is the mode when it
 * holds no '/' (a directory whose name has a ':' is written DIR:fdatasync). */
static int add_canary_path(struct dp_options *o, const char *value, const char *where, char *err,
                           size_t errsz)
{
        char *path = xstrdup(value);
        enum canary_mode mode = CANARY_MODE_FDATASYNC;
        char *colon = strrchr(path, ':');
        size_t len;

        if (colon && !strchr(colon, '/')) {
                if (canary_mode_from_string(colon + 1, &mode) < 0) {
                        fail(err, errsz,
                             "%sinvalid value for canary.path: \"%s\" (unknown mode \"%s\"; "
                             "expected fdatasync, append, dsync or direct)",
                             where, value, colon + 1);
                        free(path);
                        return -EINVAL;
                }
                *colon = 0;
        }
        len = strlen(path);
        while (len > 1 && path[len - 1] == '/')
                path[--len] = 0;
        if (path[0] != '/' || len >= 4096) {
                fail(err, errsz,
                     "%sinvalid value for canary.path: \"%s\" (expected an absolute directory, "
                     "optionally followed by :MODE)",
                     where, value);
                free(path);
                return -EINVAL;
        }
        for (size_t i = 0; i < o->n_canary; i++)
                if (o->canary[i].mode == mode && strcmp(o->canary[i].path, path) == 0) {
                        fail(err, errsz, "%sinvalid value for canary.path: \"%s\" is given twice",
                             where, value);
                        free(path);
                        return -EINVAL;
                }
        o->canary = xrealloc(o->canary, (o->n_canary + 1) * sizeof(*o->canary));
        o->canary[o->n_canary].path = path;
        o->canary[o->n_canary++].mode = mode;
        return 0;
}

/* Empties a repeatable option's list: values from a higher source replace the lower ones. */
static void reset_list(struct dp_options *o, size_t idx)
{
        if (idx >= ARRAY_SIZE(opts))
                return;
        if (opts[idx].kind == OPT_STRV) {
                for (size_t i = 0; i < o->n_listen; i++)
                        free(o->listen[i]);
                o->n_listen = 0;
        } else if (opts[idx].kind == OPT_CIDR) {
                for (size_t i = 0; i < o->n_allow_from; i++)
                        free(o->allow_from[i]);
                o->n_allow_from = 0;
        } else if (opts[idx].kind == OPT_CANARY_PATH) {
                for (size_t i = 0; i < o->n_canary; i++)
                        free(o->canary[i].path);
                o->n_canary = 0;
        }
}

/* Applies one value; idx indexes opts[] or, past it, the collector flags. */
static int apply(struct dp_options *o, size_t idx, const char *value, bool negated,
                 const char *where, char *err, size_t errsz)
{
        const struct opt_def *d = idx < ARRAY_SIZE(opts) ? &opts[idx] : NULL;
        const char *name = d ? d->name : collector_defs[idx - ARRAY_SIZE(opts)].name;
        char *base = (char *)o;
        int r;

        if (!d) {
                bool b = !negated;
                if (value && parse_bool(value, &b) < 0)
                        goto bad_bool;
                if (negated && value)
                        goto bad_bool;
                o->collector[idx - ARRAY_SIZE(opts)] = b;
                return 0;
        bad_bool:
                fail(err, errsz,
                     "%sinvalid value for collector.%s: \"%s\" (expected true or false)", where,
                     name, value);
                return -EINVAL;
        }

        if (d->kind == OPT_BOOL) {
                bool b = !negated;
                if (value && (negated || parse_bool(value, &b) < 0)) {
                        fail(err, errsz, "%sinvalid value for %s: \"%s\" (expected true or false)",
                             where, d->name, value);
                        return -EINVAL;
                }
                *(bool *)(base + d->offset) = b;
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
        switch (d->kind) {
        case OPT_STRING:
                if (!*value) {
                        fail(err, errsz, "%sinvalid value for %s: empty", where, d->name);
                        return -EINVAL;
                }
                set_string((char **)(base + d->offset), value);
                return 0;
        case OPT_STRV: {
                char host[256], port[8];
                if (listen_parse(value, host, sizeof host, port, sizeof port) < 0) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (expected [HOST]:PORT, e.g. :9477 or "
                             "[::1]:9477)",
                             where, d->name, value);
                        return -EINVAL;
                }
                o->listen = xrealloc(o->listen, (o->n_listen + 1) * sizeof(char *));
                o->listen[o->n_listen++] = xstrdup(value);
                return 0;
        }
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
                *(usec_t *)(base + d->offset) = u;
                return 0;
        }
        case OPT_UINT: {
                uint64_t v;
                if (parse_u64(value, &v) < 0 || v == 0 || v > 65535) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (expected a number from 1 to 65535)",
                             where, d->name, value);
                        return -EINVAL;
                }
                *(unsigned *)(base + d->offset) = (unsigned)v;
                return 0;
        }
        case OPT_COUNT: {
                uint64_t v;
                if (parse_u64(value, &v) < 0 || v > 65535) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (expected a number from 0 to 65535)",
                             where, d->name, value);
                        return -EINVAL;
                }
                *(unsigned *)(base + d->offset) = (unsigned)v;
                return 0;
        }
        case OPT_LOGLEVEL:
                if (log_level_from_string(value, (enum log_level *)(base + d->offset)) < 0) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (expected debug, info, warn or "
                             "error)",
                             where, d->name, value);
                        return -EINVAL;
                }
                return 0;
        case OPT_LOGFMT:
                if (log_format_from_string(value, (enum log_format *)(base + d->offset)) < 0) {
                        fail(err, errsz, "%sinvalid value for %s: \"%s\" (expected logfmt or json)",
                             where, d->name, value);
                        return -EINVAL;
                }
                return 0;
        case OPT_POWERMODE:
                if (smart_powermode_from_string(
                        value, (enum smart_powermode_check *)(base + d->offset)) < 0) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (expected never, standby or sleep)",
                             where, d->name, value);
                        return -EINVAL;
                }
                return 0;
        case OPT_CANARY_PATH:
                return add_canary_path(o, value, where, err, errsz);
        case OPT_CIDR: {
                struct cidr c;
                const char *why;
                if (cidr_parse(value, &c, &why) < 0) {
                        fail(err, errsz,
                             "%sinvalid value for %s: \"%s\" (%s; expected an address or "
                             "ADDR/PREFIX such as 10.0.0.0/8 or 2001:db8::/32)",
                             where, d->name, value, why);
                        return -EINVAL;
                }
                o->allow_from = xrealloc(o->allow_from, (o->n_allow_from + 1) * sizeof(char *));
                o->allow_from[o->n_allow_from++] = xstrdup(value);
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
                *(uint64_t *)(base + d->offset) = v;
                return 0;
        }
        case OPT_REGEX: {
                char msg[256];
                if (namefilter_check(value, msg, sizeof msg) < 0) {
                        fail(err, errsz, "%sinvalid value for %s: \"%s\" (%s)", where, d->name,
                             value, msg);
                        return -EINVAL;
                }
                set_string((char **)(base + d->offset), value);
                return 0;
        }
        default:
                return -EINVAL;
        }
}

/* Finds an option by name; sets *negated for "no-" forms. Returns its index or -1. */
static int lookup(const char *name, size_t len, bool allow_no, bool *negated)
{
        *negated = false;
        for (int pass = 0; pass < 2; pass++) {
                for (size_t i = 0; i < N_OPTS; i++) {
                        char full[96];
                        if (i < ARRAY_SIZE(opts))
                                snprintf(full, sizeof full, "%s", opts[i].name);
                        else
                                snprintf(full, sizeof full, "collector.%s",
                                         collector_defs[i - ARRAY_SIZE(opts)].name);
                        if (strlen(full) == len && strncmp(full, name, len) == 0)
                                return (int)i;
                }
                if (!allow_no || len < 3 || strncmp(name, "no-", 3) != 0)
                        return -1;
                name += 3;
                len -= 3;
                *negated = true;
        }
        return -1;
}

static bool is_bool_opt(size_t idx)
{
        return idx >= ARRAY_SIZE(opts) || opts[idx].kind == OPT_BOOL;
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
        bool reset[N_OPTS] = {false};
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
                bool negated;
                int idx;

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
                idx = lookup(key, strlen(key), false, &negated);
                if (idx < 0) {
                        fail(err, errsz, "%sunknown option \"%s\"", where, key);
                        return -EINVAL;
                }
                if ((size_t)idx < ARRAY_SIZE(opts) && opts[idx].cli_only) {
                        fail(err, errsz, "%s%s can only be given on the command line", where, key);
                        return -EINVAL;
                }
                if (from_cli[idx])
                        continue; /* flags win */
                if (!reset[idx]) {
                        reset_list(o, (size_t)idx);
                        reset[idx] = true;
                }
                r = apply(o, (size_t)idx, value, false, where, err, errsz);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void set_defaults(struct dp_options *o)
{
        const char *sd = getenv("STATE_DIRECTORY");

        memset(o, 0, sizeof(*o));
        o->max_connections = 512;
        o->max_per_address = 16;
        o->header_timeout = 5 * USEC_PER_SEC;
        o->request_timeout = 30 * USEC_PER_SEC;
        o->idle_timeout = 120 * USEC_PER_SEC;
        o->procfs = xstrdup("/proc");
        o->sysfs = xstrdup("/sys");
        o->udev_data = xstrdup("/run/udev/data");
        o->dev = xstrdup("/dev");
        o->ds_interval = USEC_PER_SEC;
        o->ds_window = 10 * USEC_PER_SEC;
        o->smart_interval = 600 * USEC_PER_SEC;
        o->smart_timeout = 10 * USEC_PER_SEC;
        o->smart_powermode = SMART_PM_STANDBY;
        o->zygote_grace = 60 * USEC_PER_SEC;
        o->canary_interval = 180 * USEC_PER_SEC;
        o->canary_burst = 16;
        o->canary_timeout = 30 * USEC_PER_SEC;
        o->canary_baseline_period = 3600 * USEC_PER_SEC;
        o->canary_size = 4096;
        /* systemd's StateDirectory= may list several, separated by ':'; the first is ours. */
        if (sd && *sd && *sd == '/') {
                o->state_dir = xstrdup(sd);
                char *colon = strchr(o->state_dir, ':');
                if (colon)
                        *colon = 0;
        } else {
                o->state_dir = xstrdup("/var/lib/diskpulse");
        }
        o->log_level = LOG_LEVEL_INFO;
        o->log_format = LOG_FORMAT_LOGFMT;
        for (size_t i = 0; i < COLLECTOR_MAX; i++)
                o->collector[i] = collector_defs[i].default_enabled;
}

static int validate(struct dp_options *o, char *err, size_t errsz)
{
        char a[32], b[32];

        if (o->ds_interval < 10 * USEC_PER_MSEC || o->ds_interval > 3600 * USEC_PER_SEC) {
                fail(err, errsz, "invalid value for diskstats.interval: %s (expected 10ms to 1h)",
                     format_duration(o->ds_interval, a, sizeof a));
                return -EINVAL;
        }
        if (o->ds_window < o->ds_interval) {
                fail(err, errsz,
                     "invalid value for diskstats.window: %s is shorter than diskstats.interval %s",
                     format_duration(o->ds_window, a, sizeof a),
                     format_duration(o->ds_interval, b, sizeof b));
                return -EINVAL;
        }
        if (o->ds_window / o->ds_interval > 3600) {
                fail(err, errsz,
                     "invalid value for diskstats.window: %s holds more than 3600 samples of %s",
                     format_duration(o->ds_window, a, sizeof a),
                     format_duration(o->ds_interval, b, sizeof b));
                return -EINVAL;
        }
        if (o->header_timeout < 100 * USEC_PER_MSEC || o->header_timeout > 3600 * USEC_PER_SEC) {
                fail(err, errsz,
                     "invalid value for web.read-header-timeout: %s (expected 100ms to 1h)",
                     format_duration(o->header_timeout, a, sizeof a));
                return -EINVAL;
        }
        if (o->request_timeout < o->header_timeout || o->request_timeout > 3600 * USEC_PER_SEC) {
                fail(err, errsz,
                     "invalid value for web.request-timeout: %s (expected web.read-header-timeout "
                     "%s to 1h)",
                     format_duration(o->request_timeout, a, sizeof a),
                     format_duration(o->header_timeout, b, sizeof b));
                return -EINVAL;
        }
        if (o->idle_timeout < 100 * USEC_PER_MSEC || o->idle_timeout > 3600 * USEC_PER_SEC) {
                fail(err, errsz, "invalid value for web.idle-timeout: %s (expected 100ms to 1h)",
                     format_duration(o->idle_timeout, a, sizeof a));
                return -EINVAL;
        }
        if (o->smart_interval < USEC_PER_SEC) {
                fail(err, errsz, "invalid value for smart.interval: %s (expected at least 1s)",
                     format_duration(o->smart_interval, a, sizeof a));
                return -EINVAL;
        }
        if (o->smart_timeout < 100 * USEC_PER_MSEC || o->smart_timeout > 600 * USEC_PER_SEC) {
                fail(err, errsz, "invalid value for smart.timeout: %s (expected 100ms to 10m)",
                     format_duration(o->smart_timeout, a, sizeof a));
                return -EINVAL;
        }
        if (o->zygote_grace < USEC_PER_SEC || o->zygote_grace > 3600 * USEC_PER_SEC) {
                fail(err, errsz, "invalid value for helper.zygote-grace: %s (expected 1s to 1h)",
                     format_duration(o->zygote_grace, a, sizeof a));
                return -EINVAL;
        }
        if (o->canary_interval < 100 * USEC_PER_MSEC || o->canary_interval > 86400 * USEC_PER_SEC) {
                fail(err, errsz, "invalid value for canary.interval: %s (expected 100ms to 24h)",
                     format_duration(o->canary_interval, a, sizeof a));
                return -EINVAL;
        }
        if (o->canary_burst > CANARY_BURST_MAX) {
                fail(err, errsz, "invalid value for canary.burst: %u (expected 0 to %d)",
                     o->canary_burst, CANARY_BURST_MAX);
                return -EINVAL;
        }
        if (o->canary_timeout < 10 * USEC_PER_MSEC || o->canary_timeout > 3600 * USEC_PER_SEC) {
                fail(err, errsz, "invalid value for canary.timeout: %s (expected 10ms to 1h)",
                     format_duration(o->canary_timeout, a, sizeof a));
                return -EINVAL;
        }
        if (o->canary_baseline_period < USEC_PER_SEC ||
            o->canary_baseline_period > 3600 * USEC_PER_SEC) {
                fail(err, errsz, "invalid value for canary.baseline-period: %s (expected 1s to 1h)",
                     format_duration(o->canary_baseline_period, a, sizeof a));
                return -EINVAL;
        }
        if (o->canary_size > CANARY_SIZE_MAX) {
                fail(err, errsz,
                     "invalid value for canary.size: %" PRIu64 " (expected 1 byte to 16M)",
                     o->canary_size);
                return -EINVAL;
        }
        if (o->n_canary == 0) {
                /* The default target: the state directory, where the baselines live too. */
                char where[] = "state.directory: ", cwd[4096], *abs = NULL;
                const char *dir = o->state_dir;
                int r;

                if (dir[0] != '/' && getcwd(cwd, sizeof cwd)) {
                        abs = xmalloc(strlen(cwd) + strlen(dir) + 2);
                        sprintf(abs, "%s/%s", cwd, dir);
                        dir = abs;
                }
                r = add_canary_path(o, dir, where, err, errsz);
                free(abs);
                if (r < 0)
                        return r;
        }
        if (o->n_listen == 0) {
                o->listen = xcalloc(1, sizeof(char *));
                o->listen[0] = xstrdup(":9477");
                o->n_listen = 1;
        }
        return 0;
}

int options_parse(int argc, char **argv, struct dp_options *ret, char *err, size_t errsz)
{
        bool from_cli[N_OPTS] = {false};
        struct dp_options o;
        int r;

        set_defaults(&o);
        for (int i = 1; i < argc; i++) {
                const char *arg = argv[i], *eq, *value = NULL;
                char where[16] = "";
                bool negated;
                size_t nlen;
                int idx;

                if (strcmp(arg, "-h") == 0)
                        arg = "--help";
                if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
                        fail(err, errsz, "unexpected argument \"%s\" (flags start with --)", arg);
                        goto fail;
                }
                arg += 2;
                eq = strchr(arg, '=');
                nlen = eq ? (size_t)(eq - arg) : strlen(arg);
                idx = lookup(arg, nlen, true, &negated);
                if (idx < 0) {
                        fail(err, errsz, "unknown flag --%.*s (see --help)", (int)nlen, arg);
                        goto fail;
                }
                if (eq)
                        value = eq + 1;
                else if (!is_bool_opt((size_t)idx) && !negated) {
                        if (i + 1 >= argc) {
                                fail(err, errsz, "flag --%.*s needs a value", (int)nlen, arg);
                                goto fail;
                        }
                        value = argv[++i];
                }
                if (!from_cli[idx])
                        reset_list(&o, (size_t)idx);
                from_cli[idx] = true;
                r = apply(&o, (size_t)idx, value, negated, where, err, errsz);
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
        for (size_t i = 0; i < o->n_listen; i++)
                free(o->listen[i]);
        free(o->listen);
        for (size_t i = 0; i < o->n_allow_from; i++)
                free(o->allow_from[i]);
        free(o->allow_from);
        free(o->config_file);
        free(o->web_config_file);
        free(o->procfs);
        free(o->sysfs);
        free(o->udev_data);
        free(o->dev);
        free(o->device_include);
        free(o->device_exclude);
        free(o->state_dir);
        free(o->canary_reset_reference);
        for (size_t i = 0; i < o->n_canary; i++)
                free(o->canary[i].path);
        free(o->canary);
        memset(o, 0, sizeof(*o));
}

void options_help(FILE *out)
{
        fputs("Usage: diskpulse [FLAGS]\n\n"
              "Watches block devices and serves Prometheus metrics.\n\nFlags:\n",
              out);
        for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
                char left[80];
                const struct opt_def *d = &opts[i];
                if (d->kind == OPT_BOOL)
                        snprintf(left, sizeof left, "--%s", d->name);
                else
                        snprintf(left, sizeof left, "--%s=%s", d->name, d->arg);
                fprintf(out, "  %-44s %s\n", left, d->help);
        }
        for (size_t i = 0; i < COLLECTOR_MAX; i++) {
                char left[80];
                snprintf(left, sizeof left, "--[no-]collector.%s", collector_defs[i].name);
                fprintf(out, "  %-44s %s (default %s)\n", left, collector_defs[i].help,
                        collector_defs[i].default_enabled ? "on" : "off");
        }
        fputs("\nDurations take ms, s, m, h (e.g. 500ms, 1m30s). Every flag can be set in the "
              "--config.file\nas \"name = value\" (without the leading --); flags win.\n",
              out);
}

void options_dump(const struct dp_options *o, FILE *out)
{
        char a[32];

        for (size_t i = 0; i < o->n_listen; i++)
                fprintf(out, "web.listen-address = %s\n", o->listen[i]);
        fprintf(out, "web.systemd-socket = %s\n", o->systemd_socket ? "true" : "false");
        fprintf(out, "web.max-connections = %u\n", o->max_connections);
        fprintf(out, "web.max-connections-per-address = %u\n", o->max_per_address);
        fprintf(out, "web.read-header-timeout = %s\n",
                format_duration(o->header_timeout, a, sizeof a));
        fprintf(out, "web.request-timeout = %s\n",
                format_duration(o->request_timeout, a, sizeof a));
        fprintf(out, "web.idle-timeout = %s\n", format_duration(o->idle_timeout, a, sizeof a));
        for (size_t i = 0; i < o->n_allow_from; i++)
                fprintf(out, "web.allow-from = %s\n", o->allow_from[i]);
        if (o->web_config_file)
                fprintf(out, "web.config.file = %s\n", o->web_config_file);
        fprintf(out, "path.procfs = %s\npath.sysfs = %s\npath.udev.data = %s\npath.dev = %s\n",
                o->procfs, o->sysfs, o->udev_data, o->dev);
        if (o->device_include)
                fprintf(out, "collector.diskstats.device-include = %s\n", o->device_include);
        fprintf(out, "collector.diskstats.device-exclude = %s\n",
                o->device_exclude ? o->device_exclude
                                  : (o->device_include ? "" : DEFAULT_DEVICE_EXCLUDE));
        fprintf(out, "diskstats.interval = %s\n", format_duration(o->ds_interval, a, sizeof a));
        fprintf(out, "diskstats.window = %s\n", format_duration(o->ds_window, a, sizeof a));
        fprintf(out, "smart.interval = %s\n", format_duration(o->smart_interval, a, sizeof a));
        fprintf(out, "smart.timeout = %s\n", format_duration(o->smart_timeout, a, sizeof a));
        fprintf(out, "smart.powermode-check = %s\n",
                (const char *[]){"never", "standby", "sleep"}[o->smart_powermode]);
        fprintf(out, "helper.zygote-grace = %s\n", format_duration(o->zygote_grace, a, sizeof a));
        for (size_t i = 0; i < o->n_canary; i++)
                fprintf(out, "canary.path = %s:%s\n", o->canary[i].path,
                        canary_mode_to_string(o->canary[i].mode));
        fprintf(out, "canary.interval = %s\n", format_duration(o->canary_interval, a, sizeof a));
        fprintf(out, "canary.burst = %u\n", o->canary_burst);
        fprintf(out, "canary.size = %" PRIu64 "\n", o->canary_size);
        fprintf(out, "canary.timeout = %s\n", format_duration(o->canary_timeout, a, sizeof a));
        fprintf(out, "canary.baseline-period = %s\n",
                format_duration(o->canary_baseline_period, a, sizeof a));
        for (size_t i = 0; i < COLLECTOR_MAX; i++)
                fprintf(out, "collector.%s = %s\n", collector_defs[i].name,
                        o->collector[i] ? "true" : "false");
        fprintf(out, "state.directory = %s\n", o->state_dir);
        fprintf(out, "log.level = %s\n",
                (const char *[]){"debug", "info", "warn", "error"}[o->log_level]);
        fprintf(out, "log.format = %s\n", o->log_format == LOG_FORMAT_JSON ? "json" : "logfmt");
}
