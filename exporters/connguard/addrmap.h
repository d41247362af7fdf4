/* Counts per client address key (the per-address connection limit): an open-addressing hash
 * table with linear probing and backward-shift deletion, so it never fills with tombstones under
 * connection churn. Keys are hashed with a per-process seed. Not thread-safe: the caller locks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"

static inline bool addrkey_equal(struct addrkey a, struct addrkey b)
{
        return a.hi == b.hi && a.lo == b.lo;
}

struct addrmap_entry {
        struct addrkey key;
        uint32_t count; /* 0: empty slot */
};

struct addrmap {
        struct addrmap_entry *e;
        size_t cap; /* 0 or a power of two */
        size_t used;
        uint64_t seed;
};

/* An empty map; no memory until the first key. */
void addrmap_init(struct addrmap *m, uint64_t seed);
/* Frees the table; the map is empty again. */
void addrmap_done(struct addrmap *m);

/* The count of k (0 when absent). */
uint32_t addrmap_get(const struct addrmap *m, struct addrkey k);
/* Adds one to k's count (grows the table at half full; aborts on out-of-memory). */
void addrmap_inc(struct addrmap *m, struct addrkey k);
/* Takes one from k's count, dropping the key at 0; an absent key is left alone. */
void addrmap_dec(struct addrmap *m, struct addrkey k);
/* Number of keys with a count above 0. */
size_t addrmap_size(const struct addrmap *m);
