/* The biolatency collector as the daemon drives it: at setup it asks the privileged helper to
 * load the BPF programs (biolatency_load() runs there) and maps what they fill; a round reads and
 * exports. Without them it still exists: diskpulse_io_latency_up 0, one warning with the reason,
 * another try at most every BIOLAT_RETRY (and at each SIGHUP).
 *
 * Health (diskpulse_collector_success): true while attached, and while not attached for a cause
 * no retry can fix and the operator chose: a build without BPF support, a kernel the loader
 * refuses (-EOPNOTSUPP), a daemon started without the privileged helper (SMART is off then too),
 * a helper without the privilege to load BPF programs (-EPERM, -EACCES: a container's default
 * capabilities, a unit without CAP_BPF; a process never gains capabilities, so only a restart
 * with them can help). False for a cause a retry may fix (the loader's other errors, a helper
 * that timed out or died, maps that cannot be mapped): success 0 is then worth an alert. */
#include "biolatency_collector.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsroot.h"
#include "log.h"

struct bl_collector {
        struct collector base;
        struct biolat_reader *r; /* NULL: not attached */
        /* borrowed from the host, renewed at each setup */
        struct devio *io;
        int sysfs_fd;
        const struct namefilter *filter;
        struct biolat_config cfg; /* read at start (max_devices, ncpu set at each attach) */
        usec_t last_try;
        bool permanent;   /* not attached, and no retry can help before the next setup */
        char logged[256]; /* the reason last logged as a warning ("" none) */
};

static struct bl_collector *bl_of(struct collector *c)
{
        return (struct bl_collector *)c;
}

/* The CPUs the program indexes rows by: the kernel's possible CPUs (what libbpf counts), or the
 * configured ones when the sysfs root has no such file. */
static uint32_t possible_cpus(int sysfs_fd)
{
        char buf[1024];
        uint32_t n;
        int len = read_attr_at(sysfs_fd, "devices/system/cpu/possible", buf, sizeof buf);
        long conf;

        if (len > 0 && biolatency_parse_cpus(buf, (size_t)len, &n) == 0)
                return n;
        conf = sysconf(_SC_NPROCESSORS_CONF);
        return conf > 0 && conf <= BIOLAT_MAX_CPUS ? (uint32_t)conf : 1;
}

/* Not attached, for why: logged once as a warning (the same reason again only at debug). */
static void bl_failed(struct bl_collector *b, int err, bool permanent, const char *why)
{
        b->permanent = permanent;
        if (strcmp(why, b->logged) == 0) {
                log_msg(LOG_LEVEL_DEBUG, "block I/O latency histograms still unavailable",
                        "collector", "biolatency", "reason", why, NULL);
                return;
        }
        (void)strscpy(b->logged, why, sizeof b->logged);
        log_errno(LOG_LEVEL_WARN, err,
                  permanent ? "no block I/O latency histograms"
                            : "no block I/O latency histograms; trying again in 10 minutes",
                  "collector", "biolatency", "reason", why, NULL);
}

/* Asks the helper to load and attach the programs (waiting at most timeout), and maps their
 * maps. */
static void bl_attach(struct bl_collector *b, usec_t now, usec_t timeout)
{
        struct biolat_params p = {.max_devices = b->cfg.max_devices,
                                  .ncpu = possible_cpus(b->sysfs_fd),
                                  .nclassic = (uint32_t)b->cfg.nclassic};
        int fds[DEVIO_MAX_FDS];
        size_t n = 0;
        char err[200] = "";
        int r;

        memcpy(p.classic_ns, b->cfg.classic_ns, b->cfg.nclassic * sizeof(p.classic_ns[0]));
        b->cfg.ncpu = p.ncpu;
        b->last_try = now;
        if (!b->io || !b->io->ops->privileged) {
#ifdef DISKPULSE_HAVE_BPF
                bl_failed(b, -ENXIO, true, "no privileged helper");
#else
                /* what the helper's biolatency_load() would answer */
                bl_failed(b, -EOPNOTSUPP, true, "built without BPF support");
#endif
                return;
        }
        r = b->io->ops->privileged(b->io, "biolatency", &p, sizeof p, timeout, fds, &n, err,
                                   sizeof err);
        if (n > DEVIO_MAX_FDS)
                n = DEVIO_MAX_FDS;
        if (r >= 0 && n != BIOLAT_NFDS) {
                snprintf(err, sizeof err, "the loader gave %zu descriptors, not %d", n,
                         BIOLAT_NFDS);
                r = -EPROTO;
        }
        if (r >= 0) {
                r = biolatency_reader_open(fds, &b->cfg, &b->r);
                if (r < 0)
                        snprintf(err, sizeof err, "cannot map the BPF maps: %s", strerror(-r));
        }
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        (void)close(fds[i]);
                if (!err[0])
                        snprintf(err, sizeof err, "%s", strerror(-r));
                bl_failed(b, r, r == -EOPNOTSUPP || r == -EPERM || r == -EACCES, err);
                return;
        }
        b->permanent = false;
        b->logged[0] = 0;
        log_msg(LOG_LEVEL_INFO, "block I/O latency programs attached", "collector", "biolatency",
                NULL);
}

static int bl_collect(struct collector *c, usec_t now)
{
        struct bl_collector *b = bl_of(c);

        if (!b->r && !b->permanent && (now < b->last_try || now - b->last_try >= BIOLAT_RETRY))
                bl_attach(b, now, BIOLAT_RETRY_TIMEOUT);
        if (b->r)
                biolatency_reader_collect_sysfs(b->r, b->sysfs_fd, b->filter, now);
        return 0;
}

static void bl_export(struct collector *c, struct mset *out)
{
        biolatency_export(bl_of(c)->r, out);
}

static bool bl_healthy(struct collector *c)
{
        struct bl_collector *b = bl_of(c);

        return b->r || b->permanent;
}

static void bl_device_event(struct collector *c, const char *device)
{
        biolatency_reader_forget(bl_of(c)->r, device);
}

static size_t bl_devices(const struct collector *c)
{
        return biolatency_reader_devices(((const struct bl_collector *)c)->r);
}

static void bl_free(struct collector *c)
{
        struct bl_collector *b = bl_of(c);

        biolatency_reader_free(b->r);
        free(b);
}

/* The classic buckets of reads and writes summed per device of the disk view. */
struct bl_sum {
        size_t n;
        double le[BIOLAT_MAX_CLASSIC + 1], cum[BIOLAT_MAX_CLASSIC + 1];
};

/* The disk view's p50 and p99: the device time of each device's reads and writes together, from
 * the classic buckets (cumulative since the programs were attached), as histogram_quantile()
 * reads them. */
void biolatency_summarize(const struct mset *set, struct summary *sum)
{
        const struct mfamily *f = mset_find(set, BIOLAT_FAMILY_DEVICE);
        struct bl_sum *acc;
        char lb[8192], dev[64], op[16], le[64];
        struct msample sm;
        size_t pos = 0;

        if (!f)
                return;
        acc = xcalloc(SUMMARY_MAX_DISKS, sizeof(*acc));
        while (mfamily_next(f, &pos, &sm, lb, sizeof lb)) {
                struct summary_disk *d;
                struct bl_sum *a;
                double bound, v = sm.is_int ? (double)sm.u : sm.d;
                size_t k;
                if (strcmp(sm.suffix, "_bucket") != 0 ||
                    !labels_get(sm.labels, "op", op, sizeof op) ||
                    (strcmp(op, "read") != 0 && strcmp(op, "write") != 0) ||
                    !labels_get(sm.labels, "device", dev, sizeof dev) ||
                    !labels_get(sm.labels, "le", le, sizeof le) ||
                    !(d = summary_disk(sum, dev, true)))
                        continue;
                a = &acc[d - sum->disks];
                bound = strtod(le, NULL);
                for (k = 0; k < a->n && a->le[k] != bound; k++)
                        ;
                if (k == a->n) {
                        if (a->n == ARRAY_SIZE(a->le) || (a->n && bound < a->le[a->n - 1]))
                                continue; /* not the grid's classic bounds in order */
                        a->le[a->n++] = bound;
                }
                a->cum[k] += v;
        }
        for (size_t i = 0; i < sum->ndisks && i < SUMMARY_MAX_DISKS; i++) {
                if (!acc[i].n)
                        continue;
                sum->disks[i].v[SUMMARY_LAT_P50] =
                    summary_quantile(0.5, acc[i].le, acc[i].cum, acc[i].n);
                sum->disks[i].v[SUMMARY_LAT_P99] =
                    summary_quantile(0.99, acc[i].le, acc[i].cum, acc[i].n);
        }
        free(acc);
}

static const struct collector_ops bl_ops = {
    .name = "biolatency",
    .collect = bl_collect,
    .export = bl_export,
    .healthy = bl_healthy,
    .summarize = biolatency_summarize,
    .device_event = bl_device_event,
    .devices = bl_devices,
    .free = bl_free,
};

/* Made, or given the host's new borrowed parts (SIGHUP); not attached: tried again now. */
static struct collector *bl_setup(const struct collector_host *h, const void *opts,
                                  struct collector *cur)
{
        const struct biolatency_options *o = opts;
        struct bl_collector *b = cur ? bl_of(cur) : xcalloc(1, sizeof(*b));

        if (!cur) {
                char why[256];
                unsigned ops[BIOLAT_KINDS] = {0};

                b->base.ops = &bl_ops;
                /* read at start: the maps' size and buckets; checked by the options' checks,
                 * never NULL (each entry has its default) */
                biolatency_config_default(&b->cfg, o->max_devices, 1);
                if (biolatency_parse_buckets(o->buckets, b->cfg.classic_ns, &b->cfg.nclassic, why,
                                             sizeof why) < 0 ||
                    biolatency_parse_ops(o->ops, &ops[BIOLAT_KIND_DEVICE], why, sizeof why) < 0 ||
                    biolatency_parse_ops(o->queue_ops, &ops[BIOLAT_KIND_QUEUE], why, sizeof why) <
                        0)
                        abort(); /* the options' checks refused these */
                memcpy(b->cfg.ops, ops, sizeof ops);
        }
        b->io = h->io;
        b->sysfs_fd = h->sysfs_fd;
        b->filter = h->filter;
        if (!b->r)
                bl_attach(b, now_monotonic(), cur ? BIOLAT_RETRY_TIMEOUT : BIOLAT_LOAD_TIMEOUT);
        return &b->base;
}

int biolatency_parse_ops(const char *text, unsigned *ret, char *why, size_t whysz)
{
        static const char *const names[BIOLAT_OPS] = {
            [BIOLAT_OP_READ] = "read",
            [BIOLAT_OP_WRITE] = "write",
            [BIOLAT_OP_FLUSH] = "flush",
            [BIOLAT_OP_DISCARD] = "discard",
        };
        unsigned mask = 0;

        for (const char *p = text; *p;) {
                size_t len = strcspn(p, ",");
                unsigned op = 0;

                while (op < BIOLAT_OPS && !(strlen(names[op]) == len && !memcmp(p, names[op], len)))
                        op++;
                if (op == BIOLAT_OPS) {
                        snprintf(why, whysz, "\"%.*s\" (expected read, write, flush or discard)",
                                 (int)len, p);
                        return -EINVAL;
                }
                mask |= 1u << op;
                p += len;
                if (*p == ',' && *++p == '\0') {
                        snprintf(why, whysz, "\"%s\" (expected no comma at the end)", text);
                        return -EINVAL;
                }
        }
        *ret = mask;
        return 0;
}

static int check_buckets(const char *value, char *why, size_t whysz)
{
        uint64_t ns[BIOLAT_MAX_CLASSIC];
        size_t n;

        return biolatency_parse_buckets(value, ns, &n, why, whysz);
}

static int check_ops(const char *value, char *why, size_t whysz)
{
        unsigned mask;

        return biolatency_parse_ops(value, &mask, why, whysz);
}

/* Its flags, read at start (the maps and the program's buckets are made when it is loaded). */
static const struct opt_def bl_options_def[] = {
    {
        .name = "biolatency.max-devices",
        .type = OPT_UINT,
        .offset = offsetof(struct biolatency_options, max_devices),
        .def = 64,
        .min = 1,
        .max = BIOLAT_MAX_DEVICES,
        .arg = "N",
        .help = "block devices kept apart; the I/O of more is counted unslotted",
    },
    {
        .name = "biolatency.buckets",
        .type = OPT_STRING,
        .offset = offsetof(struct biolatency_options, buckets),
        .def_str = BIOLAT_DEFAULT_BUCKETS,
        .check = check_buckets,
        .arg = "SECONDS,...",
        .help = "upper bounds of the text page's histogram buckets, increasing (1 to 18; the "
                "native histograms keep their own, 1.19x apart)",
    },
    {
        .name = "biolatency.ops",
        .type = OPT_STRING,
        .offset = offsetof(struct biolatency_options, ops),
        .def_str = BIOLAT_DEFAULT_OPS,
        .check = check_ops,
        .allow_empty = true,
        .arg = "OP,...",
        .help = "operations of the device-time histogram (read, write, flush, discard; each "
                "only where the device did one)",
    },
    {
        .name = "biolatency.queue-ops",
        .type = OPT_STRING,
        .offset = offsetof(struct biolatency_options, queue_ops),
        .def_str = BIOLAT_DEFAULT_QUEUE_OPS,
        .check = check_ops,
        .allow_empty = true,
        .arg = "OP,...",
        .help = "operations of the queue-time histogram (\"\": none)",
    },
};

const struct collector_def biolatency_collector_def = {
    .name = "biolatency",
    .help = "Block I/O latency histograms from eBPF (queue and device time)",
    .default_enabled = true,
    .options = bl_options_def,
    .n_options = ARRAY_SIZE(bl_options_def),
    .options_size = sizeof(struct biolatency_options),
    .setup = bl_setup,
    .privileged = biolatency_load,
};
