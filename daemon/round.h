/* The collection round: every collector in the registry's order collects and exports into its
 * own set, timed; the daemon's self metrics follow; the sets and the landing page's summary are
 * frozen into a snapshot. Main thread. */
#pragma once

#include <stdbool.h>

#include "collector.h"
#include "registry.h"
#include "snapshot.h"

/* The last round of one collector: diskpulse_collector_duration_seconds and _success. */
struct collector_stat {
        double duration;
        bool success;
        bool ran;
};

struct round {
        struct collector *c[COLLECTOR_MAX]; /* by registry id; NULL: turned off */
        struct collector_stat stats[COLLECTOR_MAX];
        unsigned count;                 /* rounds run */
        const char *version, *revision; /* diskpulse_build_info's labels */
        /* The other parts' own metrics, after the collectors' (process, helper, HTTP, web
         * config); may be NULL. */
        void (*self_export)(void *ud, struct mset *out);
        void *ud;
        usec_t (*now)(void); /* monotonic clock; NULL: now_monotonic() (tests fake it) */
};

/* Runs one round at wall-clock time realtime; returns the new snapshot (the caller's
 * reference). */
struct snapshot *round_run(struct round *r, usec_t realtime);
/* Every collector that has a sample hook takes its counters and exports nothing (the start of
 * the window whose page the next round makes); the first error, 0 if none. */
int round_sample(struct round *r);
/* The round's self metrics: diskpulse_build_info, then each collector's duration and success
 * (the collectors that ran, in registry order). */
void round_self_metrics(const struct round *r, struct mset *out);
/* Frees collector id and forgets its last round (turned off). */
void round_drop(struct round *r, size_t id);
/* Frees every collector. */
void round_free(struct round *r);
