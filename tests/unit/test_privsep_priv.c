/* Unit tests of the privileged functions (devio_ops.privileged, privsep/): a table of functions
 * fixed when the zygote is forked, run by the real helper in a worker, their descriptors received
 * by the client (proved to be the same files by their content); every error path (an unknown
 * name, an argument too long, a crash, a timeout, too many descriptors, a lying helper) ends with
 * as many descriptors open in this process as before. Also the many-descriptor fdpass.c calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/open_fds.h"

#include "devio.h"
#include "privsep_proto.h"
#include "fdpass.h"
#include "privsep.h"
#include "util.h"

#define HANG_USEC (1500 * USEC_PER_MSEC)
#define TIMEOUT   (5 * USEC_PER_SEC)

/* ---- the functions, run in the helper's workers ---- */

/* A memfd holding "TAG:ARG" (the argument as text), or -1. */
static int memfd_with(const char *tag, const void *arg, size_t len)
{
        int fd = memfd_create(tag, 0); /* without MFD_CLOEXEC: the receiver adds it */

        if (fd < 0)
                return -1;
        if (write(fd, tag, strlen(tag)) != (ssize_t)strlen(tag) || write(fd, ":", 1) != 1 ||
            (len && write(fd, arg, len) != (ssize_t)len)) {
                close(fd);
                return -1;
        }
        return fd;
}

static int f_zero(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        (void)arg, (void)len, (void)fds, (void)err, (void)errsz;
        *nfds = 0;
        return 0;
}

static int fill(const char *const *tags, size_t n, const void *arg, size_t len, int fds[],
                size_t *nfds)
{
        for (size_t i = 0; i < n; i++) {
                fds[i] = memfd_with(tags[i], arg, len);
                if (fds[i] < 0)
                        return -errno;
                *nfds = i + 1;
        }
        return 0;
}

static int f_one(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        static const char *const tags[] = {"one"};

        (void)err, (void)errsz;
        return fill(tags, 1, arg, len, fds, nfds);
}

static int f_four(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        static const char *const tags[] = {"fd0", "fd1", "fd2", "fd3"};

        (void)err, (void)errsz;
        return fill(tags, 4, arg, len, fds, nfds);
}

/* Opens four, then claims a fifth. */
static int f_five(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        int r = f_four(arg, len, fds, nfds, err, errsz);

        *nfds = 5;
        return r;
}

/* -EPERM with a message, and two descriptors that must not be sent. */
static int f_eperm(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        static const char *const tags[] = {"x", "y"};

        (void)fill(tags, 2, arg, len, fds, nfds);
        snprintf(err, errsz, "not allowed: %.*s", (int)len, (const char *)arg);
        return -EPERM;
}

static int f_crash(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        (void)f_one(arg, len, fds, nfds, err, errsz);
        raise(SIGKILL);
        return 0;
}

/* Sleeps HANG_USEC, then answers with one descriptor (late, for a caller that gave up). */
static int f_hang(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        usleep(HANG_USEC);
        return f_one(arg, len, fds, nfds, err, errsz);
}

/* Claims a descriptor that is not open. */
static int f_badfd(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        (void)arg, (void)len, (void)err, (void)errsz;
        fds[0] = 1000;
        *nfds = 1;
        return 0;
}

/* A result that is neither 0 nor -errno. */
static int f_badret(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        (void)f_one(arg, len, fds, nfds, err, errsz);
        return 7;
}

static struct privsep_function table[] = {
    {"zero", f_zero}, {"one", f_one},     {"four", f_four},
    {"five", f_five}, {"eperm", f_eperm}, {"crash", f_crash},
    {"hang", f_hang}, {"badfd", f_badfd}, {"badret", f_badret},
};
#define N_TABLE (sizeof table / sizeof table[0])

/* ---- fixtures ---- */

struct fixture {
        struct devio *io;
};

static int start(void **state, usec_t worker_timeout, unsigned max_workers)
{
        struct fixture *f = calloc(1, sizeof *f);
        struct privsep_config cfg = {
            .dev_dir = "/nonexistent",
            .keep_privileges = true,
            .worker_timeout = worker_timeout,
            .max_workers = max_workers,
            .restart_delay = 60 * USEC_PER_SEC,
            .functions = table,
            .n_functions = N_TABLE,
        };

        if (!f || privsep_start(&cfg, &f->io) < 0)
                return -1;
        *state = f;
        return 0;
}

static int setup(void **state)
{
        return start(state, 0, 0);
}

static int setup_short_deadline(void **state)
{
        return start(state, 300 * USEC_PER_MSEC, 0);
}

static int setup_one_worker(void **state)
{
        return start(state, 0, 1);
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        bool clean;

        f->io->ops->free(f->io);
        clean = waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
        free(f);
        return clean ? 0 : -1;
}

static int call(struct devio *io, const char *name, const char *arg, usec_t timeout, int fds[],
                size_t *nfds, char *err, size_t errsz)
{
        return io->ops->privileged(io, name, arg, arg ? strlen(arg) : 0, timeout, fds, nfds, err,
                                   errsz);
}

/* The whole content of fd, from offset 0, as a string. */
static void assert_content(int fd, const char *want)
{
        char buf[512];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);

        assert_true(n >= 0);
        buf[n] = '\0';
        assert_string_equal(buf, want);
}

static bool wait_stat(struct devio *io, uint64_t (*get)(const struct privsep_stats *), uint64_t n)
{
        for (int i = 0; i < 500; i++) {
                struct privsep_stats st;

                assert_int_equal(privsep_stats(io, &st), 0);
                if (get(&st) >= n)
                        return true;
                usleep(10000);
        }
        return false;
}

/* ---- the calls ---- */

static void zero_fds(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS] = {-7, -7, -7, -7}, before = open_fd_count();
        size_t nfds = 99;
        char err[64] = "junk";

        assert_int_equal(call(io, "zero", "a", TIMEOUT, fds, &nfds, err, sizeof err), 0);
        assert_int_equal(nfds, 0);
        assert_string_equal(err, "");
        assert_int_equal(open_fd_count(), before);
}

static void one_fd(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS], before = open_fd_count();
        size_t nfds = 0;
        char err[64];

        assert_int_equal(call(io, "one", "hello", TIMEOUT, fds, &nfds, err, sizeof err), 0);
        assert_int_equal(nfds, 1);
        assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
        assert_content(fds[0], "one:hello");
        assert_int_equal(open_fd_count(), before + 1);
        close(fds[0]);
        assert_int_equal(open_fd_count(), before);
}

static void four_fds(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS], before = open_fd_count();
        size_t nfds = 0;
        char err[64], want[16];

        assert_int_equal(call(io, "four", "xyz", TIMEOUT, fds, &nfds, err, sizeof err), 0);
        assert_int_equal(nfds, 4);
        assert_int_equal(open_fd_count(), before + 4);
        for (int i = 0; i < 4; i++) {
                snprintf(want, sizeof want, "fd%d:xyz", i);
                assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
                assert_content(fds[i], want);
                close(fds[i]);
        }
        assert_int_equal(open_fd_count(), before);
}

/* The largest argument goes through whole; one byte more is refused before anything is sent. */
static void argument_limit(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        static char arg[DEVIO_PRIV_ARG_MAX + 2], want[DEVIO_PRIV_ARG_MAX + 8];
        int fds[DEVIO_MAX_FDS], before = open_fd_count();
        struct privsep_stats st;
        uint64_t requests;
        size_t nfds = 0;
        char err[128];

        memset(arg, 'a', DEVIO_PRIV_ARG_MAX);
        arg[DEVIO_PRIV_ARG_MAX - 1] = 'z';
        assert_int_equal(io->ops->privileged(io, "one", arg, DEVIO_PRIV_ARG_MAX, TIMEOUT, fds,
                                             &nfds, err, sizeof err),
                         0);
        assert_int_equal(nfds, 1);
        snprintf(want, sizeof want, "one:%.*s", DEVIO_PRIV_ARG_MAX, arg);
        assert_content(fds[0], want);
        close(fds[0]);

        assert_int_equal(privsep_stats(io, &st), 0);
        requests = st.requests;
        assert_int_equal(io->ops->privileged(io, "one", arg, DEVIO_PRIV_ARG_MAX + 1, TIMEOUT, fds,
                                             &nfds, err, sizeof err),
                         -EINVAL);
        assert_int_equal(nfds, 0);
        assert_true(strlen(err) > 0);
        /* names the helper could never have: empty, too long */
        assert_int_equal(call(io, "", "a", TIMEOUT, fds, &nfds, err, sizeof err), -EINVAL);
        assert_int_equal(
            call(io, "a-name-of-thirty-two-bytes-xxxxx", "a", TIMEOUT, fds, &nfds, err, sizeof err),
            -EINVAL);
        assert_int_equal(privsep_stats(io, &st), 0);
        assert_int_equal(st.requests, requests);
        assert_int_equal(open_fd_count(), before);
}

static void error_with_message(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS] = {-1, -1, -1, -1}, before = open_fd_count();
        size_t nfds = 99;
        char err[64];

        assert_int_equal(call(io, "eperm", "bpf", TIMEOUT, fds, &nfds, err, sizeof err), -EPERM);
        assert_string_equal(err, "not allowed: bpf");
        assert_int_equal(nfds, 0);
        assert_int_equal(open_fd_count(), before);
        /* a short err buffer gets the start of it, terminated */
        assert_int_equal(call(io, "eperm", "bpf", TIMEOUT, fds, &nfds, err, 5), -EPERM);
        assert_string_equal(err, "not ");
}

static void unknown_name(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS], before = open_fd_count();
        size_t nfds = 0;
        char err[64];

        assert_int_equal(call(io, "nosuch", NULL, TIMEOUT, fds, &nfds, err, sizeof err), -ENOENT);
        assert_true(strlen(err) > 0);
        assert_int_equal(nfds, 0);
        /* a device request's name is no function's */
        assert_int_equal(call(io, "sda", NULL, TIMEOUT, fds, &nfds, err, sizeof err), -ENOENT);
        assert_int_equal(open_fd_count(), before);
}

/* A worker that dies (after opening a descriptor) costs its call only: -EIO, nothing arrives,
 * the helper still answers. */
static void worker_crash(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS], before = open_fd_count();
        struct privsep_stats st;
        size_t nfds = 0;
        char err[64];

        assert_int_equal(call(io, "crash", "a", TIMEOUT, fds, &nfds, err, sizeof err), -EIO);
        assert_string_equal(err, "the worker died without answering");
        assert_int_equal(nfds, 0);
        assert_int_equal(privsep_stats(io, &st), 0);
        assert_true(st.helper_up);
        assert_int_equal(st.worker_failures, 1);
        assert_int_equal(open_fd_count(), before);
        assert_int_equal(call(io, "one", "b", TIMEOUT, fds, &nfds, err, sizeof err), 0);
        assert_int_equal(nfds, 1);
        close(fds[0]);
}

/* Five descriptors, a closed one, a result out of range: -EIO, nothing sent. */
static void broken_functions(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS], before = open_fd_count();
        size_t nfds = 0;
        char err[96];

        assert_int_equal(call(io, "five", "a", TIMEOUT, fds, &nfds, err, sizeof err), -EIO);
        assert_string_equal(err, "five: returned 5 descriptors, at most 4");
        assert_int_equal(nfds, 0);
        assert_int_equal(open_fd_count(), before);
        assert_int_equal(call(io, "badfd", "a", TIMEOUT, fds, &nfds, err, sizeof err), -EIO);
        assert_string_equal(err, "badfd: descriptor 0 is not open");
        assert_int_equal(call(io, "badret", "a", TIMEOUT, fds, &nfds, err, sizeof err), -EIO);
        assert_string_equal(err, "badret: returned 7, not 0 or -errno");
        assert_int_equal(nfds, 0);
        assert_int_equal(open_fd_count(), before);
}

static uint64_t late_of(const struct privsep_stats *st)
{
        return st->late_responses;
}

/* The caller gives up: -ETIMEDOUT; the answer that comes later has its descriptor closed. */
static void caller_timeout(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS], before = open_fd_count();
        struct privsep_stats st;
        size_t nfds = 0;
        char err[64];
        usec_t t0 = now_monotonic();

        assert_int_equal(call(io, "hang", "a", 200 * USEC_PER_MSEC, fds, &nfds, err, sizeof err),
                         -ETIMEDOUT);
        assert_true(now_monotonic() - t0 < HANG_USEC);
        assert_string_equal(err, "no answer within the timeout");
        assert_int_equal(nfds, 0);
        assert_int_equal(privsep_stats(io, &st), 0);
        assert_int_equal(st.timeouts, 1);
        assert_true(wait_stat(io, late_of, 1));
        assert_int_equal(privsep_stats(io, &st), 0);
        assert_int_equal(st.inflight, 0);
        assert_int_equal(open_fd_count(), before);
}

/* The worker runs past the helper's worker_timeout: killed, -ETIMEDOUT from the helper. */
static void worker_deadline(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS], before = open_fd_count();
        struct privsep_stats st;
        size_t nfds = 0;
        char err[64];

        assert_int_equal(call(io, "hang", "a", TIMEOUT, fds, &nfds, err, sizeof err), -ETIMEDOUT);
        assert_string_equal(err, "the worker ran too long and was killed");
        assert_int_equal(privsep_stats(io, &st), 0);
        assert_int_equal(st.timeouts, 0);
        assert_int_equal(st.worker_failures, 1);
        assert_int_equal(open_fd_count(), before);
}

struct bg {
        struct devio *io;
        const char *name;
        int r;
        int fds[DEVIO_MAX_FDS];
        size_t nfds;
        char err[64];
};

static void *bg_call(void *p)
{
        struct bg *b = p;

        b->r = call(b->io, b->name, "a", TIMEOUT, b->fds, &b->nfds, b->err, sizeof b->err);
        return NULL;
}

/* The same worker limit as device requests: with one worker busy, -EAGAIN at once. */
static void worker_limit(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        struct bg b = {.io = io, .name = "hang"};
        int fds[DEVIO_MAX_FDS];
        pthread_t th;
        size_t nfds = 0;
        char err[64];

        assert_int_equal(pthread_create(&th, NULL, bg_call, &b), 0);
        usleep(300000);
        assert_int_equal(call(io, "zero", "a", TIMEOUT, fds, &nfds, err, sizeof err), -EAGAIN);
        assert_string_equal(err, "too many requests in flight");
        pthread_join(th, NULL);
        assert_int_equal(b.r, 0);
        assert_int_equal(b.nfds, 1);
        close(b.fds[0]);
}

static uint64_t exits_of(const struct privsep_stats *st)
{
        return st->helper_exits;
}

/* True once the lost helper was collected (its descriptors closed). */
static bool wait_until_down(struct devio *io)
{
        struct privsep_stats st;

        if (!wait_stat(io, exits_of, 1))
                return false;
        usleep(100000); /* retire() closes them right after marking it lost */
        assert_int_equal(privsep_stats(io, &st), 0);
        return !st.helper_up;
}

/* The helper dies while a caller waits: -ECONNRESET. */
static void helper_lost(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        struct bg b = {.io = io, .name = "hang"};
        struct privsep_stats st;
        int before, fds[DEVIO_MAX_FDS];
        size_t nfds = 0;
        char err[64];
        pthread_t th;

        assert_int_equal(pthread_create(&th, NULL, bg_call, &b), 0);
        usleep(300000);
        assert_int_equal(privsep_stats(io, &st), 0);
        assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
        pthread_join(th, NULL);
        assert_int_equal(b.r, -ECONNRESET);
        assert_string_equal(b.err, "the privileged helper is gone");
        assert_int_equal(b.nfds, 0);
        /* while none runs: at once (the lost helper's socket and pidfd are closed by now) */
        assert_true(wait_until_down(io));
        before = open_fd_count();
        assert_int_equal(call(io, "zero", "a", TIMEOUT, fds, &nfds, err, sizeof err), -ECONNRESET);
        assert_string_equal(err, "the privileged helper is not running");
        assert_int_equal(open_fd_count(), before);
}

/* The table is the one the zygote was forked with: renaming an entry here later changes
 * nothing there. */
static void table_fixed_at_start(void **state)
{
        struct devio *io = ((struct fixture *)*state)->io;
        int fds[DEVIO_MAX_FDS];
        size_t nfds = 0;
        char err[64];

        table[0].name = "late";
        assert_int_equal(call(io, "late", "a", TIMEOUT, fds, &nfds, err, sizeof err), -ENOENT);
        assert_int_equal(call(io, "zero", "a", TIMEOUT, fds, &nfds, err, sizeof err), 0);
        table[0].name = "zero";
}

static void bad_tables(void **state)
{
        struct privsep_function dup[] = {{"a", f_zero}, {"a", f_one}};
        struct privsep_function noname[] = {{"", f_zero}};
        struct privsep_function nofn[] = {{"a", NULL}};
        struct privsep_function longname[] = {{"a-name-of-thirty-two-bytes-xxxxx", f_zero}};
        const struct {
                const struct privsep_function *t;
                size_t n;
        } bad[] = {{dup, 2},      {noname, 1}, {nofn, 1},
                   {longname, 1}, {NULL, 1},   {table, PRIVSEP_FUNCTIONS_MAX + 1}};
        struct devio *io = NULL;

        (void)state;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                struct privsep_config cfg = {.dev_dir = "/dev",
                                             .keep_privileges = true,
                                             .functions = bad[i].t,
                                             .n_functions = bad[i].n};

                assert_int_equal(privsep_start(&cfg, &io), -EINVAL);
                assert_null(io);
        }
        /* no device directory: --path.dev's entry holds the default, the helper has none */
        assert_int_equal(privsep_start(&(struct privsep_config){.keep_privileges = true}, &io),
                         -EINVAL);
        assert_null(io);
        assert_true(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
}

/* ---- a helper played by the test: the client believes no count but its own ---- */

struct fake {
        int zfd;    /* the zygote's end */
        int helper; /* the helper's end */
};

static void *fake_zygote(void *p)
{
        struct fake *z = p;
        uint8_t buf[64], msg[PRIVSEP_PROTO_CTL_SIZE], hello[PRIVSEP_PROTO_HDR_SIZE];
        int sv[2];
        ssize_t n = recv(z->zfd, buf, sizeof buf, 0);

        assert_true(n > 0 && privsep_proto_is_spawn(buf, (size_t)n));
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        /* pid: this process, not our child, so the client never signals it */
        assert_true(privsep_proto_encode_spawned(0, (int32_t)getpid(), msg, sizeof msg) > 0);
        assert_true(privsep_proto_encode_hello(hello, sizeof hello) > 0);
        assert_int_equal(send(sv[1], hello, sizeof hello, MSG_NOSIGNAL), (ssize_t)sizeof hello);
        assert_int_equal(privsep_send_fd(z->zfd, msg, sizeof msg, sv[0], 0), 0);
        close(sv[0]);
        z->helper = sv[1];
        return NULL;
}

/* Reads the client's PRIV; returns its id. */
static uint64_t fake_read_priv(struct fake *z, const char *want_name)
{
        uint8_t buf[PRIVSEP_PROTO_PRIV_MAX];
        struct privsep_proto_hdr hdr;
        struct privsep_proto_priv pr;
        struct pollfd p = {.fd = z->helper, .events = POLLIN};
        ssize_t n;

        assert_int_equal(poll(&p, 1, 5000), 1);
        n = recv(z->helper, buf, sizeof buf, 0);
        assert_true(n > 0);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)n, &hdr), 0);
        assert_int_equal(hdr.type, PRIVSEP_PROTO_PRIV);
        assert_int_equal(privsep_proto_decode_priv(&hdr, buf, (size_t)n, &pr), 0);
        assert_string_equal(pr.name, want_name);
        return hdr.id;
}

/* Answers announcing `announced` descriptors while sending `sent` (copies of a memfd), with
 * status: the caller gets -EIO unless they match, and nothing it did not take stays open. */
static void lying_helper(void **state)
{
        static const struct {
                int status;
                size_t announced, sent;
                int want;
        } cases[] = {
            {0, 2, 2, 0},    {0, 2, 1, -EIO},      {0, 1, 2, -EIO},        {0, 0, 1, -EIO},
            {0, 3, 0, -EIO}, {-EPERM, 0, 1, -EIO}, {-EPERM, 0, 0, -EPERM}, {0, 4, 4, 0},
        };
        struct privsep_config cfg = {
            .dev_dir = "/dev", .keep_privileges = true, .restart_delay = 60 * USEC_PER_SEC};
        struct fake z = {.helper = -1};
        struct devio *io = NULL;
        int sv[2], memfd, before, during;
        pthread_t th;

        (void)state;
        memfd = memfd_with("lie", "x", 1);
        assert_true(memfd >= 0);
        before = open_fd_count();
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        z.zfd = sv[1];
        assert_int_equal(pthread_create(&th, NULL, fake_zygote, &z), 0);
        assert_int_equal(privsep_client_start(sv[0], 0, &cfg, &io), 0);
        pthread_join(th, NULL);
        during = open_fd_count(); /* ours, and the client's sockets and eventfds */
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                struct bg b = {.io = io, .name = "f"};
                uint8_t msg[PRIVSEP_PROTO_PRIV_ANSWER_MAX];
                int copies[4] = {memfd, memfd, memfd, memfd}, len;
                pthread_t caller;
                uint64_t id;

                assert_int_equal(pthread_create(&caller, NULL, bg_call, &b), 0);
                id = fake_read_priv(&z, "f");
                /* The encoder refuses a status < 0 with descriptors: build that one by hand. */
                len = privsep_proto_encode_priv_answer(id, cases[i].status, cases[i].announced,
                                                       "no", msg, sizeof msg);
                assert_true(len > 0);
                assert_int_equal(
                    privsep_send_fds(z.helper, msg, (size_t)len, copies, cases[i].sent, 0), 0);
                pthread_join(caller, NULL);
                assert_int_equal(b.r, cases[i].want);
                if (cases[i].want == 0) {
                        assert_int_equal(b.nfds, cases[i].sent);
                        for (size_t k = 0; k < b.nfds; k++) {
                                assert_content(b.fds[k], "lie:x");
                                close(b.fds[k]);
                        }
                } else {
                        assert_int_equal(b.nfds, 0);
                }
                assert_int_equal(open_fd_count(), during);
        }
        /* an answer that comes for nobody: its descriptors are closed too */
        {
                uint8_t msg[PRIVSEP_PROTO_PRIV_ANSWER_MAX];
                int copies[2] = {memfd, memfd};
                int len = privsep_proto_encode_priv_answer(999, 0, 2, NULL, msg, sizeof msg);
                struct privsep_stats st;
                uint64_t dropped;

                assert_int_equal(privsep_stats(io, &st), 0);
                dropped = st.dropped;
                assert_int_equal(privsep_send_fds(z.helper, msg, (size_t)len, copies, 2, 0), 0);
                for (int k = 0; k < 500 && st.dropped == dropped; k++) {
                        usleep(10000);
                        assert_int_equal(privsep_stats(io, &st), 0);
                }
                assert_int_equal(st.dropped, dropped + 1);
        }
        assert_int_equal(open_fd_count(), during);
        io->ops->free(io);
        close(z.helper);
        close(z.zfd);
        assert_int_equal(open_fd_count(), before);
        close(memfd);
}

/* ---- the helper's own checks, spoken to in the wire format ---- */

/* Receives one message within 5 s with up to DEVIO_MAX_FDS descriptors; returns its length. */
static ssize_t raw_recv(int fd, uint8_t *buf, size_t size, int fds[], size_t *nfds)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        size_t n;

        assert_int_equal(poll(&p, 1, 5000), 1);
        assert_int_equal(privsep_recv_fds(fd, buf, size, 0, &n, fds, DEVIO_MAX_FDS, nfds), 0);
        return (ssize_t)n;
}

/* Sends msg (len bytes, a PRIV with id 5) and returns the PRIV_ANSWER's status; its message in
 * err, its descriptors (closed here) counted in *nfds. */
static int raw_ask(int fd, const uint8_t *msg, size_t len, char *err, size_t *nfds)
{
        uint8_t buf[PRIVSEP_PROTO_PRIV_ANSWER_MAX];
        struct privsep_proto_hdr hdr;
        struct privsep_proto_priv_answer a;
        int fds[DEVIO_MAX_FDS];
        ssize_t n;

        assert_int_equal(send(fd, msg, len, MSG_NOSIGNAL), (ssize_t)len);
        n = raw_recv(fd, buf, sizeof buf, fds, nfds);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)n, &hdr), 0);
        assert_int_equal(hdr.type, PRIVSEP_PROTO_PRIV_ANSWER);
        assert_int_equal(hdr.id, 5);
        assert_int_equal(privsep_proto_decode_priv_answer(&hdr, buf, (size_t)n, &a), 0);
        assert_int_equal(a.nfds, *nfds);
        for (size_t i = 0; i < *nfds; i++)
                close(fds[i]);
        strcpy(err, a.err);
        return hdr.status;
}

/* What the client never sends, the helper refuses itself: an argument over DEVIO_PRIV_ARG_MAX, a
 * name that is not terminated or not zero-padded (-EINVAL), one not in its table (-ENOENT); and
 * it goes on serving. */
static void helper_checks(void **state)
{
        struct privsep_config cfg = {.dev_dir = "/dev", .functions = table, .n_functions = N_TABLE};
        static uint8_t msg[PRIVSEP_PROTO_PRIV_MAX + 8];
        uint8_t hello[64];
        int sv[2], fds[DEVIO_MAX_FDS], st, len;
        char err[DEVIO_PRIV_ERR_MAX];
        size_t nfds;
        pid_t pid;

        (void)state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(sv[0]);
                privsep_helper_main(sv[1], &cfg);
        }
        close(sv[1]);
        assert_int_equal(raw_recv(sv[0], hello, sizeof hello, fds, &nfds),
                         (ssize_t)PRIVSEP_PROTO_HDR_SIZE);

        /* the largest argument: runs */
        {
                static char arg[DEVIO_PRIV_ARG_MAX];

                memset(arg, 'q', sizeof arg);
                len = privsep_proto_encode_priv(5, "one", arg, sizeof arg, msg, sizeof msg);
                assert_int_equal(len, (int)PRIVSEP_PROTO_PRIV_MAX);
        }
        assert_int_equal(raw_ask(sv[0], msg, (size_t)len, err, &nfds), 0);
        assert_int_equal(nfds, 1);
        /* one byte more: -EINVAL from the helper, no worker */
        {
                struct privsep_proto_hdr h;

                memcpy(&h, msg, sizeof h);
                h.len++;
                memcpy(msg, &h, sizeof h);
                msg[len] = 'q';
        }
        assert_int_equal(raw_ask(sv[0], msg, (size_t)len + 1, err, &nfds), -EINVAL);
        assert_string_equal(err, "malformed name or argument too long");
        assert_int_equal(nfds, 0);
        /* a name not zero-padded, a name not terminated */
        len = privsep_proto_encode_priv(5, "one", "x", 1, msg, sizeof msg);
        msg[PRIVSEP_PROTO_HDR_SIZE + 10] = 'j';
        assert_int_equal(raw_ask(sv[0], msg, (size_t)len, err, &nfds), -EINVAL);
        memset(msg + PRIVSEP_PROTO_HDR_SIZE, 'n', DEVIO_NAME_MAX);
        assert_int_equal(raw_ask(sv[0], msg, (size_t)len, err, &nfds), -EINVAL);
        /* not in the table */
        len = privsep_proto_encode_priv(5, "nosuch", NULL, 0, msg, sizeof msg);
        assert_int_equal(raw_ask(sv[0], msg, (size_t)len, err, &nfds), -ENOENT);
        assert_string_equal(err, "no such privileged function");
        /* still serving */
        len = privsep_proto_encode_priv(5, "four", "k", 1, msg, sizeof msg);
        assert_int_equal(raw_ask(sv[0], msg, (size_t)len, err, &nfds), 0);
        assert_int_equal(nfds, 4);

        close(sv[0]);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- fdpass.c with several descriptors ---- */

static void fd_passing_many(void **state)
{
        int sv[2], fd[5], got[PRIVSEP_FDPASS_MAX], before;
        char buf[8];
        size_t n, nfds;

        (void)state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        for (int i = 0; i < 5; i++) {
                char tag[4] = {'m', (char)('0' + i), 0, 0};

                fd[i] = memfd_with(tag, NULL, 0);
                assert_true(fd[i] >= 0);
        }
        before = open_fd_count();

        /* 0 to 4, in order, each the same file, with FD_CLOEXEC */
        for (size_t k = 0; k <= 4; k++) {
                assert_int_equal(privsep_send_fds(sv[0], "m", 1, fd, k, 0), 0);
                assert_int_equal(
                    privsep_recv_fds(sv[1], buf, sizeof buf, 0, &n, got, PRIVSEP_FDPASS_MAX, &nfds),
                    0);
                assert_int_equal(n, 1);
                assert_int_equal(nfds, k);
                for (size_t i = 0; i < k; i++) {
                        char want[8];

                        snprintf(want, sizeof want, "m%zu:", i);
                        assert_true(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
                        assert_content(got[i], want);
                        close(got[i]);
                }
                for (size_t i = k; i < PRIVSEP_FDPASS_MAX; i++)
                        assert_int_equal(got[i], -1);
                assert_int_equal(open_fd_count(), before);
        }
        /* more than the receiver accepts: -EBADMSG, all closed, the bytes there */
        for (size_t max = 1; max <= 3; max++) {
                assert_int_equal(privsep_send_fds(sv[0], "abc", 3, fd, max + 1, 0), 0);
                assert_int_equal(privsep_recv_fds(sv[1], buf, sizeof buf, 0, &n, got, max, &nfds),
                                 -EBADMSG);
                assert_int_equal(n, 3);
                assert_int_equal(nfds, 0);
                for (size_t i = 0; i < max; i++)
                        assert_int_equal(got[i], -1);
                assert_int_equal(open_fd_count(), before);
        }
        /* five by hand (the sender refuses): -EBADMSG for a receiver of at most four */
        {
                union {
                        char b[CMSG_SPACE(5 * sizeof(int))];
                        struct cmsghdr align;
                } cbuf;
                struct iovec iov = {.iov_base = "abc", .iov_len = 3};
                struct msghdr m = {.msg_iov = &iov,
                                   .msg_iovlen = 1,
                                   .msg_control = cbuf.b,
                                   .msg_controllen = sizeof cbuf.b};
                struct cmsghdr *c;

                memset(&cbuf, 0, sizeof cbuf);
                c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(5 * sizeof(int));
                memcpy(CMSG_DATA(c), fd, 5 * sizeof(int));
                assert_int_equal(sendmsg(sv[0], &m, MSG_NOSIGNAL), 3);
                assert_int_equal(
                    privsep_recv_fds(sv[1], buf, sizeof buf, 0, &n, got, PRIVSEP_FDPASS_MAX, &nfds),
                    -EBADMSG);
                assert_int_equal(nfds, 0);
                assert_int_equal(open_fd_count(), before);
        }
        /* the sender's limits */
        assert_int_equal(privsep_send_fds(sv[0], "a", 1, fd, 5, 0), -EINVAL);
        {
                int neg[2] = {fd[0], -1};
                assert_int_equal(privsep_send_fds(sv[0], "a", 1, neg, 2, 0), -EBADF);
        }
        assert_int_equal(privsep_recv_fds(sv[1], buf, sizeof buf, MSG_DONTWAIT, &n, got, 5, &nfds),
                         -EINVAL);
        /* longer than the buffer: -EMSGSIZE, all closed */
        assert_int_equal(privsep_send_fds(sv[0], "longer message", 14, fd, 3, 0), 0);
        assert_int_equal(privsep_recv_fds(sv[1], buf, 4, 0, &n, got, PRIVSEP_FDPASS_MAX, &nfds),
                         -EMSGSIZE);
        assert_int_equal(nfds, 0);
        assert_int_equal(open_fd_count(), before);
        close(sv[0]);
        close(sv[1]);
        for (int i = 0; i < 5; i++)
                close(fd[i]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(zero_fds, setup, teardown),
            cmocka_unit_test_setup_teardown(one_fd, setup, teardown),
            cmocka_unit_test_setup_teardown(four_fds, setup, teardown),
            cmocka_unit_test_setup_teardown(argument_limit, setup, teardown),
            cmocka_unit_test_setup_teardown(error_with_message, setup, teardown),
            cmocka_unit_test_setup_teardown(unknown_name, setup, teardown),
            cmocka_unit_test_setup_teardown(worker_crash, setup, teardown),
            cmocka_unit_test_setup_teardown(broken_functions, setup, teardown),
            cmocka_unit_test_setup_teardown(caller_timeout, setup, teardown),
            cmocka_unit_test_setup_teardown(worker_deadline, setup_short_deadline, teardown),
            cmocka_unit_test_setup_teardown(worker_limit, setup_one_worker, teardown),
            cmocka_unit_test_setup_teardown(helper_lost, setup, teardown),
            cmocka_unit_test_setup_teardown(table_fixed_at_start, setup, teardown),
            cmocka_unit_test(bad_tables),
            cmocka_unit_test(lying_helper),
            cmocka_unit_test(helper_checks),
            cmocka_unit_test(fd_passing_many),
        };

        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
