/* The collector interface: what the daemon's round, reload and shutdown need from a collector,
 * as a table of function pointers each collector's adapter (collectors/NAME/NAME_collector.c)
 * fills. The daemon keeps one object per registered collector (daemon/registry.c) and loops
 * over them; it never calls a collector's own functions. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "metrics.h"
#include "summary.h"
#include "util.h"

struct collector;

struct collector_ops {
        const char *name; /* as in the registry and the collector="..." label */
        /* Starts the collector's own threads, if any (NULL: none). 0 or -errno. */
        int (*start)(struct collector *c);
        /* The work of a round before its export (reading a file); NULL: none. Returns 0, or
         * -errno when the round failed (diskpulse_collector_success 0); the collector logs. */
        int (*collect)(struct collector *c, usec_t now);
        /* Fills out with the collector's metrics. */
        void (*export)(struct collector *c, struct mset *out);
        /* After export: whether the round succeeded (NULL: as collect returned). */
        bool (*healthy)(struct collector *c);
        /* What the landing page shows of it (NULL: nothing): a pure function of the set export
         * filled, called later on an HTTP thread (lib/summary.h). */
        summarize_fn summarize;
        /* New settings (SIGHUP): settings points to the collector's own config struct. 0 or
         * -errno (the collector keeps running as before). */
        int (*reconfigure)(struct collector *c, const void *settings);
        /* --once, instead of start: begin_once starts what measures beside the others (every
         * collector's first, NULL: nothing), then settle measures once or waits until there is
         * something to export (NULL: nothing to wait for). 0 or -errno. */
        int (*begin_once)(struct collector *c);
        int (*settle)(struct collector *c);
        /* A device came, went or changed (hotplug); NULL: not interested. */
        void (*device_event)(struct collector *c, const char *device);
        /* Stops its threads and frees it. */
        void (*free)(struct collector *c);
};

/* Embedded first in each adapter's own struct. */
struct collector {
        const struct collector_ops *ops;
};

static inline const char *collector_name(const struct collector *c)
{
        return c->ops->name;
}

/* Frees c (NULL accepted); returns NULL. */
static inline struct collector *collector_free(struct collector *c)
{
        if (c)
                c->ops->free(c);
        return NULL;
}
