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
 * and that report waits for the lock, so the fd cannot have been reused under us.
 *
 * This file: the guard's thread (accepting, admitting or refusing, the waiting room, the
 * throttle) and the lifecycle. The table and eviction are in connguard_table.c, the hang-up
 * watch in connguard_hangup.c, the deadlines in connguard_deadline.c, libmicrohttpd's callbacks
 * in connguard_mhd.c. */
#include "connguard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connguard_internal.h"
#include "log.h"

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
        g->epfd = g->stopfd = g->hupfd = g->wakefd = -1;
        g->idle_due = USEC_INFINITY;
        g->shared_cpu = -1;
        {
                uint64_t seed;
                if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed)
                        seed = now_monotonic() * 0x2545F4914F6CDD1DULL;
                addrmap_init(&g->addrs, seed);
        }
        g->last_sweep = now_monotonic();
        return g;
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
                        connguard_take_hangups(g);
                if (load >= g->cfg.max_per_address && !connguard_reap_hung_up(g, &k)) {
                        struct gconn *victim = connguard_pick_victim(g, now, EVICT_MIN_AGE, &k, 0);
                        if (!victim)
                                return connguard_closing_soon(g, &k) ? WAIT_ADDRESS
                                                                     : REFUSE_ADDRESS;
                        connguard_shut(g, victim, &g->st.evicted);
                }
        } else {
                load = g->unkeyed;
        }
        if (g->live - g->closing >= g->cfg.max_connections) {
                connguard_take_hangups(g);
                (void)connguard_reap_hung_up(g,
                                             NULL); /* connections already gone make room first */
        }
        if (g->live - g->closing >= g->cfg.max_connections) {
                /* Full: an address holding more connections than this one's gives one up, so
                 * that flooding from some addresses cannot lock out the others; failing that,
                 * any connection that has waited long enough. */
                struct gconn *victim = connguard_pick_victim(g, now, 0, NULL, load);
                if (!victim)
                        victim = connguard_pick_victim(g, now, EVICT_MIN_AGE, NULL, 0);
                if (!victim)
                        return connguard_closing_soon(g, NULL) ? WAIT_LIMIT : REFUSE_LIMIT;
                connguard_shut(g, victim, &g->st.evicted);
        }
        *ret = connguard_conn_new(g, fd, &a, ip, now);
        (*ret)->seq = ++g->seq & HUP_SEQ_MASK;
        g->pending++;
        connguard_table_put(g, *ret);
        return ADMIT;
}

/* A connection accepted at since: admitted, refused, or (WAIT_*) kept in the waiting room to be
 * asked again in a moment, for at most THROTTLE_MAX. */
static void handle_new(struct connguard *g, int fd, const struct sockaddr *sa, socklen_t len,
                       usec_t since)
{
        struct gconn *c = NULL;
        usec_t now;
        enum verdict v;

        pthread_mutex_lock(&g->lock);
        now = now_monotonic(); /* after every stamp made under the lock */
        v = admit(g, fd, sa, len, now, &c);
        if ((v == WAIT_ADDRESS || v == WAIT_LIMIT) &&
            (now - since >= THROTTLE_MAX || g->nwaiting == WAITING_MAX))
                v = v == WAIT_ADDRESS ? REFUSE_ADDRESS : REFUSE_LIMIT;
        switch (v) {
        case ADMIT:
                g->st.accepted++;
                connguard_watch_hangup(g, c);
                connguard_release_cpu(g);
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
        /* libmicrohttpd closes the socket when it says no. */
        if (MHD_add_connection(g->mhd, fd, sa, len) != MHD_YES) {
                int e = errno;
                pthread_mutex_lock(&g->lock);
                if (c->in_table && g->byfd[fd] == c && !c->started)
                        connguard_drop_pending(g, c);
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
               (g->live - g->closing >= g->cfg.max_connections && connguard_closing_soon(g, NULL));
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

/* When the next sweep is due: every SWEEP_INTERVAL while a connection is busy (see
 * SWEEP_INTERVAL) or the count of open ones shown in the log summary is not current; else at the
 * earliest idle deadline, or when a summary of refusals waits for its line (USEC_INFINITY:
 * neither, the thread sleeps until a connection or a first byte comes, or libmicrohttpd's thread
 * wakes it: connguard_busy). */
static usec_t sweep_due(struct connguard *g)
{
        usec_t due = g->last_sweep + SWEEP_INTERVAL;

        pthread_mutex_lock(&g->lock);
        if (!g->busy && g->st.open == g->live) {
                const struct connguard_stats *s = &g->st, *o = &g->logged;
                bool unlogged = s->refused_network != o->refused_network ||
                                s->refused_address != o->refused_address ||
                                s->refused_limit != o->refused_limit || s->evicted != o->evicted ||
                                s->timeout_header != o->timeout_header ||
                                s->timeout_request != o->timeout_request ||
                                s->timeout_write != o->timeout_write;
                due = g->idle_due;
                if (unlogged && g->last_log + LOG_INTERVAL < due)
                        due = g->last_log + LOG_INTERVAL;
                if (due < g->last_sweep + SWEEP_INTERVAL)
                        due = g->last_sweep + SWEEP_INTERVAL;
        }
        pthread_mutex_unlock(&g->lock);
        return due;
}

static void *guard_main(void *arg)
{
        struct connguard *g = arg;

        (void)pthread_setname_np(pthread_self(), "dp-connguard"); /* top -H */
        pthread_mutex_lock(&g->lock);
        g->guard_tid = gettid();
        pthread_mutex_unlock(&g->lock);
        for (;;) {
                struct epoll_event ev[16];
                usec_t now = now_monotonic();
                usec_t next = sweep_due(g);
                int ms;

                if (g->paused && g->paused_until < next)
                        next = g->paused_until;
                if (g->nwaiting > 0 && now + THROTTLE_PAUSE < next)
                        next = now + THROTTLE_PAUSE;
                ms = next == USEC_INFINITY ? -1
                     : next > now          ? (int)((next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC)
                                           : 0;
                int n = epoll_wait(g->epfd, ev, ARRAY_SIZE(ev), ms);

                for (int i = 0; i < n; i++) {
                        if (ev[i].data.u64 == STOP_TAG)
                                return NULL;
                        if (ev[i].data.u64 == WAKE_TAG) {
                                uint64_t v;
                                (void)!read(g->wakefd, &v, sizeof v);
                                continue;
                        }
                        if (ev[i].data.u64 == HUP_SET) {
                                pthread_mutex_lock(&g->lock);
                                connguard_take_hangups(g);
                                pthread_mutex_unlock(&g->lock);
                                continue;
                        }
                        accept_some(g, g->fds[ev[i].data.u64]);
                }
                if (g->nwaiting > 0)
                        retry_waiting(g);
                now = now_monotonic();
                if (now >= sweep_due(g)) {
                        pthread_mutex_lock(&g->lock);
                        now = now_monotonic(); /* after every stamp made under the lock */
                        connguard_sweep(g, now);
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
        struct epoll_event wev = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
        int r;

        g->fds = xcalloc(n ? n : 1, sizeof(int));
        memcpy(g->fds, fds, n * sizeof(int));
        g->nfds = n;
        g->mhd = d;
        g->epfd = epoll_create1(EPOLL_CLOEXEC);
        g->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        g->hupfd = epoll_create1(EPOLL_CLOEXEC);
        g->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (g->epfd < 0 || g->stopfd < 0 || g->hupfd < 0 || g->wakefd < 0 ||
            epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->stopfd, &ev) < 0 ||
            epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->hupfd, &hev) < 0 ||
            epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->wakefd, &wev) < 0)
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
        if (g->wakefd >= 0)
                close(g->wakefd);
        g->epfd = g->stopfd = g->hupfd = g->wakefd = -1;
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
                        connguard_shut(g, c, &g->st.closed_network);
        }
        connguard_busy(g); /* the idle deadline may have changed: a sweep sees again */
        pthread_mutex_unlock(&g->lock);
}

void connguard_get_stats(struct connguard *g, struct connguard_stats *ret)
{
        pthread_mutex_lock(&g->lock);
        *ret = g->st;
        ret->open = g->live;
        pthread_mutex_unlock(&g->lock);
}
