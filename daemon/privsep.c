/* The privileged device-I/O helper process (supervisor and per-request workers) and the daemon's
 * client for it, a struct devio. See privsep.h for the process model. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>

#include "devio_proto.h"
#include "log.h"
#include "privsep.h"

#define CAP_BIT(c) (UINT64_C(1) << (c))

/* ---- capabilities (capget/capset with _LINUX_CAPABILITY_VERSION_3, no libcap) ---- */

static int caps_get(uint64_t *ret_eff, uint64_t *ret_prm)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};

        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        *ret_eff = (uint64_t)d[1].effective << 32 | d[0].effective;
        *ret_prm = (uint64_t)d[1].permitted << 32 | d[0].permitted;
        return 0;
}

static int caps_set(uint64_t eff, uint64_t prm, uint64_t inh)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {
            {.effective = (uint32_t)eff, .permitted = (uint32_t)prm, .inheritable = (uint32_t)inh},
            {.effective = (uint32_t)(eff >> 32),
             .permitted = (uint32_t)(prm >> 32),
             .inheritable = (uint32_t)(inh >> 32)},
        };

        return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

/* Leaves the calling thread with at most keep (effective = permitted = keep ∩ what it had),
 * nothing inheritable or ambient, and no_new_privs. With bounding, also drops every other
 * capability from the bounding set, which needs CAP_SETPCAP (skipped without it). */
static int caps_restrict(uint64_t keep, bool bounding)
{
        uint64_t eff = 0, prm = 0;
        int r;

        r = caps_get(&eff, &prm);
        if (r < 0)
                return r;
        keep &= prm;
        /* Before 4.3 there is no ambient set: EINVAL means there is nothing to clear. */
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;
        if (bounding && (eff & CAP_BIT(CAP_SETPCAP))) {
                for (unsigned long c = 0; c < 64; c++) {
                        int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);

                        if (in < 0)
                                break; /* EINVAL: past the kernel's last capability */
                        if (in == 1 && !(keep & CAP_BIT(c)) &&
                            prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
                                return -errno;
                }
        }
        r = caps_set(keep, keep, 0);
        if (r < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

int privsep_drop_all(void)
{
        return caps_restrict(0, true);
}

/* What the helper keeps: CAP_SYS_ADMIN for NVMe admin commands (drivers/nvme/host/ioctl.c
 * nvme_cmd_allowed(): Get Log Page always needs it), CAP_SYS_RAWIO for ATA PASS-THROUGH
 * (drivers/scsi/scsi_ioctl.c scsi_cmd_allowed(): 85h is not in the read-safe list). INQUIRY,
 * LOG SENSE and READ DEFECT DATA are read-safe: opening the node is enough. Opening needs read
 * permission on the node: uid 0 has it as the owner (nvme* 0600 root, sd* 0660 root:disk).
 * A non-root service user given the capabilities as ambient ones also needs to read the nodes:
 * for that case only, CAP_DAC_READ_SEARCH (read-only opens; narrower than CAP_DAC_OVERRIDE). */
static uint64_t helper_caps(void)
{
        uint64_t keep = CAP_BIT(CAP_SYS_ADMIN) | CAP_BIT(CAP_SYS_RAWIO);

        if (geteuid() != 0)
                keep |= CAP_BIT(CAP_DAC_READ_SEARCH);
        return keep;
}

/* A worker keeps only what its request's kind needs. */
static uint64_t worker_caps(uint32_t kind)
{
        uint64_t keep = CAP_BIT(CAP_DAC_READ_SEARCH);

        if (kind == DEVIO_NVME)
                keep |= CAP_BIT(CAP_SYS_ADMIN);
        else if (kind == DEVIO_ATA)
                keep |= CAP_BIT(CAP_SYS_RAWIO);
        return keep;
}

/* ---- the helper (supervisor) ---- */

struct worker {
        pid_t pid; /* 0: free slot */
        uint64_t id;
        usec_t deadline;
        bool killed; /* by us, for running past worker_timeout */
};

struct helper {
        int fd;  /* the socket */
        int sfd; /* signalfd: SIGCHLD, SIGTERM */
        pid_t pid;
        char dev_dir[PATH_MAX];
        privsep_exec_fn exec;
        unsigned max;
        usec_t timeout;
        struct worker *workers; /* max slots */
        unsigned running;
};

/* Sends a response of the helper's own (an error status): never blocks the helper. If the
 * daemon's receive queue is full the answer is lost and the caller times out. */
static void helper_reply(struct helper *h, uint64_t id, int status)
{
        uint8_t msg[DEVIO_PROTO_HDR_SIZE];
        int len = devio_proto_encode_response(id, status, NULL, msg, sizeof msg);

        if (len > 0 && send(h->fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                log_debug("privsep: answer lost", "error", strerror(errno));
}

static void signals_default(void)
{
        struct sigaction sa = {.sa_handler = SIG_DFL};

        for (int s = 1; s < NSIG; s++)
                if (s != SIGKILL && s != SIGSTOP)
                        (void)sigaction(s, &sa, NULL);
}

/* The worker: runs one request, writes the answer itself, exits 0 only if it was sent. */
static _Noreturn void worker_main(struct helper *h, uint64_t id, const struct devio_request *req)
{
        struct devio_response *resp;
        uint8_t *msg;
        sigset_t none;
        int r, len;

        signals_default();
        (void)signal(SIGPIPE, SIG_IGN);
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != h->pid)
                _exit(3);
        (void)prctl(PR_SET_NAME, "diskpulse-io", 0, 0, 0);
        close(h->sfd);
        if (caps_restrict(worker_caps(req->kind), false) < 0)
                _exit(4);

        resp = calloc(1, sizeof *resp);
        msg = malloc(DEVIO_PROTO_RESPONSE_MAX);
        if (!resp || !msg)
                _exit(5);
        r = h->exec(h->dev_dir, req, resp);
        if (r > 0 || r < -4095 || (r == 0 && resp->n > DEVIO_MAX_CMDS))
                r = -EIO;
        len = devio_proto_encode_response(id, r, resp, msg, DEVIO_PROTO_RESPONSE_MAX);
        if (len < 0)
                _exit(6);
        /* Blocking: the daemon reads continuously; a worker stuck here is killed at its
         * deadline like any other. */
        for (;;) {
                if (send(h->fd, msg, (size_t)len, MSG_NOSIGNAL) == len)
                        _exit(0);
                if (errno != EINTR)
                        _exit(1);
        }
}

static struct worker *worker_by_pid(struct helper *h, pid_t pid)
{
        for (unsigned i = 0; i < h->max; i++)
                if (h->workers[i].pid == pid)
                        return &h->workers[i];
        return NULL;
}

static void helper_start_worker(struct helper *h, uint64_t id, const struct devio_request *req)
{
        struct worker *w;
        pid_t pid;

        if (h->running >= h->max) {
                helper_reply(h, id, -EAGAIN);
                return;
        }
        w = worker_by_pid(h, 0);
        pid = fork();
        if (pid < 0) {
                helper_reply(h, id, -errno);
                return;
        }
        if (pid == 0)
                worker_main(h, id, req);
        *w = (struct worker){.pid = pid, .id = id, .deadline = now_monotonic() + h->timeout};
        h->running++;
}

/* Collects finished workers; answers for those that did not answer themselves. */
static void helper_reap(struct helper *h)
{
        for (;;) {
                struct worker *w;
                int st;
                pid_t pid = waitpid(-1, &st, WNOHANG);

                if (pid <= 0)
                        return;
                w = worker_by_pid(h, pid);
                if (!w)
                        continue;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                        helper_reply(h, w->id, w->killed ? -ETIMEDOUT : -EIO);
                *w = (struct worker){0};
                h->running--;
        }
}

/* Kills workers past their deadline; returns the poll timeout until the next deadline (ms). */
static int helper_deadlines(struct helper *h)
{
        usec_t now = now_monotonic(), next = USEC_INFINITY;

        for (unsigned i = 0; i < h->max; i++) {
                struct worker *w = &h->workers[i];

                if (!w->pid || w->killed)
                        continue;
                if (now >= w->deadline) {
                        (void)kill(w->pid, SIGKILL);
                        w->killed = true;
                } else if (w->deadline < next)
                        next = w->deadline;
        }
        if (next == USEC_INFINITY)
                return -1;
        return (int)((next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
}

/* Reads and handles one message. hup: poll() saw the daemon's end closed, so that reading
 * nothing means EOF and not an empty message. Returns 0, or -ECONNRESET when the daemon is
 * gone. */
static int helper_message(struct helper *h, bool hup)
{
        uint8_t buf[DEVIO_PROTO_REQUEST_SIZE + 1];
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        struct devio_proto_hdr hdr;
        struct devio_request req;
        ssize_t n;
        int r;

        /* No control buffer: file descriptors sent along are closed by the kernel. */
        n = recvmsg(h->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n == 0)
                return hup ? -ECONNRESET : 0;
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -ECONNRESET;
        if (m.msg_flags & MSG_TRUNC) {
                log_debug("privsep: oversized message dropped");
                return 0;
        }
        if (devio_proto_decode_header(buf, (size_t)n, &hdr) < 0 ||
            hdr.type != DEVIO_PROTO_REQUEST) {
                log_debug("privsep: malformed message dropped");
                return 0;
        }
        r = devio_proto_decode_request(&hdr, buf, (size_t)n, &req);
        if (r == -EINVAL)
                helper_reply(h, hdr.id, -EINVAL);
        else if (r == 0)
                helper_start_worker(h, hdr.id, &req);
        return 0;
}

/* The socket to fd 3, stdin and stdout to /dev/null, everything above 3 closed; stderr stays (the
 * daemon's log: journald or the terminal) unless the socket itself was there. Returns the
 * socket's new fd or -errno. */
static int helper_fds(int fd)
{
        int null;

        if (fd != 3) {
                if (dup3(fd, 3, O_CLOEXEC) < 0)
                        return -errno;
        }
        null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
                for (int i = 0; i <= 2; i++)
                        if (i != null && (i < 2 || fd == 2))
                                (void)dup2(null, i);
                if (null > 3)
                        close(null);
        }
        if (close_range(4, ~0U, 0) < 0)
                for (int i = 4; i < 65536; i++)
                        (void)close(i);
        return 3;
}

_Noreturn void privsep_helper_main(int fd, const struct privsep_config *cfg)
{
        struct helper h = {.sfd = -1};
        sigset_t mask;
        int r;

        (void)prctl(PR_SET_NAME, "diskpulse-priv", 0, 0, 0);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        h.pid = getpid();
        h.exec = cfg->exec ? cfg->exec : devio_exec;
        h.max = cfg->max_workers ? cfg->max_workers : PRIVSEP_MAX_WORKERS_DEFAULT;
        h.timeout = cfg->worker_timeout ? cfg->worker_timeout : PRIVSEP_WORKER_TIMEOUT_DEFAULT;
        if (!strscpy(h.dev_dir, cfg->dev_dir ? cfg->dev_dir : "/dev", sizeof h.dev_dir))
                _exit(2);
        h.workers = calloc(h.max, sizeof *h.workers);
        if (!h.workers)
                _exit(2);

        /* Signals: the daemon's handlers and mask mean nothing here. SIGTERM (systemd stops the
         * whole cgroup) ends the helper; SIGINT from a terminal and SIGHUP (a reload of the
         * daemon) are the daemon's business: the helper follows the socket's EOF instead. */
        signals_default();
        (void)signal(SIGINT, SIG_IGN);
        (void)signal(SIGHUP, SIG_IGN);
        (void)signal(SIGPIPE, SIG_IGN);
        (void)signal(SIGUSR1, SIG_IGN);
        (void)signal(SIGUSR2, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        (void)sigprocmask(SIG_SETMASK, &mask, NULL);

        h.fd = helper_fds(fd);
        if (h.fd < 0)
                _exit(2);
        r = caps_restrict(helper_caps(), true);
        if (r < 0) {
                log_debug("privsep: cannot drop capabilities", "error", strerror(-r));
                _exit(2);
        }
        h.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (h.sfd < 0)
                _exit(2);
        {
                uint8_t hello[DEVIO_PROTO_HDR_SIZE];
                int len = devio_proto_encode_hello(hello, sizeof hello);

                if (len < 0 || send(h.fd, hello, (size_t)len, MSG_NOSIGNAL) != len)
                        _exit(2);
        }

        for (;;) {
                struct pollfd p[2] = {{.fd = h.fd, .events = POLLIN},
                                      {.fd = h.sfd, .events = POLLIN}};
                bool term = false;

                if (poll(p, 2, helper_deadlines(&h)) < 0 && errno != EINTR)
                        break;
                if (p[1].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        while (read(h.sfd, &si, sizeof si) == sizeof si)
                                if (si.ssi_signo == SIGTERM)
                                        term = true;
                }
                helper_reap(&h);
                if (term)
                        break;
                if (p[0].revents & POLLIN) {
                        if (helper_message(&h, p[0].revents & POLLHUP) < 0)
                                break;
                } else if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL))
                        break;
        }
        /* The daemon is gone or stopping: nobody waits for the workers' answers. */
        for (unsigned i = 0; i < h.max; i++)
                if (h.workers[i].pid)
                        (void)kill(h.workers[i].pid, SIGKILL);
        _exit(0);
}

/* ---- the client (in the daemon) ---- */

struct pending {
        struct pending *next;
        uint64_t id;
        char name[DEVIO_NAME_MAX];
        struct devio_response *resp; /* the waiting caller's; NULL once it gave up */
        bool done;
        int status;
};

struct privsep {
        struct devio io; /* first: a struct devio * is a struct privsep * */
        int fd;
        int pidfd; /* -1 where pidfd_open() is missing (Linux < 5.3) */
        pid_t pid;
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock; /* guards everything below */
        pthread_cond_t cond;  /* broadcast when an answer arrives or the helper dies */
        bool dead, closing;
        uint64_t next_id;
        struct pending *pending;
        struct privsep_stats stats;
};

static const struct devio_ops privsep_ops;
static void mark_dead(struct privsep *ps);

static struct pending *pending_by_name(struct privsep *ps, const char *name)
{
        for (struct pending *p = ps->pending; p; p = p->next)
                if (strcmp(p->name, name) == 0)
                        return p;
        return NULL;
}

static struct pending *pending_by_id(struct privsep *ps, uint64_t id)
{
        for (struct pending *p = ps->pending; p; p = p->next)
                if (p->id == id)
                        return p;
        return NULL;
}

static void pending_unlink(struct privsep *ps, struct pending *x)
{
        for (struct pending **pp = &ps->pending; *pp; pp = &(*pp)->next)
                if (*pp == x) {
                        *pp = x->next;
                        ps->stats.inflight--;
                        return;
                }
}

static void to_timespec(usec_t u, struct timespec *ts)
{
        ts->tv_sec = (time_t)(u / USEC_PER_SEC);
        ts->tv_nsec = (long)(u % USEC_PER_SEC * NSEC_PER_USEC);
}

/* Sends one message before deadline (CLOCK_MONOTONIC, µs). Returns 0 or -errno. */
static int send_until(int fd, const void *msg, size_t len, usec_t deadline)
{
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                usec_t now;
                int ms;

                if (send(fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len)
                        return 0;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return errno == EPIPE ? -ECONNRESET : -errno;
                now = now_monotonic();
                if (now >= deadline)
                        return -ETIMEDOUT;
                ms = deadline == USEC_INFINITY || deadline - now > INT_MAX / 2 * USEC_PER_MSEC
                         ? INT_MAX / 2
                         : (int)((deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
                (void)poll(&p, 1, ms);
        }
}

static int privsep_run(struct devio *io, const struct devio_request *req, usec_t timeout,
                       struct devio_response *resp)
{
        struct privsep *ps = (struct privsep *)io;
        uint8_t msg[DEVIO_PROTO_REQUEST_SIZE];
        struct pending *p;
        usec_t deadline, now = now_monotonic();
        int r, len;

        if (!resp || devio_request_valid(req) < 0)
                return -EINVAL;
        deadline = timeout >= USEC_INFINITY - now ? USEC_INFINITY : now + timeout;
        p = xcalloc(1, sizeof *p);
        strscpy(p->name, req->name, sizeof p->name);
        p->resp = resp;

        pthread_mutex_lock(&ps->lock);
        if (ps->dead) {
                pthread_mutex_unlock(&ps->lock);
                free(p);
                return -ECONNRESET;
        }
        if (pending_by_name(ps, req->name)) {
                pthread_mutex_unlock(&ps->lock);
                free(p);
                return -EBUSY;
        }
        p->id = ++ps->next_id;
        p->next = ps->pending;
        ps->pending = p;
        ps->stats.inflight++;
        ps->stats.requests++;
        pthread_mutex_unlock(&ps->lock);

        len = devio_proto_encode_request(p->id, req, msg, sizeof msg);
        r = len < 0 ? len : send_until(ps->fd, msg, (size_t)len, deadline);
        if (r == -ECONNRESET)
                mark_dead(ps); /* the receiver may not have seen the EOF yet */

        pthread_mutex_lock(&ps->lock);
        if (r < 0) {
                pending_unlink(ps, p);
                pthread_mutex_unlock(&ps->lock);
                free(p);
                return r;
        }
        while (!p->done && !ps->dead) {
                struct timespec ts;

                if (deadline == USEC_INFINITY) {
                        pthread_cond_wait(&ps->cond, &ps->lock);
                        continue;
                }
                to_timespec(deadline, &ts);
                if (pthread_cond_timedwait(&ps->cond, &ps->lock, &ts) == ETIMEDOUT)
                        break;
        }
        if (p->done || ps->dead) {
                r = p->done ? p->status : -ECONNRESET;
                pending_unlink(ps, p);
                free(p);
        } else {
                /* Gave up: the entry stays (the device is busy) until its answer or the
                 * helper's death notice for its worker comes; the receiver frees it then. */
                p->resp = NULL;
                ps->stats.timeouts++;
                r = -ETIMEDOUT;
        }
        pthread_mutex_unlock(&ps->lock);
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

/* Hands one message from the helper to its waiting caller. Called with the lock held. */
static void deliver(struct privsep *ps, const uint8_t *buf, size_t len)
{
        struct devio_proto_hdr hdr;
        struct pending *p;

        if (devio_proto_decode_header(buf, len, &hdr) < 0 || hdr.type != DEVIO_PROTO_RESPONSE) {
                ps->stats.dropped++;
                return;
        }
        p = pending_by_id(ps, hdr.id);
        if (!p || p->done) {
                ps->stats.dropped++;
                return;
        }
        if (hdr.status == -EIO || hdr.status == -ETIMEDOUT)
                ps->stats.worker_failures++;
        else if (hdr.status == -EAGAIN)
                ps->stats.overloaded++;
        if (!p->resp) {
                ps->stats.late_responses++;
                pending_unlink(ps, p);
                free(p);
                return;
        }
        p->status = hdr.status;
        if (hdr.status == 0 && devio_proto_decode_response(&hdr, buf, len, p->resp) < 0) {
                ps->stats.dropped++;
                p->status = -EIO;
        }
        p->done = true;
        pthread_cond_broadcast(&ps->cond);
}

/* Marks the helper gone: waiting callers get -ECONNRESET, abandoned entries are freed. Called by
 * the receiver at EOF and by run() when a send finds the socket closed; idempotent. */
static void mark_dead(struct privsep *ps)
{
        pid_t pid;
        int st;

        pthread_mutex_lock(&ps->lock);
        if (!ps->dead) {
                ps->dead = true;
                ps->stats.helper_up = false;
                if (!ps->closing) {
                        ps->stats.helper_exits++;
                        log_debug("privsep: the helper is gone");
                }
        }
        for (struct pending **pp = &ps->pending; *pp;) {
                struct pending *p = *pp;

                if (!p->resp) {
                        *pp = p->next;
                        ps->stats.inflight--;
                        free(p);
                } else
                        pp = &p->next;
        }
        pthread_cond_broadcast(&ps->cond);
        pthread_mutex_unlock(&ps->lock);
        /* Reap it if it has exited already; privsep_free() waits for it otherwise. */
        pthread_mutex_lock(&ps->lock);
        pid = ps->pid;
        pthread_mutex_unlock(&ps->lock);
        if (pid > 0 && waitpid(pid, &st, WNOHANG) == pid) {
                pthread_mutex_lock(&ps->lock);
                ps->pid = 0;
                pthread_mutex_unlock(&ps->lock);
        }
}

/* Reads one message without blocking. Returns 1 when one was handled, 0 when there was none,
 * -ECONNRESET when the helper closed its end or the socket failed. */
static int receive_one(struct privsep *ps, uint8_t *buf)
{
        struct iovec iov = {.iov_base = buf, .iov_len = DEVIO_PROTO_RESPONSE_MAX};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n = recvmsg(ps->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

        if (n == 0)
                return -ECONNRESET;
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -ECONNRESET;
        pthread_mutex_lock(&ps->lock);
        if (m.msg_flags & MSG_TRUNC)
                ps->stats.dropped++;
        else
                deliver(ps, buf, (size_t)n);
        pthread_mutex_unlock(&ps->lock);
        return 1;
}

/* The receiver thread: dispatches answers by id until the helper or the socket is gone. */
static void *receiver(void *arg)
{
        struct privsep *ps = arg;
        uint8_t *buf = xmalloc(DEVIO_PROTO_RESPONSE_MAX);

        /* Created with capabilities if the caller kept them: this thread needs none. */
        (void)privsep_drop_all();
        for (;;) {
                struct pollfd p[2] = {{.fd = ps->fd, .events = POLLIN},
                                      {.fd = ps->pidfd, .events = POLLIN}};

                if (poll(p, ps->pidfd >= 0 ? 2 : 1, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[0].revents) {
                        if (receive_one(ps, buf) < 0)
                                break;
                        continue;
                }
                if (p[1].revents) {
                        /* The helper exited: take what its workers sent before, then stop. */
                        while (receive_one(ps, buf) > 0)
                                ;
                        break;
                }
        }
        free(buf);
        mark_dead(ps);
        return NULL;
}

/* Waits up to 300 ms for the helper to exit after EOF on its socket, then kills it (the
 * daemon's SIGTERM must finish within a second even with a worker stuck in a device). */
static void stop_helper(struct privsep *ps)
{
        usec_t deadline = now_monotonic() + 300 * USEC_PER_MSEC;

        if (ps->pid <= 0)
                return;
        for (;;) {
                pid_t r = waitpid(ps->pid, NULL, WNOHANG);

                if (r == ps->pid || (r < 0 && errno != EINTR))
                        return;
                if (now_monotonic() >= deadline)
                        break;
                if (ps->pidfd >= 0) {
                        struct pollfd p = {.fd = ps->pidfd, .events = POLLIN};
                        (void)poll(&p, 1, 50);
                } else
                        (void)usleep(10000);
        }
        (void)kill(ps->pid, SIGKILL);
        while (waitpid(ps->pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

/* Waits up to 5 s for the helper's HELLO. Returns 0 or -EIO (it exited or said something else). */
static int wait_hello(int fd)
{
        uint8_t buf[DEVIO_PROTO_HDR_SIZE + 1];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        struct devio_proto_hdr hdr;
        ssize_t n;
        int r;

        do
                r = poll(&p, 1, 5000);
        while (r < 0 && errno == EINTR);
        if (r != 1)
                return -EIO;
        n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0 || devio_proto_decode_header(buf, (size_t)n, &hdr) < 0 ||
            hdr.type != DEVIO_PROTO_HELLO)
                return -EIO;
        return 0;
}

static void privsep_cancel(struct devio *io)
{
        struct privsep *ps = (struct privsep *)io;

        pthread_mutex_lock(&ps->lock);
        ps->closing = true;
        pthread_mutex_unlock(&ps->lock);
        /* The receiver sees EOF and marks the helper gone, which wakes every waiter. */
        if (ps->fd >= 0)
                (void)shutdown(ps->fd, SHUT_RDWR);
}

static void privsep_free(struct devio *io)
{
        struct privsep *ps = (struct privsep *)io;

        if (!ps)
                return;
        pthread_mutex_lock(&ps->lock);
        ps->closing = true;
        pthread_mutex_unlock(&ps->lock);
        if (ps->fd >= 0)
                (void)shutdown(ps->fd, SHUT_RDWR);
        if (ps->thread_started)
                pthread_join(ps->thread, NULL);
        if (ps->fd >= 0)
                close(ps->fd);
        stop_helper(ps);
        if (ps->pidfd >= 0)
                close(ps->pidfd);
        while (ps->pending) {
                struct pending *p = ps->pending;
                ps->pending = p->next;
                free(p);
        }
        pthread_cond_destroy(&ps->cond);
        pthread_mutex_destroy(&ps->lock);
        free(ps);
}

static const struct devio_ops privsep_ops = {
    .run = privsep_run,
    .busy = privsep_busy,
    .cancel = privsep_cancel,
    .free = privsep_free,
};

int privsep_start(const struct privsep_config *cfg, struct devio **ret_io)
{
        struct privsep *ps;
        pthread_condattr_t ca;
        sigset_t all, old;
        int sv[2], r;
        pid_t parent = getpid(), pid;

        if (!cfg || !ret_io)
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
                privsep_helper_main(sv[1], cfg);
        }
        close(sv[1]);

        ps = xcalloc(1, sizeof *ps);
        ps->io.ops = &privsep_ops;
        ps->fd = sv[0];
        ps->pid = pid;
        ps->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (ps->pidfd >= 0)
                (void)fcntl(ps->pidfd, F_SETFD, FD_CLOEXEC);
        ps->stats.helper_up = true;
        ps->stats.helper_pid = pid;
        pthread_mutex_init(&ps->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&ps->cond, &ca);
        pthread_condattr_destroy(&ca);

        r = wait_hello(ps->fd);
        if (r < 0) {
                privsep_free(&ps->io);
                return r;
        }
        if (!cfg->keep_privileges) {
                r = privsep_drop_all();
                if (r < 0) {
                        privsep_free(&ps->io);
                        return r;
                }
        }
        /* The receiver inherits a full signal mask: the daemon's signals go to its loop. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&ps->thread, NULL, receiver, ps);
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

bool privsep_helper_up(struct devio *io)
{
        struct privsep_stats st;

        return privsep_stats(io, &st) == 0 && st.helper_up;
}
