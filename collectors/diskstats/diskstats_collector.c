/* The diskstats collector as the daemon drives it: a round reads /proc/diskstats and exports;
 * the landing page's disk view gets iostat's numbers per device. */
#include "diskstats_collector.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct ds_collector {
        struct collector base;
        struct diskstats *ds;
        char *procfs;
        struct ratelimit rl; /* a failed read is logged once in ten minutes */
};

static struct ds_collector *ds_of(struct collector *c)
{
        return (struct ds_collector *)c;
}

static int ds_collect(struct collector *c, usec_t now)
{
        struct ds_collector *d = ds_of(c);
        int r = diskstats_sample(d->ds, now);

        if (r == -EINVAL && ratelimit_ok(&d->rl, now))
                log_error("cannot read diskstats: not a regular file", "procfs", d->procfs);
        else if (r < 0 && ratelimit_ok(&d->rl, now))
                log_errno(LOG_LEVEL_ERROR, r, "cannot read diskstats", "procfs", d->procfs, NULL);
        return r < 0 ? r : 0;
}

static void ds_export(struct collector *c, struct mset *out)
{
        diskstats_export(ds_of(c)->ds, out);
}

/* Gauge g of the device in row of table t: straight from the table when g is a column of it
 * (so that a round with 10,000 devices pays for no search), else looked up; NaN when absent. */
static double row_gauge(const struct mset *set, const struct mfamily *g, const struct mtable *t,
                        size_t row, const char *dev)
{
        if (!g)
                return 0.0 / 0.0;
        if (g->table == t)
                return t->present[row] & (1u << g->col) ? mtable_get_double(t, row, g->col)
                                                        : 0.0 / 0.0;
        return mset_value(&set, 1, g->name, (const char *const[]){"device", dev, NULL});
}

/* The disk view's iostat columns of every device (the first SUMMARY_MAX_DISKS), and whether its
 * write cache is volatile; a table of the devices' identity (which disk to pull). */
static void ds_summarize(const struct mset *set, struct summary *sum)
{
        static const struct {
                const char *name;
                enum summary_disk_value v;
        } cols[] = {
            {DISKSTATS_FAMILY_READ_IOPS, SUMMARY_READS},
            {DISKSTATS_FAMILY_WRITE_IOPS, SUMMARY_WRITES},
            {DISKSTATS_FAMILY_READ_AWAIT, SUMMARY_READ_AWAIT},
            {DISKSTATS_FAMILY_WRITE_AWAIT, SUMMARY_WRITE_AWAIT},
            {DISKSTATS_FAMILY_QUEUE_DEPTH, SUMMARY_QUEUE_DEPTH},
            {DISKSTATS_FAMILY_UTILIZATION, SUMMARY_UTIL},
        };
        const struct mfamily *info = mset_find(set, DISKSTATS_FAMILY_INFO);
        const struct mfamily *cache = mset_find(set, DISKSTATS_FAMILY_WRITE_CACHE);
        const struct mtable *t = info ? info->table : NULL;
        static const char *const idcols[] = {"device", "model", "serial", "write cache"};
        struct summary_table *id = summary_table(sum, "Identity", idcols, ARRAY_SIZE(idcols),
                                                 SUMMARY_MAX_DISKS, "devices", false);
        const struct mfamily *fam[ARRAY_SIZE(cols)];
        size_t shown = 0;

        for (size_t k = 0; k < ARRAY_SIZE(cols); k++)
                fam[k] = mset_find(set, cols[k].name);
        for (size_t row = 0; t && row < t->added; row++) {
                char lb[8192], dev[64] = "", mode[32] = "", model[128] = "", serial[128] = "";
                const char *idrow[] = {dev, model, serial, mode};
                struct summary_disk *d;
                if (!(t->present[row] & (1u << info->col)))
                        continue;
                mtable_row_labels(t, row, info->label_mask, lb, sizeof lb);
                labels_get(lb, "device", dev, sizeof dev);
                labels_get(lb, "model", model, sizeof model);
                labels_get(lb, "serial", serial, sizeof serial);
                d = summary_disk(sum, dev, true);
                if (!d)
                        break;
                shown++;
                for (size_t k = 0; k < ARRAY_SIZE(cols); k++)
                        d->v[cols[k].v] = row_gauge(set, fam[k], t, row, dev);
                if (cache && cache->table == t && (t->present[row] & (1u << cache->col))) {
                        mtable_row_labels(t, row, cache->label_mask, lb, sizeof lb);
                        if (labels_get(lb, "mode", mode, sizeof mode) &&
                            strcmp(mode, "write back") == 0)
                                d->flags |= SUMMARY_DISK_WRITE_BACK;
                }
                for (size_t k = 1; k < ARRAY_SIZE(idrow); k++)
                        if (!*idrow[k])
                                idrow[k] = "-"; /* unknown */
                summary_row(id, idrow);
        }
        if (info && info->n > shown)
                sum->disks_more = info->n - shown;
        sum->disks_span = mset_value(&set, 1, DISKSTATS_FAMILY_SPAN, (const char *const[]){NULL});
        id->more = sum->disks_more;
}

static int ds_reconfigure(struct collector *c, const void *settings)
{
        const struct diskstats_settings *s = settings;
        struct ds_collector *d = ds_of(c);

        diskstats_reconfigure(d->ds, &s->cfg);
        free(d->procfs);
        d->procfs = xstrdup(s->procfs ? s->procfs : "");
        return 0;
}

static void ds_device_event(struct collector *c, const char *device)
{
        diskstats_invalidate(ds_of(c)->ds, device);
}

static void ds_free(struct collector *c)
{
        struct ds_collector *d = ds_of(c);

        diskstats_free(d->ds);
        free(d->procfs);
        free(d);
}

static const struct collector_ops ds_ops = {
    .name = "diskstats",
    .collect = ds_collect,
    /* a window's start: the same read, its page made by the next round */
    .sample = ds_collect,
    .export = ds_export,
    .summarize = ds_summarize,
    .reconfigure = ds_reconfigure,
    .device_event = ds_device_event,
    .devices = diskstats_collector_devices,
    .free = ds_free,
};

struct collector *diskstats_collector_new(const struct diskstats_settings *s)
{
        struct ds_collector *d = xcalloc(1, sizeof(*d));

        d->base.ops = &ds_ops;
        d->ds = diskstats_new(&s->cfg);
        d->procfs = xstrdup(s->procfs ? s->procfs : "");
        d->rl = (struct ratelimit){.interval = 600 * USEC_PER_SEC};
        return &d->base;
}

size_t diskstats_collector_devices(const struct collector *c)
{
        return c ? diskstats_device_count(((const struct ds_collector *)c)->ds) : 0;
}

static struct collector *ds_setup(const struct collector_host *h, const void *opts,
                                  struct collector *cur)
{
        const struct diskstats_options *o = opts;
        struct diskstats_settings s = {
            .cfg = {.procfs_fd = h->procfs_fd,
                    .devsrc = h->devsrc,
                    .filter = h->filter,
                    .interval = h->interval,
                    .window = o->window,
                    /* A safety net for what changes without an event (a write cache mode
                     * switched by hand): cheap (a stamp per device), and five minutes apart so
                     * that 1,000 devices cost little. */
                    .identity_refresh = 300 * USEC_PER_SEC},
            .procfs = h->procfs};

        if (!cur)
                return diskstats_collector_new(&s);
        (void)cur->ops->reconfigure(cur, &s); /* cannot fail */
        return cur;
}

/* At least diskstats.interval, at most 3600 of them. */
static int ds_complete(void *opts, const char *state_dir, usec_t interval, char *err, size_t errsz)
{
        const struct diskstats_options *o = opts;
        char a[32], b[32];

        (void)state_dir;
        if (o->window < interval) {
                snprintf(
                    err, errsz,
                    "invalid value for diskstats.window: %s is shorter than diskstats.interval "
                    "%s",
                    format_duration(o->window, a, sizeof a),
                    format_duration(interval, b, sizeof b));
                return -EINVAL;
        }
        if (o->window > 3600 * interval) {
                snprintf(
                    err, errsz,
                    "invalid value for diskstats.window: %s holds more than 3600 samples of %s",
                    format_duration(o->window, a, sizeof a),
                    format_duration(interval, b, sizeof b));
                return -EINVAL;
        }
        return 0;
}

static usec_t ds_window(const void *opts)
{
        return ((const struct diskstats_options *)opts)->window;
}

/* Its flags: the window is applied at once on SIGHUP (the daemon adds its part); at least
 * diskstats.interval, at most 3600 of them: checked with it, in ds_complete(). */
static const struct opt_def ds_options_def[] = {
    {.name = "diskstats.window",
     .type = OPT_DURATION,
     .offset = offsetof(struct diskstats_options, window),
     .def = 10 * USEC_PER_SEC,
     .arg = "DUR",
     .help = "window of the derived, iostat-like gauges",
     .help_min = "--diskstats.interval",
     .help_max = "3600 x --diskstats.interval",
     .reload = OPT_RELOAD},
};

const struct collector_def diskstats_collector_def = {
    .name = "diskstats",
    .help = "block device counters from /proc/diskstats, iostat's derived gauges and device "
            "facts",
    .default_enabled = true,
    .options = ds_options_def,
    .n_options = ARRAY_SIZE(ds_options_def),
    .options_size = sizeof(struct diskstats_options),
    .complete = ds_complete,
    .window = ds_window,
    .setup = ds_setup,
};
