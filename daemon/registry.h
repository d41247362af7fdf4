/* The collector registry: every collector's name, help and default, from which the
 * --[no-]collector.NAME flags are made. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum collector_id { COLLECTOR_DISKSTATS, COLLECTOR_SMART, COLLECTOR_CANARY, COLLECTOR_MAX };

struct collector_def {
        const char *name;
        const char *help;
        bool default_enabled;
};

extern const struct collector_def collector_defs[COLLECTOR_MAX];
