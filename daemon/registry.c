/* The collector registry (registry.h): the definitions, by pointer, in the order of ids. */
#include "registry.h"

#define REGISTRY_DECLARE(ID, NAME) extern const struct collector_def NAME##_collector_def;
REGISTRY_COLLECTORS(REGISTRY_DECLARE)

#define REGISTRY_DEF(ID, NAME) [COLLECTOR_##ID] = &NAME##_collector_def,
const struct collector_def *const collector_defs[COLLECTOR_MAX] = {
    REGISTRY_COLLECTORS(REGISTRY_DEF)};

size_t registry_count(void)
{
        return COLLECTOR_MAX;
}

const struct collector_def *registry_def(size_t id)
{
        return collector_defs[id];
}

int registry_commanded(void *const opts[])
{
        for (int i = 0; i < COLLECTOR_MAX; i++)
                if (collector_defs[i]->commanded && opts[i] &&
                    collector_defs[i]->commanded(opts[i]))
                        return i;
        return -1;
}

bool registry_window(void *const opts[], usec_t *ret)
{
        bool any = false;

        *ret = 0;
        for (int i = 0; i < COLLECTOR_MAX; i++) {
                usec_t w;

                if (!collector_defs[i]->window || !opts[i])
                        continue;
                w = collector_defs[i]->window(opts[i]);
                if (!any || w > *ret)
                        *ret = w;
                any = true;
        }
        return any;
}
