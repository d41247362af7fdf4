/* The daemon's client of the helper, the public face of the client's four files: the struct
 * devio (run, busy, cancel, free), privsep_start() (forks the zygote) and the counters. It calls
 * the three below it - client_thread.c (started here), client_spawn.c (the first helper,
 * stopping them all), client_conn.c (the state) - and none of them calls it. See privsep.h for
 * the process model. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "devio_linux.h"
#include "privsep_proto.h"
#include "fdpass.h"
#include "log.h"
#include "privsep_internal.h"

static const struct devio_ops privsep_ops;

static struct pending *pending_by_name(struct privsep *ps, const char *name)
{
        for (struct pending *p = ps->pending; p; p = p->next)
                if (strcmp(p->name, name) == 0)
                        return p;
        return NULL;
}

static void to_timespec(usec_t u, struct timespec *ts)
{
        ts->tv_sec = (time_t)(u / USEC_PER_SEC);
        ts->tv_nsec = (long)(u % USEC_PER_SEC * NSEC_PER_USEC);
}

static void wake_thread(struct privsep *ps)
{
        uint64_t one = 1;

        if (write(ps->wake, &one, sizeof one) < 0 && errno != EAGAIN)
                log_debug("privsep: cannot wake the client thread", "error", strerror(errno));
}

/* Sends one message before deadline (CLOCK_MONOTONIC, µs). Returns 0 or -errno. */
static int send_until(int fd, const void *msg, size_t len, usec_t deadline)
{
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};

                int r = privsep_send_fds(fd, msg, len, NULL, 0, MSG_DONTWAIT);

                if (r == 0)
                        return 0;
                if (r != -EAGAIN)
                        return r == -EPIPE ? -ECONNRESET : r;
                if (now_monotonic() >= deadline)
                        return -ETIMEDOUT;
                (void)poll(&p, 1, privsep_ms_until(deadline));
        }
}

/* Puts p (name, priv, resp or out filled) in the pending table with a new id, for the current
 * helper, whose reference it takes (*ret_c). Returns 0, -ECONNRESET when no helper runs (p is
 * not freed), -EBUSY when a device request for p->name is in flight. */
static int enqueue(struct privsep *ps, struct pending *p, struct conn **ret_c)
{
        struct conn *c;

        pthread_mutex_lock(&ps->lock);
        c = ps->conn;
        if (ps->closing || !c || c->lost) {
                /* No helper right now: fail fast, a new one may come later. */
                pthread_mutex_unlock(&ps->lock);
                return -ECONNRESET;
        }
        if (!p->priv && pending_by_name(ps, p->name)) {
                pthread_mutex_unlock(&ps->lock);
                return -EBUSY;
        }
        privsep_conn_ref(c); /* c->fd stays open (and not reused) until the send is over */
        p->gen = c->gen;
        p->id = ++ps->next_id;
        p->next = ps->pending;
        ps->pending = p;
        ps->stats.inflight++;
        ps->stats.requests++;
        pthread_mutex_unlock(&ps->lock);
        *ret_c = c;
        return 0;
}

/* Sends the len bytes of msg (len < 0: the encoder's error) for p, enqueued to helper c, and
 * waits until deadline for the answer. Returns its status (p freed), the send's error (p
 * freed), or -ETIMEDOUT (p left to the client thread, its caller's storage forgotten). */
static int send_and_wait(struct privsep *ps, struct pending *p, struct conn *c, const void *msg,
                         int len, usec_t deadline)
{
        int r = len < 0 ? len : send_until(c->fd, msg, (size_t)len, deadline);

        pthread_mutex_lock(&ps->lock);
        if (r == -ECONNRESET) {
                /* The client thread may not have seen the EOF yet: helper_up goes false now. The
                 * other callers wait for the thread: answers sent before the helper closed may
                 * still be in the socket, and they are theirs. */
                privsep_conn_mark_lost(ps, c);
                wake_thread(ps);
        }
        privsep_conn_unref(c);
        if (r < 0) {
                privsep_pending_unlink(ps, p);
                pthread_mutex_unlock(&ps->lock);
                free(p);
                return r;
        }
        while (!p->done) {
                struct timespec ts;

                if (deadline == USEC_INFINITY) {
                        pthread_cond_wait(&ps->cond, &ps->lock);
                        continue;
                }
                to_timespec(deadline, &ts);
                if (pthread_cond_timedwait(&ps->cond, &ps->lock, &ts) == ETIMEDOUT)
                        break;
        }
        if (p->done) {
                r = p->status;
                privsep_pending_unlink(ps, p);
                free(p);
        } else {
                /* Gave up: the entry stays (a device stays busy) until its answer or the
                 * helper's death notice for its worker comes; the receiver frees it then, and
                 * closes the descriptors of a late answer. */
                p->resp = NULL;
                p->out = NULL;
                ps->stats.timeouts++;
                r = -ETIMEDOUT;
        }
        pthread_mutex_unlock(&ps->lock);
        return r;
}

static usec_t deadline_of(usec_t timeout)
{
        usec_t now = now_monotonic();

        return timeout >= USEC_INFINITY - now ? USEC_INFINITY : now + timeout;
}

static int privsep_run(struct devio *io, const struct devio_request *req, usec_t timeout,
                       struct devio_response *resp)
{
        struct privsep *ps = (struct privsep *)io;
        uint8_t msg[PRIVSEP_PROTO_REQUEST_SIZE];
        struct pending *p;
        struct conn *c;
        usec_t deadline;
        int r;

        if (!resp || privsep_request_valid(req) < 0)
                return -EINVAL;
        deadline = deadline_of(timeout);
        p = xcalloc(1, sizeof *p);
        strscpy(p->name, req->name, sizeof p->name);
        p->resp = resp;
        r = enqueue(ps, p, &c);
        if (r < 0) {
                free(p);
                return r;
        }
        return send_and_wait(ps, p, c, msg,
                             privsep_proto_encode_request(p->id, req, msg, sizeof msg), deadline);
}

static int privsep_privileged(struct devio *io, const char *name, const void *arg, size_t len,
                              usec_t timeout, int fds[], size_t *nfds, char *err, size_t errsz)
{
        struct privsep *ps = (struct privsep *)io;
        uint8_t msg[PRIVSEP_PROTO_PRIV_MAX];
        struct priv_out out = {.nfds = 0};
        struct pending *p;
        struct conn *c;
        usec_t deadline = deadline_of(timeout);
        size_t nlen = name ? strnlen(name, DEVIO_NAME_MAX) : 0;
        int r;

        if (nfds)
                *nfds = 0;
        if (err && errsz)
                err[0] = '\0';
        if (!fds || !nfds || (len > 0 && !arg) || nlen == 0 || nlen >= DEVIO_NAME_MAX ||
            len > DEVIO_PRIV_ARG_MAX) {
                if (err && errsz)
                        snprintf(err, errsz,
                                 "invalid privileged call (name, or argument of %zu "
                                 "bytes over %d)",
                                 len, DEVIO_PRIV_ARG_MAX);
                return -EINVAL;
        }
        p = xcalloc(1, sizeof *p);
        memcpy(p->name, name, nlen);
        p->priv = true;
        p->out = &out;
        r = enqueue(ps, p, &c);
        if (r < 0) {
                free(p);
                snprintf(out.err, sizeof out.err, "the privileged helper is not running");
        } else {
                r = send_and_wait(ps, p, c, msg,
                                  privsep_proto_encode_priv(p->id, name, arg, len, msg, sizeof msg),
                                  deadline);
        }
        if (r == 0) {
                memcpy(fds, out.fds, out.nfds * sizeof fds[0]);
                *nfds = out.nfds;
                return 0;
        }
        /* Only an answer with status 0 carries descriptors (deliver_priv() takes no others). */
        if (r == -ETIMEDOUT && !out.err[0])
                snprintf(out.err, sizeof out.err, "no answer within the timeout");
        else if (r == -ECONNRESET && !out.err[0])
                snprintf(out.err, sizeof out.err, "the privileged helper is gone");
        else if (!out.err[0])
                snprintf(out.err, sizeof out.err, "%s", strerror(-r));
        if (err && errsz)
                snprintf(err, errsz, "%s", out.err);
        return r;
}

static bool privsep_busy(struct devio *io, const char *name)
{
        struct privsep *ps = (struct privsep *)io;
        bool busy;

        if (!name)
                return false;
        pthread_mutex_lock(&ps->lock);
        busy = pending_by_name(ps, name) != NULL;
        pthread_mutex_unlock(&ps->lock);
        return busy;
}

static void privsep_cancel(struct devio *io)
{
        struct privsep *ps = (struct privsep *)io;

        pthread_mutex_lock(&ps->lock);
        ps->closing = true;
        if (ps->conn) {
                /* Wakes every waiter; the helper sees EOF and begins to exit. */
                privsep_conn_lost(ps, ps->conn);
                (void)shutdown(ps->conn->fd, SHUT_RDWR);
        }
        pthread_cond_broadcast(&ps->cond);
        pthread_mutex_unlock(&ps->lock);
        if (ps->wake >= 0)
                wake_thread(ps);
}

static void privsep_free(struct devio *io)
{
        struct privsep *ps = (struct privsep *)io;

        if (!ps)
                return;
        privsep_cancel(io);
        if (ps->thread_started)
                pthread_join(ps->thread, NULL);
        privsep_stop_children(ps);
        /* Every caller of run() has returned: the client thread's reference is the last. */
        ps->conn = privsep_conn_unref(ps->conn);
        while (ps->pending) {
                struct pending *p = ps->pending;
                ps->pending = p->next;
                free(p);
        }
        if (ps->wake >= 0)
                close(ps->wake);
        if (ps->lost >= 0)
                close(ps->lost);
        pthread_cond_destroy(&ps->cond);
        pthread_mutex_destroy(&ps->lock);
        free(ps);
}

static const struct devio_ops privsep_ops = {
    .run = privsep_run,
    .busy = privsep_busy,
    .cancel = privsep_cancel,
    .free = privsep_free,
    .privileged = privsep_privileged,
};

static int client_start(int zfd, pid_t zpid, const struct privsep_config *cfg,
                        struct devio **ret_io);

int privsep_start(const struct privsep_config *cfg, struct devio **ret_io)
{
        int sv[2], r;
        pid_t parent = getpid(), pid;

        if (!cfg || !cfg->dev_dir || !ret_io || privsep_functions_valid(cfg) < 0)
                return -EINVAL;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pid == 0) {
                /* The daemon may have died before this line: then PDEATHSIG never comes. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                        _exit(2);
                close(sv[0]);
                privsep_zygote_main(sv[1], cfg);
        }
        close(sv[1]);
        return client_start(sv[0], pid, cfg, ret_io);
}

int privsep_client_start(int zfd, pid_t zpid, const struct privsep_config *cfg,
                         struct devio **ret_io)
{
        if (zfd < 0 || zpid < 0 || !cfg || !ret_io)
                return -EINVAL;
        return client_start(zfd, zpid, cfg, ret_io);
}

/* The client on the zygote's control socket zfd (owned from here on) of process zpid (0: none
 * of ours to reap). */
static int client_start(int zfd, pid_t zpid, const struct privsep_config *cfg,
                        struct devio **ret_io)
{
        struct privsep *ps;
        struct conn *c = NULL;
        pthread_condattr_t ca;
        sigset_t all, old;
        int r;

        ps = xcalloc(1, sizeof *ps);
        ps->io.ops = &privsep_ops;
        ps->lost = -1;
        ps->zfd = zfd;
        ps->zpid = zpid;
        ps->delay_min = cfg->restart_delay ? cfg->restart_delay : PRIVSEP_RESTART_DELAY_DEFAULT;
        ps->delay_max = cfg->restart_max ? cfg->restart_max : PRIVSEP_RESTART_MAX_DEFAULT;
        if (ps->delay_max < ps->delay_min)
                ps->delay_max = ps->delay_min;
        ps->delay = ps->delay_min;
        ps->stats.zygote_up = true;
        ps->stats.zygote_pid = zpid;
        pthread_mutex_init(&ps->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&ps->cond, &ca);
        pthread_condattr_destroy(&ca);
        ps->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ps->wake >= 0)
                ps->lost = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ps->wake < 0 || ps->lost < 0) {
                r = -errno;
                privsep_free(&ps->io);
                return r;
        }

        r = privsep_spawn_helper(ps, &c);
        if (r < 0) {
                log_errno(LOG_LEVEL_DEBUG, r, "privsep: the first helper did not start", NULL);
                privsep_free(&ps->io);
                return -EIO;
        }
        privsep_conn_install(ps, c, false);
        if (!cfg->keep_privileges) {
                r = privsep_drop_all();
                if (r < 0) {
                        privsep_free(&ps->io);
                        return r;
                }
        }
        /* The client thread inherits a full signal mask: the daemon's signals go to its loop. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&ps->thread, NULL, privsep_client_thread, ps);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                privsep_free(&ps->io);
                return r;
        }
        ps->thread_started = true;
        *ret_io = &ps->io;
        return 0;
}

int privsep_stats(struct devio *io, struct privsep_stats *ret)
{
        struct privsep *ps = (struct privsep *)io;

        if (!io || io->ops != &privsep_ops || !ret)
                return -EINVAL;
        pthread_mutex_lock(&ps->lock);
        *ret = ps->stats;
        pthread_mutex_unlock(&ps->lock);
        return 0;
}

int privsep_zygote_lost_fd(struct devio *io)
{
        struct privsep *ps = (struct privsep *)io;

        if (!io || io->ops != &privsep_ops)
                return -1;
        return ps->lost;
}

bool privsep_helper_up(struct devio *io)
{
        struct privsep_stats st;

        return privsep_stats(io, &st) == 0 && st.helper_up;
}
