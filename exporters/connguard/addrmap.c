/* Counts per client address key (see addrmap.h). */
#include "addrmap.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static size_t slot(const struct addrmap *m, struct addrkey k)
{
        uint64_t h = (k.hi ^ m->seed) * 0x9E3779B97F4A7C15ULL;

        h ^= (k.lo + m->seed) * 0xC2B2AE3D27D4EB4FULL;
        h ^= h >> 31;
        return (size_t)h & (m->cap - 1);
}

void addrmap_init(struct addrmap *m, uint64_t seed)
{
        memset(m, 0, sizeof(*m));
        m->seed = seed;
}

void addrmap_done(struct addrmap *m)
{
        free(m->e);
        addrmap_init(m, m->seed);
}

uint32_t addrmap_get(const struct addrmap *m, struct addrkey k)
{
        if (m->cap == 0)
                return 0;
        for (size_t i = slot(m, k);; i = (i + 1) & (m->cap - 1)) {
                if (m->e[i].count == 0)
                        return 0;
                if (addrkey_equal(m->e[i].key, k))
                        return m->e[i].count;
        }
}

static void put_new(struct addrmap *m, struct addrkey k, uint32_t count)
{
        size_t i = slot(m, k);

        while (m->e[i].count != 0)
                i = (i + 1) & (m->cap - 1);
        m->e[i].key = k;
        m->e[i].count = count;
        m->used++;
}

void addrmap_inc(struct addrmap *m, struct addrkey k)
{
        if ((m->used + 1) * 2 > m->cap) {
                struct addrmap_entry *old = m->e;
                size_t oldcap = m->cap;

                m->cap = oldcap ? oldcap * 2 : 64;
                m->e = xcalloc(m->cap, sizeof(*m->e));
                m->used = 0;
                for (size_t i = 0; i < oldcap; i++)
                        if (old[i].count)
                                put_new(m, old[i].key, old[i].count);
                free(old);
        }
        for (size_t i = slot(m, k);; i = (i + 1) & (m->cap - 1)) {
                if (m->e[i].count == 0) {
                        m->e[i].key = k;
                        m->e[i].count = 1;
                        m->used++;
                        return;
                }
                if (addrkey_equal(m->e[i].key, k)) {
                        m->e[i].count++;
                        return;
                }
        }
}

void addrmap_dec(struct addrmap *m, struct addrkey k)
{
        size_t i, j, mask = m->cap - 1;

        if (m->cap == 0)
                return;
        for (i = slot(m, k);; i = (i + 1) & mask) {
                if (m->e[i].count == 0)
                        return;
                if (addrkey_equal(m->e[i].key, k))
                        break;
        }
        if (--m->e[i].count > 0)
                return;
        m->used--;
        /* Backward shift: an entry later in the run moves into the hole unless its home slot
         * lies (cyclically) after the hole and up to where it is. */
        for (j = (i + 1) & mask; m->e[j].count != 0; j = (j + 1) & mask) {
                size_t home = slot(m, m->e[j].key);
                bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
                if (stays)
                        continue;
                m->e[i] = m->e[j];
                m->e[j].count = 0;
                i = j;
        }
}

size_t addrmap_size(const struct addrmap *m)
{
        return m->used;
}
