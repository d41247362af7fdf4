/* The diskstats collector (node_exporter collector/diskstats_linux.go for names and meanings,
 * sysstat iostat -x for the derived gauges). */
#include "diskstats.h"

#include <stdio.h>
#include <string.h>

#include "diskstats_parse.h"
#include "fsroot.h"
#include "iostat.h"
#include "log.h"

#define DISKSTATS_MAX_BYTES (64u << 20)

struct ds_sample {
        usec_t t;
        uint64_t v[DS_NFIELDS];
};

struct ds_device {
        char name[DS_NAME_MAX];
        unsigned major, minor;
        bool included;
        bool identity_valid;
        usec_t identity_time;
        struct device_info info;
        uint32_t present;
        struct ds_sample *ring; /* ring_cap entries */
        size_t head, count;     /* head: index of the newest */
        bool since_boot;        /* only one sample, taken in the first round */
        unsigned seen;          /* generation of the last sample that listed it */
};

struct diskstats {
        struct diskstats_config cfg;
        struct ds_device **devs; /* sorted by name */
        size_t n, cap;
        size_t ring_cap;
        unsigned gen;
        bool first_round_done;
        uint64_t bad_lines;
        usec_t uptime; /* from /proc/uptime at the first round */
        struct ratelimit bad_rl;
};

static size_t ring_cap_for(const struct diskstats_config *cfg)
{
        usec_t iv = cfg->interval ? cfg->interval : USEC_PER_SEC;
        return (size_t)(cfg->window / iv) + 2;
}

struct diskstats *diskstats_new(const struct diskstats_config *cfg)
{
        struct diskstats *d = xcalloc(1, sizeof(*d));

        d->cfg = *cfg;
        d->ring_cap = ring_cap_for(cfg);
        d->bad_rl.interval = 3600 * USEC_PER_SEC;
        return d;
}

static void device_free(struct ds_device *dev)
{
        if (dev) {
                free(dev->ring);
                free(dev);
        }
}

struct diskstats *diskstats_free(struct diskstats *d)
{
        if (!d)
                return NULL;
        for (size_t i = 0; i < d->n; i++)
                device_free(d->devs[i]);
        free(d->devs);
        free(d);
        return NULL;
}

static bool name_included(const struct diskstats_config *cfg, const char *name)
{
        return name_filter_match(cfg->include, cfg->exclude, name);
}

void diskstats_reconfigure(struct diskstats *d, const struct diskstats_config *cfg)
{
        size_t cap = ring_cap_for(cfg);

        d->cfg = *cfg;
        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];
                dev->included = name_included(cfg, dev->name);
                if (cap != d->ring_cap) {
                        free(dev->ring);
                        dev->ring = xcalloc(cap, sizeof(*dev->ring));
                        dev->head = dev->count = 0;
                }
        }
        d->ring_cap = cap;
}

/* Binary search by name; returns the index where it is or would be. */
static size_t find_pos(const struct diskstats *d, const char *name, bool *found)
{
        size_t lo = 0, hi = d->n;

        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcmp(d->devs[mid]->name, name);
                if (c == 0) {
                        *found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

static struct ds_device *device_add(struct diskstats *d, size_t pos, const struct ds_entry *e)
{
        struct ds_device *dev = xcalloc(1, sizeof(*dev));

        memcpy(dev->name, e->name, sizeof dev->name);
        dev->major = e->major;
        dev->minor = e->minor;
        dev->included = name_included(&d->cfg, dev->name);
        dev->ring = xcalloc(d->ring_cap, sizeof(*dev->ring));
        GROW(d->devs, d->cap, d->n + 1);
        memmove(d->devs + pos + 1, d->devs + pos, (d->n - pos) * sizeof(*d->devs));
        d->devs[pos] = dev;
        d->n++;
        return dev;
}

struct sample_ctx {
        struct diskstats *d;
        usec_t now;
};

static int on_entry(const struct ds_entry *e, void *userdata)
{
        struct sample_ctx *c = userdata;
        struct diskstats *d = c->d;
        struct ds_device *dev;
        struct ds_sample *s;
        bool found;
        size_t pos = find_pos(d, e->name, &found);

        if (found) {
                dev = d->devs[pos];
                if (dev->seen == d->gen)
                        return 0; /* a duplicate name in one read: keep the first */
                if (dev->major != e->major || dev->minor != e->minor) {
                        /* Same name, another device: start afresh. */
                        dev->major = e->major;
                        dev->minor = e->minor;
                        dev->identity_valid = false;
                        dev->head = dev->count = 0;
                }
        } else {
                dev = device_add(d, pos, e);
        }
        dev->seen = d->gen;
        dev->present = e->present;
        if (!dev->included)
                return 0;

        if (dev->count > 0 && iostat_is_reset(dev->ring[dev->head].v, e->v))
                dev->count = 0; /* removed and added again: the old samples mean nothing */

        dev->head = dev->count == 0 ? 0 : (dev->head + 1) % d->ring_cap;
        s = &dev->ring[dev->head];
        s->t = c->now;
        memcpy(s->v, e->v, sizeof s->v);
        if (dev->count < d->ring_cap)
                dev->count++;
        dev->since_boot = !d->first_round_done && dev->count == 1;

        if (!dev->identity_valid ||
            (d->cfg.identity_refresh && c->now - dev->identity_time >= d->cfg.identity_refresh)) {
                int r = d->cfg.devsrc
                            ? d->cfg.devsrc->ops->lookup(d->cfg.devsrc, dev->name, dev->major,
                                                         dev->minor, &dev->info)
                            : -ENODEV;
                if (r < 0) {
                        memset(&dev->info, 0, sizeof dev->info);
                        dev->info.rotational = -1;
                }
                dev->identity_valid = true;
                dev->identity_time = c->now;
        }
        return 0;
}

static usec_t read_uptime(int procfs_fd)
{
        char buf[128];
        unsigned long long sec = 0, frac = 0;
        int fl = 0;

        if (read_attr_at(procfs_fd, "uptime", buf, sizeof buf) < 0)
                return 0;
        /* "12345.67 23456.78": seconds with hundredths */
        if (sscanf(buf, "%llu.%n", &sec, &fl) < 1)
                return 0;
        if (fl > 0) {
                const char *p = buf + fl;
                unsigned mult = 100000;
                while (*p >= '0' && *p <= '9' && mult > 0) {
                        frac += (unsigned long long)(*p - '0') * mult;
                        mult /= 10;
                        p++;
                }
        }
        return (usec_t)sec * USEC_PER_SEC + frac;
}

int diskstats_sample(struct diskstats *d, usec_t now)
{
        _cleanup_free_ char *buf = NULL;
        struct sample_ctx c = {.d = d, .now = now};
        unsigned bad = 0;
        size_t len, kept = 0;
        int r;

        r = read_file_at(d->cfg.procfs_fd, "diskstats", DISKSTATS_MAX_BYTES, &buf, &len);
        if (r < 0)
                return r;
        if (!d->first_round_done)
                d->uptime = read_uptime(d->cfg.procfs_fd);
        d->gen++;
        (void)ds_parse(buf, len, on_entry, &c, &bad);
        if (bad) {
                d->bad_lines += bad;
                if (ratelimit_ok(&d->bad_rl, now)) {
                        char n[16];
                        snprintf(n, sizeof n, "%u", bad);
                        log_warn("malformed lines in diskstats, skipped", "lines", n);
                }
        }
        /* Devices no longer listed are gone: drop them and their series. */
        for (size_t i = 0; i < d->n; i++) {
                if (d->devs[i]->seen == d->gen)
                        d->devs[kept++] = d->devs[i];
                else
                        device_free(d->devs[i]);
        }
        d->n = kept;
        d->first_round_done = true;
        return 0;
}

void diskstats_invalidate(struct diskstats *d, const char *name)
{
        for (size_t i = 0; i < d->n; i++)
                if (!name || strcmp(d->devs[i]->name, name) == 0)
                        d->devs[i]->identity_valid = false;
}

size_t diskstats_device_count(const struct diskstats *d)
{
        size_t n = 0;
        for (size_t i = 0; i < d->n; i++)
                n += d->devs[i]->included;
        return n;
}

/* The oldest sample within the window (with half an interval of slack for timer jitter). */
static const struct ds_sample *window_start(const struct diskstats *d, const struct ds_device *dev)
{
        const struct ds_sample *newest = &dev->ring[dev->head];
        usec_t limit = d->cfg.window + d->cfg.interval / 2;

        for (size_t k = dev->count - 1; k > 0; k--) {
                const struct ds_sample *s = &dev->ring[(dev->head + d->ring_cap - k) % d->ring_cap];
                if (newest->t - s->t <= limit)
                        return s;
        }
        return NULL;
}

static void derive(const struct diskstats *d, const struct ds_device *dev,
                   struct iostat_derived *ret)
{
        static const uint64_t zero[DS_NFIELDS];
        const struct ds_sample *newest = &dev->ring[dev->head], *old;

        if (dev->since_boot) {
                /* As iostat's first report: everything since boot. */
                iostat_derive(zero, newest->v, dev->present, d->uptime, ret);
                return;
        }
        old = dev->count > 1 ? window_start(d, dev) : NULL;
        if (!old) {
                iostat_derive(zero, zero, dev->present, 0, ret);
                return;
        }
        iostat_derive(old->v, newest->v, dev->present, newest->t - old->t, ret);
}

struct counter_def {
        enum ds_field field;
        const char *name;
        const char *help;
        unsigned scale; /* 0: integer as is; 512: sectors to bytes; 1000: ms to seconds */
        enum mtype type;
};

static const struct counter_def counters[] = {
    {DS_READS, "diskpulse_disk_reads_completed_total",
     "The total number of reads completed successfully.", 0, MT_COUNTER},
    {DS_READS_MERGED, "diskpulse_disk_reads_merged_total",
     "The total number of reads merged with adjacent ones.", 0, MT_COUNTER},
    {DS_READ_SECTORS, "diskpulse_disk_read_bytes_total",
     "The total number of bytes read successfully.", 512, MT_COUNTER},
    {DS_READ_MS, "diskpulse_disk_read_time_seconds_total",
     "The total number of seconds spent by all reads.", 1000, MT_COUNTER},
    {DS_WRITES, "diskpulse_disk_writes_completed_total",
     "The total number of writes completed successfully.", 0, MT_COUNTER},
    {DS_WRITES_MERGED, "diskpulse_disk_writes_merged_total",
     "The total number of writes merged with adjacent ones.", 0, MT_COUNTER},
    {DS_WRITE_SECTORS, "diskpulse_disk_written_bytes_total",
     "The total number of bytes written successfully.", 512, MT_COUNTER},
    {DS_WRITE_MS, "diskpulse_disk_write_time_seconds_total",
     "The total number of seconds spent by all writes.", 1000, MT_COUNTER},
    {DS_IO_NOW, "diskpulse_disk_io_now", "The number of I/Os currently in progress.", 0, MT_GAUGE},
    {DS_IO_MS, "diskpulse_disk_io_time_seconds_total",
     "Total seconds spent doing I/Os (the device was busy).", 1000, MT_COUNTER},
    {DS_IO_WEIGHTED_MS, "diskpulse_disk_io_time_weighted_seconds_total",
     "The weighted number of seconds spent doing I/Os (request time summed over requests).", 1000,
     MT_COUNTER},
    {DS_DISCARDS, "diskpulse_disk_discards_completed_total",
     "The total number of discards completed successfully.", 0, MT_COUNTER},
    {DS_DISCARDS_MERGED, "diskpulse_disk_discards_merged_total",
     "The total number of discards merged with adjacent ones.", 0, MT_COUNTER},
    {DS_DISCARD_SECTORS, "diskpulse_disk_discarded_bytes_total",
     "The total number of bytes discarded successfully.", 512, MT_COUNTER},
    {DS_DISCARD_MS, "diskpulse_disk_discard_time_seconds_total",
     "The total number of seconds spent by all discards.", 1000, MT_COUNTER},
    {DS_FLUSHES, "diskpulse_disk_flush_requests_total",
     "The total number of flush requests completed successfully.", 0, MT_COUNTER},
    {DS_FLUSH_MS, "diskpulse_disk_flush_time_seconds_total",
     "The total number of seconds spent by all flush requests.", 1000, MT_COUNTER},
};

struct gauge_def {
        const char *name;
        const char *help;
        size_t offset;
};

#define G(field) offsetof(struct iostat_derived, field)
static const struct gauge_def gauges[] = {
    {"diskpulse_disk_read_await_seconds",
     "Average time reads took to be served, queue included, over the window (iostat r_await).",
     G(read_await)},
    {"diskpulse_disk_write_await_seconds",
     "Average time writes took to be served, queue included, over the window (iostat w_await).",
     G(write_await)},
    {"diskpulse_disk_discard_await_seconds",
     "Average time discards took to be served over the window (iostat d_await).", G(discard_await)},
    {"diskpulse_disk_flush_await_seconds",
     "Average time flush requests took to be served over the window (iostat f_await).",
     G(flush_await)},
    {"diskpulse_disk_utilization_ratio",
     "Fraction of the window the device had I/O in flight (iostat %util / 100).", G(utilization)},
    {"diskpulse_disk_queue_depth",
     "Average number of requests queued or in service over the window (iostat aqu-sz).",
     G(queue_depth)},
    {"diskpulse_disk_read_iops", "Reads completed per second over the window (iostat r/s).",
     G(read_iops)},
    {"diskpulse_disk_write_iops", "Writes completed per second over the window (iostat w/s).",
     G(write_iops)},
    {"diskpulse_disk_read_bytes_per_second",
     "Bytes read per second over the window (iostat rkB/s x 1024).", G(read_bytes_per_second)},
    {"diskpulse_disk_write_bytes_per_second",
     "Bytes written per second over the window (iostat wkB/s x 1024).", G(write_bytes_per_second)},
};
#undef G

void diskstats_export(struct diskstats *d, struct mset *out)
{
        struct iostat_derived *der = xcalloc(d->n ? d->n : 1, sizeof(*der));
        char **lab = xcalloc(d->n ? d->n : 1, sizeof(*lab));
        size_t included = 0;

        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];
                if (!dev->included || dev->count == 0)
                        continue;
                lab[i] = mset_labels(out, "device", dev->name, NULL);
                derive(d, dev, &der[i]);
                included++;
        }

        {
                struct mfamily *f = mset_family(
                    out, "diskpulse_disk_info",
                    "Facts about a monitored block device; identity lives only here.", MT_GAUGE);
                for (size_t i = 0; i < d->n; i++) {
                        struct ds_device *dev = d->devs[i];
                        char maj[16], min[16];
                        if (!lab[i])
                                continue;
                        snprintf(maj, sizeof maj, "%u", dev->major);
                        snprintf(min, sizeof min, "%u", dev->minor);
                        mfamily_add(out, f, "", 1.0, "device", dev->name, "major", maj, "minor",
                                    min, "model", dev->info.model, "serial", dev->info.serial,
                                    "wwn", dev->info.wwn, "path", dev->info.path, "revision",
                                    dev->info.revision, "rotational",
                                    dev->info.rotational < 0 ? ""
                                    : dev->info.rotational   ? "1"
                                                             : "0",
                                    NULL);
                }
        }
        {
                struct mfamily *f = mset_family(
                    out, "diskpulse_disk_write_cache_info",
                    "The kernel's write cache mode of the device (queue/write_cache).", MT_GAUGE);
                for (size_t i = 0; i < d->n; i++)
                        if (lab[i] && d->devs[i]->info.write_cache[0])
                                mfamily_add(out, f, "", 1.0, "device", d->devs[i]->name, "mode",
                                            d->devs[i]->info.write_cache, NULL);
        }

        for (size_t c = 0; c < ARRAY_SIZE(counters); c++) {
                const struct counter_def *cd = &counters[c];
                struct mfamily *f = NULL;
                for (size_t i = 0; i < d->n; i++) {
                        struct ds_device *dev = d->devs[i];
                        uint64_t v;
                        if (!lab[i] || !(dev->present & (1u << cd->field)))
                                continue;
                        if (!f)
                                f = mset_family(out, cd->name, cd->help, cd->type);
                        v = dev->ring[dev->head].v[cd->field];
                        if (cd->scale == 0)
                                mfamily_add_raw(out, f, "", lab[i], NULL, NULL, true, v, (double)v);
                        else if (cd->scale == 512 && v <= UINT64_MAX / 512)
                                mfamily_add_raw(out, f, "", lab[i], NULL, NULL, true, v * 512,
                                                (double)v * 512);
                        else
                                mfamily_add_raw(out, f, "", lab[i], NULL, NULL, false, 0,
                                                cd->scale == 512 ? (double)v * 512.0
                                                                 : (double)v / 1000.0);
                }
        }

        for (size_t g = 0; g < ARRAY_SIZE(gauges); g++) {
                struct mfamily *f = NULL;
                for (size_t i = 0; i < d->n; i++) {
                        double v;
                        if (!lab[i])
                                continue;
                        if (!f)
                                f = mset_family(out, gauges[g].name, gauges[g].help, MT_GAUGE);
                        memcpy(&v, (const char *)&der[i] + gauges[g].offset, sizeof v);
                        mfamily_add_raw(out, f, "", lab[i], NULL, NULL, false, 0, v);
                }
        }

        mset_gauge(out, "diskpulse_disk_devices", "Number of block devices monitored.",
                   (double)included, NULL);
        {
                struct mfamily *f = mset_family(
                    out, "diskpulse_diskstats_malformed_lines_total",
                    "Lines of the diskstats file that could not be parsed and were skipped.",
                    MT_COUNTER);
                mfamily_add_u64(out, f, "", d->bad_lines, NULL);
        }
        free(der);
        free(lab);
}
