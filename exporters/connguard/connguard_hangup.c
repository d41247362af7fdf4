/* The connection guard's hang-up watch: every admitted socket in an epoll set of the guard's own
 * (EPOLLRDHUP, edge-triggered), so making room at a limit looks only at connections whose peer
 * has gone. */
#include <sys/epoll.h>

#include "connguard_internal.h"

/* Caller holds the lock. Marks the connections the hang-up watch reports (all it has queued:
 * the kernel queues a socket's hang-up when its FIN or reset arrives, so a client that hangs up
 * and connects again is seen gone before its new connection is accepted). */
void connguard_take_hangups(struct connguard *g)
{
        struct epoll_event ev[64];
        int n;

        if (g->hupfd < 0)
                return;
        do {
                n = epoll_wait(g->hupfd, ev, ARRAY_SIZE(ev), 0);
                for (int i = 0; i < n; i++) {
                        uint64_t tag = ev[i].data.u64;
                        size_t fd = (uint32_t)tag;
                        struct gconn *c = fd < g->nbyfd ? g->byfd[fd] : NULL;

                        if (c && c->seq == ((uint32_t)(tag >> 32) & HUP_SEQ_MASK))
                                c->hup = true;
                }
        } while (n == (int)ARRAY_SIZE(ev));
}

/* Caller holds the lock. Shuts the connections between requests, from key's address when key
 * is not NULL, that are closing already (the client has hung up, or the response said
 * "Connection: close": the hang-up watch or the sweep has seen it) and that libmicrohttpd has
 * still to close (a scraper that connects again right after its response finds its old
 * connection still counted); true if there was one. They are gone already: not evictions. */
bool connguard_reap_hung_up(struct connguard *g, const struct addrkey *key)
{
        bool any = false;

        for (size_t fd = 0; fd < g->nbyfd; fd++) {
                struct gconn *c = g->byfd[fd];
                struct tcp_info ti;

                if (!c || !c->hup || !c->started || c->closing || c->phase != PHASE_IDLE ||
                    (key && !(c->keyed && addrkey_equal(c->key, *key))) ||
                    !connguard_tcp_view(c->fd, &ti) || ti.tcpi_state == TCPI_STATE_ESTABLISHED ||
                    connguard_request_bytes(&ti, c->rx_mark) > 0)
                        continue;
                connguard_shut(g, c, NULL);
                any = true;
        }
        return any;
}

/* Caller holds the lock. Whether a connection being answered, from key's address when key is not
 * NULL, is about to go by itself: it is closing, and if only the client has hung up, nothing is
 * left to send (the response is out; libmicrohttpd has still to report it sent and close it). */
bool connguard_closing_soon(struct connguard *g, const struct addrkey *key)
{
        for (size_t fd = 0; fd < g->nbyfd; fd++) {
                struct gconn *c = g->byfd[fd];
                struct tcp_info ti;

                if (c && c->started && !c->closing && c->phase == PHASE_HANDLING &&
                    (!key || (c->keyed && addrkey_equal(c->key, *key))) &&
                    connguard_tcp_view(c->fd, &ti) && ti.tcpi_state != TCPI_STATE_ESTABLISHED &&
                    (ti.tcpi_state != TCPI_STATE_CLOSE_WAIT ||
                     (ti.tcpi_notsent_bytes == 0 && ti.tcpi_unacked == 0)))
                        return true;
        }
        return false;
}

/* Puts a socket not yet handed over into the hang-up watch; closing it takes it out. If that
 * fails, the sweep still sees the hang-up (at its pace). */
void connguard_watch_hangup(struct connguard *g, int fd, uint32_t seq)
{
        struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET,
                                 .data.u64 = HUP_TAG | (uint64_t)seq << 32 | (uint32_t)fd};

        if (g->hupfd >= 0)
                (void)epoll_ctl(g->hupfd, EPOLL_CTL_ADD, fd, &ev);
}
