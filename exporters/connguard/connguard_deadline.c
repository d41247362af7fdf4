/* The connection guard's deadlines: header, request, idle and write timeouts, checked every
 * SWEEP_INTERVAL while a connection is busy, else at the earliest idle deadline; a late
 * connection is shut down. */
#include <netinet/in.h>

#include "connguard_internal.h"

/* Caller holds the lock. Deadlines of every connection; pending records never started. */
void connguard_sweep(struct connguard *g, usec_t now)
{
        const struct connguard_config *cfg = &g->cfg;
        bool busy = false;
        usec_t idle_due = USEC_INFINITY;

        for (size_t fd = 0; fd < g->nbyfd; fd++) {
                struct gconn *c = g->byfd[fd];

                if (!c)
                        continue;
                if (!c->started) {
                        if (connguard_elapsed(now, c->accepted) > PENDING_MAX_AGE)
                                connguard_drop_pending(g, c);
                        else
                                busy = true;
                        continue;
                }
                if (c->closing)
                        continue;
                if (c->phase != PHASE_HEADERS) {
                        /* The write deadline: is the peer reading what it was sent? */
                        struct tcp_info ti;
                        if (!connguard_tcp_view(c->fd, &ti) ||
                            (ti.tcpi_notsent_bytes == 0 && ti.tcpi_unacked == 0)) {
                                c->stall_since = 0;
                        } else if (!c->stall_since ||
                                   ti.tcpi_bytes_acked >= c->ack_mark + WRITE_PROGRESS) {
                                c->stall_since = now;
                                c->ack_mark = ti.tcpi_bytes_acked;
                        } else if (connguard_elapsed(now, c->stall_since) > WRITE_TIMEOUT) {
                                /* a reset when libmicrohttpd closes it: the kernel drops what
                                 * the peer would not read instead of keeping it for an orphan
                                 * socket to retransmit */
                                struct linger lg = {.l_onoff = 1, .l_linger = 0};
                                (void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
                                connguard_shut(g, c, &g->st.timeout_write);
                                continue;
                        }
                }
                if (c->phase == PHASE_IDLE) {
                        struct tcp_info ti;
                        uint64_t rx = 0;
                        if (connguard_tcp_view(c->fd, &ti)) {
                                rx = connguard_request_bytes(&ti, c->rx_mark);
                                if (ti.tcpi_state != TCPI_STATE_ESTABLISHED)
                                        c->hup = true; /* in case the watch missed it */
                        }
                        if (rx > 0) {
                                /* The next request began since the last look. */
                                connguard_begin_request(g, c, now, false);
                        } else if (connguard_elapsed(now, c->since) > cfg->idle_timeout) {
                                connguard_shut(g, c, &g->st.timeout_idle);
                                continue;
                        }
                }
                /* Idle, watched for its next first byte, its response read by the peer: nothing
                 * to look at until its idle deadline. */
                if (c->phase == PHASE_IDLE && c->armed && !c->stall_since) {
                        usec_t due = c->since + cfg->idle_timeout + 1;
                        idle_due = due < idle_due ? due : idle_due;
                } else {
                        busy = true;
                }
                if (c->phase == PHASE_HEADERS &&
                    connguard_elapsed(now, c->since) > cfg->header_timeout)
                        connguard_shut(g, c, &g->st.timeout_header);
                else if (c->phase == PHASE_HANDLING &&
                         connguard_elapsed(now, c->since) > cfg->request_timeout)
                        connguard_shut(g, c, &g->st.timeout_request);
        }
        g->last_sweep = now;
        g->busy = busy;
        g->idle_due = idle_due;
}
