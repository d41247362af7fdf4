/* The SMART collector behind the collector interface (lib/collector.h). */
#pragma once

#include "collector.h"
#include "smart.h"

/* Its settings (the reconfigure argument). */
struct smart_settings {
        struct smart_config cfg;
        /* Whether cfg.io can run commands now: a round succeeds while it does. */
        bool (*io_up)(struct devio *io);
};

/* Its options, the --smart.* flags: the storage of its option entries. */
struct smart_options {
        usec_t interval, timeout;
        enum smart_powermode_check powermode;
};

/* A new collector, its thread not started yet (never fails). */
struct collector *smart_collector_new(const struct smart_settings *s);

/* Its definition, for the daemon's registry. */
extern const struct collector_def smart_collector_def;

/* Its part of the landing page's summary from the set it exported (its summarize function, named
 * for tests): pure, any thread. */
void smart_summarize(const struct mset *set, struct summary *sum);
