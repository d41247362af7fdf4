/* The diskstats collector: samples /proc/diskstats into a ring per device, exports the kernel's
 * counters and iostat's derived gauges over the window, and the device facts. Main thread only. */
#pragma once

#include "devices.h"
#include "metrics.h"
#include "namefilter.h"
#include "util.h"

/* Families the landing page's summary reads back from the exported set (diskstats_collector.c),
 * named once here. */
#define DISKSTATS_FAMILY_INFO        "diskpulse_disk_info"
#define DISKSTATS_FAMILY_WRITE_AWAIT "diskpulse_disk_write_await_seconds"
#define DISKSTATS_FAMILY_FLUSH_AWAIT "diskpulse_disk_flush_await_seconds"
#define DISKSTATS_FAMILY_UTILIZATION "diskpulse_disk_utilization_ratio"
#define DISKSTATS_FAMILY_READ_AWAIT  "diskpulse_disk_read_await_seconds"
#define DISKSTATS_FAMILY_QUEUE_DEPTH "diskpulse_disk_queue_depth"
#define DISKSTATS_FAMILY_READ_IOPS   "diskpulse_disk_read_iops"
#define DISKSTATS_FAMILY_WRITE_IOPS  "diskpulse_disk_write_iops"
#define DISKSTATS_FAMILY_WRITE_CACHE "diskpulse_disk_write_cache_info"
#define DISKSTATS_FAMILY_SPAN        "diskpulse_disk_window_seconds"

struct diskstats_config {
        int procfs_fd;                   /* borrowed; /proc/diskstats and /proc/uptime below it */
        struct devsrc *devsrc;           /* borrowed; identity lookups */
        const struct namefilter *filter; /* borrowed, may be NULL: the device name filters */
        usec_t interval, window;         /* sampling period (> 0), derived-gauge window */
        usec_t identity_refresh;         /* re-read device facts this often (0: never) */
};

struct diskstats;

/* Creates the collector. The config's borrowed objects must outlive it (or the next
 * diskstats_reconfigure). Never fails. */
struct diskstats *diskstats_new(const struct diskstats_config *cfg);
struct diskstats *diskstats_free(struct diskstats *d);

/* Applies a new config (SIGHUP); the rings are kept when interval and window are unchanged. */
void diskstats_reconfigure(struct diskstats *d, const struct diskstats_config *cfg);

/* Reads /proc/diskstats once at monotonic time now. Returns 0 or -errno (the file could not be
 * read; the previous data stays): -EINVAL when it is not a regular file (a FIFO in a
 * --path.procfs tree is refused, never waited on). */
int diskstats_sample(struct diskstats *d, usec_t now);

/* Writes the families for the latest sample into out. */
void diskstats_export(struct diskstats *d, struct mset *out);

/* Marks one device's facts (or all, when name is NULL) to be read again at the next sample. */
void diskstats_invalidate(struct diskstats *d, const char *name);

/* Number of monitored (included) devices at the last sample. */
size_t diskstats_device_count(const struct diskstats *d);
