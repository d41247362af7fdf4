/* The diskstats collector (node_exporter collector/diskstats_linux.go for names and meanings,
 * sysstat iostat -x for the derived gauges): its lifecycle (creation, reconfiguration,
 * invalidation) and the table of monitored devices; sampling is in diskstats_sample.c, the
 * export in diskstats_export.c.
 *
 * Cost: the file is read in chunks into one buffer; a line that is byte for byte what the same
 * device printed last round (by a keyed 64-bit hash and its length) is not parsed again, the
 * others are parsed without allocating. Each device
 * keeps its latest counters and, for the window of the derived gauges, only the samples at which
 * the counters those gauges use changed (an idle device keeps one); the time of every round is
 * kept once for all devices. The exported set is a table: one row per device, whose label values
 * (device name and identity) are shared with the previous round's set as long as no device came,
 * went or changed its identity, and whose values are the previous round's own table as long as no
 * counter changed. */
#include "diskstats.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "diskstats_internal.h"

static size_t ring_cap_for(const struct diskstats_config *cfg)
{
        if (cfg->interval == 0)
                abort(); /* diskstats.h: > 0; --diskstats.interval's entry holds the default */
        return (size_t)(cfg->window / cfg->interval) + 2;
}

struct diskstats *diskstats_new(const struct diskstats_config *cfg)
{
        struct diskstats *d = xcalloc(1, sizeof(*d));

        d->cfg = *cfg;
        d->ring_cap = ring_cap_for(cfg);
        d->times = xcalloc(d->ring_cap, sizeof(*d->times));
        d->bad_rl.interval = 3600 * USEC_PER_SEC;
        d->rows = mrows_new(label_names, L_MAX);
        d->membership_changed = true;
        if (getrandom(d->seed, sizeof d->seed, GRND_NONBLOCK) != (ssize_t)sizeof d->seed) {
                d->seed[0] = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
                d->seed[1] = ~d->seed[0] * 0xC2B2AE3D27D4EB4FULL;
        }
        d->seed[0] |= 1;
        return d;
}

void diskstats_device_free(struct ds_device *dev)
{
        if (dev) {
                free(dev->pts);
                free(dev);
        }
}

struct diskstats *diskstats_free(struct diskstats *d)
{
        if (!d)
                return NULL;
        for (size_t i = 0; i < d->n; i++)
                diskstats_device_free(d->devs[i]);
        free(d->devs);
        free(d->lines);
        free(d->times);
        free(d->buf);
        mrows_unref(d->rows);
        mrows_unref(d->fresh);
        mtable_unref(d->table);
        free(d);
        return NULL;
}

bool diskstats_name_included(const struct diskstats_config *cfg, const char *name)
{
        return namefilter_match(cfg->filter, name);
}

/* Forgets the device's samples: its next one starts a new window. */
void diskstats_device_restart(struct ds_device *dev)
{
        dev->npts = 0;
        dev->last_round = 0;
}

void diskstats_reconfigure(struct diskstats *d, const struct diskstats_config *cfg)
{
        size_t cap = ring_cap_for(cfg), kept = 0;

        d->cfg = *cfg;
        /* Devices the new filters leave out go; those they let in come with the next read. */
        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];
                if (!diskstats_name_included(cfg, dev->name)) {
                        diskstats_device_free(dev);
                        continue;
                }
                if (cap != d->ring_cap)
                        diskstats_device_restart(dev);
                d->devs[kept++] = dev;
        }
        d->n = kept;
        d->nlines = 0;
        if (cap != d->ring_cap) {
                free(d->times);
                d->times = xcalloc(cap, sizeof(*d->times));
                d->ring_cap = cap;
        }
        d->membership_changed = true;
        d->table_dirty = true;
}

/* Binary search by name; returns the index where it is or would be. */
size_t diskstats_find_pos(const struct diskstats *d, const char *name, bool *found)
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

struct ds_device *diskstats_device_add(struct diskstats *d, size_t pos, const struct ds_entry *e)
{
        struct ds_device *dev = xcalloc(1, sizeof(*dev));

        memcpy(dev->name, e->name, sizeof dev->name);
        dev->major = e->major;
        dev->minor = e->minor;
        dev->row = NO_ROW;
        dev->fresh_row = NO_ROW;
        GROW(d->devs, d->cap, d->n + 1);
        memmove(d->devs + pos + 1, d->devs + pos, (d->n - pos) * sizeof(*d->devs));
        d->devs[pos] = dev;
        d->n++;
        d->membership_changed = true;
        return dev;
}

/* The full counters of the latest sample. */
void diskstats_device_values(const struct ds_device *dev, uint64_t v[DS_NFIELDS])
{
        memset(v, 0, DS_NFIELDS * sizeof(*v));
        for (size_t k = 0; k < NW; k++)
                v[window_fields[k]] = dev->pts[dev->npts - 1].v[k];
        for (size_t k = 0; k < NL; k++)
                v[latest_fields[k]] = dev->latest[k];
}

void diskstats_invalidate(struct diskstats *d, const char *name)
{
        for (size_t i = 0; i < d->n; i++)
                if (!name || strcmp(d->devs[i]->name, name) == 0)
                        d->devs[i]->identity_valid = false;
}

size_t diskstats_device_count(const struct diskstats *d)
{
        return d->n;
}
