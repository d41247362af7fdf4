/* The canary tests' fake clock: the prober's now and sleep, where a sleep moves the clock at once
 * and, past a limit of sleeps, waits until the test says stop. Shared, lock and condition
 * included, with the test's other fakes, which wait and signal under the same lock. */
#ifndef DISKPULSE_FAKE_CLOCK_H
#define DISKPULSE_FAKE_CLOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "util.h"

struct fake_clock {
        pthread_mutex_t lock;
        pthread_cond_t cond; /* broadcast at each sleep */
        usec_t now;          /* the fake monotonic clock */
        unsigned sleeps;     /* sleeps done */
        unsigned limit;      /* a sleep pauses once this many sleeps happened */
        bool stopping;       /* sleeps return at once */
};

/* A clock at 0 that pauses after limit sleeps. */
static inline void fake_clock_init(struct fake_clock *c, unsigned limit)
{
        *c = (struct fake_clock){.limit = limit};
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->cond, NULL);
}

/* canary_ops.now, with ud the struct fake_clock. */
static inline usec_t fake_clock_now(void *ud)
{
        struct fake_clock *c = ud;
        usec_t t;

        pthread_mutex_lock(&c->lock);
        t = c->now;
        pthread_mutex_unlock(&c->lock);
        return t;
}

/* canary_ops.sleep, with ud the struct fake_clock: moves the clock by usec, counts the sleep and
 * wakes the waiters; past the limit waits for stopping; then lets the other threads run. */
static inline void fake_clock_sleep(void *ud, usec_t usec)
{
        struct fake_clock *c = ud;

        pthread_mutex_lock(&c->lock);
        c->now += usec;
        c->sleeps++;
        pthread_cond_broadcast(&c->cond);
        while (c->sleeps >= c->limit && !c->stopping)
                pthread_cond_wait(&c->cond, &c->lock);
        pthread_mutex_unlock(&c->lock);
        nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
}

#endif
