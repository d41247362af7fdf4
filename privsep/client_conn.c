/* The client's shared state, the lowest of its four files: one helper's connection (struct conn)
 * and its reference count, marking a helper lost, installing a new one, the table of pending
 * requests, the eventfd that wakes the client thread and the deadlines its polls wait for. It
 * calls no other file of the client; client_spawn.c, client_thread.c and client.c build on it,
 * in that order. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "privsep_internal.h"

int privsep_ms_until(usec_t deadline)
{
        usec_t now = now_monotonic();

        if (deadline == USEC_INFINITY)
                return -1;
        if (deadline <= now)
                return 0;
        if (deadline - now > (usec_t)INT_MAX / 2 * USEC_PER_MSEC)
                return INT_MAX / 2;
        return (int)((deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
}

bool privsep_woken(struct privsep *ps)
{
        uint64_t v;
        bool closing;

        (void)!read(ps->wake, &v, sizeof v);
        pthread_mutex_lock(&ps->lock);
        closing = ps->closing;
        pthread_mutex_unlock(&ps->lock);
        return closing;
}

static void conn_destroy(struct conn *c)
{
        close(c->fd);
        if (c->pidfd >= 0)
                close(c->pidfd);
        free(c);
}

/* The count is refcount.h's, yet taken and dropped only under ps->lock: every change of it goes
 * with other state that the same lock guards (ps->conn, c->lost, the pending table), and the last
 * reference closes c->fd, which must not happen between run()'s check that the helper is up and
 * its send. That it is atomic besides changes nothing there. */
REFCOUNT_DEFINE(, struct conn, privsep_conn, refs, conn_destroy)

void privsep_conn_install(struct privsep *ps, struct conn *c, bool restart)
{
        refcount_init(&c->refs); /* the client thread's */
        c->gen = ++ps->gen;
        ps->conn = c;
        ps->stats.helper_up = true;
        ps->stats.helper_pid = c->pid;
        if (restart)
                ps->stats.helper_restarts++;
}

void privsep_conn_mark_lost(struct privsep *ps, struct conn *c)
{
        usec_t now = now_monotonic();

        if (c->lost)
                return;
        c->lost = true;
        if (ps->conn == c) {
                ps->stats.helper_up = false;
                ps->stats.helper_pid = 0;
                if (!ps->closing)
                        ps->stats.helper_exits++;
                /* A helper that lived at least as long as the longest wait is not crash-looping:
                 * start the backoff again from the shortest. */
                if (now - c->started >= ps->delay_max)
                        ps->delay = ps->delay_min;
                ps->next_restart = now + ps->delay;
        }
}

void privsep_conn_lost(struct privsep *ps, struct conn *c)
{
        privsep_conn_mark_lost(ps, c);
        for (struct pending **pp = &ps->pending; *pp;) {
                struct pending *p = *pp;

                if (p->gen != c->gen || p->done) {
                        pp = &p->next;
                } else if (!p->resp && !p->out) {
                        *pp = p->next;
                        ps->stats.inflight--;
                        free(p);
                } else {
                        p->done = true;
                        p->status = -ECONNRESET;
                        pp = &p->next;
                }
        }
        pthread_cond_broadcast(&ps->cond);
}

void privsep_pending_unlink(struct privsep *ps, struct pending *x)
{
        for (struct pending **pp = &ps->pending; *pp; pp = &(*pp)->next)
                if (*pp == x) {
                        *pp = x->next;
                        ps->stats.inflight--;
                        return;
                }
}
