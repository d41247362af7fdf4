/* The collector registry: every collector's definition (lib/collector.h: name, help, default,
 * options, setup), from which the --[no-]collector.NAME flags and the collector's own flags are
 * made and the daemon makes it. Adding a collector: its folder (an adapter to lib/collector.h
 * defining NAME_collector_def) and its line here. */
#pragma once

#include "collector.h"

/* X(ID, NAME) for every collector, in the order of --help, the dump and the round:
 * COLLECTOR_ID is its index, NAME_collector_def its definition. */
#define REGISTRY_COLLECTORS(X)                                                                     \
        X(DISKSTATS, diskstats)                                                                    \
        X(SMART, smart)                                                                            \
        X(CANARY, canary)                                                                          \
        X(BIOLATENCY, biolatency)

#define REGISTRY_ID(ID, NAME) COLLECTOR_##ID,
enum collector_id { REGISTRY_COLLECTORS(REGISTRY_ID) COLLECTOR_MAX };
#undef REGISTRY_ID

/* The registry's size as a constant, for arrays indexed by id. */
#define REGISTRY_MAX COLLECTOR_MAX

extern const struct collector_def *const collector_defs[COLLECTOR_MAX];

/* The rest of the daemon knows collectors only through these: ids run from 0 to
 * registry_count() - 1, in the registry's order. */
size_t registry_count(void);
const struct collector_def *registry_def(size_t id);
/* The id of the first collector whose one-shot command (collector_def.commanded) its options,
 * opts[id], ask for; -1 when none does. */
int registry_commanded(void *const opts[]);
/* The longest window a collector derives its gauges over (collector_def.window) from its options,
 * opts[id] (NULL: none), into *ret; false when no collector has one. */
bool registry_window(void *const opts[], usec_t *ret);
