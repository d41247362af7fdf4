/* The SMART collector as the daemon drives it: its thread reads the devices on its own
 * schedule; a round copies out what it read last, and succeeds while the helper is up. */
#include "smart_collector.h"

#include <stddef.h>
#include <stdlib.h>

struct smart_collector {
        struct collector base;
        struct smart *smart;
        struct devio *io;
        bool (*io_up)(struct devio *io);
};

static struct smart_collector *sc_of(struct collector *c)
{
        return (struct smart_collector *)c;
}

static int sc_start(struct collector *c)
{
        return smart_start(sc_of(c)->smart);
}

static void sc_export(struct collector *c, struct mset *out)
{
        smart_export(sc_of(c)->smart, out);
}

static bool sc_healthy(struct collector *c)
{
        struct smart_collector *s = sc_of(c);

        return s->io && s->io_up && s->io_up(s->io);
}

static int sc_reconfigure(struct collector *c, const void *settings)
{
        const struct smart_settings *st = settings;
        struct smart_collector *s = sc_of(c);

        smart_reconfigure(s->smart, &st->cfg);
        s->io = st->cfg.io;
        s->io_up = st->io_up;
        return 0;
}

/* A device came, went or changed: the disks are enumerated again. */
static void sc_device_event(struct collector *c, const char *device)
{
        (void)device;
        smart_rescan(sc_of(c)->smart);
}

/* Every device read once, now, without the thread. */
static int sc_settle(struct collector *c)
{
        smart_read_all_now(sc_of(c)->smart);
        return 0;
}

static void sc_free(struct collector *c)
{
        struct smart_collector *s = sc_of(c);

        smart_free(s->smart);
        free(s);
}

/* The value of family name for device in set, or NaN. */
static double dev_value(const struct mset *set, const char *name, const char *dev)
{
        return mset_value(&set, 1, name, (const char *const[]){"device", dev, NULL});
}

/* Each read device's facts in the disk view, on the alert rules' conditions
 * (etc/prometheus/diskpulse.rules.yml: DiskpulseSmartUnhealthy, -SpareLow, -TemperatureCritical,
 * -TemperatureHigh, -WearExhausted, -SmartReadsFailing; as their value is now, without their
 * "for"). */
void smart_summarize(const struct mset *set, struct summary *sum)
{
        const struct mfamily *up = mset_find(set, "diskpulse_smart_up");
        char lb[8192], dev[64];
        struct msample sm;
        size_t pos = 0;

        while (up && mfamily_next(up, &pos, &sm, lb, sizeof lb)) {
                double temp, crit, warn, spare, spare_min, wear;
                struct summary_disk *d;
                if (!labels_get(sm.labels, "device", dev, sizeof dev) ||
                    !(d = summary_disk(sum, dev, true)))
                        continue;
                /* not read yet (at start) is not unreadable: a failure was counted */
                if ((sm.is_int ? (double)sm.u : sm.d) == 0 &&
                    dev_value(set, "diskpulse_smart_read_errors_total", dev) > 0)
                        summary_fact(d, SUMMARY_WARNING, "SMART unreadable");
                if (dev_value(set, "diskpulse_smart_healthy", dev) == 0)
                        summary_fact(d, SUMMARY_CRITICAL, "SMART failing");
                spare = dev_value(set, "diskpulse_smart_available_spare_ratio", dev);
                spare_min = dev_value(set, "diskpulse_smart_available_spare_threshold_ratio", dev);
                if (spare_min > 0 && spare <= spare_min)
                        summary_fact(d, SUMMARY_CRITICAL, "spare used up (%.0f %%)", 100 * spare);
                temp = dev_value(set, "diskpulse_smart_temperature_celsius", dev);
                crit =
                    dev_value(set, "diskpulse_smart_temperature_critical_threshold_celsius", dev);
                warn = dev_value(set, "diskpulse_smart_temperature_warning_threshold_celsius", dev);
                if (temp >= crit || (crit != crit && temp >= 70 && !(temp < warn)))
                        summary_fact(d, SUMMARY_CRITICAL, "%.0f °C, critical", temp);
                else if (temp >= warn || (warn != warn && temp >= 60))
                        summary_fact(d, SUMMARY_WARNING, "%.0f °C, hot", temp);
                wear = dev_value(set, "diskpulse_smart_wear_used_ratio", dev);
                if (wear >= 1)
                        summary_fact(d, SUMMARY_WARNING, "past its rated endurance (%.0f %%)",
                                     100 * wear);
        }
}

static const struct collector_ops sc_ops = {
    .name = "smart",
    .start = sc_start,
    .export = sc_export,
    .healthy = sc_healthy,
    .summarize = smart_summarize,
    .reconfigure = sc_reconfigure,
    .settle = sc_settle,
    .device_event = sc_device_event,
    .free = sc_free,
};

struct collector *smart_collector_new(const struct smart_settings *st)
{
        struct smart_collector *s = xcalloc(1, sizeof(*s));

        s->base.ops = &sc_ops;
        s->smart = smart_new(&st->cfg);
        s->io = st->cfg.io;
        s->io_up = st->io_up;
        return &s->base;
}

/* SMART runs only with the helper. */
static struct collector *sc_setup(const struct collector_host *h, const void *opts,
                                  struct collector *cur)
{
        const struct smart_options *o = opts;
        struct smart_settings s = {.cfg = {.io = h->io,
                                           .sysfs_fd = h->sysfs_fd,
                                           .filter = h->filter,
                                           .interval = o->interval,
                                           .timeout = o->timeout,
                                           .powermode = o->powermode},
                                   .io_up = h->io_up};

        if (!h->io)
                return collector_free(cur);
        if (!cur)
                return smart_collector_new(&s);
        (void)cur->ops->reconfigure(cur, &s); /* cannot fail */
        return cur;
}

static const char *const powermode_names[] = {[SMART_PM_NEVER] = "never",
                                              [SMART_PM_STANDBY] = "standby",
                                              [SMART_PM_SLEEP] = "sleep",
                                              [SMART_PM_SLEEP + 1] = NULL};
/* OPT_ENUM values are read and written as int. */
_Static_assert(sizeof(enum smart_powermode_check) == sizeof(int), "enum smart_powermode_check");

#define OFF(f) offsetof(struct smart_options, f)

/* Its flags, read at start: a reload reconfigures the SMART thread with the running values (and
 * reads every device again), without a warning. */
static const struct opt_def smart_options_def[] = {
    {.name = "smart.interval",
     .type = OPT_DURATION,
     .offset = OFF(interval),
     .def = 600 * USEC_PER_SEC,
     .min = 1 * USEC_PER_SEC,
     .arg = "DUR",
     .help = "how often each device's SMART data is read"},
    {.name = "smart.timeout",
     .type = OPT_DURATION,
     .offset = OFF(timeout),
     .def = 10 * USEC_PER_SEC,
     .min = 100 * USEC_PER_MSEC,
     .max = 600 * USEC_PER_SEC,
     .arg = "DUR",
     .help = "a SMART read taking longer counts as timed out"},
    {.name = "smart.powermode-check",
     .type = OPT_ENUM,
     .offset = OFF(powermode),
     .def = SMART_PM_STANDBY,
     .names = powermode_names,
     .arg = "MODE",
     .help = "never, standby or sleep: do not wake disks in that power mode"},
};

const struct collector_def smart_collector_def = {
    .name = "smart",
    .help = "SMART and NVMe health, read by the privileged helper every --smart.interval",
    .default_enabled = true,
    .options = smart_options_def,
    .n_options = sizeof(smart_options_def) / sizeof(smart_options_def[0]),
    .options_size = sizeof(struct smart_options),
    .setup = sc_setup,
    .device_io = true,
};
