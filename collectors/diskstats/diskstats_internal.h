/* What the diskstats collector's files share: the collector's struct, its devices and their
 * windows, the lines of the last read, the row labels, and the calls between the lifecycle and
 * device table (diskstats.c), the sampling (diskstats_sample.c) and the export
 * (diskstats_export.c). Main thread only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "devices.h"
#include "diskstats.h"
#include "diskstats_parse.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

/* The counters the derived gauges read, kept for every change within the window; the others
 * are kept for the latest sample only. */
static const enum ds_field window_fields[] = {
    DS_READS, DS_READ_SECTORS,   DS_READ_MS,  DS_WRITES,     DS_WRITE_SECTORS, DS_WRITE_MS,
    DS_IO_MS, DS_IO_WEIGHTED_MS, DS_DISCARDS, DS_DISCARD_MS, DS_FLUSHES,       DS_FLUSH_MS,
};
#define NW ARRAY_SIZE(window_fields)
static const enum ds_field latest_fields[] = {DS_READS_MERGED, DS_WRITES_MERGED, DS_IO_NOW,
                                              DS_DISCARDS_MERGED, DS_DISCARD_SECTORS};
#define NL ARRAY_SIZE(latest_fields)

/* The window's counters as of a round: valid from that round until the next point's. */
struct ds_point {
        uint64_t round;
        uint64_t v[NW];
};

struct ds_device {
        char name[DS_NAME_MAX];
        unsigned major, minor;
        uint32_t present;
        uint32_t row;       /* its row in d->rows, or NO_ROW */
        uint32_t fresh_row; /* its identity read anew, in d->fresh, or NO_ROW */
        bool identity_valid;
        bool since_boot;                  /* only one sample, taken in the first round */
        bool changed;                     /* its exported values may differ from the last round's */
        uint16_t npts, cap;               /* points */
        uint64_t first_round, last_round; /* sampled in every round from first to last */
        struct ds_point *pts;             /* oldest first; the last holds the latest values */
        uint64_t latest[NL];
        usec_t identity_time;
        uint64_t identity_stamp; /* the source's stamp when it was read */
};

#define NO_ROW UINT32_MAX

/* What the last read printed at a line position: enough to tell the same line again. */
enum line_kind {
        LINE_OTHER,    /* malformed, a duplicate: parsed each time */
        LINE_EXCLUDED, /* a device the filters leave out (a partition): nothing to do */
        LINE_DEVICE,   /* a monitored device's */
};

struct ds_line {
        uint64_t hash;
        uint32_t len;
        uint32_t kind;
        union {
                struct ds_device *dev; /* LINE_DEVICE */
                uint64_t name_hash;    /* LINE_EXCLUDED: its name's, to skip the filter */
        };
};

/* The labels of the rows: what diskpulse_disk_info, ..._write_cache_info and ..._set_info say
 * of a device. */
enum {
        L_DEVICE,
        L_MAJOR,
        L_MINOR,
        L_MODEL,
        L_SERIAL,
        L_WWN,
        L_PATH,
        L_REVISION,
        L_ROTATIONAL,
        L_MODE,
        L_SETS,
        L_MAX
};
static const char *const label_names[L_MAX] = {"device",     "major", "minor", "model",
                                               "serial",     "wwn",   "path",  "revision",
                                               "rotational", "mode",  "set"};

struct diskstats {
        struct diskstats_config cfg;
        struct ds_device **devs; /* the monitored devices, sorted by name */
        size_t n, cap;
        struct ds_line *lines; /* by position in the last read, rewritten in place as read */
        size_t nlines, lines_cap;
        size_t ring_cap; /* rounds a window spans at most */
        usec_t *times;   /* time of round r at times[r % ring_cap] */
        uint64_t round;  /* the latest round; 0 before the first */
        bool first_round_done;
        uint64_t bad_lines;
        usec_t uptime; /* from /proc/uptime at the first round */
        struct ratelimit bad_rl;
        char *buf; /* buf_cap + 1 bytes */
        size_t buf_cap;
        uint64_t seed[2];        /* of the line hash */
        bool membership_changed; /* a device came or went, or its row must change */
        struct mrows *rows;      /* the label values of the exported devices, shared */
        struct mrows *fresh;     /* identities read since the rows were made, or NULL */
        struct mtable *table;    /* the last round's values, reused while nothing changed */
        bool table_dirty;
};

/* ---- diskstats.c: the device table ---- */

/* Frees a device; accepts NULL. */
void diskstats_device_free(struct ds_device *dev);
/* Whether the filters of cfg let the device name in. */
bool diskstats_name_included(const struct diskstats_config *cfg, const char *name);
/* Forgets the device's samples: its next one starts a new window. */
void diskstats_device_restart(struct ds_device *dev);
/* Binary search by name; returns the index where it is or would be. */
size_t diskstats_find_pos(const struct diskstats *d, const char *name, bool *found);
/* Inserts a new device for e at index pos of d->devs. Returns it (owned by d). */
struct ds_device *diskstats_device_add(struct diskstats *d, size_t pos, const struct ds_entry *e);
/* The full counters of the latest sample. */
void diskstats_device_values(const struct ds_device *dev, uint64_t v[DS_NFIELDS]);

/* ---- diskstats_export.c: the rows ---- */

/* Adds the label values of a device's row to rows; returns its index. */
size_t diskstats_add_row(struct mrows *rows, const struct ds_device *dev,
                         const struct device_info *info);
/* Reads the device's identity from the source (and the source's stamp of it). */
void diskstats_read_identity(struct diskstats *d, struct ds_device *dev, struct device_info *ret);
