/* The collector registry. */
#include "registry.h"

#include "canary_collector.h"
#include "diskstats_collector.h"
#include "smart_collector.h"

const struct collector_def *const collector_defs[COLLECTOR_MAX] = {
    [COLLECTOR_DISKSTATS] = &diskstats_collector_def,
    [COLLECTOR_SMART] = &smart_collector_def,
    [COLLECTOR_CANARY] = &canary_collector_def,
};
