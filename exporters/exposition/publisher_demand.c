/* What requests ask of the main loop: on demand, a round for a request that finds the snapshot
 * too old and a heartbeat for a health check, through an eventfd; the arrival times of the
 * requests for the page, for the main loop's sampler; the first request for each form on a
 * snapshot, for publisher_prepare(). */
#include "publisher.h"

#include <errno.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "snapshot_internal.h"

void publisher_note_asked(struct publisher *p, enum expo_format fmt, bool gzip, usec_t now)
{
        pthread_mutex_lock(&p->lock);
        p->asked[fmt][gzip].prev = p->asked[fmt][gzip].last;
        p->asked[fmt][gzip].last = now;
        pthread_mutex_unlock(&p->lock);
}

int publisher_on_demand(struct publisher *p, usec_t max_age)
{
        int fd = -1;

        if (max_age && p->wantfd < 0) {
                fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
                if (fd < 0)
                        return -errno;
        }
        pthread_mutex_lock(&p->lock);
        if (fd >= 0)
                p->wantfd = fd;
        p->max_age = max_age;
        pthread_mutex_unlock(&p->lock);
        return p->wantfd;
}

/* Caller holds the lock. Asks the main loop for what (once until it answers). */
static void ask(struct publisher *p, unsigned what)
{
        uint64_t one = 1;

        if ((p->wants & what) == what)
                return;
        p->wants |= what;
        if (write(p->wantfd, &one, sizeof one) < 0) {
                /* the counter is full (never: the main loop reads it): asked already */
        }
}

/* Caller holds the lock. Waits until cond's counter moves from seen or until deadline; false if
 * it did not. */
static bool wait_moved(struct publisher *p, const uint64_t *counter, uint64_t seen, usec_t deadline)
{
        struct timespec ts = {.tv_sec = (time_t)(deadline / USEC_PER_SEC),
                              .tv_nsec = (long)(deadline % USEC_PER_SEC) * 1000};

        while (*counter == seen)
                if (pthread_cond_timedwait(&p->changed, &p->lock, &ts) == ETIMEDOUT)
                        return *counter != seen;
        return true;
}

struct snapshot *publisher_fresh(struct publisher *p)
{
        struct snapshot *s;
        usec_t now = now_monotonic();

        pthread_mutex_lock(&p->lock);
        if (!p->narrivals ||
            now - p->arrivals[(p->apos + PUBLISHER_ARRIVALS - 1) % PUBLISHER_ARRIVALS] >=
                PUBLISHER_SAME) {
                p->arrivals[p->apos] = now;
                p->apos = (p->apos + 1) % PUBLISHER_ARRIVALS;
                if (p->narrivals < PUBLISHER_ARRIVALS)
                        p->narrivals++;
        }
        if (p->cur && p->max_age && p->wantfd >= 0 && now - p->made > p->max_age &&
            !(p->deaf & PUBLISHER_WANT_ROUND)) {
                uint64_t seen = p->publishes;
                ask(p, PUBLISHER_WANT_ROUND);
                if (!wait_moved(p, &p->publishes, seen, now + PUBLISHER_WAIT))
                        p->deaf |= PUBLISHER_WANT_ROUND; /* served as it is until answered */
        }
        s = snapshot_ref(p->cur);
        pthread_mutex_unlock(&p->lock);
        return s;
}

bool publisher_alive(struct publisher *p, usec_t stale)
{
        usec_t now = now_monotonic();
        bool alive;

        pthread_mutex_lock(&p->lock);
        alive = p->beat && now - p->beat <= stale;
        if (!alive && p->beat && p->max_age && p->wantfd >= 0 && !(p->deaf & PUBLISHER_WANT_BEAT)) {
                /* The main loop sleeps until it has work: is it there to answer? */
                uint64_t seen = p->beats;
                ask(p, PUBLISHER_WANT_BEAT);
                alive = wait_moved(p, &p->beats, seen, now + PUBLISHER_WAIT);
                if (!alive)
                        p->deaf |= PUBLISHER_WANT_BEAT;
        }
        pthread_mutex_unlock(&p->lock);
        return alive;
}

unsigned publisher_take_wants(struct publisher *p)
{
        uint64_t n;
        unsigned w;

        pthread_mutex_lock(&p->lock);
        if (p->wantfd >= 0)
                (void)!read(p->wantfd, &n, sizeof n);
        w = p->wants;
        pthread_mutex_unlock(&p->lock);
        return w;
}

size_t publisher_take_arrivals(struct publisher *p, usec_t *out, size_t max)
{
        size_t n;

        pthread_mutex_lock(&p->lock);
        n = p->narrivals < max ? p->narrivals : max;
        for (size_t i = 0; i < n; i++)
                out[i] = p->arrivals[(p->apos + PUBLISHER_ARRIVALS - n + i) % PUBLISHER_ARRIVALS];
        p->narrivals = 0;
        pthread_mutex_unlock(&p->lock);
        return n;
}
