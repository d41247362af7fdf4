/* The canary collector as the daemon drives it: prober threads measure on their own; a round
 * copies out what they measured, and succeeds while no target is down. The landing page gets a
 * row per target. */
#include "canary_collector.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "canary_records.h"
#include "canary_reset.h"
#include "log.h"

struct canary_collector {
        struct collector base;
        struct canary *canary;
        usec_t first_cycle; /* the longest a first cycle takes: the probe, its burst */
};

static usec_t first_cycle(const struct canary_config *cfg)
{
        return (1 + cfg->burst) * cfg->timeout + 100 * USEC_PER_MSEC;
}

static struct canary *canary_of(struct collector *c)
{
        return ((struct canary_collector *)c)->canary;
}

static int cc_start(struct collector *c)
{
        return canary_start(canary_of(c));
}

static void cc_export(struct collector *c, struct mset *out)
{
        canary_export(canary_of(c), out);
}

static bool cc_healthy(struct collector *c)
{
        return canary_targets_down(canary_of(c)) == 0;
}

/* A cell with the value, or a dash when there is none (NaN). */
static void cell(char *buf, size_t size, double v, int decimals)
{
        if (v == v)
                snprintf(buf, size, "%.*f", decimals, v);
        else
                snprintf(buf, size, "-");
}

/* The sample of family name for the target with path and mode (and the regime and quantile
 * labels when not NULL), or NaN. */
static double target_value(const struct mset *set, const char *name, const char *path,
                           const char *mode, const char *regime, const char *q)
{
        const char *want[9] = {"path", path, "mode", mode};
        size_t k = 4;

        if (regime) {
                want[k++] = "regime";
                want[k++] = regime;
        }
        if (q) {
                want[k++] = "quantile";
                want[k++] = q;
        }
        want[k] = NULL;
        return mset_value(&set, 1, name, want);
}

/* The thresholds of the canary's facts in the disk view: the alert rules' (etc/prometheus/
 * diskpulse.rules.yml) DiskpulseSyncLatencyDrift (drift 1.5; -Doubled, from 2, is a warning
 * too), -Degraded (degradation 1.5), -Trend (1.26 a month on 14 daily medians, 10 % above new). */
#define CC_DRIFT_WARNING 1.5
#define CC_DEGRADED      1.5
#define CC_TREND         1.26
#define CC_TREND_DAYS    14
#define CC_TREND_DRIFT   1.1

/* Marks every disk backing the target (diskpulse_sync_backing_disk_info) as one its flushes do
 * not reach. */
static void no_flush(const struct mset *set, struct summary *sum, const char *path,
                     const char *mode)
{
        const struct mfamily *f = mset_find(set, "diskpulse_sync_backing_disk_info");
        char lb[8192], p[4096], m[32], disk[64];
        struct msample sm;
        size_t pos = 0;

        while (f && mfamily_next(f, &pos, &sm, lb, sizeof lb)) {
                struct summary_disk *d;
                if (!labels_get(sm.labels, "path", p, sizeof p) || strcmp(p, path) != 0 ||
                    !labels_get(sm.labels, "mode", m, sizeof m) || strcmp(m, mode) != 0 ||
                    !labels_get(sm.labels, "disk", disk, sizeof disk))
                        continue;
                d = summary_disk(sum, disk, true);
                if (d)
                        d->flags |= SUMMARY_DISK_NO_FLUSH;
        }
}

/* One regime of a target: its row, and its facts on the disk d (may be NULL). */
static void regime_row(const struct mset *set, struct summary_table *t, struct summary_disk *d,
                       const char *const id[3], const char *state, const char *regime)
{
        const char *path = id[0], *mode = id[2],
                   *busy = strcmp(regime, "busy") == 0 ? " (busy)" : "";
        double med = target_value(set, CANARY_FAMILY_RECENT, path, mode, regime, "0.5");
        double ref = target_value(set, CANARY_FAMILY_REFERENCE, path, mode, regime, NULL);
        double drift = target_value(set, CANARY_FAMILY_DRIFT, path, mode, regime, NULL);
        double degr = target_value(set, CANARY_FAMILY_DEGRADATION, path, mode, regime, NULL);
        double trend = target_value(set, CANARY_FAMILY_TREND, path, mode, regime, NULL);
        double days = target_value(set, CANARY_FAMILY_TREND_DAYS, path, mode, regime, NULL);
        char v[5][32];
        const char *row[] = {id[0], *id[1] ? id[1] : "-", id[2], regime, state, v[0], v[1], v[2],
                             v[3]};

        cell(v[0], sizeof v[0], 1000 * med, 3);
        cell(v[1], sizeof v[1], 1000 * ref, 3);
        cell(v[2], sizeof v[2], drift, 2);
        cell(v[3], sizeof v[3], trend, 2);
        summary_row(t, row);
        if (!d)
                return;
        if (drift > CC_DRIFT_WARNING)
                summary_fact(d, SUMMARY_WARNING, "commit latency %.2fx its reference%s", drift,
                             busy);
        else if (degr > CC_DEGRADED)
                summary_fact(d, SUMMARY_WARNING, "commit latency %.2fx its baseline%s", degr, busy);
        if (trend > CC_TREND && days >= CC_TREND_DAYS && drift > CC_TREND_DRIFT)
                summary_fact(d, SUMMARY_WARNING, "commit latency grows %.2fx a month%s", trend,
                             busy);
}

/* Per target and regime (busy only where it has series): state, recent median, reference, drift and trend; the facts of its disk
 * (a probe stuck, the target down, latency against the reference, the baseline, its trend, no
 * flush reaching a disk with a write-back cache). */
void canary_summarize(const struct mset *set, struct summary *sum)
{
        static const char *const cols[] = {"path",         "device", "mode",
                                           "regime",       "state",  "p50_5m_ms",
                                           "reference_ms", "drift",  "trend_30d"};
        const struct mfamily *up = mset_find(set, CANARY_FAMILY_TARGET_UP);
        struct summary_table *t =
            summary_table(sum, "Sync canary", cols, ARRAY_SIZE(cols), 0, NULL, false);
        struct msample sm;
        size_t pos = 0;
        char lb[8192];

        summary_note(t,
                     "p50_5m_ms: median of the recent window (the last 5 minutes, at least the "
                     "last 10 probes; idle: each cycle's spaced probe, busy: its burst); "
                     "reference_ms: the disk's as-new median (its first 7 daily medians); drift: "
                     "p50 / reference; trend_30d: growth of the daily median per 30 days. \"-\": "
                     "not learnt yet.");
        while (up && mfamily_next(up, &pos, &sm, lb, sizeof lb)) {
                char path[4096], dev[64], mode[32];
                const char *id[3] = {path, dev, mode}, *state;
                struct summary_disk *d;
                bool is_up = (sm.is_int ? (double)sm.u : sm.d) > 0, stuck;
                path[0] = dev[0] = mode[0] = 0;
                labels_get(sm.labels, "path", path, sizeof path);
                labels_get(sm.labels, "device", dev, sizeof dev);
                labels_get(sm.labels, "mode", mode, sizeof mode);
                stuck = target_value(set, "diskpulse_sync_stuck", path, mode, NULL, NULL) > 0;
                state = stuck ? "stuck" : is_up ? "up" : "down";
                d = *dev ? summary_disk(sum, dev, true) : NULL;
                if (d && stuck)
                        summary_fact(d, SUMMARY_CRITICAL, "probe stuck");
                else if (d && !is_up)
                        summary_fact(d, SUMMARY_WARNING, "canary target down");
                regime_row(set, t, d, id, state, "idle");
                /* busy while bursts are on or were (the regime's series exist) */
                d = *dev ? summary_disk(sum, dev, false) : NULL; /* the view may have grown */
                if (target_value(set, CANARY_FAMILY_SAMPLES, path, mode, "busy", NULL) >= 0)
                        regime_row(set, t, d, id, state, "busy");
                if (strcmp(mode, "direct") != 0 &&
                    target_value(set, CANARY_FAMILY_FLUSH_RATIO, path, mode, NULL, NULL) == 0)
                        no_flush(set, sum, path, mode);
        }
}

static int cc_reconfigure(struct collector *c, const void *settings)
{
        ((struct canary_collector *)c)->first_cycle = first_cycle(settings);
        return canary_reconfigure(canary_of(c), settings);
}

/* Waits for one cycle per target (the spaced probe and its burst); a hung probe shows as stuck
 * after --canary.timeout and ends its cycle. */
static int cc_settle(struct collector *c)
{
        (void)canary_wait_first(canary_of(c), ((struct canary_collector *)c)->first_cycle);
        return 0;
}

static void cc_free(struct collector *c)
{
        /* Waits at most a few hundred ms: a probe blocked in the kernel is abandoned. */
        canary_free(canary_of(c));
        free(c);
}

static const struct collector_ops cc_ops = {
    .name = "canary",
    .start = cc_start,
    .export = cc_export,
    .healthy = cc_healthy,
    .summarize = canary_summarize,
    .reconfigure = cc_reconfigure,
    .begin_once = cc_start,
    .settle = cc_settle,
    .free = cc_free,
};

struct collector *canary_collector_new(const struct canary_config *cfg)
{
        struct canary_collector *c = xcalloc(1, sizeof(*c));

        c->base.ops = &cc_ops;
        c->canary = canary_new(cfg);
        c->first_cycle = first_cycle(cfg);
        return &c->base;
}

/* The baselines' disk key (canary_disk_id()) from the host's identity facts; ud: the host's
 * struct collector_disk_ids, which lives as long as the process. */
int canary_collector_disk_id(void *ud, const char *device, char *buf, size_t size)
{
        const struct collector_disk_ids *ids = ud;
        char wwn[128], serial[128];
        int r = ids->lookup(ids, device, wwn, sizeof wwn, serial, sizeof serial);

        return r < 0 ? r : canary_disk_id(buf, size, wwn, serial);
}

static struct collector *cc_setup(const struct collector_host *h, const void *opts,
                                  struct collector *cur)
{
        const struct canary_options *o = opts;
        _cleanup_free_ struct canary_target_config *t = xcalloc(o->n_paths + 1, sizeof(*t));
        struct canary_config c;
        int state_fd = cur ? -1 : h->state_dir(h); /* ignored by a reconfigure */
        int r;

        for (size_t i = 0; i < o->n_paths; i++)
                t[i] = (struct canary_target_config){.path = o->paths[i].path,
                                                     .mode = o->paths[i].mode};
        c = (struct canary_config){
            .targets = t,
            .n_targets = o->n_paths,
            .interval = o->interval,
            .burst = o->burst,
            .size = (size_t)o->size,
            .timeout = o->timeout,
            .baseline_period = o->baseline_period,
            .state_dir_fd = state_fd,
            .sysfs_fd = h->sysfs_fd,
            .disk_id = h->disk_ids ? canary_collector_disk_id : NULL,
            .disk_id_ud = (void *)h->disk_ids,
        };
        if (!cur)
                return canary_collector_new(&c);
        r = cur->ops->reconfigure(cur, &c);
        if (r < 0)
                log_errno(LOG_LEVEL_ERROR, r, "cannot start a canary thread", NULL);
        return cur;
}

/* --canary.path=DIR[:MODE]: DIR absolute, in its normal form (canary_path_normalize(): "DIR/",
 * "DIR/." and "/a/../DIR" are DIR, the path the records are keyed by and an import takes); the
 * part after the last ':' is the mode when it holds no '/' (a directory whose name has a ':' is
 * written DIR:fdatasync). */
static int path_parse(const struct opt_def *d, const char *value, const void *elems, size_t n,
                      void *elem, char *why, size_t whysz)
{
        const struct canary_path_option *have = elems;
        struct canary_path_option *p = elem;
        char *path = xstrdup(value), norm[4096];
        enum canary_mode mode = CANARY_MODE_FDATASYNC;
        char *colon = strrchr(path, ':');

        (void)d;
        if (colon && !strchr(colon, '/')) {
                if (canary_mode_from_string(colon + 1, &mode) < 0) {
                        snprintf(why, whysz,
                                 "\"%s\" (unknown mode \"%s\"; expected fdatasync, append, dsync "
                                 "or direct)",
                                 value, colon + 1);
                        free(path);
                        return -EINVAL;
                }
                *colon = 0;
        }
        if (canary_path_normalize(path, norm, sizeof norm) < 0) {
                snprintf(why, whysz,
                         "\"%s\" (expected an absolute directory, optionally followed by :MODE)",
                         value);
                free(path);
                return -EINVAL;
        }
        free(path);
        path = xstrdup(norm);
        for (size_t i = 0; i < n; i++)
                if (have[i].mode == mode && strcmp(have[i].path, path) == 0) {
                        snprintf(why, whysz, "\"%s\" is given twice", value);
                        free(path);
                        return -EINVAL;
                }
        *p = (struct canary_path_option){.path = path, .mode = mode};
        return 0;
}

static void path_copy(void *dst, const void *src)
{
        const struct canary_path_option *s = src;

        *(struct canary_path_option *)dst =
            (struct canary_path_option){.path = xstrdup(s->path), .mode = s->mode};
}

static bool path_equal(const void *a, const void *b)
{
        const struct canary_path_option *x = a, *y = b;

        return x->mode == y->mode && strcmp(x->path, y->path) == 0;
}

static void path_free(void *elem)
{
        free(((struct canary_path_option *)elem)->path);
}

static const char *path_format(const struct opt_def *d, const void *elem, char *buf, size_t size)
{
        const struct canary_path_option *p = elem;

        (void)d;
        snprintf(buf, size, "%s:%s", p->path, canary_mode_to_string(p->mode));
        return buf;
}

static const struct opt_type_ops path_custom = {
    .size = sizeof(struct canary_path_option),
    .parse = path_parse,
    .copy = path_copy,
    .equal = path_equal,
    .free = path_free,
    .format = path_format,
};

#define OFF(f) offsetof(struct canary_options, f)

/* Its flags, in the order of --help and the dump. Each is applied at once on SIGHUP (to this
 * collector: the daemon adds its part) but canary.baseline-period, read at start. */
static const struct opt_def canary_options_def[] = {
    {.name = "canary.path",
     .type = OPT_CUSTOM,
     .offset = OFF(paths),
     .count_offset = OFF(n_paths),
     .custom = &path_custom,
     .arg = "DIR[:MODE]",
     .help = "probe the filesystem of DIR; MODE fdatasync (default), append, dsync or direct; "
             "repeatable",
     .help_default = ": the state directory",
     .reload = OPT_RELOAD},
    {.name = "canary.interval",
     .type = OPT_DURATION,
     .offset = OFF(interval),
     .def = 180 * USEC_PER_SEC,
     .min = 100 * USEC_PER_MSEC,
     .max = 86400 * USEC_PER_SEC,
     .arg = "DUR",
     .help = "time between two probe cycles of a canary target, +-10% jitter",
     .reload = OPT_RELOAD},
    {.name = "canary.burst",
     .type = OPT_UINT,
     .offset = OFF(burst),
     .def = 16,
     .min = 0,
     .max = CANARY_BURST_MAX,
     .arg = "N",
     .help = "back-to-back probes after each spaced one, their median the busy regime; 0: none",
     .reload = OPT_RELOAD},
    {.name = "canary.size",
     .type = OPT_SIZE,
     .offset = OFF(size),
     .def = 4096,
     .min = 1,
     .max = CANARY_SIZE_MAX,
     .arg = "BYTES",
     .help = "bytes written by each probe; k, M suffixes",
     .reload = OPT_RELOAD},
    {.name = "canary.timeout",
     .type = OPT_DURATION,
     .offset = OFF(timeout),
     .def = 30 * USEC_PER_SEC,
     .min = 10 * USEC_PER_MSEC,
     .max = 3600 * USEC_PER_SEC,
     .arg = "DUR",
     .help = "a probe running longer is stuck; no new probe starts until it returns",
     .reload = OPT_RELOAD},
    {.name = "canary.baseline-period",
     .type = OPT_DURATION,
     .offset = OFF(baseline_period),
     .def = 3600 * USEC_PER_SEC,
     .min = 1 * USEC_PER_SEC,
     .max = 3600 * USEC_PER_SEC,
     .arg = "DUR",
     .help = "for tests and evaluation only: the baseline's hour lasts DUR but no "
             "less than the time between two probes, so the reference (7 days of 24 hours) and "
             "the trend come sooner only with --canary.interval at most DUR/6 (at 3m a day takes "
             "about 72 minutes whatever DUR); the recent window behind the ratios is scaled with "
             "DUR (5m x DUR/1h); read at start"},
};

/* Its one-shot commands' flags (canary_command.c), command-line only. */
static const struct opt_def canary_command_options_def[] = {
    {.name = "canary.reset-reference",
     .type = OPT_STRING,
     .offset = OFF(reset_reference),
     .flags = OPT_CLI_ONLY,
     .arg = "PATH",
     .help = "forget the reference, daily medians and trend of the canary target PATH (every "
             "disk, mode and regime of it) in the state directory's file and exit; while "
             "diskpulse is stopped"},
    {.name = "canary.export-records",
     .type = OPT_STRING,
     .offset = OFF(export_disk),
     .flags = OPT_CLI_ONLY,
     .arg = "DISK",
     .help = "print the state directory's records of DISK (a device name such as sdb, or an "
             "identity such as wwn:0x5000c500a1b2c3d4) as a file for --canary.import-records, "
             "and exit"},
    {.name = "canary.import-records",
     .type = OPT_STRING,
     .offset = OFF(import_file),
     .flags = OPT_CLI_ONLY,
     .arg = "FILE",
     .help = "add one disk's records from FILE (- for standard input), written by "
             "--canary.export-records, to the state directory's file and exit; the disk must be "
             "on this host, each record's path a directory on it; while diskpulse is stopped"},
    {.name = "canary.import-path",
     .type = OPT_STRING,
     .offset = OFF(import_path),
     .flags = OPT_CLI_ONLY,
     .arg = "PATH",
     .help = "with --canary.import-records: the canary target the records are for on this host, "
             "when the disk's filesystem is mounted elsewhere than where they were exported; a "
             "directory on that disk"},
};

/* No --canary.path given: the state directory, where the baselines live too. */
static int cc_complete(void *opts, const char *state_dir, usec_t interval, char *err, size_t errsz)
{
        struct canary_options *o = opts;
        char cwd[4096], why[4400], *abs = NULL;
        const char *dir = state_dir;
        struct canary_path_option p;
        int r;

        (void)interval;
        if (o->n_paths > 0)
                return 0;
        if (dir[0] != '/' && getcwd(cwd, sizeof cwd)) {
                abs = xmalloc(strlen(cwd) + strlen(dir) + 2);
                sprintf(abs, "%s/%s", cwd, dir);
                dir = abs;
        }
        r = path_parse(NULL, dir, NULL, 0, &p, why, sizeof why);
        free(abs);
        if (r < 0) {
                snprintf(err, errsz, "state.directory: invalid value for canary.path: %s", why);
                return r;
        }
        o->paths = xmalloc(sizeof(p));
        o->paths[0] = p;
        o->n_paths = 1;
        return 0;
}

const struct collector_def canary_collector_def = {
    .name = "canary",
    .help = "what a commit costs: timed write + fdatasync probes on each --canary.path",
    .default_enabled = true,
    .options = canary_options_def,
    .n_options = sizeof(canary_options_def) / sizeof(canary_options_def[0]),
    .options_size = sizeof(struct canary_options),
    .command_options = canary_command_options_def,
    .n_command_options = ARRAY_SIZE(canary_command_options_def),
    .complete = cc_complete,
    .commanded = canary_commanded,
    .command = canary_command,
    .setup = cc_setup,
    .uses_state_dir = true,
};
