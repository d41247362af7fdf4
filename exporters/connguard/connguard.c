/* Connection guard of the HTTP front (see connguard.h).
 *
 * libmicrohttpd 0.9.75 stops accepting at its connection limit, so connections over it wait in
 * the kernel's backlog, and its only timeout is an inactivity timer that every received byte
 * restarts. Here the guard's thread accepts every connection itself, refuses what is over a
 * limit with a reset at once, and hands the rest over with MHD_add_connection(). It follows each
 * connection through libmicrohttpd's notifications (started, request line, headers complete in
 * the access handler, response sent, closed) and closes those past a deadline with shutdown(2),
 * which makes libmicrohttpd's next read fail and the connection go. Whether a kept-alive
 * connection has begun its next request is read from the kernel (tcp_info's bytes_received,
 * Linux 4.6+), so a request trickled in a byte at a time is timed from its first byte, and so is
 * whether a client has hung up before libmicrohttpd has seen it. Hang-ups come from the kernel
 * too: each socket is watched for them (EPOLLRDHUP, edge-triggered) in an epoll set of the
 * guard's own, so making room at a limit looks only at connections whose peer has gone instead
 * of asking the kernel about every open one for every newcomer.
 *
 * One lock guards the table; libmicrohttpd's thread takes it in its callbacks, the guard's
 * thread while admitting and sweeping. A socket's fd is only touched while its connection is in
 * the table as started: libmicrohttpd reports a connection closed before it closes the socket,
 * and that report waits for the lock, so the fd cannot have been reused under us. */
#include "connguard.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* tcp_info with tcpi_bytes_received (glibc's lacks it) */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "addrmap.h"
#include "log.h"

/* epoll data of the guard's own descriptors (a listening socket's is its index); a socket in the
 * hang-up watch has HUP_TAG | seq << 32 | fd. */
#define STOP_TAG     UINT64_MAX
#define HUP_TAG      (UINT64_C(1) << 62)
#define HUP_SET      (UINT64_MAX - 1)
#define HUP_SEQ_MASK ((uint32_t)((HUP_TAG - 1) >> 32))
/* How often deadlines are checked: the precision of every timeout. */
#define SWEEP_INTERVAL (250 * USEC_PER_MSEC)
/* A connection handed to libmicrohttpd that it never started (it failed to set one up, and
 * closed the socket) is forgotten after this. */
#define PENDING_MAX_AGE (10 * USEC_PER_SEC)
/* At a limit a connection waiting for its request this long may always make room: a real client
 * sends its request at once. Younger ones only make room for an address holding fewer. */
#define EVICT_MIN_AGE (1 * USEC_PER_SEC)
/* A connection accepted this recently whose request has not arrived is the last to make room: a
 * client sends its request within milliseconds of its connect, so it has had no chance to yet.
 * (Under a flood from many addresses, the rule "an address holding more gives one up" would
 * otherwise pick a scraper's connection the moment after it was accepted, its address holding
 * one like each attacker's, and a request still arriving goes before an idle connection.) */
#define EVICT_GRACE (200 * USEC_PER_MSEC)
/* Evicted connections take a moment to close; beyond the limit plus this many, refuse. */
#define EVICT_SLACK(max) ((max) / 8 + 8)
/* The write deadline: a connection with data waiting for its peer (unsent or unacknowledged)
 * whose peer has acknowledged fewer than WRITE_PROGRESS bytes in WRITE_TIMEOUT is closed, so a
 * slot is never held by a reader slower than 16 KiB in 5 s (3.2 KiB/s); a real scraper, even
 * across a slow link, reads a page far faster. At a limit such a connection may make room once
 * it has stalled for EVICT_MIN_AGE. */
#define WRITE_TIMEOUT  (5 * USEC_PER_SEC)
#define WRITE_PROGRESS (16 * 1024)
/* Connections accepted from one socket before looking at the others and the clock. */
#define ACCEPT_BATCH 64
/* After EMFILE and the like, accepting pauses this long (the backlog keeps the rest). */
#define ACCEPT_PAUSE (100 * USEC_PER_MSEC)
/* Connections handed to libmicrohttpd and not yet started, beyond which accepting waits. */
#define PENDING_LIMIT 32
/* While libmicrohttpd catches up (too many handed over and not started, or the slack full of
 * connections it has still to close), accepting pauses this long at a time, so that the
 * kernel's backlog, first come first served, keeps the newcomers instead of a reset; after
 * THROTTLE_MAX of that without a break, newcomers are accepted and refused again. */
#define THROTTLE_PAUSE (1 * USEC_PER_MSEC)
#define THROTTLE_MAX   (100 * USEC_PER_MSEC)
/* Connections at most in the waiting room (see enum verdict); beyond, refused at once. */
#define WAITING_MAX 16
/* Summary of refusals and closes in the log, at most this often. */
#define LOG_INTERVAL (60 * USEC_PER_SEC)

enum phase {
        PHASE_HEADERS,  /* a request is arriving (or expected, right after accept) */
        PHASE_HANDLING, /* its headers are complete: the response is being made and sent */
        PHASE_IDLE,     /* kept alive, between requests */
};

struct gconn {
        int fd;
        bool started;  /* libmicrohttpd has started it (else: handed over, not yet started) */
        bool in_table; /* byfd[fd] points here */
        bool closing;  /* shut down by the guard; libmicrohttpd will close it */
        bool keyed;    /* counted in the per-address map (IP clients) */
        enum phase phase;
        usec_t accepted;
        usec_t since;       /* start of the current request, or of the idle wait */
        uint64_t rx_mark;   /* bytes received by the end of the last response */
        uint64_t ack_mark;  /* bytes the peer had acknowledged at stall_since */
        usec_t stall_since; /* data waits for the peer since (no progress); 0: none waits */
        bool hup;           /* its peer has hung up or reset it (the hang-up watch said so) */
        uint32_t seq;       /* tells its hang-up events from those of an earlier socket */
        struct netaddr addr;
        struct addrkey key;
};

/* A connection accepted and neither admitted nor refused yet. */
struct waiting {
        int fd;
        socklen_t len;
        usec_t since; /* accepted */
        struct sockaddr_storage ss;
};

struct connguard {
        pthread_mutex_t lock;
        struct connguard_config cfg;
        struct cidr *allow; /* cfg.allow points here */
        struct MHD_Daemon *mhd;
        int *fds;
        size_t nfds;
        int epfd, stopfd;
        int hupfd;    /* the hang-up watch: every admitted socket, EPOLLRDHUP | EPOLLET */
        uint32_t seq; /* of the last admitted connection */
        struct waiting waiting[WAITING_MAX]; /* the waiting room (see enum verdict); the guard's */
        size_t nwaiting;                     /* thread only */
        pthread_t thread;
        bool running;
        bool paused;
        usec_t paused_until;

        struct gconn **byfd;
        size_t nbyfd;
        struct addrmap addrs;
        unsigned live;          /* in the table or started: counted against the limit */
        unsigned closing;       /* of those, shut down and about to go */
        unsigned unkeyed;       /* of those, unix-domain clients (no address) */
        unsigned pending;       /* of those, handed to libmicrohttpd and not yet started */
        usec_t throttled_since; /* accepting has waited for libmicrohttpd since (0: not) */
        usec_t last_sweep;

        struct connguard_stats st;
        struct connguard_stats logged;
        usec_t last_log;
};

/* tcp_info's tcpi_state values (the kernel's TCP_ESTABLISHED and TCP_CLOSE_WAIT, which
 * <linux/tcp.h> does not define and <netinet/tcp.h>, which does, cannot be included beside it).
 * Any other state of an accepted socket means it is closing: the peer has reset it, or one
 * side or both have sent their FIN. */
#define TCPI_STATE_ESTABLISHED 1
#define TCPI_STATE_CLOSE_WAIT  8 /* only the peer's FIN has arrived */

/* The kernel's view of a TCP socket; false for other sockets or kernels before 4.6. */
static bool tcp_view(int fd, struct tcp_info *ti)
{
        socklen_t len = sizeof *ti;

        memset(ti, 0, sizeof *ti);
        return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0 &&
               len >=
                   offsetof(struct tcp_info, tcpi_notsent_bytes) + sizeof(ti->tcpi_notsent_bytes);
}

/* Bytes the kernel has received on a TCP socket (tcp_info, RFC 4898 HCThruOctetsReceived);
 * 0 for other sockets or old kernels. */
static uint64_t rx_bytes(int fd)
{
        struct tcp_info ti;

        return tcp_view(fd, &ti) ? ti.tcpi_bytes_received : 0;
}

/* Bytes of a next request received since mark (the bytes received at the end of the last
 * response). tcp_info counts the peer's FIN as a byte received (it takes a sequence number), so
 * once the connection is no longer established one byte is not request data: a client that
 * hangs up between requests has begun none. */
static uint64_t request_bytes(const struct tcp_info *ti, uint64_t mark)
{
        uint64_t rx = ti->tcpi_bytes_received;

        if (ti->tcpi_state != TCPI_STATE_ESTABLISHED && rx > mark)
                rx--;
        return rx > mark ? rx - mark : 0;
}

/* Closes a refused socket with a reset: nothing is sent, and no state stays behind. */
static void refuse(int fd)
{
        struct linger lg = {.l_onoff = 1, .l_linger = 0};

        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);
}

static void copy_config(struct connguard *g, const struct connguard_config *cfg)
{
        free(g->allow);
        g->cfg = *cfg;
        g->allow = NULL;
        if (cfg->n_allow) {
                g->allow = xmalloc(cfg->n_allow * sizeof(*g->allow));
                memcpy(g->allow, cfg->allow, cfg->n_allow * sizeof(*g->allow));
        }
        g->cfg.allow = g->allow;
        if (g->cfg.max_connections == 0)
                g->cfg.max_connections = 1;
        if (g->cfg.max_per_address == 0 || g->cfg.max_per_address > g->cfg.max_connections)
                g->cfg.max_per_address = g->cfg.max_connections;
        if (g->cfg.request_timeout < g->cfg.header_timeout)
                g->cfg.request_timeout = g->cfg.header_timeout;
}

struct connguard *connguard_new(const struct connguard_config *cfg)
{
        struct connguard *g = xcalloc(1, sizeof(*g));

        pthread_mutex_init(&g->lock, NULL);
        copy_config(g, cfg);
        g->epfd = g->stopfd = g->hupfd = -1;
        {
                uint64_t seed;
                if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed)
                        seed = now_monotonic() * 0x2545F4914F6CDD1DULL;
                addrmap_init(&g->addrs, seed);
        }
        g->last_sweep = now_monotonic();
        return g;
}

/* Seconds for libmicrohttpd's own inactivity timeout: a backstop behind the guard's deadlines,
 * never shorter than any of them. */
static unsigned backstop_seconds(const struct connguard_config *cfg)
{
        usec_t m =
            cfg->idle_timeout > cfg->request_timeout ? cfg->idle_timeout : cfg->request_timeout;
        return (unsigned)(m / USEC_PER_SEC) + 2;
}

/* Caller holds the lock. Forgets c's counts; the table slot and memory are the caller's. */
static void uncount(struct connguard *g, struct gconn *c)
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
static void drop_pending(struct connguard *g, struct gconn *c)
{
        if (c->in_table && g->byfd[c->fd] == c)
                g->byfd[c->fd] = NULL;
        g->pending--;
        uncount(g, c);
        free(c);
}

static void table_put(struct connguard *g, struct gconn *c)
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
                        drop_pending(g, old);
        }
        g->byfd[c->fd] = c;
        c->in_table = true;
}

static struct gconn *gconn_new(struct connguard *g, int fd, const struct netaddr *a, bool ip,
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
        return c;
}

/* Caller holds the lock; c is started and in the table. Counts the close in *counter unless
 * counter is NULL. */
static void shut(struct connguard *g, struct gconn *c, uint64_t *counter)
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
        return c->stall_since && now - c->stall_since >= EVICT_MIN_AGE;
}

/* Which connection of an address goes first: one whose peer does not read, then one whose
 * request is arriving (slowly: accepted at least EVICT_GRACE ago), then an idle one, then one just
 * accepted. */
static int victim_rank(const struct gconn *c, usec_t now, bool is_stalled)
{
        if (is_stalled)
                return 3;
        if (c->phase == PHASE_HEADERS)
                return now - c->accepted >= EVICT_GRACE ? 2 : 0;
        return 1;
}

/* Caller holds the lock. The connection to close to make room: started, not being answered
 * (unless its peer does not read the answer), waiting for its request at least min_age, from
 * key's address when key is not NULL, from an address holding more than above connections; of
 * those, from the address holding most, by victim_rank(), the one waiting longest. NULL if
 * none. */
static struct gconn *pick_victim(struct connguard *g, usec_t now, usec_t min_age,
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
                if ((!st && (c->phase == PHASE_HANDLING || now - c->since < min_age)) ||
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

/* Caller holds the lock. Marks the connections the hang-up watch reports (all it has queued:
 * the kernel queues a socket's hang-up when its FIN or reset arrives, so a client that hangs up
 * and connects again is seen gone before its new connection is accepted). */
static void take_hangups(struct connguard *g)
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
static bool reap_hung_up(struct connguard *g, const struct addrkey *key)
{
        bool any = false;

        for (size_t fd = 0; fd < g->nbyfd; fd++) {
                struct gconn *c = g->byfd[fd];
                struct tcp_info ti;

                if (!c || !c->hup || !c->started || c->closing || c->phase != PHASE_IDLE ||
                    (key && !(c->keyed && addrkey_equal(c->key, *key))) || !tcp_view(c->fd, &ti) ||
                    ti.tcpi_state == TCPI_STATE_ESTABLISHED || request_bytes(&ti, c->rx_mark) > 0)
                        continue;
                shut(g, c, NULL);
                any = true;
        }
        return any;
}

/* Caller holds the lock. Whether a connection being answered, from key's address when key is not
 * NULL, is about to go by itself: it is closing, and if only the client has hung up, nothing is
 * left to send (the response is out; libmicrohttpd has still to report it sent and close it). */
static bool closing_soon(struct connguard *g, const struct addrkey *key)
{
        for (size_t fd = 0; fd < g->nbyfd; fd++) {
                struct gconn *c = g->byfd[fd];
                struct tcp_info ti;

                if (c && c->started && !c->closing && c->phase == PHASE_HANDLING &&
                    (!key || (c->keyed && addrkey_equal(c->key, *key))) && tcp_view(c->fd, &ti) &&
                    ti.tcpi_state != TCPI_STATE_ESTABLISHED &&
                    (ti.tcpi_state != TCPI_STATE_CLOSE_WAIT ||
                     (ti.tcpi_notsent_bytes == 0 && ti.tcpi_unacked == 0)))
                        return true;
        }
        return false;
}

/* Puts a socket not yet handed over into the hang-up watch; closing it takes it out. If that
 * fails, the sweep still sees the hang-up (at its pace). */
static void watch_hangup(struct connguard *g, int fd, uint32_t seq)
{
        struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET,
                                 .data.u64 = HUP_TAG | (uint64_t)seq << 32 | (uint32_t)fd};

        if (g->hupfd >= 0)
                (void)epoll_ctl(g->hupfd, EPOLL_CTL_ADD, fd, &ev);
}

/* WAIT_*: over a limit, but a connection that would make room is about to go (a client that
 * hangs up after its response and connects again at once can be quicker than libmicrohttpd's
 * report that the response is sent): asked again in a moment, refused for the limit if still
 * over it after THROTTLE_MAX. */
enum verdict { ADMIT, REFUSE_NETWORK, REFUSE_ADDRESS, REFUSE_LIMIT, WAIT_ADDRESS, WAIT_LIMIT };

/* Caller holds the lock. On ADMIT, *ret is the new pending record in the table. */
static enum verdict admit(struct connguard *g, int fd, const struct sockaddr *sa, socklen_t len,
                          usec_t now, struct gconn **ret)
{
        struct netaddr a;
        bool ip = cidr_netaddr_from_sockaddr(sa, len, &a) == 0;
        struct addrkey k;
        uint32_t load;

        /* Unix-domain clients (a socket systemd passed) are local: no network, no address. */
        if (ip && !cidr_list_allows(g->cfg.allow, g->cfg.n_allow, &a))
                return REFUSE_NETWORK;
        if (g->live >= g->cfg.max_connections + EVICT_SLACK(g->cfg.max_connections))
                return REFUSE_LIMIT;
        if (ip) {
                /* At its limit an address may replace its own connection that has waited
                 * longest (a client that reconnects is not locked out by its stale ones). */
                k = cidr_netaddr_key(&a);
                load = addrmap_get(&g->addrs, k);
                if (load >= g->cfg.max_per_address)
                        take_hangups(g);
                if (load >= g->cfg.max_per_address && !reap_hung_up(g, &k)) {
                        struct gconn *victim = pick_victim(g, now, EVICT_MIN_AGE, &k, 0);
                        if (!victim)
                                return closing_soon(g, &k) ? WAIT_ADDRESS : REFUSE_ADDRESS;
                        shut(g, victim, &g->st.evicted);
                }
        } else {
                load = g->unkeyed;
        }
        if (g->live - g->closing >= g->cfg.max_connections) {
                take_hangups(g);
                (void)reap_hung_up(g, NULL); /* connections already gone make room first */
        }
        if (g->live - g->closing >= g->cfg.max_connections) {
                /* Full: an address holding more connections than this one's gives one up, so
                 * that flooding from some addresses cannot lock out the others; failing that,
                 * any connection that has waited long enough. */
                struct gconn *victim = pick_victim(g, now, 0, NULL, load);
                if (!victim)
                        victim = pick_victim(g, now, EVICT_MIN_AGE, NULL, 0);
                if (!victim)
                        return closing_soon(g, NULL) ? WAIT_LIMIT : REFUSE_LIMIT;
                shut(g, victim, &g->st.evicted);
        }
        *ret = gconn_new(g, fd, &a, ip, now);
        (*ret)->seq = ++g->seq & HUP_SEQ_MASK;
        g->pending++;
        table_put(g, *ret);
        return ADMIT;
}

/* A connection accepted at since: admitted, refused, or (WAIT_*) kept in the waiting room to be
 * asked again in a moment, for at most THROTTLE_MAX. */
static void handle_new(struct connguard *g, int fd, const struct sockaddr *sa, socklen_t len,
                       usec_t since)
{
        struct gconn *c = NULL;
        usec_t now = now_monotonic();
        enum verdict v;

        pthread_mutex_lock(&g->lock);
        v = admit(g, fd, sa, len, now, &c);
        if ((v == WAIT_ADDRESS || v == WAIT_LIMIT) &&
            (now - since >= THROTTLE_MAX || g->nwaiting == WAITING_MAX))
                v = v == WAIT_ADDRESS ? REFUSE_ADDRESS : REFUSE_LIMIT;
        switch (v) {
        case ADMIT:
                g->st.accepted++;
                break;
        case REFUSE_NETWORK:
                g->st.refused_network++;
                break;
        case REFUSE_ADDRESS:
                g->st.refused_address++;
                break;
        case REFUSE_LIMIT:
                g->st.refused_limit++;
                break;
        case WAIT_ADDRESS:
        case WAIT_LIMIT:
                break;
        }
        pthread_mutex_unlock(&g->lock);
        if (v == WAIT_ADDRESS || v == WAIT_LIMIT) {
                struct waiting *w = &g->waiting[g->nwaiting++];
                w->fd = fd;
                w->len = len < (socklen_t)sizeof w->ss ? len : (socklen_t)sizeof w->ss;
                memcpy(&w->ss, sa, w->len);
                w->since = since;
                return;
        }
        if (v != ADMIT) {
                refuse(fd);
                return;
        }
        watch_hangup(g, fd, c->seq);
        /* libmicrohttpd closes the socket when it says no. */
        if (MHD_add_connection(g->mhd, fd, sa, len) != MHD_YES) {
                int e = errno;
                pthread_mutex_lock(&g->lock);
                if (c->in_table && g->byfd[fd] == c && !c->started)
                        drop_pending(g, c);
                pthread_mutex_unlock(&g->lock);
                log_errno(LOG_LEVEL_DEBUG, -e, "libmicrohttpd did not take a connection", NULL);
        }
}

static void set_listening(struct connguard *g, bool on)
{
        for (size_t i = 0; i < g->nfds; i++) {
                struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.u64 = i};
                (void)epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->fds[i], &ev);
        }
        g->paused = !on;
}

/* Whether accepting should wait a moment for libmicrohttpd: it has many connections handed
 * over and not started, the slack above the limit is full of ones it has still to close, or
 * it is full and one whose client has gone is about to close. Each passes in milliseconds;
 * refusing meanwhile would reset a scraper that waiting lets in (an evicted attacker makes room
 * for it once libmicrohttpd has started the others; a scraper that connects again right after
 * its response finds the old connection gone). */
static bool throttle(struct connguard *g, usec_t now)
{
        bool busy;

        pthread_mutex_lock(&g->lock);
        busy = g->pending >= PENDING_LIMIT ||
               (g->closing > 0 &&
                g->live >= g->cfg.max_connections + EVICT_SLACK(g->cfg.max_connections)) ||
               (g->live - g->closing >= g->cfg.max_connections && closing_soon(g, NULL));
        pthread_mutex_unlock(&g->lock);
        if (!busy) {
                g->throttled_since = 0;
                return false;
        }
        if (!g->throttled_since)
                g->throttled_since = now;
        else if (now - g->throttled_since > THROTTLE_MAX)
                return false; /* libmicrohttpd is stuck: refuse at once rather than queue */
        set_listening(g, false);
        g->paused_until = now + THROTTLE_PAUSE;
        return true;
}

static void accept_some(struct connguard *g, int lfd)
{
        static struct ratelimit rl = {.interval = LOG_INTERVAL};

        for (int i = 0; i < ACCEPT_BATCH; i++) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                int fd;

                if (throttle(g, now_monotonic()))
                        return;
                fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (fd >= 0) {
                        handle_new(g, fd, (struct sockaddr *)&ss, len, now_monotonic());
                        continue;
                }
                switch (errno) {
                case EAGAIN:
                        return;
                case EINTR:
                case ECONNABORTED:
                case EPROTO:
                case EPERM:
                        continue;
                case EMFILE:
                case ENFILE:
                case ENOBUFS:
                case ENOMEM:
                        /* Out of descriptors or memory: leave the rest in the backlog for a
                         * moment instead of spinning on a socket that stays readable. */
                        if (ratelimit_ok(&rl, now_monotonic()))
                                log_errno(LOG_LEVEL_WARN, -errno,
                                          "cannot accept connections for the moment", NULL);
                        set_listening(g, false);
                        g->paused_until = now_monotonic() + ACCEPT_PAUSE;
                        return;
                default:
                        if (ratelimit_ok(&rl, now_monotonic()))
                                log_errno(LOG_LEVEL_WARN, -errno, "accept failed", NULL);
                        return;
                }
        }
}

/* Asks again about the connections in the waiting room. The guard's thread. */
static void retry_waiting(struct connguard *g)
{
        struct waiting w[WAITING_MAX];
        size_t n = g->nwaiting;

        memcpy(w, g->waiting, n * sizeof *w);
        g->nwaiting = 0;
        for (size_t i = 0; i < n; i++)
                handle_new(g, w[i].fd, (struct sockaddr *)&w[i].ss, w[i].len, w[i].since);
}

/* Caller holds the lock. Deadlines of every connection; pending records never started. */
static void sweep(struct connguard *g, usec_t now)
{
        const struct connguard_config *cfg = &g->cfg;

        for (size_t fd = 0; fd < g->nbyfd; fd++) {
                struct gconn *c = g->byfd[fd];

                if (!c)
                        continue;
                if (!c->started) {
                        if (now - c->accepted > PENDING_MAX_AGE)
                                drop_pending(g, c);
                        continue;
                }
                if (c->closing)
                        continue;
                if (c->phase != PHASE_HEADERS) {
                        /* The write deadline: is the peer reading what it was sent? */
                        struct tcp_info ti;
                        if (!tcp_view(c->fd, &ti) ||
                            (ti.tcpi_notsent_bytes == 0 && ti.tcpi_unacked == 0)) {
                                c->stall_since = 0;
                        } else if (!c->stall_since ||
                                   ti.tcpi_bytes_acked >= c->ack_mark + WRITE_PROGRESS) {
                                c->stall_since = now;
                                c->ack_mark = ti.tcpi_bytes_acked;
                        } else if (now - c->stall_since > WRITE_TIMEOUT) {
                                /* a reset when libmicrohttpd closes it: the kernel drops what
                                 * the peer would not read instead of keeping it for an orphan
                                 * socket to retransmit */
                                struct linger lg = {.l_onoff = 1, .l_linger = 0};
                                (void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
                                shut(g, c, &g->st.timeout_write);
                                continue;
                        }
                }
                if (c->phase == PHASE_IDLE) {
                        struct tcp_info ti;
                        uint64_t rx = 0;
                        if (tcp_view(c->fd, &ti)) {
                                rx = request_bytes(&ti, c->rx_mark);
                                if (ti.tcpi_state != TCPI_STATE_ESTABLISHED)
                                        c->hup = true; /* in case the watch missed it */
                        }
                        if (rx > 0) {
                                /* The next request began since the last look. */
                                c->phase = PHASE_HEADERS;
                                c->since = c->since > g->last_sweep ? c->since : g->last_sweep;
                        } else if (now - c->since > cfg->idle_timeout) {
                                shut(g, c, &g->st.timeout_idle);
                                continue;
                        }
                }
                if (c->phase == PHASE_HEADERS && now - c->since > cfg->header_timeout)
                        shut(g, c, &g->st.timeout_header);
                else if (c->phase == PHASE_HANDLING && now - c->since > cfg->request_timeout)
                        shut(g, c, &g->st.timeout_request);
        }
        g->last_sweep = now;
}

/* Caller holds the lock. One line a minute at most while connections are refused or cut. */
static void log_summary(struct connguard *g, usec_t now)
{
        const struct connguard_stats *s = &g->st, *o = &g->logged;
        uint64_t refused = (s->refused_network - o->refused_network) +
                           (s->refused_address - o->refused_address) +
                           (s->refused_limit - o->refused_limit);
        uint64_t cut = (s->evicted - o->evicted) + (s->timeout_header - o->timeout_header) +
                       (s->timeout_request - o->timeout_request) +
                       (s->timeout_write - o->timeout_write);
        char b[9][24];

        if (now - g->last_log < LOG_INTERVAL || (refused == 0 && cut == 0))
                return;
        snprintf(b[0], sizeof b[0], "%u", s->open);
        snprintf(b[1], sizeof b[1], "%llu",
                 (unsigned long long)(s->refused_network - o->refused_network));
        snprintf(b[2], sizeof b[2], "%llu",
                 (unsigned long long)(s->refused_address - o->refused_address));
        snprintf(b[3], sizeof b[3], "%llu",
                 (unsigned long long)(s->refused_limit - o->refused_limit));
        snprintf(b[4], sizeof b[4], "%llu", (unsigned long long)(s->evicted - o->evicted));
        snprintf(b[5], sizeof b[5], "%llu",
                 (unsigned long long)(s->timeout_header - o->timeout_header));
        snprintf(b[6], sizeof b[6], "%llu",
                 (unsigned long long)(s->timeout_request - o->timeout_request));
        snprintf(b[7], sizeof b[7], "%llu",
                 (unsigned long long)(s->timeout_idle - o->timeout_idle));
        snprintf(b[8], sizeof b[8], "%llu",
                 (unsigned long long)(s->timeout_write - o->timeout_write));
        log_warn("connections refused or cut by the HTTP limits", "open", b[0], "refused_network",
                 b[1], "refused_per_address", b[2], "refused_total", b[3], "evicted", b[4],
                 "header_timeouts", b[5], "request_timeouts", b[6], "idle_timeouts", b[7],
                 "write_timeouts", b[8]);
        g->logged = *s;
        g->last_log = now;
}

static void *guard_main(void *arg)
{
        struct connguard *g = arg;

        for (;;) {
                struct epoll_event ev[16];
                usec_t now = now_monotonic();
                usec_t next = g->last_sweep + SWEEP_INTERVAL;
                int ms;

                if (g->paused && g->paused_until < next)
                        next = g->paused_until;
                if (g->nwaiting > 0 && now + THROTTLE_PAUSE < next)
                        next = now + THROTTLE_PAUSE;
                ms = next > now ? (int)((next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC) : 0;
                int n = epoll_wait(g->epfd, ev, ARRAY_SIZE(ev), ms);

                for (int i = 0; i < n; i++) {
                        if (ev[i].data.u64 == STOP_TAG)
                                return NULL;
                        if (ev[i].data.u64 == HUP_SET) {
                                pthread_mutex_lock(&g->lock);
                                take_hangups(g);
                                pthread_mutex_unlock(&g->lock);
                                continue;
                        }
                        accept_some(g, g->fds[ev[i].data.u64]);
                }
                if (g->nwaiting > 0)
                        retry_waiting(g);
                now = now_monotonic();
                if (now - g->last_sweep >= SWEEP_INTERVAL) {
                        pthread_mutex_lock(&g->lock);
                        sweep(g, now);
                        g->st.open = g->live;
                        log_summary(g, now);
                        pthread_mutex_unlock(&g->lock);
                }
                if (g->paused && now >= g->paused_until)
                        set_listening(g, true);
        }
}

int connguard_start(struct connguard *g, struct MHD_Daemon *d, const int *fds, size_t n)
{
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = STOP_TAG};
        struct epoll_event hev = {.events = EPOLLIN, .data.u64 = HUP_SET};
        int r;

        g->fds = xcalloc(n ? n : 1, sizeof(int));
        memcpy(g->fds, fds, n * sizeof(int));
        g->nfds = n;
        g->mhd = d;
        g->epfd = epoll_create1(EPOLL_CLOEXEC);
        g->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        g->hupfd = epoll_create1(EPOLL_CLOEXEC);
        if (g->epfd < 0 || g->stopfd < 0 || g->hupfd < 0 ||
            epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->stopfd, &ev) < 0 ||
            epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->hupfd, &hev) < 0)
                return -errno;
        for (size_t i = 0; i < n; i++) {
                int fl = fcntl(fds[i], F_GETFL);
                struct epoll_event lev = {.events = EPOLLIN, .data.u64 = i};
                if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0 ||
                    epoll_ctl(g->epfd, EPOLL_CTL_ADD, fds[i], &lev) < 0)
                        return -errno;
        }
        r = pthread_create(&g->thread, NULL, guard_main, g);
        if (r != 0)
                return -r;
        g->running = true;
        return 0;
}

void connguard_stop(struct connguard *g)
{
        if (!g)
                return;
        if (g->running) {
                uint64_t one = 1;
                (void)!write(g->stopfd, &one, sizeof one);
                pthread_join(g->thread, NULL);
                g->running = false;
        }
        for (size_t i = 0; i < g->nwaiting; i++)
                refuse(g->waiting[i].fd);
        g->nwaiting = 0;
        for (size_t i = 0; i < g->nfds; i++)
                close(g->fds[i]);
        g->nfds = 0;
        if (g->epfd >= 0)
                close(g->epfd);
        if (g->stopfd >= 0)
                close(g->stopfd);
        pthread_mutex_lock(&g->lock);
        if (g->hupfd >= 0)
                close(g->hupfd);
        g->epfd = g->stopfd = g->hupfd = -1;
        pthread_mutex_unlock(&g->lock);
}

struct connguard *connguard_free(struct connguard *g)
{
        if (!g)
                return NULL;
        connguard_stop(g);
        /* What is left was never started (or libmicrohttpd has stopped and closed it). */
        for (size_t fd = 0; fd < g->nbyfd; fd++)
                if (g->byfd[fd] && !g->byfd[fd]->started)
                        free(g->byfd[fd]);
        free(g->byfd);
        addrmap_done(&g->addrs);
        free(g->fds);
        free(g->allow);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
}

void connguard_reconfigure(struct connguard *g, const struct connguard_config *cfg)
{
        pthread_mutex_lock(&g->lock);
        copy_config(g, cfg);
        for (size_t fd = 0; fd < g->nbyfd; fd++) {
                struct gconn *c = g->byfd[fd];
                if (c && c->started && !c->closing && c->keyed &&
                    !cidr_list_allows(g->cfg.allow, g->cfg.n_allow, &c->addr))
                        shut(g, c, &g->st.closed_network);
        }
        pthread_mutex_unlock(&g->lock);
}

void connguard_get_stats(struct connguard *g, struct connguard_stats *ret)
{
        pthread_mutex_lock(&g->lock);
        *ret = g->st;
        ret->open = g->live;
        pthread_mutex_unlock(&g->lock);
}

static struct gconn *conn_of(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

/* libmicrohttpd's thread: a connection was set up, or is about to be closed. */
static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
        struct connguard *g = cls;

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *fi =
                    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *ai =
                    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
                int fd = fi ? fi->connect_fd : -1;
                struct gconn *c = NULL;
                unsigned backstop;

                pthread_mutex_lock(&g->lock);
                if (fd >= 0 && (size_t)fd < g->nbyfd)
                        c = g->byfd[fd];
                if (c && !c->started)
                        g->pending--;
                if (!c || c->started) {
                        /* Its record was dropped as stale (libmicrohttpd took longer than
                         * PENDING_MAX_AGE): count it again. */
                        struct netaddr a;
                        bool ip = ai && ai->client_addr &&
                                  cidr_netaddr_from_sockaddr(ai->client_addr,
                                                             sizeof(struct sockaddr_in6), &a) == 0;
                        c = gconn_new(g, fd, &a, ip, now_monotonic());
                        if (fd >= 0)
                                table_put(g, c);
                }
                c->started = true;
                *socket_context = c;
                backstop = backstop_seconds(&g->cfg);
                pthread_mutex_unlock(&g->lock);
                (void)MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT, backstop);
                return;
        }
        if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
                struct gconn *c = *socket_context;

                pthread_mutex_lock(&g->lock);
                if (c->in_table && g->byfd[c->fd] == c)
                        g->byfd[c->fd] = NULL;
                uncount(g, c);
                pthread_mutex_unlock(&g->lock);
                free(c);
                *socket_context = NULL;
        }
}

/* libmicrohttpd's thread: a request line has arrived. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *mc)
{
        struct connguard *g = cls;
        struct gconn *c = conn_of(mc);

        (void)uri;
        if (c) {
                pthread_mutex_lock(&g->lock);
                if (c->phase == PHASE_IDLE) {
                        c->phase = PHASE_HEADERS;
                        c->since = c->since > g->last_sweep ? c->since : g->last_sweep;
                }
                pthread_mutex_unlock(&g->lock);
        }
        return NULL;
}

void connguard_headers_done(struct connguard *g, struct MHD_Connection *mc)
{
        struct gconn *c = conn_of(mc);

        if (!c)
                return;
        pthread_mutex_lock(&g->lock);
        if (c->phase == PHASE_IDLE)
                c->since = c->since > g->last_sweep ? c->since : g->last_sweep;
        c->phase = PHASE_HANDLING;
        pthread_mutex_unlock(&g->lock);
}

/* libmicrohttpd's thread: a response has been sent (or the request ended otherwise). */
static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct connguard *g = cls;
        struct gconn *c = conn_of(mc);
        uint64_t rx;

        (void)req_cls;
        (void)toe;
        if (!c)
                return;
        rx = rx_bytes(c->fd);
        pthread_mutex_lock(&g->lock);
        c->phase = PHASE_IDLE;
        c->since = now_monotonic();
        c->rx_mark = rx;
        pthread_mutex_unlock(&g->lock);
}

void connguard_mhd_options(struct connguard *g, struct MHD_OptionItem *opts)
{
        struct MHD_OptionItem o[CONNGUARD_MHD_OPTIONS] = {
            {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, g},
            {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_request_line, g},
            {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, g},
            /* The guard counts; libmicrohttpd's own limit must never be the one that binds. */
            {MHD_OPTION_CONNECTION_LIMIT, 1 << 20, NULL},
            {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)backstop_seconds(&g->cfg), NULL},
            {MHD_OPTION_END, 0, NULL},
        };
        memcpy(opts, o, sizeof o);
}
