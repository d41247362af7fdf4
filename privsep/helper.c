/* The helper process (the supervisor "diskpulse-priv") and its per-request workers
 * ("diskpulse-io"): validates each request - device commands, and the privileged functions of
 * the table fixed in its memory - forks a worker that runs it with only the capabilities it
 * needs, answers for a worker that died or ran too long. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devio_linux.h"
#include "privsep_proto.h"
#include "fdpass.h"
#include "log.h"
#include "privsep_internal.h"

struct worker {
        pid_t pid; /* 0: free slot */
        uint64_t id;
        usec_t deadline;
        bool killed; /* by us, for running past worker_timeout */
        bool priv;   /* runs a privileged function: answered with PRIV_ANSWER */
};

struct helper {
        int fd;  /* the socket */
        int sfd; /* signalfd: SIGCHLD, SIGTERM */
        pid_t pid;
        char dev_dir[PATH_MAX];
        privsep_exec_fn exec;
        bool no_devices; /* device requests refused (-EPERM): no capability kept for them */
        const struct privsep_function *functions; /* the table, in this process's memory */
        size_t n_functions;
        unsigned max;
        usec_t timeout;
        struct worker *workers; /* max slots */
        unsigned running;
};

/* Sends a response of the helper's own (an error status): never blocks the helper. If the
 * daemon's receive queue is full the answer is lost and the caller times out. */
static void helper_reply(struct helper *h, uint64_t id, int status)
{
        uint8_t msg[PRIVSEP_PROTO_HDR_SIZE];
        int len = privsep_proto_encode_response(id, status, NULL, msg, sizeof msg), r;

        if (len > 0 && (r = privsep_send_fds(h->fd, msg, (size_t)len, NULL, 0, MSG_DONTWAIT)) < 0)
                log_debug("privsep: answer lost", "error", strerror(-r));
}

/* The helper's own answer to a PRIV (an error status, with a message): never blocks. */
static void helper_reply_priv(struct helper *h, uint64_t id, int status, const char *err)
{
        uint8_t msg[PRIVSEP_PROTO_PRIV_ANSWER_MAX];
        int len = privsep_proto_encode_priv_answer(id, status, 0, err, msg, sizeof msg), r;

        if (len > 0 && (r = privsep_send_fds(h->fd, msg, (size_t)len, NULL, 0, MSG_DONTWAIT)) < 0)
                log_debug("privsep: answer lost", "error", strerror(-r));
}

int privsep_functions_valid(const struct privsep_config *cfg)
{
        if (cfg->n_functions > PRIVSEP_FUNCTIONS_MAX || (cfg->n_functions && !cfg->functions))
                return -EINVAL;
        for (size_t i = 0; i < cfg->n_functions; i++) {
                const struct privsep_function *f = &cfg->functions[i];
                size_t n = f->name ? strnlen(f->name, DEVIO_NAME_MAX) : 0;

                if (!f->fn || n == 0 || n >= DEVIO_NAME_MAX)
                        return -EINVAL;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(cfg->functions[j].name, f->name) == 0)
                                return -EINVAL;
        }
        return 0;
}

static privsep_function_fn function_by_name(const struct helper *h, const char *name)
{
        for (size_t i = 0; i < h->n_functions; i++)
                if (strcmp(h->functions[i].name, name) == 0)
                        return h->functions[i].fn;
        return NULL;
}

/* What every worker does first: the process's state, then only the capabilities keep. */
static void worker_setup(struct helper *h, uint64_t keep)
{
        sigset_t none;

        privsep_child_signals();
        (void)signal(SIGPIPE, SIG_IGN);
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != h->pid)
                _exit(3);
        (void)prctl(PR_SET_NAME, "diskpulse-io", 0, 0, 0);
        close(h->sfd);
        if (privsep_caps_restrict(keep, false) < 0)
                _exit(4);
}

/* The worker of a privileged function: runs it, sends its result with its descriptors in one
 * message (fdpass.h), exits 0 only if it was sent. A function that breaks the rules (more than
 * DEVIO_MAX_FDS descriptors, one that is not open, a result that is not 0 or -errno) is
 * answered -EIO and nothing it opened is sent; its descriptors end with this process. */
static _Noreturn void priv_worker_main(struct helper *h, uint64_t id, privsep_function_fn fn,
                                       const struct privsep_proto_priv *pr)
{
        uint8_t msg[PRIVSEP_PROTO_PRIV_ANSWER_MAX];
        char err[DEVIO_PRIV_ERR_MAX] = "";
        int fds[DEVIO_MAX_FDS] = {-1, -1, -1, -1};
        size_t nfds = 0;
        int r, len;

        _Static_assert(DEVIO_MAX_FDS == 4 && DEVIO_MAX_FDS <= PRIVSEP_FDPASS_MAX, "fds[] above");
        worker_setup(h, privsep_function_caps());
        r = fn(pr->arg, pr->len, fds, &nfds, err, sizeof err);
        err[sizeof err - 1] = '\0';
        if (r > 0 || r < -4095) {
                snprintf(err, sizeof err, "%s: returned %d, not 0 or -errno", pr->name, r);
                r = -EIO;
        } else if (nfds > DEVIO_MAX_FDS) {
                snprintf(err, sizeof err, "%s: returned %zu descriptors, at most %d", pr->name,
                         nfds, DEVIO_MAX_FDS);
                r = -EIO;
        } else if (r == 0) {
                for (size_t i = 0; i < nfds; i++)
                        if (fds[i] < 0 || fcntl(fds[i], F_GETFD) < 0) {
                                snprintf(err, sizeof err, "%s: descriptor %zu is not open",
                                         pr->name, i);
                                r = -EIO;
                                break;
                        }
        } else if (!err[0])
                snprintf(err, sizeof err, "%s: %s", pr->name, strerror(-r));
        if (r < 0)
                nfds = 0;
        len = privsep_proto_encode_priv_answer(id, r, nfds, err, msg, sizeof msg);
        if (len < 0)
                _exit(6);
        /* Blocking, as the device worker's answer. */
        _exit(privsep_send_fds(h->fd, msg, (size_t)len, fds, nfds, 0) == 0 ? 0 : 1);
}

/* The worker: runs one request, writes the answer itself, exits 0 only if it was sent. */
static _Noreturn void worker_main(struct helper *h, uint64_t id, const struct devio_request *req)
{
        struct devio_response *resp;
        uint8_t *msg;
        int r, len;

        worker_setup(h, privsep_worker_caps(req->kind));

        resp = calloc(1, sizeof *resp);
        msg = malloc(PRIVSEP_PROTO_RESPONSE_MAX);
        if (!resp || !msg)
                _exit(5);
        r = h->exec(h->dev_dir, req, resp);
        if (r > 0 || r < -4095 || (r == 0 && resp->n > DEVIO_MAX_CMDS))
                r = -EIO;
        len = privsep_proto_encode_response(id, r, resp, msg, PRIVSEP_PROTO_RESPONSE_MAX);
        if (len < 0)
                _exit(6);
        /* Blocking: the daemon reads continuously; a worker stuck here is killed at its
         * deadline like any other. */
        r = privsep_send_fds(h->fd, msg, (size_t)len, NULL, 0, 0);
        /* freed although the process ends, so that leak checkers stay quiet */
        free(msg);
        free(resp);
        _exit(r == 0 ? 0 : 1);
}

static struct worker *worker_by_pid(struct helper *h, pid_t pid)
{
        for (unsigned i = 0; i < h->max; i++)
                if (h->workers[i].pid == pid)
                        return &h->workers[i];
        return NULL;
}

/* Starts a worker for a device request (req) or a privileged function (fn with pr). */
static void helper_start_worker(struct helper *h, uint64_t id, const struct devio_request *req,
                                privsep_function_fn fn, const struct privsep_proto_priv *pr)
{
        struct worker *w;
        pid_t pid;

        if (h->running >= h->max) {
                if (fn)
                        helper_reply_priv(h, id, -EAGAIN, "too many requests in flight");
                else
                        helper_reply(h, id, -EAGAIN);
                return;
        }
        w = worker_by_pid(h, 0);
        pid = fork();
        if (pid < 0) {
                if (fn)
                        helper_reply_priv(h, id, -errno, "cannot start a worker");
                else
                        helper_reply(h, id, -errno);
                return;
        }
        if (pid == 0) {
                if (fn)
                        priv_worker_main(h, id, fn, pr);
                worker_main(h, id, req);
        }
        *w = (struct worker){
            .pid = pid, .id = id, .deadline = now_monotonic() + h->timeout, .priv = fn != NULL};
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
                if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && w->priv)
                        helper_reply_priv(h, w->id, w->killed ? -ETIMEDOUT : -EIO,
                                          w->killed ? "the worker ran too long and was killed"
                                                    : "the worker died without answering");
                else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
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
        /* Room for a PRIV with an argument too long, so that it is answered -EINVAL. */
        uint8_t buf[PRIVSEP_PROTO_PRIV_MAX + DEVIO_PRIV_ARG_MAX];
        struct privsep_proto_hdr hdr;
        struct devio_request req;
        struct privsep_proto_priv pr;
        privsep_function_fn fn;
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
        if (privsep_proto_decode_header(buf, n, &hdr) < 0 ||
            (hdr.type != PRIVSEP_PROTO_REQUEST && hdr.type != PRIVSEP_PROTO_PRIV)) {
                log_debug("privsep: malformed message dropped");
                return 0;
        }
        if (hdr.type == PRIVSEP_PROTO_PRIV) {
                r = privsep_proto_decode_priv(&hdr, buf, n, &pr);
                if (r == -EINVAL)
                        helper_reply_priv(h, hdr.id, -EINVAL,
                                          "malformed name or argument too long");
                if (r < 0)
                        return 0;
                fn = function_by_name(h, pr.name);
                if (!fn)
                        helper_reply_priv(h, hdr.id, -ENOENT, "no such privileged function");
                else
                        helper_start_worker(h, hdr.id, NULL, fn, &pr);
                return 0;
        }
        r = privsep_proto_decode_request(&hdr, buf, n, &req);
        if (r == -EINVAL)
                helper_reply(h, hdr.id, -EINVAL);
        else if (r == 0 && h->no_devices)
                helper_reply(h, hdr.id, -EPERM); /* started without the capabilities for it */
        else if (r == 0)
                helper_start_worker(h, hdr.id, &req, NULL, NULL);
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
        h.no_devices = cfg->no_devices;
        if (privsep_functions_valid(cfg) == 0) {
                h.functions = cfg->functions;
                h.n_functions = cfg->n_functions;
        }
        h.max = cfg->max_workers ? cfg->max_workers : PRIVSEP_MAX_WORKERS_DEFAULT;
        h.timeout = cfg->worker_timeout ? cfg->worker_timeout : PRIVSEP_WORKER_TIMEOUT_DEFAULT;
        if (!cfg->dev_dir || !strscpy(h.dev_dir, cfg->dev_dir, sizeof h.dev_dir))
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
        r = privsep_caps_restrict(privsep_helper_caps(cfg), true);
        if (r < 0) {
                log_debug("privsep: cannot drop capabilities", "error", strerror(-r));
                _exit(2);
        }
        h.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (h.sfd < 0)
                _exit(2);
        {
                uint8_t hello[PRIVSEP_PROTO_HDR_SIZE];
                int len = privsep_proto_encode_hello(hello, sizeof hello);

                if (len < 0 || privsep_send_fds(h.fd, hello, (size_t)len, NULL, 0, 0) < 0)
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
