/* The canary collector behind the collector interface (lib/collector.h). */
#pragma once

#include <stdint.h>

#include "canary.h"
#include "canary_probe.h"
#include "collector.h"

/* One --canary.path target. */
struct canary_path_option {
        char *path; /* absolute */
        enum canary_mode mode;
};

/* Its options, the --canary.* flags: the storage of its option entries. */
struct canary_options {
        struct canary_path_option *paths; /* --canary.path, repeatable; none given: state dir */
        size_t n_paths;
        usec_t interval, timeout;
        usec_t baseline_period; /* tests and evaluation only: the baseline's hour */
        unsigned burst;         /* 0 .. CANARY_BURST_MAX */
        uint64_t size;
};

/* Its settings (the reconfigure argument) are a struct canary_config. A new collector, its
 * prober threads not started yet (never fails). */
struct collector *canary_collector_new(const struct canary_config *cfg);

/* Its definition, for the daemon's registry. */
extern const struct collector_def canary_collector_def;

/* Its part of the landing page's summary from the set it exported (its summarize function, named
 * for tests): pure, any thread. */
void canary_summarize(const struct mset *set, struct summary *sum);
