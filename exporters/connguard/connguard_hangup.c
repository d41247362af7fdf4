/* The connection guard's hang-up watch: every admitted socket in an epoll set of the guard's own
 * (EPOLLRDHUP, edge-triggered), so making room at a limit looks only at connections whose peer
 * has gone. While a connection is idle between requests the watch also reports the first byte of
 * its next request (EPOLLIN), so the guard need not poll idle connections to time a request from
 * its first byte: it sleeps until a deadline or a byte. Also here: when a request began. */
#include <sys/epoll.h>

#include "connguard_internal.h"

/* When the first byte of c's next request came, the watch not having reported it (libmicrohttpd
 * read it first: the watch reports a socket with data unread; or c is not watched). Arrived in
 * one segment (a real client's request), that segment's arrival (tcp_info, milliseconds).
 * Otherwise it came after the guard last saw c without one: its last sweep (every
 * SWEEP_INTERVAL while c is not watched; while c is watched and the guard sleeps, the first
 * byte may have come any time since, so the deadline is the strictest it can be: a request
 * trickled in pieces the guard has not seen begin is closed once its header deadline from
 * there has passed, at the latest at its idle deadline). */
static usec_t first_byte(const struct connguard *g, const struct gconn *c, usec_t now)
{
        usec_t floor = c->since > g->last_sweep ? c->since : g->last_sweep;
        struct tcp_info ti;

        if (connguard_tcp_view(c->fd, &ti) && ti.tcpi_data_segs_in - c->segs_mark == 1) {
                usec_t ago = (usec_t)ti.tcpi_last_data_recv * USEC_PER_MSEC;
                usec_t at = now > ago ? now - ago : 0;
                return at > c->since ? at : c->since;
        }
        return floor;
}

void connguard_begin_request(struct connguard *g, struct gconn *c, usec_t now, bool seen)
{
        c->since = seen ? now : first_byte(g, c, now);
        connguard_arm(g, c, false);
        c->phase = PHASE_HEADERS;
        connguard_busy(g);
}

/* Caller holds the lock. Data has arrived on c, idle between requests: if it is a request's first
 * byte (not only the peer's FIN), the request begins now. */
static void woken(struct connguard *g, struct gconn *c, uint32_t events)
{
        struct tcp_info ti;

        if (!c->armed || !c->started || c->closing || c->phase != PHASE_IDLE)
                return;
        if (connguard_tcp_view(c->fd, &ti) ? connguard_request_bytes(&ti, c->rx_mark) > 0
                                           : !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                connguard_begin_request(g, c, now_monotonic(), true);
}

/* Caller holds the lock. Marks the connections the hang-up watch reports (all it has queued:
 * the kernel queues a socket's hang-up when its FIN or reset arrives, so a client that hangs up
 * and connects again is seen gone before its new connection is accepted), and begins the
 * requests whose first byte it reports. */
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

                        if (!c || c->seq != ((uint32_t)(tag >> 32) & HUP_SEQ_MASK))
                                continue;
                        if (ev[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                                c->hup = true;
                        if (ev[i].events & EPOLLIN)
                                woken(g, c, ev[i].events);
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

static struct epoll_event watch_event(const struct gconn *c, bool first_byte)
{
        return (struct epoll_event){.events = EPOLLRDHUP | EPOLLET | (first_byte ? EPOLLIN : 0),
                                    .data.u64 = HUP_TAG | (uint64_t)c->seq << 32 | (uint32_t)c->fd};
}

/* Caller holds the lock. Puts a socket not yet handed over into the hang-up watch; closing it
 * takes it out. If that fails, the sweep still sees the hang-up and the next request (at its
 * pace: an unwatched connection keeps the guard sweeping). */
void connguard_watch_hangup(struct connguard *g, struct gconn *c)
{
        struct epoll_event ev = watch_event(c, false);

        c->watched = g->hupfd >= 0 && epoll_ctl(g->hupfd, EPOLL_CTL_ADD, c->fd, &ev) == 0;
}

/* Caller holds the lock; c's socket is open. Changing what the watch reports of a socket looks
 * at it again: a first byte already there is reported at once. */
void connguard_arm(struct connguard *g, struct gconn *c, bool on)
{
        struct epoll_event ev = watch_event(c, on);

        if (c->armed == on || !c->watched || g->hupfd < 0)
                return;
        c->armed = epoll_ctl(g->hupfd, EPOLL_CTL_MOD, c->fd, &ev) == 0 ? on : false;
}
