/* The collector registry: every collector's name, help and default, from which the
 * --[no-]collector.NAME flags are made, and how the daemon makes it from the options. Adding a
 * collector: its folder (an adapter to lib/collector.h), its line here and in registry.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum collector_id { COLLECTOR_DISKSTATS, COLLECTOR_SMART, COLLECTOR_CANARY, COLLECTOR_MAX };

struct collector;
struct daemon;

struct collector_def {
        const char *name;
        const char *help;
        bool default_enabled;
        /* Makes the collector from the daemon's options (cur NULL) or gives cur its new
         * settings; NULL when it cannot run now (cur freed). daemon/settings.c. */
        struct collector *(*setup)(struct daemon *d, struct collector *cur);
};

extern const struct collector_def collector_defs[COLLECTOR_MAX];
