/* The client's thread: receives the helper's answers and hands each to its waiting caller, and
 * when the helper is gone reaps it and starts another after a backoff. Above client_conn.c (the
 * state) and client_spawn.c (new helpers, reaping); client.c starts it. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "privsep_proto.h"
#include "fdpass.h"
#include "log.h"
#include "privsep_internal.h"

static struct pending *pending_by_id(struct privsep *ps, uint64_t id)
{
        for (struct pending *p = ps->pending; p; p = p->next)
                if (p->id == id)
                        return p;
        return NULL;
}

static void close_all(const int *fds, size_t n)
{
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
}

/* A privileged function's answer for p, whose caller waits: its result, its message and exactly
 * the descriptors it announced, or -EIO (everything that came closed). bad: the message came with
 * something fdpass.c refused (its descriptors are already closed). */
static void deliver_priv(struct privsep *ps, struct pending *p, const struct privsep_proto_hdr *hdr,
                         const uint8_t *buf, size_t len, const int *fds, size_t nfds, bool bad)
{
        struct privsep_proto_priv_answer a;

        if (bad || hdr->type != PRIVSEP_PROTO_PRIV_ANSWER ||
            privsep_proto_decode_priv_answer(hdr, buf, len, &a) < 0 || a.nfds != nfds) {
                ps->stats.dropped++;
                close_all(fds, nfds);
                p->status = -EIO;
                snprintf(p->out->err, sizeof p->out->err, "malformed answer from the helper");
                return;
        }
        p->status = hdr->status;
        memcpy(p->out->fds, fds, nfds * sizeof fds[0]);
        p->out->nfds = nfds;
        memcpy(p->out->err, a.err, sizeof a.err);
}

/* Hands one message from helper c, with the nfds descriptors that came along, to its waiting
 * caller; closes the descriptors nobody takes. bad: fdpass.c refused what came along. Called
 * with the lock held. */
static void deliver(struct privsep *ps, struct conn *c, const uint8_t *buf, size_t len,
                    const int *fds, size_t nfds, bool bad)
{
        struct privsep_proto_hdr hdr;
        struct pending *p;

        if (privsep_proto_decode_header(buf, len, &hdr) < 0 ||
            (hdr.type != PRIVSEP_PROTO_RESPONSE && hdr.type != PRIVSEP_PROTO_PRIV_ANSWER)) {
                ps->stats.dropped++;
                close_all(fds, nfds);
                return;
        }
        p = pending_by_id(ps, hdr.id);
        if (!p || p->done || p->gen != c->gen) {
                ps->stats.dropped++;
                close_all(fds, nfds);
                return;
        }
        if (hdr.status == -EIO || hdr.status == -ETIMEDOUT)
                ps->stats.worker_failures++;
        else if (hdr.status == -EAGAIN)
                ps->stats.overloaded++;
        if (!p->resp && !p->out) {
                ps->stats.late_responses++;
                privsep_pending_unlink(ps, p);
                free(p);
                close_all(fds, nfds);
                return;
        }
        if (p->priv) {
                deliver_priv(ps, p, &hdr, buf, len, fds, nfds, bad);
        } else if (bad || nfds || hdr.type != PRIVSEP_PROTO_RESPONSE) {
                /* A device answer never carries a descriptor. */
                ps->stats.dropped++;
                close_all(fds, nfds);
                p->status = -EIO;
        } else {
                p->status = hdr.status;
                if (hdr.status == 0 && privsep_proto_decode_response(&hdr, buf, len, p->resp) < 0) {
                        ps->stats.dropped++;
                        p->status = -EIO;
                }
        }
        p->done = true;
        pthread_cond_broadcast(&ps->cond);
}

/* Reads one message of helper c without blocking. Returns 1 when one was handled, 0 when there
 * was none, -ECONNRESET when the helper closed its end or the socket failed. */
static int receive_one(struct privsep *ps, struct conn *c, uint8_t *buf)
{
        int fds[DEVIO_MAX_FDS];
        size_t n, nfds;
        /* At most DEVIO_MAX_FDS descriptors (a privileged function's answer); with more, or
         * anything else along, every one is closed (-EBADMSG) and the answer fails. */
        int r = privsep_recv_fds(c->fd, buf, PRIVSEP_PROTO_RESPONSE_MAX, MSG_DONTWAIT, &n, fds,
                                 DEVIO_MAX_FDS, &nfds);

        if (r < 0 && r != -EMSGSIZE && r != -EBADMSG)
                return r == -EAGAIN || r == -EINTR ? 0 : -ECONNRESET;
        if (n == 0 && r == 0) {
                close_all(fds, nfds); /* an empty message reads as EOF */
                return -ECONNRESET;
        }
        pthread_mutex_lock(&ps->lock);
        if (r == -EMSGSIZE)
                ps->stats.dropped++;
        else
                deliver(ps, c, buf, n, fds, nfds, r == -EBADMSG);
        pthread_mutex_unlock(&ps->lock);
        return 1;
}

static usec_t doubled(struct privsep *ps, usec_t d)
{
        return d >= ps->delay_max / 2 ? ps->delay_max : 2 * d;
}

/* Receives c's answers until c is lost or the client closes. Also watches the zygote. Returns
 * true when c was lost (it still is ps->conn), false when the client is closing. */
static bool serve(struct privsep *ps, struct conn *c, uint8_t *buf)
{
        bool closing;

        for (;;) {
                struct pollfd p[4] = {{.fd = c->fd, .events = POLLIN},
                                      {.fd = c->pidfd, .events = POLLIN},
                                      {.fd = ps->wake, .events = POLLIN},
                                      {.fd = ps->zfd, .events = POLLIN}};
                bool lost;

                if (poll(p, 4, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[2].revents) {
                        if (privsep_woken(ps))
                                return false;
                        pthread_mutex_lock(&ps->lock);
                        lost = c->lost; /* by run() */
                        pthread_mutex_unlock(&ps->lock);
                        if (lost) {
                                /* A send found the socket closed: take the answers it holds
                                 * still, as after an exit. */
                                while (receive_one(ps, c, buf) > 0)
                                        ;
                                break;
                        }
                }
                if (p[3].revents)
                        privsep_zygote_drain(ps);
                if (p[0].revents) {
                        if (receive_one(ps, c, buf) < 0)
                                break;
                        continue;
                }
                if (p[1].revents) {
                        /* The helper exited: take what its workers sent before, then stop. */
                        while (receive_one(ps, c, buf) > 0)
                                ;
                        break;
                }
        }
        pthread_mutex_lock(&ps->lock);
        privsep_conn_lost(ps, c);
        closing = ps->closing; /* cancel's shutdown() may be the EOF we saw */
        pthread_mutex_unlock(&ps->lock);
        return !closing;
}

/* Collects lost helper c and lets it go. */
static void retire(struct privsep *ps, struct conn *c)
{
        char st[32], pid[16], wait[24];
        int status = privsep_reap_child(c->pid);
        usec_t in, now = now_monotonic();

        snprintf(pid, sizeof pid, "%d", (int)c->pid);
        pthread_mutex_lock(&ps->lock);
        if (ps->conn == c)
                ps->conn = NULL;
        privsep_conn_unref(c); /* c may be gone now */
        in = ps->next_restart > now ? ps->next_restart - now : 0;
        pthread_mutex_unlock(&ps->lock);
        snprintf(wait, sizeof wait, "%.3fs", (double)in / (double)USEC_PER_SEC);
        /* Exit status 0: it was told to stop (SIGTERM, as when systemd stops the whole cgroup);
         * anything else is a crash or a kill. */
        log_msg(status == 0 ? LOG_LEVEL_INFO : LOG_LEVEL_WARN, "privsep: the helper is gone", "pid",
                pid, "status", privsep_describe_status(status, st, sizeof st), "restart_in",
                ps->zfd >= 0 ? wait : "never (no zygote)", NULL);
}

/* One attempt to replace the helper; schedules the next one when it fails. */
static void restart(struct privsep *ps)
{
        struct conn *c = NULL;
        char buf[24], pid[16];
        int r = privsep_spawn_helper(ps, &c);
        usec_t wait;

        pthread_mutex_lock(&ps->lock);
        if (r == 0 && ps->closing) {
                pthread_mutex_unlock(&ps->lock);
                privsep_spawn_discard(c);
                return;
        }
        /* A new helper that dies soon waits longer; so does the next attempt after a failure. */
        ps->delay = doubled(ps, ps->delay);
        if (r == 0)
                privsep_conn_install(ps, c, true);
        else if (r != -ECANCELED && r != -ENOTCONN) {
                ps->stats.failed_restarts++;
                ps->next_restart = now_monotonic() + ps->delay;
        }
        wait = ps->delay;
        pthread_mutex_unlock(&ps->lock);
        if (r == 0) {
                snprintf(pid, sizeof pid, "%d", (int)c->pid);
                log_info("privsep: helper restarted", "pid", pid);
        } else if (r != -ECANCELED && r != -ENOTCONN) {
                snprintf(buf, sizeof buf, "%.3fs", (double)wait / (double)USEC_PER_SEC);
                log_errno(LOG_LEVEL_WARN, r, "privsep: cannot restart the helper", "retry_in", buf,
                          NULL);
        }
}

void *privsep_client_thread(void *arg)
{
        struct privsep *ps = arg;
        uint8_t *buf = xmalloc(PRIVSEP_PROTO_RESPONSE_MAX);

        (void)pthread_setname_np(pthread_self(), "dp-privsep"); /* top -H */
        /* Created with capabilities if the caller kept them: this thread needs none. */
        (void)privsep_drop_all();
        for (;;) {
                struct conn *c;
                usec_t next;
                bool closing;

                pthread_mutex_lock(&ps->lock);
                closing = ps->closing;
                c = ps->conn;
                next = ps->next_restart;
                pthread_mutex_unlock(&ps->lock);
                if (closing)
                        break;
                if (c) {
                        if (!serve(ps, c, buf))
                                break; /* closing: privsep_free() stops the helper */
                        retire(ps, c);
                        continue;
                }
                /* No helper: wait for the restart time (forever without a zygote), watching the
                 * zygote's socket meanwhile. */
                if (ps->zfd < 0 || now_monotonic() < next) {
                        struct pollfd p[2] = {{.fd = ps->wake, .events = POLLIN},
                                              {.fd = ps->zfd, .events = POLLIN}};
                        int r = poll(p, 2, ps->zfd < 0 ? -1 : privsep_ms_until(next));

                        if (r > 0 && p[0].revents && privsep_woken(ps))
                                break;
                        if (r > 0 && p[1].revents)
                                privsep_zygote_drain(ps);
                        continue;
                }
                restart(ps);
        }
        free(buf);
        return NULL;
}
