/* Snapshots: an immutable set of metrics, reference counted (lib/refcount.h), with the landing
 * page's status summary made on first use; snapshot_page.c renders its pages. */
#include "snapshot.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_internal.h"

/* Snapshots freed since start (any thread): see publisher_publish. */
static atomic_uint_fast64_t snapshots_freed;

uint64_t snapshot_freed_count(void)
{
        return atomic_load_explicit(&snapshots_freed, memory_order_relaxed);
}

struct snapshot *snapshot_new(struct mset **sets, size_t n, usec_t realtime)
{
        struct snapshot *s = xcalloc(1, sizeof(*s));

        refcount_init(&s->refs);
        s->sets = xcalloc(n ? n : 1, sizeof(*s->sets));
        memcpy(s->sets, sets, n * sizeof(*sets));
        s->n = n;
        s->realtime = realtime;
        pthread_mutex_init(&s->lock, NULL);
        return s;
}

static void snapshot_destroy(struct snapshot *s)
{
        for (size_t i = 0; i < s->n; i++)
                mset_free(s->sets[i]);
        free(s->sets);
        free(s->summarize);
        summary_free(s->summary);
        for (size_t f = 0; f < _EXPO_FORMAT_MAX; f++)
                for (size_t z = 0; z < 2; z++)
                        free(s->pages[f][z].buf);
        pthread_mutex_destroy(&s->lock);
        free(s);
        atomic_fetch_add_explicit(&snapshots_freed, 1, memory_order_relaxed);
}

REFCOUNT_DEFINE(, struct snapshot, snapshot, refs, snapshot_destroy)

size_t snapshot_sets(const struct snapshot *s, struct mset *const **ret_sets)
{
        *ret_sets = s->sets;
        return s->n;
}

void snapshot_set_summarizers(struct snapshot *s, const summarize_fn *fns)
{
        free(s->summarize);
        s->summarize = xcalloc(s->n ? s->n : 1, sizeof(*s->summarize));
        memcpy(s->summarize, fns, s->n * sizeof(*fns));
}

const struct summary *snapshot_summary(struct snapshot *s)
{
        pthread_mutex_lock(&s->lock);
        if (!s->summary) {
                s->summary = summary_new();
                for (size_t i = 0; s->summarize && i < s->n; i++)
                        if (s->summarize[i])
                                s->summarize[i](s->sets[i], s->summary);
                summary_finish(s->summary);
        }
        pthread_mutex_unlock(&s->lock);
        return s->summary;
}
