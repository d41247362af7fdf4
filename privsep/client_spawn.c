/* Helpers from the zygote, for the client: asking for one (SPAWN, then its socket and its HELLO),
 * reaping and describing the ones that ended, and stopping them all at the end. Above
 * client_conn.c (the state it fills in), below client_thread.c and client.c (which call it). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "privsep_proto.h"
#include "fdpass.h"
#include "log.h"
#include "privsep_internal.h"

#define SPAWN_TIMEOUT (5 * USEC_PER_SEC) /* for the zygote's answer, then again for HELLO */
#define STOP_TIMEOUT  (300 * USEC_PER_MSEC)

int privsep_reap_child(pid_t pid)
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

const char *privsep_describe_status(int st, char *buf, size_t size)
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
        st = privsep_reap_child(ps->zpid);
        ps->zpid = 0;
        pthread_mutex_lock(&ps->lock);
        ps->stats.zygote_up = false;
        ps->stats.zygote_pid = 0;
        closing = ps->closing;
        pthread_mutex_unlock(&ps->lock);
        if (!closing) {
                uint64_t one = 1;

                log_error("privsep: the zygote is gone; a helper that dies now stays down until "
                          "diskpulse restarts",
                          "status", privsep_describe_status(st, buf, sizeof buf));
                if (write(ps->lost, &one, sizeof one) < 0 && errno != EAGAIN)
                        log_errno(LOG_LEVEL_WARN, -errno,
                                  "privsep: cannot signal the zygote's loss", NULL);
        }
}

/* Reads one SPAWNED from the zygote without blocking. Returns 0 with *ret_status, *ret_pid and
 * *ret_fd (the helper's socket, or -1 with a failure status); -EAGAIN when there is none;
 * -EBADMSG for a message that is not a SPAWNED (its descriptors closed, *ret_pid 0); -ENOTCONN
 * when the zygote is gone (zygote_lost() done). */
static int zygote_recv(struct privsep *ps, int *ret_status, pid_t *ret_pid, int *ret_fd)
{
        uint8_t buf[PRIVSEP_PROTO_CTL_SIZE + 1];
        int status, fd, r, d;
        int32_t pid;
        size_t n;

        *ret_fd = -1;
        *ret_pid = 0;
        if (ps->zfd < 0)
                return -ENOTCONN;
        r = privsep_recv_fd(ps->zfd, buf, sizeof buf, MSG_DONTWAIT, &n, &fd);
        if (r == -EAGAIN || r == -EINTR)
                return -EAGAIN;
        if ((r < 0 && r != -EMSGSIZE && r != -EBADMSG) || (r == 0 && n == 0)) {
                zygote_lost(ps); /* EOF: it never sends an empty message */
                return -ENOTCONN;
        }
        d = privsep_proto_decode_spawned(buf, n, &status, &pid);
        if (r < 0 || d < 0 || (fd >= 0) != (status == 0)) {
                if (d == 0)
                        *ret_pid = pid; /* a helper we will not use: the caller reaps it */
                if (fd >= 0)
                        close(fd);
                return -EBADMSG;
        }
        *ret_status = status;
        *ret_pid = pid;
        *ret_fd = fd;
        return 0;
}

void privsep_zygote_drain(struct privsep *ps)
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
                        (void)privsep_reap_child(pid);
        }
}

/* Waits until fd is readable, deadline passes, or the client is closing. Returns 1, 0 (timeout)
 * or -ECANCELED. */
static int wait_readable(struct privsep *ps, int fd, usec_t deadline)
{
        for (;;) {
                struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                                      {.fd = ps->wake, .events = POLLIN}};
                int r = poll(p, 2, privsep_ms_until(deadline));

                if (r < 0 && errno != EINTR)
                        return 0;
                if (r > 0 && p[1].revents && privsep_woken(ps))
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
        uint8_t buf[PRIVSEP_PROTO_HDR_SIZE + 1];
        struct privsep_proto_hdr hdr;
        size_t n;
        int r = wait_readable(ps, fd, deadline);

        if (r <= 0)
                return r == -ECANCELED ? r : -EIO;
        r = privsep_recv_fds(fd, buf, sizeof buf, MSG_DONTWAIT, &n, NULL, 0, NULL);
        if (r < 0 || n == 0 || privsep_proto_decode_header(buf, n, &hdr) < 0 ||
            hdr.type != PRIVSEP_PROTO_HELLO)
                return -EIO;
        return 0;
}

int privsep_spawn_helper(struct privsep *ps, struct conn **ret)
{
        uint8_t msg[PRIVSEP_PROTO_CTL_SIZE];
        struct conn *c;
        int len, r, status, fd;
        pid_t pid;

        privsep_zygote_drain(ps);
        if (ps->zfd < 0)
                return -ENOTCONN;
        len = privsep_proto_encode_spawn(msg, sizeof msg);
        if (len < 0)
                return len;
        r = privsep_send_fds(ps->zfd, msg, (size_t)len, NULL, 0, MSG_DONTWAIT);
        if (r < 0) {
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
                (void)privsep_reap_child(pid);
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
                privsep_spawn_discard(c);
                return r;
        }
        c->started = now_monotonic();
        *ret = c;
        return 0;
}

void privsep_spawn_discard(struct conn *c)
{
        close(c->fd);
        if (c->pidfd >= 0)
                close(c->pidfd);
        (void)privsep_reap_child(c->pid);
        free(c);
}

void privsep_stop_children(struct privsep *ps)
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

                        r = poll(&p, 1, privsep_ms_until(deadline));
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
                                (void)privsep_reap_child(pid);
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
                (void)privsep_reap_child(pids[i]);
}
