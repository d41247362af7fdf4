/* The canary collector behind the collector interface (lib/collector.h). */
#pragma once

#include "canary.h"
#include "collector.h"

/* Its settings (the reconfigure argument) are a struct canary_config. A new collector, its
 * prober threads not started yet (never fails). */
struct collector *canary_collector_new(const struct canary_config *cfg);
