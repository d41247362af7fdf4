/* The collector registry (registry.h): the definitions, by pointer, in the order of ids. */
#include "registry.h"

#define REGISTRY_DECLARE(ID, NAME) extern const struct collector_def NAME##_collector_def;
REGISTRY_COLLECTORS(REGISTRY_DECLARE)

#define REGISTRY_DEF(ID, NAME) [COLLECTOR_##ID] = &NAME##_collector_def,
const struct collector_def *const collector_defs[COLLECTOR_MAX] = {
    REGISTRY_COLLECTORS(REGISTRY_DEF)};
