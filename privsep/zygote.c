/* The zygote ("diskpulse-zyg"): holds the helper's capabilities (only those cfg needs) and nothing
 * else, and for each
 * SPAWN from the daemon starts a helper as the daemon's child (CLONE_PARENT), sending back its
 * socket and pid. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "privsep_proto.h"
#include "fdpass.h"
#include "privsep_internal.h"

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
        uint8_t msg[PRIVSEP_PROTO_CTL_SIZE];
        int len = privsep_proto_encode_spawned(status, (int32_t)pid, msg, sizeof msg);

        if (len < 0)
                return len;
        return privsep_send_fd(ctl, msg, (size_t)len, fd, 0);
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
        privsep_child_signals();
        for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
                (void)signal(ignored[i], SIG_IGN);
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        fd = privsep_child_fds(fd);
        if (fd < 0 || privsep_caps_restrict(privsep_helper_caps(cfg), true) < 0)
                _exit(2);

        for (;;) {
                uint8_t buf[PRIVSEP_PROTO_CTL_SIZE + 1];
                struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
                size_t n;
                int r;

                if (poll(&p, 1, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                /* No descriptor wanted: one sent along is closed by the kernel. */
                r = privsep_recv_fd(fd, buf, sizeof buf, MSG_DONTWAIT, &n, NULL);
                if (r == -EMSGSIZE)
                        continue;
                if (r < 0) {
                        if (r == -EAGAIN || r == -EINTR)
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
                if (privsep_proto_is_spawn(buf, n))
                        zygote_spawn(fd, cfg, daemon);
        }
        _exit(0);
}
