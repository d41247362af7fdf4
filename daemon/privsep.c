/* The privileged device-I/O helper process (supervisor and per-request workers), the zygote that
 * starts helpers, and the daemon's client for them, a struct devio. See privsep.h for the process
 * model. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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
                ssize_t n = send(h->fd, msg, (size_t)len, MSG_NOSIGNAL);
                if (n == len || errno != EINTR) {
                        /* freed although the process ends, so that leak checkers stay quiet */
                        free(msg);
                        free(resp);
                        _exit(n == len ? 0 : 1);
                }
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

/* ---- the zygote ---- */

/* fork(), except that the child's parent is our parent (CLONE_PARENT): the helper becomes the
 * daemon's child, not the zygote's. clone3() first (its exit_signal must be 0 with CLONE_PARENT:
 * the child gets ours, SIGCHLD); clone() where clone3() is missing or filtered (ENOSYS: seccomp
 * profiles, valgrind). glibc's own fork() cannot do it; the raw syscall skips its fork handlers
 * and leaves the cached thread id in the child's TCB stale, which is harmless here: the zygote
 * has one thread, and the helper takes no pthread locks and starts its workers with fork(),
 * which sets the id afresh. */
static pid_t clone_parent(void)
{
        struct {
                uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
        } args = {.flags = CLONE_PARENT};
        long r;

#ifdef SYS_clone3
        r = syscall(SYS_clone3, &args, sizeof args);
        if (r >= 0 || errno != ENOSYS)
                return (pid_t)r;
#endif
#if defined(__s390__) || defined(__CRIS__)
        r = syscall(SYS_clone, 0L, (long)(CLONE_PARENT | SIGCHLD), 0L, 0L, 0L);
#else
        r = syscall(SYS_clone, (long)(CLONE_PARENT | SIGCHLD), 0L, 0L, 0L, 0L);
#endif
        return (pid_t)r;
}

/* Sends SPAWNED, with fd attached when it is >= 0. Blocking: the daemon reads one answer per
 * SPAWN it sent. Returns 0 or -errno. */
static int zygote_reply(int ctl, int status, pid_t pid, int fd)
{
        uint8_t msg[DEVIO_PROTO_CTL_SIZE];
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = {.iov_base = msg, .iov_len = sizeof msg};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        int len = devio_proto_encode_spawned(status, (int32_t)pid, msg, sizeof msg);

        if (len < 0)
                return len;
        if (fd >= 0) {
                struct cmsghdr *c;

                memset(&cbuf, 0, sizeof cbuf);
                m.msg_control = cbuf.buf;
                m.msg_controllen = sizeof cbuf.buf;
                c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof fd);
        }
        for (;;) {
                if (sendmsg(ctl, &m, MSG_NOSIGNAL) == len)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

/* One SPAWN: a new helper, a child of the daemon, on a new socketpair; the daemon gets its end.
 * There is no limit on how many: a daemon that asks for many helpers gains nothing it could not
 * do with one (each does the same validated requests) or by forking itself, and the zygote
 * keeps no state to get wrong. */
static void zygote_spawn(int ctl, const struct privsep_config *cfg, pid_t daemon)
{
        int sv[2], status = 0;
        pid_t pid = 0;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                (void)zygote_reply(ctl, -errno, 0, -1);
                return;
        }
        pid = clone_parent();
        if (pid == 0) {
                /* The daemon may have died since the SPAWN: then PDEATHSIG never comes. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != daemon)
                        _exit(2);
                close(sv[0]);
                privsep_helper_main(sv[1], cfg); /* moves sv[1] onto fd 3, the control socket */
        }
        if (pid < 0)
                status = -errno;
        close(sv[1]);
        /* If the answer cannot be sent (the daemon is gone), nobody will talk to the helper. */
        if (zygote_reply(ctl, status, status < 0 ? 0 : pid, status < 0 ? -1 : sv[0]) < 0 && pid > 0)
                (void)kill(pid, SIGKILL);
        close(sv[0]);
}

_Noreturn void privsep_zygote_main(int fd, const struct privsep_config *cfg)
{
        static const int ignored[] = {SIGINT, SIGHUP, SIGTERM, SIGPIPE, SIGUSR1, SIGUSR2};
        pid_t daemon = getppid();
        sigset_t none;

        (void)prctl(PR_SET_NAME, "diskpulse-zyg", 0, 0, 0);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        /* Its lifetime is the daemon's: it ends at EOF on its socket (the daemon closed it or
         * died) or by PDEATHSIG, not on SIGTERM (systemd signals the whole cgroup; the daemon's
         * exit within a second ends the zygote) nor a terminal's SIGINT or the daemon's SIGHUP:
         * a zygote lost to a stray signal would make the next helper death final. */
        signals_default();
        for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
                (void)signal(ignored[i], SIG_IGN);
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        fd = helper_fds(fd);
        if (fd < 0 || caps_restrict(helper_caps(), true) < 0)
                _exit(2);

        for (;;) {
                uint8_t buf[DEVIO_PROTO_CTL_SIZE + 1];
                struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
                struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
                struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
                ssize_t n;

                if (poll(&p, 1, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                /* No control buffer: descriptors sent along are closed by the kernel. */
                n = recvmsg(fd, &m, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                continue;
                        break;
                }
                if (n == 0) {
                        /* EOF: the daemon closed its end (POLLHUP) or shut down writing
                         * (POLLRDHUP, privsep_free()); an empty message otherwise. */
                        if (p.revents & (POLLHUP | POLLRDHUP))
                                break;
                        continue;
                }
                if (!(m.msg_flags & MSG_TRUNC) && devio_proto_is_spawn(buf, (size_t)n))
                        zygote_spawn(fd, cfg, daemon);
        }
        _exit(0);
}

/* ---- the client (in the daemon) ---- */

#define SPAWN_TIMEOUT (5 * USEC_PER_SEC) /* for the zygote's answer, then again for HELLO */
#define STOP_TIMEOUT  (300 * USEC_PER_MSEC)

/* One helper and its socket. Freed with the last reference. */
struct conn {
        int fd;
        int pidfd; /* -1 where pidfd_open() is missing (Linux < 5.3, valgrind) */
        pid_t pid;
        uint64_t gen;   /* which helper: pending requests carry it */
        usec_t started; /* when it said HELLO */
        unsigned refs;  /* under the lock: the client thread's, and one per run() sending */
        bool lost;      /* under the lock: found gone; the client thread reaps it */
};

struct pending {
        struct pending *next;
        uint64_t id;
        uint64_t gen; /* the helper it was sent to */
        char name[DEVIO_NAME_MAX];
        struct devio_response *resp; /* the waiting caller's; NULL once it gave up */
        bool done;
        int status;
};

struct privsep {
        struct devio io; /* first: a struct devio * is a struct privsep * */
        /* Used by the client thread only (and by privsep_start() and privsep_free() while that
         * thread does not run). */
        int zfd;    /* the zygote's control socket; -1 once the zygote is gone */
        pid_t zpid; /* 0 once reaped */
        usec_t delay_min, delay_max;
        /* Set at start, read by anyone. */
        int wake; /* eventfd: cancel, free and run() wake the client thread */
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock; /* guards everything below */
        pthread_cond_t cond;  /* broadcast when an answer arrives or a helper is lost */
        struct conn *conn;    /* the current helper (maybe lost), NULL while none runs */
        bool closing;
        usec_t delay;        /* the next restart's wait */
        usec_t next_restart; /* while conn is NULL: when to ask the zygote */
        uint64_t gen;
        uint64_t next_id;
        struct pending *pending;
        struct privsep_stats stats;
};

static const struct devio_ops privsep_ops;

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

/* Milliseconds from now until deadline for poll(): -1 for USEC_INFINITY, 0 once past. */
static int ms_until(usec_t deadline)
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

static void wake_thread(struct privsep *ps)
{
        uint64_t one = 1;

        if (write(ps->wake, &one, sizeof one) < 0 && errno != EAGAIN)
                log_debug("privsep: cannot wake the client thread", "error", strerror(errno));
}

/* Called with the lock held. */
static void conn_unref(struct conn *c)
{
        if (--c->refs > 0)
                return;
        close(c->fd);
        if (c->pidfd >= 0)
                close(c->pidfd);
        free(c);
}

/* Collects a child of ours (a helper or the zygote), killing it first if it still runs. Returns
 * its wait status, or -1 when pid is not (or no longer) our child. */
static int reap_child(pid_t pid)
{
        int st = -1;
        pid_t r;

        if (pid <= 0)
                return -1;
        do
                r = waitpid(pid, &st, WNOHANG);
        while (r < 0 && errno == EINTR);
        if (r == pid)
                return st;
        if (r < 0)
                return -1;
        (void)kill(pid, SIGKILL);
        do
                r = waitpid(pid, &st, 0);
        while (r < 0 && errno == EINTR);
        return r == pid ? st : -1;
}

static const char *describe_status(int st, char *buf, size_t size)
{
        if (st < 0)
                snprintf(buf, size, "unknown");
        else if (WIFEXITED(st))
                snprintf(buf, size, "exit %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st))
                snprintf(buf, size, "signal %d", WTERMSIG(st));
        else
                snprintf(buf, size, "status %d", st);
        return buf;
}

/* Marks c gone: its waiting callers get -ECONNRESET, its abandoned entries are freed, and the next
 * restart is scheduled. Called with the lock held, by the client thread (EOF, exit), by run() (a
 * send found the socket closed) and by cancel; idempotent. */
static void conn_lost(struct privsep *ps, struct conn *c)
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
        for (struct pending **pp = &ps->pending; *pp;) {
                struct pending *p = *pp;

                if (p->gen != c->gen || p->done) {
                        pp = &p->next;
                } else if (!p->resp) {
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

/* Sends one message before deadline (CLOCK_MONOTONIC, µs). Returns 0 or -errno. */
static int send_until(int fd, const void *msg, size_t len, usec_t deadline)
{
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};

                if (send(fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len)
                        return 0;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return errno == EPIPE ? -ECONNRESET : -errno;
                if (now_monotonic() >= deadline)
                        return -ETIMEDOUT;
                (void)poll(&p, 1, ms_until(deadline));
        }
}

static int privsep_run(struct devio *io, const struct devio_request *req, usec_t timeout,
                       struct devio_response *resp)
{
        struct privsep *ps = (struct privsep *)io;
        uint8_t msg[DEVIO_PROTO_REQUEST_SIZE];
        struct pending *p;
        struct conn *c;
        usec_t deadline, now = now_monotonic();
        int r, len;

        if (!resp || devio_request_valid(req) < 0)
                return -EINVAL;
        deadline = timeout >= USEC_INFINITY - now ? USEC_INFINITY : now + timeout;
        p = xcalloc(1, sizeof *p);
        strscpy(p->name, req->name, sizeof p->name);
        p->resp = resp;

        pthread_mutex_lock(&ps->lock);
        c = ps->conn;
        if (ps->closing || !c || c->lost) {
                /* No helper right now: fail fast, a new one may come later. */
                pthread_mutex_unlock(&ps->lock);
                free(p);
                return -ECONNRESET;
        }
        if (pending_by_name(ps, req->name)) {
                pthread_mutex_unlock(&ps->lock);
                free(p);
                return -EBUSY;
        }
        c->refs++; /* c->fd stays open (and not reused) until the send is over */
        p->gen = c->gen;
        p->id = ++ps->next_id;
        p->next = ps->pending;
        ps->pending = p;
        ps->stats.inflight++;
        ps->stats.requests++;
        pthread_mutex_unlock(&ps->lock);

        len = devio_proto_encode_request(p->id, req, msg, sizeof msg);
        r = len < 0 ? len : send_until(c->fd, msg, (size_t)len, deadline);

        pthread_mutex_lock(&ps->lock);
        if (r == -ECONNRESET) {
                /* The client thread may not have seen the EOF yet: helper_up goes false now. */
                conn_lost(ps, c);
                wake_thread(ps);
        }
        conn_unref(c);
        if (r < 0) {
                pending_unlink(ps, p);
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

/* Hands one message from helper c to its waiting caller. Called with the lock held. */
static void deliver(struct privsep *ps, struct conn *c, const uint8_t *buf, size_t len)
{
        struct devio_proto_hdr hdr;
        struct pending *p;

        if (devio_proto_decode_header(buf, len, &hdr) < 0 || hdr.type != DEVIO_PROTO_RESPONSE) {
                ps->stats.dropped++;
                return;
        }
        p = pending_by_id(ps, hdr.id);
        if (!p || p->done || p->gen != c->gen) {
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

/* Reads one message of helper c without blocking. Returns 1 when one was handled, 0 when there
 * was none, -ECONNRESET when the helper closed its end or the socket failed. */
static int receive_one(struct privsep *ps, struct conn *c, uint8_t *buf)
{
        struct iovec iov = {.iov_base = buf, .iov_len = DEVIO_PROTO_RESPONSE_MAX};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n = recvmsg(c->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

        if (n == 0)
                return -ECONNRESET;
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -ECONNRESET;
        pthread_mutex_lock(&ps->lock);
        if (m.msg_flags & MSG_TRUNC)
                ps->stats.dropped++;
        else
                deliver(ps, c, buf, (size_t)n);
        pthread_mutex_unlock(&ps->lock);
        return 1;
}

/* Empties the eventfd. Returns true when the client is closing. */
static bool woken(struct privsep *ps)
{
        uint64_t v;
        bool closing;

        (void)!read(ps->wake, &v, sizeof v);
        pthread_mutex_lock(&ps->lock);
        closing = ps->closing;
        pthread_mutex_unlock(&ps->lock);
        return closing;
}

/* The zygote is gone (EOF or an error on its socket): no helper can be started any more. */
static void zygote_lost(struct privsep *ps)
{
        char buf[32];
        bool closing;
        int st;

        if (ps->zfd < 0)
                return;
        close(ps->zfd);
        ps->zfd = -1;
        st = reap_child(ps->zpid);
        ps->zpid = 0;
        pthread_mutex_lock(&ps->lock);
        ps->stats.zygote_up = false;
        ps->stats.zygote_pid = 0;
        closing = ps->closing;
        pthread_mutex_unlock(&ps->lock);
        if (!closing)
                log_error("privsep: the zygote is gone; a helper that dies now stays down until "
                          "diskpulse restarts",
                          "status", describe_status(st, buf, sizeof buf));
}

/* Reads one SPAWNED from the zygote without blocking. Returns 0 with *ret_status, *ret_pid and
 * *ret_fd (the helper's socket, or -1 with a failure status); -EAGAIN when there is none;
 * -EBADMSG for a message that is not a SPAWNED (its descriptors closed, *ret_pid 0); -ENOTCONN
 * when the zygote is gone (zygote_lost() done). */
static int zygote_recv(struct privsep *ps, int *ret_status, pid_t *ret_pid, int *ret_fd)
{
        uint8_t buf[DEVIO_PROTO_CTL_SIZE + 1];
        union {
                char buf[CMSG_SPACE(4 * sizeof(int))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = cbuf.buf,
                           .msg_controllen = sizeof cbuf.buf};
        int fds[4], nfds = 0, status, r;
        int32_t pid;
        ssize_t n;

        *ret_fd = -1;
        *ret_pid = 0;
        if (ps->zfd < 0)
                return -ENOTCONN;
        n = recvmsg(ps->zfd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return -EAGAIN;
        if (n <= 0) {
                zygote_lost(ps); /* EOF: it never sends an empty message */
                return -ENOTCONN;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
                size_t k;

                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;

                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                        if (nfds < 4)
                                fds[nfds++] = fd;
                        else
                                close(fd);
                }
        }
        r = devio_proto_decode_spawned(buf, (size_t)n, &status, &pid);
        if (r < 0 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || nfds != (status == 0 ? 1 : 0)) {
                if (r == 0)
                        *ret_pid = pid; /* a helper we will not use: the caller reaps it */
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return -EBADMSG;
        }
        *ret_status = status;
        *ret_pid = pid;
        *ret_fd = nfds ? fds[0] : -1;
        return 0;
}

/* Takes whatever the zygote sent that nobody waits for (an answer that came after its SPAWN timed
 * out): those helpers are not wanted. Also notices the zygote's EOF. */
static void zygote_drain(struct privsep *ps)
{
        for (;;) {
                int status, fd;
                pid_t pid;
                int r = zygote_recv(ps, &status, &pid, &fd);

                if (r == -EAGAIN || r == -ENOTCONN)
                        return;
                if (fd >= 0)
                        close(fd); /* the helper sees EOF and exits */
                if (pid > 0)
                        (void)reap_child(pid);
        }
}

/* Waits until fd is readable, deadline passes, or the client is closing. Returns 1, 0 (timeout)
 * or -ECANCELED. */
static int wait_readable(struct privsep *ps, int fd, usec_t deadline)
{
        for (;;) {
                struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                                      {.fd = ps->wake, .events = POLLIN}};
                int r = poll(p, 2, ms_until(deadline));

                if (r < 0 && errno != EINTR)
                        return 0;
                if (r > 0 && p[1].revents && woken(ps))
                        return -ECANCELED;
                if (r > 0 && p[0].revents)
                        return 1;
                if (r == 0)
                        return 0;
        }
}

/* Waits up to deadline for the helper's HELLO. Returns 0, -ECANCELED or -EIO (it exited, said
 * something else, or nothing). */
static int wait_hello(struct privsep *ps, int fd, usec_t deadline)
{
        uint8_t buf[DEVIO_PROTO_HDR_SIZE + 1];
        struct devio_proto_hdr hdr;
        ssize_t n;
        int r = wait_readable(ps, fd, deadline);

        if (r <= 0)
                return r == -ECANCELED ? r : -EIO;
        n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0 || devio_proto_decode_header(buf, (size_t)n, &hdr) < 0 ||
            hdr.type != DEVIO_PROTO_HELLO)
                return -EIO;
        return 0;
}

/* Asks the zygote for a helper and waits for its socket and its HELLO (up to SPAWN_TIMEOUT
 * each). Returns 0 and *ret (not installed yet), -ENOTCONN when the zygote is gone, -ECANCELED
 * when the client is closing, or another -errno. Without the lock: the client thread, or
 * privsep_start() before that thread exists. */
static int spawn_helper(struct privsep *ps, struct conn **ret)
{
        uint8_t msg[DEVIO_PROTO_CTL_SIZE];
        struct conn *c;
        int len, r, status, fd;
        pid_t pid;

        zygote_drain(ps);
        if (ps->zfd < 0)
                return -ENOTCONN;
        len = devio_proto_encode_spawn(msg, sizeof msg);
        if (len < 0)
                return len;
        if (send(ps->zfd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) != len) {
                r = -errno;
                if (r == -EPIPE || r == -ECONNRESET) {
                        zygote_lost(ps);
                        return -ENOTCONN;
                }
                return r;
        }
        r = wait_readable(ps, ps->zfd, now_monotonic() + SPAWN_TIMEOUT);
        if (r <= 0)
                return r == 0 ? -ETIMEDOUT : r; /* a late answer is drained next time */
        r = zygote_recv(ps, &status, &pid, &fd);
        if (r == -EAGAIN)
                return -EIO;
        if (r < 0) {
                (void)reap_child(pid);
                return r == -ENOTCONN ? r : -EIO;
        }
        if (status < 0)
                return status;

        c = xcalloc(1, sizeof *c);
        c->fd = fd;
        c->pid = pid;
        c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (c->pidfd >= 0)
                (void)fcntl(c->pidfd, F_SETFD, FD_CLOEXEC);
        r = wait_hello(ps, fd, now_monotonic() + SPAWN_TIMEOUT);
        if (r < 0) {
                close(fd);
                if (c->pidfd >= 0)
                        close(c->pidfd);
                (void)reap_child(pid);
                free(c);
                return r;
        }
        c->started = now_monotonic();
        *ret = c;
        return 0;
}

/* Makes c the current helper. Called with the lock held. */
static void conn_install(struct privsep *ps, struct conn *c, bool restart)
{
        c->refs = 1; /* the client thread's */
        c->gen = ++ps->gen;
        ps->conn = c;
        ps->stats.helper_up = true;
        ps->stats.helper_pid = c->pid;
        if (restart)
                ps->stats.helper_restarts++;
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
                        if (woken(ps))
                                return false;
                        pthread_mutex_lock(&ps->lock);
                        lost = c->lost; /* by run() */
                        pthread_mutex_unlock(&ps->lock);
                        if (lost)
                                return true;
                }
                if (p[3].revents)
                        zygote_drain(ps);
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
        conn_lost(ps, c);
        closing = ps->closing; /* cancel's shutdown() may be the EOF we saw */
        pthread_mutex_unlock(&ps->lock);
        return !closing;
}

/* Collects lost helper c and lets it go. */
static void retire(struct privsep *ps, struct conn *c)
{
        char st[32], pid[16], wait[24];
        int status = reap_child(c->pid);
        usec_t in, now = now_monotonic();

        snprintf(pid, sizeof pid, "%d", (int)c->pid);
        pthread_mutex_lock(&ps->lock);
        if (ps->conn == c)
                ps->conn = NULL;
        conn_unref(c); /* c may be gone now */
        in = ps->next_restart > now ? ps->next_restart - now : 0;
        pthread_mutex_unlock(&ps->lock);
        snprintf(wait, sizeof wait, "%.3fs", (double)in / (double)USEC_PER_SEC);
        /* Exit status 0: it was told to stop (SIGTERM, as when systemd stops the whole cgroup);
         * anything else is a crash or a kill. */
        log_msg(status == 0 ? LOG_LEVEL_INFO : LOG_LEVEL_WARN, "privsep: the helper is gone", "pid",
                pid, "status", describe_status(status, st, sizeof st), "restart_in",
                ps->zfd >= 0 ? wait : "never (no zygote)", NULL);
}

/* One attempt to replace the helper; schedules the next one when it fails. */
static void restart(struct privsep *ps)
{
        struct conn *c = NULL;
        char buf[24], pid[16];
        int r = spawn_helper(ps, &c);
        usec_t wait;

        pthread_mutex_lock(&ps->lock);
        if (r == 0 && ps->closing) {
                pthread_mutex_unlock(&ps->lock);
                close(c->fd);
                if (c->pidfd >= 0)
                        close(c->pidfd);
                (void)reap_child(c->pid);
                free(c);
                return;
        }
        /* A new helper that dies soon waits longer; so does the next attempt after a failure. */
        ps->delay = doubled(ps, ps->delay);
        if (r == 0)
                conn_install(ps, c, true);
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

/* The client thread: dispatches the helper's answers by id; when the helper is gone, reaps it
 * and, after the backoff, asks the zygote for a new one. Runs until the client closes. */
static void *client_thread(void *arg)
{
        struct privsep *ps = arg;
        uint8_t *buf = xmalloc(DEVIO_PROTO_RESPONSE_MAX);

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
                        int r = poll(p, 2, ps->zfd < 0 ? -1 : ms_until(next));

                        if (r > 0 && p[0].revents && woken(ps))
                                break;
                        if (r > 0 && p[1].revents)
                                zygote_drain(ps);
                        continue;
                }
                restart(ps);
        }
        free(buf);
        return NULL;
}

/* Ends the helper (if any), every helper the zygote still answers with, and the zygote: EOF on
 * their sockets first, then up to STOP_TIMEOUT for them to exit, then SIGKILL. The client thread
 * does not run. */
static void stop_children(struct privsep *ps)
{
        usec_t deadline = now_monotonic() + STOP_TIMEOUT;
        pid_t pids[8];
        size_t n = 0;

        if (ps->conn) {
                (void)shutdown(ps->conn->fd, SHUT_RDWR);
                pids[n++] = ps->conn->pid;
        }
        if (ps->zfd >= 0) {
                /* The zygote answers the SPAWN it may have been sent, then sees EOF and exits. */
                (void)shutdown(ps->zfd, SHUT_WR);
                for (;;) {
                        struct pollfd p = {.fd = ps->zfd, .events = POLLIN};
                        int status, fd, r;
                        pid_t pid;

                        r = poll(&p, 1, ms_until(deadline));
                        if (r < 0 && errno == EINTR)
                                continue;
                        if (r <= 0)
                                break;
                        r = zygote_recv(ps, &status, &pid, &fd);
                        if (r == -ENOTCONN)
                                break;
                        if (fd >= 0)
                                close(fd);
                        if (pid > 0 && n < sizeof pids / sizeof pids[0] - 1)
                                pids[n++] = pid;
                        else if (pid > 0)
                                (void)reap_child(pid);
                }
                if (ps->zfd >= 0)
                        close(ps->zfd);
                ps->zfd = -1;
        }
        if (ps->zpid > 0)
                pids[n++] = ps->zpid;
        ps->zpid = 0;
        while (n > 0) {
                for (size_t i = 0; i < n;) {
                        pid_t r = waitpid(pids[i], NULL, WNOHANG);

                        if (r == pids[i] || (r < 0 && errno != EINTR))
                                pids[i] = pids[--n];
                        else
                                i++;
                }
                if (n == 0 || now_monotonic() >= deadline)
                        break;
                (void)usleep(2000);
        }
        for (size_t i = 0; i < n; i++)
                (void)reap_child(pids[i]);
}

static void privsep_cancel(struct devio *io)
{
        struct privsep *ps = (struct privsep *)io;

        pthread_mutex_lock(&ps->lock);
        ps->closing = true;
        if (ps->conn) {
                /* Wakes every waiter; the helper sees EOF and begins to exit. */
                conn_lost(ps, ps->conn);
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
        stop_children(ps);
        if (ps->conn) {
                ps->conn->refs = 1;
                conn_unref(ps->conn);
                ps->conn = NULL;
        }
        while (ps->pending) {
                struct pending *p = ps->pending;
                ps->pending = p->next;
                free(p);
        }
        if (ps->wake >= 0)
                close(ps->wake);
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
        struct conn *c = NULL;
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
                privsep_zygote_main(sv[1], cfg);
        }
        close(sv[1]);

        ps = xcalloc(1, sizeof *ps);
        ps->io.ops = &privsep_ops;
        ps->zfd = sv[0];
        ps->zpid = pid;
        ps->delay_min = cfg->restart_delay ? cfg->restart_delay : PRIVSEP_RESTART_DELAY_DEFAULT;
        ps->delay_max = cfg->restart_max ? cfg->restart_max : PRIVSEP_RESTART_MAX_DEFAULT;
        if (ps->delay_max < ps->delay_min)
                ps->delay_max = ps->delay_min;
        ps->delay = ps->delay_min;
        ps->stats.zygote_up = true;
        ps->stats.zygote_pid = pid;
        pthread_mutex_init(&ps->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&ps->cond, &ca);
        pthread_condattr_destroy(&ca);
        ps->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ps->wake < 0) {
                r = -errno;
                privsep_free(&ps->io);
                return r;
        }

        r = spawn_helper(ps, &c);
        if (r < 0) {
                log_errno(LOG_LEVEL_DEBUG, r, "privsep: the first helper did not start", NULL);
                privsep_free(&ps->io);
                return -EIO;
        }
        conn_install(ps, c, false);
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
        r = -pthread_create(&ps->thread, NULL, client_thread, ps);
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
