/* The one reference count of the code base: an atomic counter that any thread may take and drop;
 * the thread that drops the last reference frees the object. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

struct refcount {
        atomic_uint n;
};

/* Sets the count of a new object (one reference, its creator's), before it is shared. */
static inline void refcount_init(struct refcount *r)
{
        atomic_init(&r->n, 1);
}

/* Takes one more reference; the caller holds one already, so nothing is ordered by it. */
static inline void refcount_get(struct refcount *r)
{
        atomic_fetch_add_explicit(&r->n, 1, memory_order_relaxed);
}

/* Drops one reference. Returns true when it was the last: the caller frees the object, and
 * sees every write that other threads made to it before they dropped theirs (release on each
 * drop, acquire before the free). */
static inline bool refcount_put(struct refcount *r)
{
        if (atomic_fetch_sub_explicit(&r->n, 1, memory_order_release) != 1)
                return false;
        atomic_thread_fence(memory_order_acquire);
        return true;
}

/* Defines the two reference functions of a struct type whose member named member is its struct
 * refcount, as every reference-counted object of the code base has them:
 *   type *name_ref(type *p)    takes one more reference and returns p;
 *   type *name_unref(type *p)  drops one; the last calls destroy(p), which releases what p holds
 *                              and frees p. Returns NULL, to assign: p = name_unref(p).
 * Both accept NULL. scope is static, or empty when a header declares them. */
#define REFCOUNT_DEFINE(scope, type, name, member, destroy)                                        \
        scope type *name##_ref(type *p)                                                            \
        {                                                                                          \
                if (p)                                                                             \
                        refcount_get(&p->member);                                                  \
                return p;                                                                          \
        }                                                                                          \
        scope type *name##_unref(type *p)                                                          \
        {                                                                                          \
                if (p && refcount_put(&p->member))                                                 \
                        destroy(p);                                                                \
                return NULL;                                                                       \
        }
