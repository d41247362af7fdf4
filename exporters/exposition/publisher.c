/* The publisher: the current snapshot, replaced by each publication (the free heap given back
 * now and then) and handed to HTTP threads; the pages a steady scraper will ask for made ahead. */
#include "publisher.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "snapshot_internal.h"

struct publisher *publisher_new(void)
{
        struct publisher *p = xcalloc(1, sizeof(*p));
        pthread_condattr_t ca;

        pthread_mutex_init(&p->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->changed, &ca);
        pthread_condattr_destroy(&ca);
        p->wantfd = -1;
        return p;
}

struct publisher *publisher_free(struct publisher *p)
{
        if (!p)
                return NULL;
        snapshot_unref(p->cur);
        if (p->wantfd >= 0)
                close(p->wantfd);
        pthread_cond_destroy(&p->changed);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
}

void publisher_publish(struct publisher *p, struct snapshot *s)
{
        struct snapshot *old;

        if (s)
                s->pub = p;
        pthread_mutex_lock(&p->lock);
        old = p->cur;
        p->cur = s;
        p->made = now_monotonic();
        p->publishes++;
        p->wants &= ~PUBLISHER_WANT_ROUND;
        p->deaf &= ~PUBLISHER_WANT_ROUND;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
        /* The free heap the old snapshot leaves is what the next round takes: trimming it every
         * round gave the pages back and faulted them in again, with a TLB shootdown on every CPU
         * (a fifth of a scrape's CPU at 2 devices). It goes back only when it is much more than
         * a round's: after snapshots that slow readers held were let go (more than the one each
         * publication frees; their connections' memory goes with them), and every
         * PUBLISHER_LOOK_EVERY publications for the rest. Looking costs a walk of the free
         * heap (mallinfo2), a tenth of a round's CPU at 2 devices: not every round. */
        snapshot_unref(old);
        {
                uint64_t freed = snapshot_freed_count();
                bool others = freed - p->freed_seen > 1;

                p->freed_seen = freed;
                if (others || ++p->unlooked >= PUBLISHER_LOOK_EVERY) {
                        p->unlooked = 0;
                        p->looks++;
                        malloc_give_back();
                }
        }
}

uint64_t publisher_heap_looks(const struct publisher *p)
{
        return p->looks;
}

int publisher_prepare(struct publisher *p, usec_t now, usec_t next)
{
        struct snapshot *s = publisher_get(p);
        int made = 0;

        if (!s)
                return 0;
        for (int fmt = 0; fmt < _EXPO_FORMAT_MAX; fmt++)
                for (int gz = 0; gz < 2; gz++) {
                        struct asked_times a;
                        usec_t every, due;
                        const void *buf;
                        size_t len;
                        bool keep;

                        pthread_mutex_lock(&p->lock);
                        a = p->asked[fmt][gz];
                        pthread_mutex_unlock(&p->lock);
                        if (!a.prev || a.last <= a.prev)
                                continue;
                        every = a.last - a.prev;
                        due = a.last + every;
                        /* a scraper that comes less often than every other snapshot, within the
                         * last two of its intervals, and whose next request comes before the
                         * next snapshot: this snapshot is the one it will read */
                        if (every < 2 * (next - now) || every > 3600 * USEC_PER_SEC ||
                            now > a.last + 2 * every || due < now || due >= next)
                                continue;
                        pthread_mutex_lock(&s->lock);
                        keep = snapshot_page_kept(s, (enum expo_format)fmt, gz);
                        pthread_mutex_unlock(&s->lock);
                        if (keep && !snapshot_page_ready(s, (enum expo_format)fmt, gz) &&
                            snapshot_page(s, (enum expo_format)fmt, gz, &buf, &len) == 0)
                                made++;
                }
        snapshot_unref(s);
        return made;
}

struct snapshot *publisher_get(struct publisher *p)
{
        struct snapshot *s;

        pthread_mutex_lock(&p->lock);
        s = snapshot_ref(p->cur);
        pthread_mutex_unlock(&p->lock);
        return s;
}

void publisher_beat(struct publisher *p, usec_t now)
{
        pthread_mutex_lock(&p->lock);
        p->beat = now;
        p->beats++;
        p->wants &= ~PUBLISHER_WANT_BEAT;
        p->deaf &= ~PUBLISHER_WANT_BEAT;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
}
