/* The diskstats collector behind the collector interface (lib/collector.h). */
#pragma once

#include "collector.h"
#include "diskstats.h"

/* Its settings (the reconfigure argument): the collector's config and, for the log line of a
 * failed read, the --path.procfs it came from. */
struct diskstats_settings {
        struct diskstats_config cfg;
        const char *procfs;
};

/* Its options, the --diskstats.* flags but the interval (the daemon's: it paces the round). */
struct diskstats_options {
        usec_t window; /* of the derived gauges */
};

/* A new collector (never fails). */
struct collector *diskstats_collector_new(const struct diskstats_settings *s);
/* The devices it follows now (for the service status line); 0 for NULL. */
size_t diskstats_collector_devices(const struct collector *c);

/* Its definition, for the daemon's registry. */
extern const struct collector_def diskstats_collector_def;
