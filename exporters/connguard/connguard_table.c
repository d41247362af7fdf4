/* The connection guard's table of connections: the kernel's view of their sockets (tcp_info),
 * their counts per address and in total, and which one makes room at a limit. Under the guard's
 * lock. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "connguard_internal.h"

bool connguard_tcp_view(int fd, struct tcp_info *ti)
{
        socklen_t len = sizeof *ti;

        memset(ti, 0, sizeof *ti);
        return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0 &&
               len >=
                   offsetof(struct tcp_info, tcpi_notsent_bytes) + sizeof(ti->tcpi_notsent_bytes);
}

/* Bytes the kernel has received on a TCP socket (tcp_info, RFC 4898 HCThruOctetsReceived) and
 * its segments with data; 0 for other sockets or old kernels. */
uint64_t connguard_rx_bytes(int fd, uint32_t *ret_segs)
{
        struct tcp_info ti;
        bool ok = connguard_tcp_view(fd, &ti);

        *ret_segs = ok ? ti.tcpi_data_segs_in : 0;
        return ok ? ti.tcpi_bytes_received : 0;
}

/* Bytes of a next request received since mark (the bytes received at the end of the last
 * response). tcp_info counts the peer's FIN as a byte received (it takes a sequence number), so
 * once the connection is no longer established one byte is not request data: a client that
 * hangs up between requests has begun none. */
uint64_t connguard_request_bytes(const struct tcp_info *ti, uint64_t mark)
{
        uint64_t rx = ti->tcpi_bytes_received;

        if (ti->tcpi_state != TCPI_STATE_ESTABLISHED && rx > mark)
                rx--;
        return rx > mark ? rx - mark : 0;
}

/* Caller holds the lock. Forgets c's counts; the table slot and memory are the caller's. */
void connguard_uncount(struct connguard *g, struct gconn *c)
{
        if (c->keyed)
                addrmap_dec(&g->addrs, c->key);
        else
                g->unkeyed--;
        if (c->closing)
                g->closing--;
        g->live--;
}

/* Caller holds the lock. Drops a record libmicrohttpd never started. */
void connguard_drop_pending(struct connguard *g, struct gconn *c)
{
        if (c->in_table && g->byfd[c->fd] == c)
                g->byfd[c->fd] = NULL;
        g->pending--;
        connguard_uncount(g, c);
        free(c);
}

void connguard_table_put(struct connguard *g, struct gconn *c)
{
        if ((size_t)c->fd >= g->nbyfd) {
                size_t n = g->nbyfd ? g->nbyfd : 256;
                while (n <= (size_t)c->fd)
                        n *= 2;
                g->byfd = xrealloc(g->byfd, n * sizeof(*g->byfd));
                memset(g->byfd + g->nbyfd, 0, (n - g->nbyfd) * sizeof(*g->byfd));
                g->nbyfd = n;
        }
        struct gconn *old = g->byfd[c->fd];
        if (old) {
                /* The fd number came back, so the socket of the old record was closed: a
                 * hand-over libmicrohttpd dropped. (A started one cannot be here: it leaves
                 * the table before its socket is closed.) */
                if (old->started)
                        old->in_table = false;
                else
                        connguard_drop_pending(g, old);
        }
        g->byfd[c->fd] = c;
        c->in_table = true;
}

struct gconn *connguard_conn_new(struct connguard *g, int fd, const struct netaddr *a, bool ip,
                                 usec_t now)
{
        struct gconn *c = xcalloc(1, sizeof(*c));

        c->fd = fd;
        c->phase = PHASE_HEADERS;
        c->accepted = c->since = now;
        if (ip) {
                c->addr = *a;
                c->key = cidr_netaddr_key(a);
                c->keyed = true;
                addrmap_inc(&g->addrs, c->key);
        } else {
                g->unkeyed++;
        }
        g->live++;
        connguard_busy(g);
        return c;
}

void connguard_busy(struct connguard *g)
{
        uint64_t one = 1;

        if (g->busy)
                return;
        g->busy = true;
        /* The guard's own thread is awake; libmicrohttpd's and the main thread wake it. */
        if (g->wakefd >= 0 && !pthread_equal(pthread_self(), g->thread))
                (void)!write(g->wakefd, &one, sizeof one);
}

/* Caller holds the lock; c is started and in the table. Counts the close in *counter unless
 * counter is NULL. */
void connguard_shut(struct connguard *g, struct gconn *c, uint64_t *counter)
{
        (void)shutdown(c->fd, SHUT_RDWR);
        c->closing = true;
        g->closing++;
        if (counter)
                (*counter)++;
}

/* Caller holds the lock. Connections open from c's address (unix-domain clients count as one). */
static uint32_t address_load(const struct connguard *g, const struct gconn *c)
{
        return c->keyed ? addrmap_get(&g->addrs, c->key) : g->unkeyed;
}

/* Whether c's peer has left what it was sent unread for EVICT_MIN_AGE (see WRITE_TIMEOUT). */
static bool stalled(const struct gconn *c, usec_t now)
{
        return c->stall_since && connguard_elapsed(now, c->stall_since) >= EVICT_MIN_AGE;
}

/* Which connection of an address goes first: one whose peer does not read, then one whose
 * request is arriving (slowly: accepted at least EVICT_GRACE ago), then an idle one, then one just
 * accepted. */
static int victim_rank(const struct gconn *c, usec_t now, bool is_stalled)
{
        if (is_stalled)
                return 3;
        if (c->phase == PHASE_HEADERS)
                return connguard_elapsed(now, c->accepted) >= EVICT_GRACE ? 2 : 0;
        return 1;
}

/* Caller holds the lock. The connection to close to make room: started, not being answered
 * (unless its peer does not read the answer), waiting for its request at least min_age, from
 * key's address when key is not NULL, from an address holding more than above connections; of
 * those, from the address holding most, by victim_rank(), the one waiting longest. NULL if
 * none. */
struct gconn *connguard_pick_victim(struct connguard *g, usec_t now, usec_t min_age,
                                    const struct addrkey *key, uint32_t above)
{
        struct gconn *best = NULL;
        uint32_t best_load = 0;
        int best_rank = 0;

        for (size_t fd = 0; fd < g->nbyfd; fd++) {
                struct gconn *c = g->byfd[fd];
                uint32_t load;

                bool st;

                if (!c || !c->started || c->closing)
                        continue;
                int rank;

                st = stalled(c, now);
                if ((!st &&
                     (c->phase == PHASE_HANDLING || connguard_elapsed(now, c->since) < min_age)) ||
                    (key && !(c->keyed && addrkey_equal(c->key, *key))))
                        continue;
                load = address_load(g, c);
                if (load <= above)
                        continue;
                rank = victim_rank(c, now, st);
                if (!best || load > best_load ||
                    (load == best_load &&
                     (rank > best_rank || (rank == best_rank && c->since < best->since)))) {
                        best = c;
                        best_load = load;
                        best_rank = rank;
                }
        }
        return best;
}
