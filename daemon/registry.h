/* The collector registry: every collector's definition (lib/collector.h: name, help, default,
 * options, setup), from which the --[no-]collector.NAME flags are made and the daemon makes it.
 * Adding a collector: its folder (an adapter to lib/collector.h with its collector_def), its
 * line in registry.c and its id here. */
#pragma once

#include "collector.h"

enum collector_id { COLLECTOR_DISKSTATS, COLLECTOR_SMART, COLLECTOR_CANARY, COLLECTOR_MAX };

extern const struct collector_def *const collector_defs[COLLECTOR_MAX];
