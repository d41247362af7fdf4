/* The canary collector as the daemon drives it: prober threads measure on their own; a round
 * copies out what they measured, and succeeds while no target is down. The landing page gets a
 * row per target. */
#include "canary_collector.h"

#include <stdio.h>
#include <stdlib.h>

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

/* Per target: up, recent medians of both regimes, the idle baseline and degradation, busy/idle
 * and flush ratios, probes. */
static void cc_summarize(const struct mset *set, struct summary *sum)
{
        static const char *const cols[] = {"path",
                                           "device",
                                           "mode",
                                           "up",
                                           "idle median 5m (ms)",
                                           "busy median 5m (ms)",
                                           "busy/idle",
                                           "idle baseline (ms)",
                                           "idle degradation",
                                           "flushes per probe",
                                           "probes"};
        const struct mfamily *up = mset_find(set, CANARY_FAMILY_TARGET_UP);
        struct summary_table *t =
            summary_table(sum, "Sync canary", cols, ARRAY_SIZE(cols), 0, NULL, false);
        struct msample sm;
        size_t pos = 0;
        char lb[8192];

        while (up && mfamily_next(up, &pos, &sm, lb, sizeof lb)) {
                char path[4096], dev[64], mode[32], v[8][32];
                const char *row[] = {path, dev,  mode, v[0], v[1], v[2],
                                     v[3], v[4], v[5], v[6], v[7]};
                path[0] = dev[0] = mode[0] = 0;
                labels_get(sm.labels, "path", path, sizeof path);
                labels_get(sm.labels, "device", dev, sizeof dev);
                labels_get(sm.labels, "mode", mode, sizeof mode);
                snprintf(v[0], sizeof v[0], "%s",
                         (sm.is_int ? (double)sm.u : sm.d) > 0 ? "yes" : "no");
                cell(v[1], sizeof v[1],
                     1000 * target_value(set, CANARY_FAMILY_RECENT, path, mode, "idle", "0.5"), 3);
                cell(v[2], sizeof v[2],
                     1000 * target_value(set, CANARY_FAMILY_RECENT, path, mode, "busy", "0.5"), 3);
                cell(v[3], sizeof v[3],
                     target_value(set, CANARY_FAMILY_BUSY_IDLE, path, mode, NULL, NULL), 2);
                cell(v[4], sizeof v[4],
                     1000 * target_value(set, CANARY_FAMILY_BASELINE, path, mode, "idle", NULL), 3);
                cell(v[5], sizeof v[5],
                     target_value(set, CANARY_FAMILY_DEGRADATION, path, mode, "idle", NULL), 2);
                cell(v[6], sizeof v[6],
                     target_value(set, CANARY_FAMILY_FLUSH_RATIO, path, mode, NULL, NULL), 2);
                cell(v[7], sizeof v[7],
                     target_value(set, CANARY_FAMILY_PROBES, path, mode, NULL, NULL), 0);
                summary_row(t, row);
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
    .summarize = cc_summarize,
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
            .disk_id = h->disk_id,
            .disk_id_ud = h->disk_id_ud,
        };
        if (!cur)
                return canary_collector_new(&c);
        r = cur->ops->reconfigure(cur, &c);
        if (r < 0)
                log_errno(LOG_LEVEL_ERROR, r, "cannot start a canary thread", NULL);
        return cur;
}

const struct collector_def canary_collector_def = {
    .name = "canary",
    .help = "what a commit costs: timed write + fdatasync probes on each --canary.path",
    .default_enabled = true,
    .options_size = sizeof(struct canary_options),
    .setup = cc_setup,
};
