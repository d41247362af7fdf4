/* The helper process (the supervisor "diskpulse-priv") and its per-request workers
 * ("diskpulse-io"): validates each request, forks a worker that runs it with only the
 * capabilities its kind needs, answers for a worker that died or ran too long. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devio_linux.h"
#include "devio_proto.h"
#include "fdpass.h"
#include "log.h"
#include "privsep_internal.h"

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
        int len = privsep_proto_encode_response(id, status, NULL, msg, sizeof msg);

        if (len > 0 && send(h->fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                log_debug("privsep: answer lost", "error", strerror(errno));
}

/* The worker: runs one request, writes the answer itself, exits 0 only if it was sent. */
static _Noreturn void worker_main(struct helper *h, uint64_t id, const struct devio_request *req)
{
        struct devio_response *resp;
        uint8_t *msg;
        sigset_t none;
        int r, len;

        privsep_child_signals();
        (void)signal(SIGPIPE, SIG_IGN);
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != h->pid)
                _exit(3);
        (void)prctl(PR_SET_NAME, "diskpulse-io", 0, 0, 0);
        close(h->sfd);
        if (privsep_caps_restrict(privsep_worker_caps(req->kind), false) < 0)
                _exit(4);

        resp = calloc(1, sizeof *resp);
        msg = malloc(DEVIO_PROTO_RESPONSE_MAX);
        if (!resp || !msg)
                _exit(5);
        r = h->exec(h->dev_dir, req, resp);
        if (r > 0 || r < -4095 || (r == 0 && resp->n > DEVIO_MAX_CMDS))
                r = -EIO;
        len = privsep_proto_encode_response(id, r, resp, msg, DEVIO_PROTO_RESPONSE_MAX);
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
        struct devio_proto_hdr hdr;
        struct devio_request req;
        size_t n;
        /* No descriptor wanted: one sent along is closed by the kernel. */
        int r = privsep_recv_fd(h->fd, buf, sizeof buf, MSG_DONTWAIT, &n, NULL);

        if (r == -EMSGSIZE) {
                log_debug("privsep: oversized message dropped");
                return 0;
        }
        if (r < 0)
                return r == -EAGAIN || r == -EINTR ? 0 : -ECONNRESET;
        if (n == 0)
                return hup ? -ECONNRESET : 0;
        if (privsep_proto_decode_header(buf, n, &hdr) < 0 || hdr.type != DEVIO_PROTO_REQUEST) {
                log_debug("privsep: malformed message dropped");
                return 0;
        }
        r = privsep_proto_decode_request(&hdr, buf, n, &req);
        if (r == -EINVAL)
                helper_reply(h, hdr.id, -EINVAL);
        else if (r == 0)
                helper_start_worker(h, hdr.id, &req);
        return 0;
}

_Noreturn void privsep_helper_main(int fd, const struct privsep_config *cfg)
{
        struct helper h = {.sfd = -1};
        sigset_t mask;
        int r;

        (void)prctl(PR_SET_NAME, "diskpulse-priv", 0, 0, 0);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        h.pid = getpid();
        h.exec = cfg->exec ? cfg->exec : privsep_devio_exec;
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
        privsep_child_signals();
        (void)signal(SIGINT, SIG_IGN);
        (void)signal(SIGHUP, SIG_IGN);
        (void)signal(SIGPIPE, SIG_IGN);
        (void)signal(SIGUSR1, SIG_IGN);
        (void)signal(SIGUSR2, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        (void)sigprocmask(SIG_SETMASK, &mask, NULL);

        h.fd = privsep_child_fds(fd);
        if (h.fd < 0)
                _exit(2);
        r = privsep_caps_restrict(privsep_helper_caps(), true);
        if (r < 0) {
                log_debug("privsep: cannot drop capabilities", "error", strerror(-r));
                _exit(2);
        }
        h.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (h.sfd < 0)
                _exit(2);
        {
                uint8_t hello[DEVIO_PROTO_HDR_SIZE];
                int len = privsep_proto_encode_hello(hello, sizeof hello);

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
