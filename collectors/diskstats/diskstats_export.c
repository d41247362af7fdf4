/* The diskstats collector's export: the rows (device labels and identity), iostat's gauges over
 * the window, and the table of counters and gauges shared with the previous round's set. */
#include <stdio.h>
#include <string.h>

#include "diskstats_internal.h"
#include "iostat.h"

#define MASK_DEVICE (1u << L_DEVICE)
#define MASK_INFO   ((1u << L_MODE) - 1)
#define MASK_CACHE  (1u << L_DEVICE | 1u << L_MODE)
#define MASK_SET    (1u << L_DEVICE | 1u << L_SETS)

/* The window's counters as of round r (r within the device's samples). */
static const struct ds_point *point_at(const struct ds_device *dev, uint64_t r)
{
        size_t k = dev->npts - 1;

        while (k > 0 && dev->pts[k].round > r)
                k--;
        return &dev->pts[k];
}

/* The label values of a device's row. */
size_t diskstats_add_row(struct mrows *rows, const struct ds_device *dev,
                         const struct device_info *info)
{
        char maj[16], min[16];
        const char *values[L_MAX];

        snprintf(maj, sizeof maj, "%u", dev->major);
        snprintf(min, sizeof min, "%u", dev->minor);
        values[L_DEVICE] = dev->name;
        values[L_MAJOR] = maj;
        values[L_MINOR] = min;
        values[L_MODEL] = info->model;
        values[L_SERIAL] = info->serial;
        values[L_WWN] = info->wwn;
        values[L_PATH] = info->path;
        values[L_REVISION] = info->revision;
        values[L_ROTATIONAL] = info->rotational < 0 ? "" : info->rotational ? "1" : "0";
        values[L_MODE] = info->write_cache;
        values[L_SETS] = info->sets;
        return mrows_add(rows, values);
}

/* Reads the device's identity from the source (and the source's stamp of it). */
void diskstats_read_identity(struct diskstats *d, struct ds_device *dev, struct device_info *ret)
{
        struct devsrc *src = d->cfg.devsrc;
        int r = src ? src->ops->lookup(src, dev->name, dev->major, dev->minor, ret) : -ENODEV;

        if (r < 0) {
                memset(ret, 0, sizeof(*ret));
                ret->rotational = -1;
        }
        if (src && src->ops->stamp)
                dev->identity_stamp = src->ops->stamp(src, dev->name, dev->major, dev->minor);
}

/* Exported: included and sampled (in this round, or in the last one when this round's read
 * failed half-way). */
static bool exported(const struct ds_device *dev)
{
        return dev->npts > 0;
}

/* The oldest round a window that ends at round r may start at (with half an interval of slack
 * for timer jitter); when none but r itself is that near (rounds that follow irregular scrapes,
 * a stall), the round before r: the gauges then cover the longer span since it. 0 when r has no
 * round before it in the ring. */
static uint64_t window_start(const struct diskstats *d, uint64_t r)
{
        usec_t newest = d->times[r % d->ring_cap];
        usec_t limit = d->cfg.window + d->cfg.interval / 2;
        uint64_t start = 0;

        if (r + d->ring_cap <= d->round)
                return 0; /* out of the ring */
        for (uint64_t k = 1; k + (d->round - r) < d->ring_cap && k < r; k++) {
                usec_t t = d->times[(r - k) % d->ring_cap];
                if (newest - t > limit) {
                        if (k == 1)
                                start = r - 1;
                        break;
                }
                start = r - k;
        }
        return start;
}

/* start: window_start(d, d->round). */
static void derive(const struct diskstats *d, const struct ds_device *dev, uint64_t start,
                   struct iostat_derived *ret)
{
        static const uint64_t zero[DS_NFIELDS];
        uint64_t cur[DS_NFIELDS], old[DS_NFIELDS];
        const struct ds_point *p;
        uint64_t from, last = dev->last_round;

        diskstats_device_values(dev, cur);
        if (dev->since_boot) {
                /* As iostat's first report: everything since boot. */
                iostat_derive(zero, cur, dev->present, d->uptime, ret);
                return;
        }
        if (last != d->round)
                start = window_start(d, last);
        from = start > dev->first_round ? start : dev->first_round;
        if (start == 0 || from >= last) {
                iostat_derive(zero, zero, dev->present, 0, ret);
                return;
        }
        p = point_at(dev, from);
        memcpy(old, cur, sizeof old);
        for (size_t k = 0; k < NW; k++)
                old[window_fields[k]] = p->v[k];
        iostat_derive(old, cur, dev->present,
                      d->times[last % d->ring_cap] - d->times[from % d->ring_cap], ret);
}

/* The span the gauges of the newest round cover: since boot in the first round (iostat's first
 * report), else from the round the window starts at to the newest (longer than the window when
 * the round before is older, a request the sampler did not expect); 0 without a round before.
 * A device that appeared within it is derived from its first round. */
static usec_t window_span(const struct diskstats *d)
{
        uint64_t start;

        for (size_t i = 0; i < d->n; i++)
                if (exported(d->devs[i]) && d->devs[i]->since_boot)
                        return d->uptime;
        start = window_start(d, d->round);
        if (!start)
                return 0;
        return d->times[d->round % d->ring_cap] - d->times[start % d->ring_cap];
}

/* /proc/diskstats counts 512-byte sectors whatever the device's block size. */
#define DISKSTATS_SECTOR_BYTES 512

struct counter_def {
        enum ds_field field;
        const char *name;
        const char *help;
        enum mcell cell;
        enum mtype type;
};

static const struct counter_def counters[] = {
    {DS_READS, "diskpulse_disk_reads_completed_total",
     "The total number of reads completed successfully.", MCELL_U64, MT_COUNTER},
    {DS_READS_MERGED, "diskpulse_disk_reads_merged_total",
     "The total number of reads merged with adjacent ones.", MCELL_U64, MT_COUNTER},
    {DS_READ_SECTORS, "diskpulse_disk_read_bytes_total",
     "The total number of bytes read successfully.", MCELL_SCALED, MT_COUNTER},
    {DS_READ_MS, "diskpulse_disk_read_time_seconds_total",
     "The total number of seconds spent by all reads.", MCELL_MILLIS, MT_COUNTER},
    {DS_WRITES, "diskpulse_disk_writes_completed_total",
     "The total number of writes completed successfully.", MCELL_U64, MT_COUNTER},
    {DS_WRITES_MERGED, "diskpulse_disk_writes_merged_total",
     "The total number of writes merged with adjacent ones.", MCELL_U64, MT_COUNTER},
    {DS_WRITE_SECTORS, "diskpulse_disk_written_bytes_total",
     "The total number of bytes written successfully.", MCELL_SCALED, MT_COUNTER},
    {DS_WRITE_MS, "diskpulse_disk_write_time_seconds_total",
     "The total number of seconds spent by all writes.", MCELL_MILLIS, MT_COUNTER},
    {DS_IO_NOW, "diskpulse_disk_io_now", "The number of I/Os currently in progress.", MCELL_U64,
     MT_GAUGE},
    {DS_IO_MS, "diskpulse_disk_io_time_seconds_total",
     "Total seconds spent doing I/Os (the device was busy).", MCELL_MILLIS, MT_COUNTER},
    {DS_IO_WEIGHTED_MS, "diskpulse_disk_io_time_weighted_seconds_total",
     "The weighted number of seconds spent doing I/Os (request time summed over requests).",
     MCELL_MILLIS, MT_COUNTER},
    {DS_DISCARDS, "diskpulse_disk_discards_completed_total",
     "The total number of discards completed successfully.", MCELL_U64, MT_COUNTER},
    {DS_DISCARDS_MERGED, "diskpulse_disk_discards_merged_total",
     "The total number of discards merged with adjacent ones.", MCELL_U64, MT_COUNTER},
    {DS_DISCARD_SECTORS, "diskpulse_disk_discarded_bytes_total",
     "The total number of bytes discarded successfully.", MCELL_SCALED, MT_COUNTER},
    {DS_DISCARD_MS, "diskpulse_disk_discard_time_seconds_total",
     "The total number of seconds spent by all discards.", MCELL_MILLIS, MT_COUNTER},
    {DS_FLUSHES, "diskpulse_disk_flush_requests_total",
     "The total number of flush requests completed successfully.", MCELL_U64, MT_COUNTER},
    {DS_FLUSH_MS, "diskpulse_disk_flush_time_seconds_total",
     "The total number of seconds spent by all flush requests.", MCELL_MILLIS, MT_COUNTER},
};

struct gauge_def {
        const char *name;
        const char *help;
        size_t offset;
};

#define G(field) offsetof(struct iostat_derived, field)
static const struct gauge_def gauges[] = {
    {DISKSTATS_FAMILY_READ_AWAIT,
     "Average time reads took to be served, queue included, over diskpulse_disk_window_seconds "
     "(iostat r_await).",
     G(read_await)},
    {DISKSTATS_FAMILY_WRITE_AWAIT,
     "Average time writes took to be served, queue included, over diskpulse_disk_window_seconds "
     "(iostat w_await).",
     G(write_await)},
    {"diskpulse_disk_discard_await_seconds",
     "Average time discards took to be served over diskpulse_disk_window_seconds (iostat d_await).",
     G(discard_await)},
    {DISKSTATS_FAMILY_FLUSH_AWAIT,
     "Average time flush requests took to be served over diskpulse_disk_window_seconds (iostat "
     "f_await).",
     G(flush_await)},
    {DISKSTATS_FAMILY_UTILIZATION,
     "Fraction of diskpulse_disk_window_seconds the device had I/O in flight (iostat %util / 100).",
     G(utilization)},
    {DISKSTATS_FAMILY_QUEUE_DEPTH,
     "Average number of requests queued or in service over diskpulse_disk_window_seconds (iostat "
     "aqu-sz).",
     G(queue_depth)},
    {DISKSTATS_FAMILY_READ_IOPS,
     "Reads completed per second over diskpulse_disk_window_seconds (iostat r/s).", G(read_iops)},
    {DISKSTATS_FAMILY_WRITE_IOPS,
     "Writes completed per second over diskpulse_disk_window_seconds (iostat w/s).", G(write_iops)},
    {"diskpulse_disk_read_bytes_per_second",
     "Bytes read per second over diskpulse_disk_window_seconds (iostat rkB/s x 1024).",
     G(read_bytes_per_second)},
    {"diskpulse_disk_write_bytes_per_second",
     "Bytes written per second over diskpulse_disk_window_seconds (iostat wkB/s x 1024).",
     G(write_bytes_per_second)},
};
#undef G

/* The columns of the table. */
#define COL_GAUGE(g) (ARRAY_SIZE(counters) + (g))
#define COL_INFO     (ARRAY_SIZE(counters) + ARRAY_SIZE(gauges))
#define COL_CACHE    (COL_INFO + 1)
#define COL_SET      (COL_CACHE + 1)
#define NCOLS        (COL_SET + 1)
_Static_assert(NCOLS <= 32, "a row's present mask is 32 bits");

/* A new d->rows for the devices exported now, copying the rows that did not change. */
static void rebuild_rows(struct diskstats *d)
{
        struct mrows *rows = mrows_new(label_names, L_MAX);

        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];

                if (!exported(dev)) {
                        dev->row = NO_ROW;
                } else if (dev->fresh_row != NO_ROW) {
                        dev->row = (uint32_t)mrows_copy_row(rows, d->fresh, dev->fresh_row);
                } else if (dev->row != NO_ROW) {
                        dev->row = (uint32_t)mrows_copy_row(rows, d->rows, dev->row);
                } else {
                        struct device_info info;
                        diskstats_read_identity(d, dev, &info);
                        dev->row = (uint32_t)diskstats_add_row(rows, dev, &info);
                }
                dev->fresh_row = NO_ROW;
        }
        mrows_unref(d->rows);
        d->rows = rows;
        d->fresh = mrows_unref(d->fresh);
}

static struct mtable *build_table(struct diskstats *d)
{
        struct mtable *t = mtable_new(d->rows, NCOLS);
        uint64_t start = window_start(d, d->round);

        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];
                struct iostat_derived der;
                uint64_t v[DS_NFIELDS], cells[NCOLS];
                uint32_t present = 0;
                size_t mode_len;

                if (dev->row == NO_ROW)
                        continue;
                diskstats_device_values(dev, v);
                for (size_t c = 0; c < ARRAY_SIZE(counters); c++)
                        if (dev->present & (1u << counters[c].field)) {
                                present |= 1u << c;
                                cells[c] = v[counters[c].field];
                        }
                derive(d, dev, start, &der);
                for (size_t g = 0; g < ARRAY_SIZE(gauges); g++) {
                        double x;
                        memcpy(&x, (const char *)&der + gauges[g].offset, sizeof x);
                        present |= 1u << COL_GAUGE(g);
                        cells[COL_GAUGE(g)] = mtable_double(x);
                }
                /* the info families print 1 whatever the cell: 0 takes no room */
                present |= 1u << COL_INFO;
                cells[COL_INFO] = 0;
                (void)mrows_value(d->rows, dev->row, L_MODE, &mode_len);
                if (mode_len)
                        present |= 1u << COL_CACHE;
                cells[COL_CACHE] = 0;
                (void)mrows_value(d->rows, dev->row, L_SETS, &mode_len);
                if (mode_len)
                        present |= 1u << COL_SET;
                cells[COL_SET] = 0;
                mtable_add_row(t, dev->row, present, cells);
        }
        return t;
}

void diskstats_export(struct diskstats *d, struct mset *out)
{
        size_t included = 0;

        for (size_t i = 0; i < d->n; i++)
                if (exported(d->devs[i]))
                        included++;
        /* Only what changed is done again: the rows when a device came, went or changed its
         * identity, the values when a counter moved (or the window still holds a change). */
        if (d->membership_changed) {
                rebuild_rows(d);
                d->membership_changed = false;
                d->table_dirty = true;
        }
        if (d->table_dirty || !d->table) {
                mtable_unref(d->table);
                d->table = build_table(d);
                d->table_dirty = false;
        }

        mset_table_family(out, DISKSTATS_FAMILY_INFO,
                          "Facts about a monitored block device; identity lives only here.",
                          MT_GAUGE, d->table, COL_INFO, MCELL_ONE, MASK_INFO);
        mset_table_family(out, DISKSTATS_FAMILY_WRITE_CACHE,
                          "The kernel's write cache mode of the device (queue/write_cache).",
                          MT_GAUGE, d->table, COL_CACHE, MCELL_ONE, MASK_CACHE);
        mset_table_family(out, "diskpulse_disk_set_info",
                          "The md arrays that hold the device or one of its partitions (set, "
                          "comma-separated); devices with the same set are siblings.",
                          MT_GAUGE, d->table, COL_SET, MCELL_ONE, MASK_SET);
        for (size_t c = 0; c < ARRAY_SIZE(counters); c++) {
                struct mfamily *f =
                    mset_table_family(out, counters[c].name, counters[c].help, counters[c].type,
                                      d->table, (unsigned)c, counters[c].cell, MASK_DEVICE);
                if (counters[c].cell == MCELL_SCALED) /* sectors in the table, bytes on the page */
                        mfamily_scale(f, DISKSTATS_SECTOR_BYTES);
        }
        for (size_t g = 0; g < ARRAY_SIZE(gauges); g++)
                mset_table_family(out, gauges[g].name, gauges[g].help, MT_GAUGE, d->table,
                                  (unsigned)COL_GAUGE(g), MCELL_DOUBLE, MASK_DEVICE);

        mset_gauge(out, DISKSTATS_FAMILY_SPAN,
                   "The span the derived disk gauges (awaits, IOPS, bytes per second, utilization, "
                   "queue depth) of this page cover: --diskstats.window when the samples follow a "
                   "scraper or are fixed; the longer time since the sample before for a request "
                   "the daemon did not expect; since boot in the first round; 0 before a second "
                   "sample.",
                   (double)window_span(d) / (double)USEC_PER_SEC, NULL);
        mset_gauge(out, "diskpulse_disk_devices", "Number of block devices monitored.",
                   (double)included, NULL);
        {
                struct mfamily *f = mset_family(
                    out, "diskpulse_diskstats_malformed_lines_total",
                    "Lines of the diskstats file that could not be parsed and were skipped.",
                    MT_COUNTER);
                mfamily_add_u64(out, f, "", d->bad_lines, NULL);
        }
}
