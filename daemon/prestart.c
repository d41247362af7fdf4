/* Start-up without capabilities for the parsers: a child without capabilities reads flags and
 * config file and hands the privileged parent a fixed-size message of facts (see prestart.h). */
#include "prestart.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

#include "privsep.h"

#define PRESTART_MAGIC 0x54535044u /* "DPST" read as little-endian bytes */

/* The child's answer: every string NUL-terminated inside its array, nothing else set. */
struct prestart_msg {
        uint32_t magic;
        uint32_t n_listen;
        uint8_t systemd_socket, once, log_level, log_format;
        uint8_t collector[REGISTRY_MAX]; /* what the helper keeps depends on them */
        char dev[PATH_MAX];
        char listen[PRESTART_LISTEN_MAX][PRESTART_LISTEN_LEN_MAX];
};

bool prestart_needed(void)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};

        if (syscall(SYS_capget, &h, d) < 0)
                return true; /* cannot tell: be careful */
        return d[0].permitted || d[1].permitted;
}

static bool copy_str(char *dst, size_t size, const char *src)
{
        size_t l = src ? strlen(src) : 0;

        if (l == 0 || l >= size)
                return false;
        memcpy(dst, src, l + 1);
        return true;
}

/* Sends the facts of o on fd. Returns the child's exit status: 0, or 2 for a value that does
 * not fit the message (said on stderr), 1 when it cannot be sent. */
static int answer(int fd, const struct dp_options *o)
{
        struct prestart_msg *m = calloc(1, sizeof *m);
        int st = 0;

        if (!m)
                return 1;
        if (o->n_listen > PRESTART_LISTEN_MAX) {
                fprintf(stderr, "diskpulse: --web.listen-address: at most %d addresses\n",
                        PRESTART_LISTEN_MAX);
                st = 2;
        }
        for (size_t i = 0; st == 0 && i < o->n_listen; i++)
                if (!copy_str(m->listen[i], sizeof m->listen[i], o->listen[i])) {
                        fprintf(stderr, "diskpulse: --web.listen-address=%s: at most %d bytes\n",
                                o->listen[i], PRESTART_LISTEN_LEN_MAX - 1);
                        st = 2;
                }
        if (st == 0 && !copy_str(m->dev, sizeof m->dev, o->dev)) {
                fprintf(stderr, "diskpulse: --path.dev: empty or too long\n");
                st = 2;
        }
        if (st == 0) {
                m->magic = PRESTART_MAGIC;
                m->n_listen = (uint32_t)o->n_listen;
                m->systemd_socket = o->systemd_socket;
                m->once = o->once;
                m->log_level = (uint8_t)o->log_level;
                m->log_format = (uint8_t)o->log_format;
                for (size_t i = 0; i < registry_count(); i++)
                        m->collector[i] = o->collector[i];
                if (send(fd, m, sizeof *m, MSG_NOSIGNAL) != (ssize_t)sizeof *m)
                        st = 1;
        }
        free(m);
        return st;
}

/* The child: no capability from here on; parses, answers, exits. */
static _Noreturn void child(int fd, prestart_front_fn front, void *ud)
{
        struct dp_options o;
        int st, r;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        /* Nothing but stdio and the answer's socket: not the sockets systemd passed. */
        if (fd > 3)
                (void)close_range(3, (unsigned)fd - 1, 0);
        (void)close_range((unsigned)fd + 1, ~0U, 0);
        r = privsep_drop_all();
        if (r < 0) {
                fprintf(stderr,
                        "diskpulse: cannot drop capabilities to read the configuration: %s\n",
                        strerror(-r));
                _exit(1);
        }
        memset(&o, 0, sizeof o);
        st = front(ud, &o);
        if (st < 0)
                st = answer(fd, &o);
        /* Freed although the process ends, so that leak checkers see nothing. */
        options_free(&o);
        fflush(stdout);
        _exit(st);
}

static bool str_ok(const char *s, size_t size)
{
        return s[0] != 0 && memchr(s, 0, size) != NULL;
}

/* Checks the child's message and turns it into *ret. Returns 0 or -EBADMSG. */
static int facts_from(const struct prestart_msg *m, struct dp_options *ret)
{
        struct dp_options o;

        if (m->magic != PRESTART_MAGIC || m->n_listen > PRESTART_LISTEN_MAX ||
            m->systemd_socket > 1 || m->once > 1 || m->log_level > LOG_LEVEL_ERROR ||
            m->log_format > LOG_FORMAT_JSON || !str_ok(m->dev, sizeof m->dev))
                return -EBADMSG;
        for (uint32_t i = 0; i < m->n_listen; i++)
                if (!str_ok(m->listen[i], sizeof m->listen[i]))
                        return -EBADMSG;
        for (size_t i = 0; i < registry_count(); i++)
                if (m->collector[i] > 1)
                        return -EBADMSG;
        memset(&o, 0, sizeof o);
        o.listen = xcalloc(m->n_listen + 1, sizeof *o.listen);
        for (uint32_t i = 0; i < m->n_listen; i++)
                o.listen[i] = xstrdup(m->listen[i]);
        o.n_listen = m->n_listen;
        o.dev = xstrdup(m->dev);
        o.systemd_socket = m->systemd_socket;
        o.once = m->once;
        o.log_level = (enum log_level)m->log_level;
        o.log_format = (enum log_format)m->log_format;
        for (size_t i = 0; i < registry_count(); i++)
                o.collector[i] = m->collector[i];
        *ret = o;
        return 0;
}

int prestart_run(prestart_front_fn front, void *ud, struct dp_options *ret)
{
        struct prestart_msg *m;
        int sv[2], st = 0, status = 1;
        ssize_t n;
        pid_t pid, w;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                fprintf(stderr, "diskpulse: socketpair: %s\n", strerror(errno));
                return 1;
        }
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0) {
                fprintf(stderr, "diskpulse: fork: %s\n", strerror(errno));
                close(sv[0]);
                close(sv[1]);
                return 1;
        }
        if (pid == 0) {
                close(sv[0]);
                child(sv[1], front, ud);
        }
        close(sv[1]);
        m = xcalloc(1, sizeof *m);
        /* One byte more than a message: a longer one is truncated, and refused. */
        do
                n = recv(sv[0], m, sizeof *m, MSG_TRUNC);
        while (n < 0 && errno == EINTR);
        close(sv[0]);
        do
                w = waitpid(pid, &st, 0);
        while (w < 0 && errno == EINTR);
        if (w == pid && WIFEXITED(st))
                status = WEXITSTATUS(st);
        /* Nothing sent: the child did it all (or failed and said why): its status. */
        if (n != 0) {
                if (n == (ssize_t)sizeof *m && status == 0 && facts_from(m, ret) == 0) {
                        status = -1;
                } else {
                        fprintf(stderr, "diskpulse: malformed answer from the configuration "
                                        "reader\n");
                        status = 1;
                }
        }
        free(m);
        return status;
}

int prestart_same(const struct dp_options *facts, const struct dp_options *o)
{
        /* the options marked OPT_PRESTART in the table; the log level and format, though sent,
         * are only the child's hint for the parent's first messages */
        return options_same(facts, o, OPT_PRESTART) ? 0 : -ESTALE;
}
