/* Unit tests of the privileged helper, the zygote that starts it and the client: answers by id,
 * timeouts and busy devices, worker crashes and deadlines, the worker limit, garbage on the
 * sockets, helper death and restart with backoff, zygote death, shutdown during a backoff or a
 * spawn, capability sets. A fake exec (the config's test seam) makes workers echo, hang or die. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/open_fds.h"

#include "devio.h"
#include "devio_linux.h"
#include "privsep_proto.h"
#include "fdpass.h"
#include "privsep.h"
#include "util.h"

#define HANG_USEC (1500 * USEC_PER_MSEC)

/* Runs in the worker. "sdhang*" sleeps HANG_USEC then echoes, "sdkill" dies by SIGKILL,
 * "sdx*" echoes its name and each command's param, anything else is the real privsep_devio_exec. */
static int fake_exec(const char *dev_dir, const struct devio_request *req,
                     struct devio_response *resp)
{
        if (strncmp(req->name, "sdhang", 6) == 0)
                usleep(HANG_USEC);
        else if (strcmp(req->name, "sdkill") == 0)
                raise(SIGKILL);
        else if (strncmp(req->name, "sdx", 3) != 0)
                return privsep_devio_exec(dev_dir, req, resp);
        memset(resp, 0, sizeof *resp);
        resp->n = req->n;
        for (uint32_t i = 0; i < req->n; i++) {
                struct devio_result *r = &resp->r[i];
                r->len = (uint32_t)snprintf((char *)r->data, sizeof r->data, "%s:%u", req->name,
                                            req->cmds[i].param);
        }
        return 0;
}

struct fixture {
        char dir[64];
        struct devio *io;
        usec_t restart_delay, restart_max;
        /* what the helper is given: no device commands; a table of privileged functions */
        bool no_devices;
        const struct privsep_function *functions;
        size_t n_functions;
};

static struct devio_request vpd(const char *name, uint32_t page)
{
        struct devio_request r;

        memset(&r, 0, sizeof r);
        r.kind = DEVIO_SCSI;
        snprintf(r.name, sizeof r.name, "%s", name);
        r.n = 1;
        r.cmds[0].cmd = DEVIO_SCSI_INQUIRY_VPD;
        r.cmds[0].param = page;
        return r;
}

static int start(struct fixture *f, unsigned max_workers, usec_t worker_timeout)
{
        struct privsep_config cfg = {
            .dev_dir = f->dir,
            .max_workers = max_workers,
            .worker_timeout = worker_timeout,
            .keep_privileges = true, /* the test process keeps its own */
            .exec = fake_exec,
            .restart_delay = f->restart_delay,
            .restart_max = f->restart_max,
            .no_devices = f->no_devices,
            .functions = f->functions,
            .n_functions = f->n_functions,
        };

        return privsep_start(&cfg, &f->io);
}

static int setup_restarting(void **state, unsigned max_workers, usec_t worker_timeout,
                            usec_t restart_delay, usec_t restart_max)
{
        struct fixture *f = calloc(1, sizeof *f);

        snprintf(f->dir, sizeof f->dir, "/tmp/diskpulse-test-privsep-XXXXXX");
        f->restart_delay = restart_delay;
        f->restart_max = restart_max;
        if (!mkdtemp(f->dir) || start(f, max_workers, worker_timeout) < 0)
                return -1;
        *state = f;
        return 0;
}

static int setup_common(void **state, unsigned max_workers, usec_t worker_timeout)
{
        return setup_restarting(state, max_workers, worker_timeout, 0, 0);
}

/* Only the device directory, no helper: for a test that forks and runs a helper, a zygote or
 * privsep_start() in the child. A process forked while another thread runs (the client thread of
 * a started helper) may inherit a lock that thread held, and a child that then starts threads and
 * forks hangs on it: one run in about thirty timed out so under load. The daemon starts its
 * helper single-threaded. */
static int setup_dir_only(void **state)
{
        struct fixture *f = calloc(1, sizeof *f);

        if (!f)
                return -1;
        snprintf(f->dir, sizeof f->dir, "/tmp/diskpulse-test-privsep-XXXXXX");
        if (!mkdtemp(f->dir)) {
                free(f);
                return -1;
        }
        *state = f;
        return 0;
}

static int setup(void **state)
{
        return setup_common(state, 0, 0);
}

static int setup_two_workers(void **state)
{
        return setup_common(state, 2, 0);
}

static int setup_short_deadline(void **state)
{
        return setup_common(state, 0, 300 * USEC_PER_MSEC);
}

/* A helper that dies stays down for a minute: long enough to look at. */
static int setup_slow_restart(void **state)
{
        return setup_restarting(state, 0, 0, 60 * USEC_PER_SEC, 0);
}

static int setup_restart_200ms(void **state)
{
        return setup_restarting(state, 0, 0, 200 * USEC_PER_MSEC, 10 * USEC_PER_SEC);
}

static int setup_restart_250ms_max_800ms(void **state)
{
        return setup_restarting(state, 0, 0, 250 * USEC_PER_MSEC, 800 * USEC_PER_MSEC);
}

static int setup_restart_100ms(void **state)
{
        return setup_restarting(state, 0, 0, 100 * USEC_PER_MSEC, 10 * USEC_PER_SEC);
}

static int noop_function(const void *arg, size_t len, int fds[], size_t *nfds, char *err,
                         size_t errsz)
{
        (void)arg, (void)len, (void)fds, (void)nfds, (void)err, (void)errsz;
        return 0;
}

static const struct privsep_function noop_table[] = {{.name = "noop", .fn = noop_function}};

/* Set up like setup_restart_100ms with no device commands (SMART off) and functions (a table of
 * privileged functions, as biolatency's) or none. */
static int setup_no_devices_with(void **state, bool functions)
{
        struct fixture *f = calloc(1, sizeof *f);

        snprintf(f->dir, sizeof f->dir, "/tmp/diskpulse-test-privsep-XXXXXX");
        f->restart_delay = 100 * USEC_PER_MSEC;
        f->restart_max = 10 * USEC_PER_SEC;
        f->no_devices = true;
        f->functions = functions ? noop_table : NULL;
        f->n_functions = functions ? 1 : 0;
        if (!mkdtemp(f->dir) || start(f, 0, 0) < 0)
                return -1;
        *state = f;
        return 0;
}

static int setup_no_devices(void **state)
{
        return setup_no_devices_with(state, false);
}

static int setup_functions_only(void **state)
{
        return setup_no_devices_with(state, true);
}

/* True when this process has no child left, running or zombie: the zygote and every helper were
 * collected. */
static bool no_children(void)
{
        return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        bool clean;

        if (f->io)
                f->io->ops->free(f->io);
        clean = no_children();
        if (!clean)
                print_message("teardown: a child process was left behind\n");
        rmdir(f->dir);
        free(f);
        return clean ? 0 : -1;
}

static bool wait_until_idle(struct devio *io, const char *name, usec_t within)
{
        usec_t end = now_monotonic() + within;

        while (io->ops->busy(io, name)) {
                if (now_monotonic() > end)
                        return false;
                usleep(10000);
        }
        return true;
}

static void missing_device(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("sda", 0x80);

        assert_int_equal(f->io->ops->run(f->io, &r, 5 * USEC_PER_SEC, &resp), 0);
        assert_int_equal(resp.n, 1);
        assert_int_equal(resp.r[0].err, -ENOENT);
        r.kind = DEVIO_NVME;
        snprintf(r.name, sizeof r.name, "nvme0");
        r.cmds[0].cmd = DEVIO_NVME_SMART_LOG;
        r.cmds[0].param = 0;
        assert_int_equal(f->io->ops->run(f->io, &r, 5 * USEC_PER_SEC, &resp), 0);
        assert_int_equal(resp.r[0].err, -ENOENT);
        assert_false(f->io->ops->busy(f->io, "nvme0"));
}

static void invalid_request(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("../sda", 0x80);

        assert_int_equal(f->io->ops->run(f->io, &r, USEC_PER_SEC, &resp), -EINVAL);
        r = vpd("sda", 0x100);
        assert_int_equal(f->io->ops->run(f->io, &r, USEC_PER_SEC, &resp), -EINVAL);
        assert_int_equal(f->io->ops->run(f->io, NULL, USEC_PER_SEC, &resp), -EINVAL);
}

struct worker_arg {
        struct devio *io;
        char name[16];
        int rounds;
        int ok, wrong, failed;
};

static void *client_thread(void *p)
{
        struct worker_arg *a = p;
        struct devio_response *resp = malloc(sizeof *resp);

        for (int i = 0; i < a->rounds; i++) {
                struct devio_request r = vpd(a->name, (uint32_t)(i & 0xff));
                char want[64];
                int rc;

                r.n = 2;
                r.cmds[1] = r.cmds[0];
                r.cmds[1].param = (uint32_t)((i * 7) & 0xff);
                rc = a->io->ops->run(a->io, &r, 10 * USEC_PER_SEC, resp);
                if (rc != 0 || resp->n != 2) {
                        a->failed++;
                        continue;
                }
                snprintf(want, sizeof want, "%s:%u", a->name, r.cmds[1].param);
                if (resp->r[1].len == strlen(want) &&
                    memcmp(resp->r[1].data, want, resp->r[1].len) == 0)
                        a->ok++;
                else
                        a->wrong++;
        }
        free(resp);
        return NULL;
}

static void concurrent_callers(void **state)
{
        struct fixture *f = *state;
        struct worker_arg args[8];
        pthread_t t[8];
        struct privsep_stats st;

        for (int i = 0; i < 8; i++) {
                args[i] = (struct worker_arg){.io = f->io, .rounds = 25};
                snprintf(args[i].name, sizeof args[i].name, "sdx%c", 'a' + i);
                assert_int_equal(pthread_create(&t[i], NULL, client_thread, &args[i]), 0);
        }
        for (int i = 0; i < 8; i++) {
                pthread_join(t[i], NULL);
                assert_int_equal(args[i].failed, 0);
                assert_int_equal(args[i].wrong, 0);
                assert_int_equal(args[i].ok, 25);
        }
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_true(st.helper_up);
        assert_int_equal(st.requests, 200);
        assert_int_equal(st.inflight, 0);
        assert_int_equal(st.dropped, 0);
}

static void hang_times_out_and_busy(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request hang = vpd("sdhang", 1), other = vpd("sdxother", 2);
        struct privsep_stats st;
        usec_t t0 = now_monotonic();

        assert_int_equal(f->io->ops->run(f->io, &hang, 200 * USEC_PER_MSEC, &resp), -ETIMEDOUT);
        assert_true(now_monotonic() - t0 < HANG_USEC);
        assert_true(f->io->ops->busy(f->io, "sdhang"));
        assert_false(f->io->ops->busy(f->io, "sdxother"));
        /* no second request is piled on the busy device */
        assert_int_equal(f->io->ops->run(f->io, &hang, USEC_PER_SEC, &resp), -EBUSY);
        /* other devices are served meanwhile, quickly */
        t0 = now_monotonic();
        assert_int_equal(f->io->ops->run(f->io, &other, 5 * USEC_PER_SEC, &resp), 0);
        assert_true(now_monotonic() - t0 < 500 * USEC_PER_MSEC);
        assert_memory_equal(resp.r[0].data, "sdxother:2", 10);
        assert_true(f->io->ops->busy(f->io, "sdhang"));
        /* the late answer clears busy */
        assert_true(wait_until_idle(f->io, "sdhang", 5 * USEC_PER_SEC));
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(st.timeouts, 1);
        assert_int_equal(st.late_responses, 1);
        assert_int_equal(st.inflight, 0);
        /* and the device can be asked again */
        hang = vpd("sdhangtwo", 3);
        assert_int_equal(f->io->ops->run(f->io, &hang, 5 * USEC_PER_SEC, &resp), 0);
        assert_memory_equal(resp.r[0].data, "sdhangtwo:3", 11);
}

static void worker_killed(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("sdkill", 0);
        struct privsep_stats st;

        assert_int_equal(f->io->ops->run(f->io, &r, 5 * USEC_PER_SEC, &resp), -EIO);
        assert_false(f->io->ops->busy(f->io, "sdkill"));
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(st.worker_failures, 1);
        assert_true(st.helper_up);
        /* the helper goes on */
        r = vpd("sdxa", 9);
        assert_int_equal(f->io->ops->run(f->io, &r, 5 * USEC_PER_SEC, &resp), 0);
}

static void worker_limit(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request a = vpd("sdhanga", 0), b = vpd("sdhangb", 0), c = vpd("sdxc", 0);
        struct privsep_stats st;

        assert_int_equal(f->io->ops->run(f->io, &a, 100 * USEC_PER_MSEC, &resp), -ETIMEDOUT);
        assert_int_equal(f->io->ops->run(f->io, &b, 100 * USEC_PER_MSEC, &resp), -ETIMEDOUT);
        assert_int_equal(f->io->ops->run(f->io, &c, 5 * USEC_PER_SEC, &resp), -EAGAIN);
        assert_false(f->io->ops->busy(f->io, "sdxc"));
        assert_true(wait_until_idle(f->io, "sdhanga", 5 * USEC_PER_SEC));
        assert_true(wait_until_idle(f->io, "sdhangb", 5 * USEC_PER_SEC));
        assert_int_equal(f->io->ops->run(f->io, &c, 5 * USEC_PER_SEC, &resp), 0);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(st.overloaded, 1);
}

static void worker_deadline(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("sdhang", 0);
        usec_t t0 = now_monotonic();

        /* the helper kills the worker at 300 ms and answers for it */
        assert_int_equal(f->io->ops->run(f->io, &r, 5 * USEC_PER_SEC, &resp), -ETIMEDOUT);
        assert_true(now_monotonic() - t0 < HANG_USEC - 200 * USEC_PER_MSEC);
        assert_false(f->io->ops->busy(f->io, "sdhang"));
}

static void helper_killed(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("sdxa", 1);
        struct privsep_stats st;
        usec_t t0;

        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_true(st.helper_pid > 0);
        assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
        t0 = now_monotonic();
        assert_int_equal(f->io->ops->run(f->io, &r, 10 * USEC_PER_SEC, &resp), -ECONNRESET);
        assert_true(now_monotonic() - t0 < 2 * USEC_PER_SEC);
        /* later calls fail at once */
        t0 = now_monotonic();
        assert_int_equal(f->io->ops->run(f->io, &r, 10 * USEC_PER_SEC, &resp), -ECONNRESET);
        assert_true(now_monotonic() - t0 < 100 * USEC_PER_MSEC);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_false(st.helper_up);
        assert_false(privsep_helper_up(f->io));
        assert_int_equal(st.helper_exits, 1);
        assert_int_equal(st.helper_pid, 0);
        assert_int_equal(st.helper_restarts, 0);
        assert_true(st.zygote_up);
        assert_false(f->io->ops->busy(f->io, "sdxa"));
}

struct hang_arg {
        struct devio *io;
        int rc;
        usec_t took;
};

static void *hang_thread(void *p)
{
        struct hang_arg *a = p;
        struct devio_response *resp = malloc(sizeof *resp);
        struct devio_request r = vpd("sdhang", 0);
        usec_t t0 = now_monotonic();

        a->rc = a->io->ops->run(a->io, &r, 10 * USEC_PER_SEC, resp);
        a->took = now_monotonic() - t0;
        free(resp);
        return NULL;
}

static void helper_killed_while_waiting(void **state)
{
        struct fixture *f = *state;
        struct hang_arg a = {.io = f->io};
        struct privsep_stats st;
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, hang_thread, &a), 0);
        usleep(200000);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(st.inflight, 1);
        assert_int_equal(kill(st.helper_pid, SIGTERM), 0); /* systemd stopping the cgroup */
        pthread_join(t, NULL);
        assert_int_equal(a.rc, -ECONNRESET);
        assert_true(a.took < HANG_USEC);
        assert_false(f->io->ops->busy(f->io, "sdhang"));
}

static void free_with_hung_worker(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("sdhang", 0);
        usec_t t0;

        assert_int_equal(f->io->ops->run(f->io, &r, 50 * USEC_PER_MSEC, &resp), -ETIMEDOUT);
        t0 = now_monotonic();
        f->io->ops->free(f->io);
        f->io = NULL;
        assert_true(now_monotonic() - t0 < HANG_USEC);
}

static void stats_of_other_devio(void **state)
{
        (void)state;
        static const struct devio_ops ops = {0};
        struct devio other = {.ops = &ops};
        struct privsep_stats st;

        assert_int_equal(privsep_stats(&other, &st), -EINVAL);
        assert_false(privsep_helper_up(&other));
        assert_false(privsep_helper_up(NULL));
}

/* ---- restarts ---- */

/* Waits until a helper is up and helper_restarts reached n. Returns the time it took or
 * USEC_INFINITY. */
static usec_t wait_restarts(struct devio *io, uint64_t n, usec_t within)
{
        usec_t t0 = now_monotonic();
        struct privsep_stats st;

        for (;;) {
                assert_int_equal(privsep_stats(io, &st), 0);
                if (st.helper_up && st.helper_restarts >= n)
                        return now_monotonic() - t0;
                if (now_monotonic() - t0 > within)
                        return USEC_INFINITY;
                usleep(1000);
        }
}

/* The parent pid of a process, from /proc/<pid>/stat, or -1. */
static pid_t ppid_of(pid_t pid)
{
        char path[64], buf[512], *p;
        FILE *fp;
        int ppid = -1;

        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        fp = fopen(path, "re");
        if (!fp)
                return -1;
        if (fgets(buf, sizeof buf, fp) && (p = strrchr(buf, ')')) != NULL)
                (void)sscanf(p + 2, "%*c %d", &ppid);
        fclose(fp);
        return ppid;
}

static bool echo_works(struct devio *io, const char *name, uint32_t param)
{
        static struct devio_response resp;
        struct devio_request r = vpd(name, param);
        char want[64];
        int n = snprintf(want, sizeof want, "%s:%u", name, param);

        return io->ops->run(io, &r, 5 * USEC_PER_SEC, &resp) == 0 && resp.n == 1 &&
               resp.r[0].len == (uint32_t)n && memcmp(resp.r[0].data, want, (size_t)n) == 0;
}

/* SIGKILLs the running helper and returns how long until the next one is up (the n-th restart),
 * checking what callers see meanwhile. */
static usec_t kill_helper_and_time_restart(struct devio *io, uint64_t n)
{
        static struct devio_response resp;
        struct devio_request r = vpd("sdxk", 1);
        struct privsep_stats st;
        usec_t t0, took;
        pid_t old;

        assert_int_equal(privsep_stats(io, &st), 0);
        assert_true(st.helper_up);
        old = st.helper_pid;
        assert_true(old > 0);
        /* The clock starts before the kill, so that the client cannot have seen the death
         * earlier: its restart delay is then a true lower bound of what is measured here
         * (taken after the kill, a test thread descheduled for a moment measured 248 ms of a
         * 250 ms delay). */
        t0 = now_monotonic();
        assert_int_equal(kill(old, SIGKILL), 0);
        /* a caller gets -ECONNRESET: the helper is gone */
        assert_int_equal(io->ops->run(io, &r, 5 * USEC_PER_SEC, &resp), -ECONNRESET);
        assert_true(now_monotonic() - t0 < USEC_PER_SEC);
        assert_int_equal(privsep_stats(io, &st), 0);
        assert_false(st.helper_up);
        assert_int_equal(st.helper_pid, 0);
        assert_true(wait_restarts(io, n, 20 * USEC_PER_SEC) != USEC_INFINITY);
        took = now_monotonic() - t0; /* from just before the kill */
        assert_int_equal(privsep_stats(io, &st), 0);
        assert_int_equal(st.helper_restarts, n);
        assert_true(st.helper_pid > 0 && st.helper_pid != old);
        return took;
}

static void helper_restarted(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("sdxa", 1);
        struct privsep_stats st0, st;
        usec_t t0, took;
        int rc;

        assert_int_equal(privsep_stats(f->io, &st0), 0);
        assert_true(st0.zygote_up && st0.zygote_pid > 0);
        assert_int_equal(st0.helper_restarts, 0);
        /* every helper is a child of the client's process, the zygote too */
        assert_int_equal(ppid_of(st0.helper_pid), getpid());
        assert_int_equal(ppid_of(st0.zygote_pid), getpid());
        t0 = now_monotonic(); /* before the kill: the restart delay bounds what is measured */
        assert_int_equal(kill(st0.helper_pid, SIGKILL), 0);
        assert_int_equal(f->io->ops->run(f->io, &r, 10 * USEC_PER_SEC, &resp), -ECONNRESET);
        /* while it is down (200 ms), calls fail at once */
        rc = f->io->ops->run(f->io, &r, 10 * USEC_PER_SEC, &resp);
        if (now_monotonic() - t0 < 150 * USEC_PER_MSEC) {
                assert_int_equal(rc, -ECONNRESET);
                assert_false(privsep_helper_up(f->io));
        }
        took = wait_restarts(f->io, 1, 10 * USEC_PER_SEC);
        assert_true(took != USEC_INFINITY);
        took = now_monotonic() - t0;
        print_message("restart latency: %.1f ms (restart_delay 200 ms)\n",
                      (double)took / (double)USEC_PER_MSEC);
        assert_true(took >= 200 * USEC_PER_MSEC);
        assert_true(took < 200 * USEC_PER_MSEC + 2 * USEC_PER_SEC);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_true(st.helper_up);
        assert_int_equal(st.helper_exits, 1);
        assert_int_equal(st.helper_restarts, 1);
        assert_int_equal(st.failed_restarts, 0);
        assert_true(st.helper_pid > 0 && st.helper_pid != st0.helper_pid);
        assert_int_equal(st.zygote_pid, st0.zygote_pid);
        assert_int_equal(ppid_of(st.helper_pid), getpid());
        /* the new helper answers; requests counted across helpers */
        assert_true(echo_works(f->io, "sdxa", 7));
        assert_true(echo_works(f->io, "sdxb", 8));
        /* and survives a crashing worker like the first one */
        r = vpd("sdkill", 0);
        assert_int_equal(f->io->ops->run(f->io, &r, 5 * USEC_PER_SEC, &resp), -EIO);
        assert_true(privsep_helper_up(f->io));
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(st.inflight, 0);
        assert_int_equal(st.helper_restarts, 1);
}

static void restart_backs_off(void **state)
{
        struct fixture *f = *state;
        usec_t a, b, c;
        struct privsep_stats st;

        a = kill_helper_and_time_restart(f->io, 1);
        b = kill_helper_and_time_restart(f->io, 2);
        c = kill_helper_and_time_restart(f->io, 3);
        print_message("restart after 1st death %.0f ms, 2nd %.0f ms, 3rd %.0f ms\n",
                      (double)a / 1000.0, (double)b / 1000.0, (double)c / 1000.0);
        assert_true(a >= 200 * USEC_PER_MSEC);
        assert_true(b >= 400 * USEC_PER_MSEC); /* doubled: the helper died soon */
        assert_true(c >= 800 * USEC_PER_MSEC);
        assert_true(b > a && c > b);
        assert_true(c < 800 * USEC_PER_MSEC + 2 * USEC_PER_SEC);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(st.helper_exits, 3);
        assert_int_equal(st.helper_restarts, 3);
        assert_true(echo_works(f->io, "sdxz", 3));
}

static void backoff_resets_after_a_stable_helper(void **state)
{
        struct fixture *f = *state;
        usec_t a, b, c;

        a = kill_helper_and_time_restart(f->io, 1);
        b = kill_helper_and_time_restart(f->io, 2);
        assert_true(a >= 250 * USEC_PER_MSEC);
        assert_true(b >= 500 * USEC_PER_MSEC);
        /* this helper lives longer than restart_max (800 ms): back to 250 ms */
        usleep(900 * 1000);
        c = kill_helper_and_time_restart(f->io, 3);
        print_message("restart %.0f ms, %.0f ms, after a stable helper %.0f ms\n",
                      (double)a / 1000.0, (double)b / 1000.0, (double)c / 1000.0);
        assert_true(c >= 250 * USEC_PER_MSEC);
        assert_true(c < 500 * USEC_PER_MSEC);
}

static bool wait_zygote_down(struct devio *io, usec_t within)
{
        usec_t end = now_monotonic() + within;
        struct privsep_stats st;

        for (;;) {
                assert_int_equal(privsep_stats(io, &st), 0);
                if (!st.zygote_up)
                        return true;
                if (now_monotonic() > end)
                        return false;
                usleep(1000);
        }
}

static void zygote_killed_then_helper(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("sdxa", 1);
        struct privsep_stats st;
        pid_t zygote;
        usec_t t0;

        assert_int_equal(privsep_stats(f->io, &st), 0);
        zygote = st.zygote_pid;
        assert_int_equal(kill(zygote, SIGKILL), 0);
        assert_true(wait_zygote_down(f->io, 5 * USEC_PER_SEC));
        /* the helper does not depend on the zygote: it goes on */
        assert_true(echo_works(f->io, "sdxa", 2));
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_true(st.helper_up);
        assert_int_equal(st.zygote_pid, 0);
        /* the zygote was collected, not left a zombie */
        assert_int_equal(waitpid(zygote, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);

        assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
        assert_int_equal(f->io->ops->run(f->io, &r, 10 * USEC_PER_SEC, &resp), -ECONNRESET);
        usleep(600 * 1000); /* 6 restart delays */
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_false(st.helper_up);
        assert_int_equal(st.helper_restarts, 0);
        assert_int_equal(st.helper_exits, 1);
        t0 = now_monotonic();
        assert_int_equal(f->io->ops->run(f->io, &r, 10 * USEC_PER_SEC, &resp), -ECONNRESET);
        assert_true(now_monotonic() - t0 < 50 * USEC_PER_MSEC);
        assert_false(privsep_helper_up(f->io));
}

/* The zygote dies while the restart waits: the attempt finds it gone and that is final. */
static void zygote_killed_during_backoff(void **state)
{
        struct fixture *f = *state;
        static struct devio_response resp;
        struct devio_request r = vpd("sdxa", 1);
        struct privsep_stats st;

        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
        assert_int_equal(kill(st.zygote_pid, SIGKILL), 0);
        assert_int_equal(f->io->ops->run(f->io, &r, 10 * USEC_PER_SEC, &resp), -ECONNRESET);
        assert_true(wait_zygote_down(f->io, 5 * USEC_PER_SEC));
        usleep(600 * 1000);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_false(st.helper_up);
        assert_int_equal(st.helper_restarts, 0);
        assert_int_equal(f->io->ops->run(f->io, &r, 10 * USEC_PER_SEC, &resp), -ECONNRESET);
}

/* SIGTERM, SIGHUP, SIGINT (a cgroup stop, a reload, a terminal) do not end the zygote. */
static void zygote_ignores_stray_signals(void **state)
{
        struct fixture *f = *state;
        struct privsep_stats st;

        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(kill(st.zygote_pid, SIGTERM), 0);
        assert_int_equal(kill(st.zygote_pid, SIGHUP), 0);
        assert_int_equal(kill(st.zygote_pid, SIGINT), 0);
        assert_int_equal(kill(st.zygote_pid, SIGUSR1), 0);
        assert_int_equal(kill(st.zygote_pid, SIGPIPE), 0);
        usleep(100 * 1000);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_true(st.zygote_up);
        assert_int_equal(ppid_of(st.zygote_pid), getpid());
        (void)kill_helper_and_time_restart(f->io, 1);
}

static void free_during_backoff(void **state)
{
        struct fixture *f = *state;
        struct privsep_stats st;
        usec_t t0, took;

        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
        while (privsep_helper_up(f->io))
                usleep(1000);
        usleep(50 * 1000); /* into the minute-long wait */
        t0 = now_monotonic();
        f->io->ops->cancel(f->io);
        f->io->ops->free(f->io);
        f->io = NULL;
        took = now_monotonic() - t0;
        print_message("free during a backoff: %.1f ms\n", (double)took / 1000.0);
        assert_true(took < 300 * USEC_PER_MSEC);
        assert_true(no_children());
}

/* The zygote is stopped (SIGSTOP) when the restart asks it: the client thread waits for its
 * answer, and free() must not. */
static void free_during_spawn(void **state)
{
        struct fixture *f = *state;
        struct privsep_stats st;
        usec_t t0, took;

        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(kill(st.zygote_pid, SIGSTOP), 0);
        assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
        usleep(400 * 1000); /* 100 ms restart delay: the SPAWN is waiting for its answer */
        assert_false(privsep_helper_up(f->io));
        t0 = now_monotonic();
        f->io->ops->free(f->io);
        f->io = NULL;
        took = now_monotonic() - t0;
        print_message("free during a spawn: %.1f ms\n", (double)took / 1000.0);
        assert_true(took < 300 * USEC_PER_MSEC + 200 * USEC_PER_MSEC);
        assert_true(no_children());
}

/* The zygote is slow (stopped for a while): the spawn goes on when it continues, and free()
 * afterwards collects everything, also a helper whose answer came late. */
static void slow_zygote(void **state)
{
        struct fixture *f = *state;
        struct privsep_stats st;

        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(kill(st.zygote_pid, SIGSTOP), 0);
        assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
        usleep(300 * 1000);
        assert_int_equal(kill(st.zygote_pid, SIGCONT), 0);
        assert_true(wait_restarts(f->io, 1, 5 * USEC_PER_SEC) != USEC_INFINITY);
        assert_true(echo_works(f->io, "sdxs", 1));
}

struct restart_arg {
        struct devio *io;
        char name[16];
        atomic_bool *stop;
        int ok, reset, wrong, failed;
        int failed_rc, failed_n; /* the last failure's result and answer count */
};

static void *restart_caller(void *p)
{
        struct restart_arg *a = p;
        struct devio_response *resp = malloc(sizeof *resp);

        for (uint32_t i = 0; !atomic_load(a->stop); i++) {
                struct devio_request r = vpd(a->name, i & 0xff);
                char want[64];
                int rc = a->io->ops->run(a->io, &r, 10 * USEC_PER_SEC, resp);

                if (rc == -ECONNRESET) {
                        a->reset++;
                        usleep(2000);
                        continue;
                }
                if (rc != 0 || resp->n != 1) {
                        a->failed++;
                        a->failed_rc = rc;
                        a->failed_n = rc == 0 ? (int)resp->n : -1;
                        continue;
                }
                snprintf(want, sizeof want, "%s:%u", a->name, i & 0xff);
                if (resp->r[0].len == strlen(want) &&
                    memcmp(resp->r[0].data, want, resp->r[0].len) == 0)
                        a->ok++;
                else
                        a->wrong++;
        }
        free(resp);
        return NULL;
}

/* Eight threads call run() in a loop while the helper is killed twice: each call either gets its
 * own answer or -ECONNRESET, nothing else, and no entry is left behind. */
static void concurrent_callers_across_restarts(void **state)
{
        struct fixture *f = *state;
        struct restart_arg args[8];
        atomic_bool stop = false;
        struct privsep_stats st;
        pthread_t t[8];

        for (int i = 0; i < 8; i++) {
                args[i] = (struct restart_arg){.io = f->io, .stop = &stop};
                snprintf(args[i].name, sizeof args[i].name, "sdx%c", 'a' + i);
                assert_int_equal(pthread_create(&t[i], NULL, restart_caller, &args[i]), 0);
        }
        for (int k = 1; k <= 2; k++) {
                usleep(100 * 1000);
                assert_int_equal(privsep_stats(f->io, &st), 0);
                assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
                assert_true(wait_restarts(f->io, (uint64_t)k, 10 * USEC_PER_SEC) != USEC_INFINITY);
        }
        usleep(100 * 1000);
        atomic_store(&stop, true);
        for (int i = 0; i < 8; i++) {
                pthread_join(t[i], NULL);
                if (args[i].failed)
                        fail_msg("%s: %d calls failed, the last with %d (%s), %d answers",
                                 args[i].name, args[i].failed, args[i].failed_rc,
                                 strerror(-args[i].failed_rc), args[i].failed_n);
                assert_int_equal(args[i].wrong, 0);
                assert_true(args[i].ok > 0);
                assert_true(args[i].reset > 0);
        }
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_true(st.helper_up);
        assert_int_equal(st.helper_exits, 2);
        assert_int_equal(st.helper_restarts, 2);
        assert_int_equal(st.inflight, 0);
        assert_int_equal(st.dropped, 0);
        for (int i = 0; i < 8; i++)
                assert_false(f->io->ops->busy(f->io, args[i].name));
}

/* A caller waits on a hung device when the helper dies: it gets -ECONNRESET at once, the device
 * is not busy any more, and the new helper serves it. */
static void waiter_across_restart(void **state)
{
        struct fixture *f = *state;
        struct hang_arg a = {.io = f->io};
        struct privsep_stats st;
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, hang_thread, &a), 0);
        usleep(200000);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(st.inflight, 1);
        assert_int_equal(kill(st.helper_pid, SIGKILL), 0);
        pthread_join(t, NULL);
        assert_int_equal(a.rc, -ECONNRESET);
        assert_true(a.took < HANG_USEC);
        assert_false(f->io->ops->busy(f->io, "sdhang"));
        assert_true(wait_restarts(f->io, 1, 10 * USEC_PER_SEC) != USEC_INFINITY);
        assert_true(echo_works(f->io, "sdxhang", 4));
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_int_equal(st.inflight, 0);
}

/* ---- the raw protocol against privsep_helper_main() ---- */

struct raw {
        int fd;
        pid_t pid;
};

static void raw_start(struct raw *h, const char *dir)
{
        struct privsep_config cfg = {.dev_dir = dir, .exec = fake_exec};
        int sv[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        h->pid = fork();
        assert_true(h->pid >= 0);
        if (h->pid == 0) {
                close(sv[0]);
                privsep_helper_main(sv[1], &cfg);
        }
        close(sv[1]);
        h->fd = sv[0];
}

static ssize_t raw_recv(struct raw *h, uint8_t *buf, size_t size);

/* The helper says hello once it is ready. */
static void raw_hello(struct raw *h)
{
        uint8_t buf[64];
        struct privsep_proto_hdr hdr;
        ssize_t n = raw_recv(h, buf, sizeof buf);

        assert_int_equal(n, (ssize_t)PRIVSEP_PROTO_HDR_SIZE);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)n, &hdr), 0);
        assert_int_equal(hdr.type, PRIVSEP_PROTO_HELLO);
}

static void raw_stop(struct raw *h)
{
        int st;

        close(h->fd);
        assert_int_equal(waitpid(h->pid, &st, 0), h->pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

/* Receives one message within 5 s; returns its length or -1. */
static ssize_t raw_recv(struct raw *h, uint8_t *buf, size_t size)
{
        struct pollfd p = {.fd = h->fd, .events = POLLIN};

        if (poll(&p, 1, 5000) != 1)
                return -1;
        return recv(h->fd, buf, size, 0);
}

static void raw_send(struct raw *h, const void *buf, size_t len)
{
        assert_int_equal(send(h->fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void garbage_does_not_kill_the_helper(void **state)
{
        struct fixture *f = *state;
        static uint8_t buf[PRIVSEP_PROTO_RESPONSE_MAX + 16], big[65536];
        static struct devio_response resp;
        struct devio_request req = vpd("sdxz", 5);
        struct privsep_proto_hdr h;
        struct raw raw;
        ssize_t n;
        int len;

        raw_start(&raw, f->dir);
        raw_hello(&raw);
        /* empty, short, random, oversized messages */
        raw_send(&raw, "", 0);
        raw_send(&raw, "x", 1);
        srand(7);
        for (int i = 0; i < 200; i++) {
                size_t l = (size_t)(rand() % 300);
                for (size_t k = 0; k < l; k++)
                        buf[k] = (uint8_t)rand();
                raw_send(&raw, buf, l);
        }
        memset(big, 0xa5, sizeof big);
        raw_send(&raw, big, sizeof big);
        /* well-formed header, wrong version; a response sent to the helper; truncated */
        len = privsep_proto_encode_request(1, &req, buf, sizeof buf);
        buf[4] = 9;
        raw_send(&raw, buf, (size_t)len);
        len = privsep_proto_encode_response(2, -EIO, NULL, buf, sizeof buf);
        raw_send(&raw, buf, (size_t)len);
        len = privsep_proto_encode_request(3, &req, buf, sizeof buf);
        raw_send(&raw, buf, (size_t)len - 1);
        /* a file descriptor passed along is closed, not kept */
        {
                int pass = open("/dev/null", O_RDONLY | O_CLOEXEC);

                privsep_proto_encode_request(4, &req, buf, sizeof buf);
                assert_int_equal(privsep_send_fd(raw.fd, buf, (size_t)len, pass, 0), 0);
                close(pass);
        }
        /* answered: id 4 (the one with the fd) */
        n = raw_recv(&raw, buf, sizeof buf);
        assert_true(n > 0);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)n, &h), 0);
        assert_int_equal(h.id, 4);
        assert_int_equal(h.status, 0);
        /* a framed but invalid request is answered -EINVAL */
        req = vpd("sd/a", 5);
        len = privsep_proto_encode_request(5, &req, buf, sizeof buf);
        raw_send(&raw, buf, (size_t)len);
        n = raw_recv(&raw, buf, sizeof buf);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)n, &h), 0);
        assert_int_equal(h.id, 5);
        assert_int_equal(h.status, -EINVAL);
        /* and a good one still works, with the real privsep_devio_exec */
        req = vpd("sda", 0x80);
        len = privsep_proto_encode_request(6, &req, buf, sizeof buf);
        raw_send(&raw, buf, (size_t)len);
        n = raw_recv(&raw, buf, sizeof buf);
        assert_true(n > 0);
        assert_int_equal(privsep_proto_decode_header(buf, (size_t)n, &h), 0);
        assert_int_equal(h.id, 6);
        assert_int_equal(h.status, 0);
        assert_int_equal(privsep_proto_decode_response(&h, buf, (size_t)n, &resp), 0);
        assert_int_equal(resp.n, 1);
        assert_int_equal(resp.r[0].err, -ENOENT);
        /* nothing else was answered */
        struct pollfd p = {.fd = raw.fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 100), 0);
        /* EOF ends the helper with status 0 */
        raw_stop(&raw);
}

/* ---- the zygote, raw, against privsep_zygote_main() ---- */

static void zygote_raw_start(struct raw *z, const char *dir)
{
        struct privsep_config cfg = {.dev_dir = dir, .exec = fake_exec};
        int sv[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        z->pid = fork();
        assert_true(z->pid >= 0);
        if (z->pid == 0) {
                close(sv[0]);
                privsep_zygote_main(sv[1], &cfg);
        }
        close(sv[1]);
        z->fd = sv[0];
}

/* Receives a SPAWNED within 5 s: 0 and its fields, or -1. */
static int recv_spawned(int fd, int *status, pid_t *pid, int *ret_fd)
{
        uint8_t buf[64];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int32_t pid32;
        size_t n;

        *ret_fd = -1;
        if (poll(&p, 1, 5000) != 1)
                return -1;
        if (privsep_recv_fd(fd, buf, sizeof buf, 0, &n, ret_fd) < 0 || n == 0 ||
            privsep_proto_decode_spawned(buf, n, status, &pid32) < 0)
                return -1;
        *pid = pid32;
        return 0;
}

/* The descriptors a process holds, as a bit set of fds 0..63 (bit 63: any fd above 62). */
static uint64_t fds_of(pid_t pid)
{
        char path[64];
        struct dirent *e;
        uint64_t set = 0;
        DIR *d;

        snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
        d = opendir(path);
        if (!d)
                return UINT64_MAX;
        while ((e = readdir(d)) != NULL) {
                int fd;

                if (e->d_name[0] == '.')
                        continue;
                fd = atoi(e->d_name);
                set |= UINT64_C(1) << (fd < 63 ? fd : 63);
        }
        closedir(d);
        return set;
}

/* How many children this process has (every thread's), from /proc/self/task/<tid>/children. */
static int count_children(void)
{
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        int n = 0;

        if (!d)
                return -1;
        while ((e = readdir(d)) != NULL) {
                char path[64];
                FILE *fp;
                int pid;

                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof path, "/proc/self/task/%d/children", atoi(e->d_name));
                fp = fopen(path, "re");
                if (!fp)
                        continue;
                while (fscanf(fp, "%d", &pid) == 1)
                        n++;
                fclose(fp);
        }
        closedir(d);
        return n;
}

/* The zygote closes its copy of a new helper's socket just after sending it: wait for that. */
static uint64_t settled_fds_of(pid_t pid)
{
        usec_t end = now_monotonic() + 2 * USEC_PER_SEC;
        uint64_t set;

        while ((set = fds_of(pid)) != 0xf && now_monotonic() < end)
                usleep(1000);
        return set;
}

static bool fd_is_socket(pid_t pid, int fd)
{
        char path[64], target[64];
        ssize_t n;

        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
        n = readlink(path, target, sizeof target - 1);
        if (n < 0)
                return false;
        target[n] = '\0';
        return strncmp(target, "socket:", 7) == 0;
}

static void zygote_ignores_garbage(void **state)
{
        struct fixture *f = *state;
        static uint8_t buf[PRIVSEP_PROTO_REQUEST_SIZE], big[65536];
        static struct devio_response resp;
        struct devio_request req = vpd("sdxz", 5);
        uint8_t spawn[PRIVSEP_PROTO_CTL_SIZE];
        struct pollfd p;
        struct raw z, helper;
        struct privsep_proto_hdr h;
        int status, hfd, st, len, kids;
        pid_t pid;
        ssize_t n;

        kids = count_children(); /* none: the fixture starts no helper */
        zygote_raw_start(&z, f->dir);
        assert_int_equal(privsep_proto_encode_spawn(spawn, sizeof spawn), (int)sizeof spawn);
        /* empty, short, random, oversized messages */
        raw_send(&z, "", 0);
        raw_send(&z, "s", 1);
        srand(11);
        for (int i = 0; i < 300; i++) {
                size_t l = (size_t)(rand() % 40);
                for (size_t k = 0; k < l; k++)
                        buf[k] = (uint8_t)rand();
                if (l == sizeof spawn)
                        buf[0] ^= 0xff; /* never the one message by chance */
                raw_send(&z, buf, l);
        }
        memset(big, 0xa5, sizeof big);
        raw_send(&z, big, sizeof big);
        /* near misses: each byte of SPAWN flipped, one byte short, one byte more, SPAWN twice in
         * one message, a SPAWNED, a helper request, a HELLO */
        for (size_t i = 0; i < sizeof spawn; i++) {
                memcpy(buf, spawn, sizeof spawn);
                buf[i] ^= 0x01;
                raw_send(&z, buf, sizeof spawn);
        }
        raw_send(&z, spawn, sizeof spawn - 1);
        memcpy(buf, spawn, sizeof spawn);
        buf[sizeof spawn] = 0;
        raw_send(&z, buf, sizeof spawn + 1);
        memcpy(buf + sizeof spawn, spawn, sizeof spawn);
        raw_send(&z, buf, 2 * sizeof spawn);
        len = privsep_proto_encode_spawned(0, 1234, buf, sizeof buf);
        raw_send(&z, buf, (size_t)len);
        len = privsep_proto_encode_request(1, &req, buf, sizeof buf);
        raw_send(&z, buf, (size_t)len);
        len = privsep_proto_encode_hello(buf, sizeof buf);
        raw_send(&z, buf, (size_t)len);
        /* garbage with a descriptor attached */
        {
                int pass = open("/dev/null", O_RDONLY | O_CLOEXEC);

                assert_int_equal(privsep_send_fd(z.fd, big, 7, pass, 0), 0);
                close(pass);
        }
        /* nothing was answered, nothing was started, the zygote lives with stdio and its socket */
        p = (struct pollfd){.fd = z.fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 200), 0);
        assert_int_equal(count_children(), kids + 1); /* the zygote; no helper was started */
        assert_int_equal(settled_fds_of(z.pid), 0xf);
        assert_true(fd_is_socket(z.pid, 3));

        /* the one message: a helper, our child, on the socket that comes with the answer */
        raw_send(&z, spawn, sizeof spawn);
        assert_int_equal(recv_spawned(z.fd, &status, &pid, &hfd), 0);
        assert_int_equal(status, 0);
        assert_true(pid > 0);
        assert_true(hfd >= 0);
        assert_int_equal(ppid_of(pid), getpid());
        helper = (struct raw){.fd = hfd, .pid = pid};
        raw_hello(&helper);
        req = vpd("sdxz", 5);
        len = privsep_proto_encode_request(9, &req, buf, sizeof buf);
        raw_send(&helper, buf, (size_t)len);
        {
                static uint8_t rbuf[PRIVSEP_PROTO_RESPONSE_MAX];

                n = raw_recv(&helper, rbuf, sizeof rbuf);
                assert_true(n > 0);
                assert_int_equal(privsep_proto_decode_header(rbuf, (size_t)n, &h), 0);
                assert_int_equal(h.id, 9);
                assert_int_equal(privsep_proto_decode_response(&h, rbuf, (size_t)n, &resp), 0);
                assert_memory_equal(resp.r[0].data, "sdxz:5", 6);
        }
        raw_stop(&helper); /* EOF: the helper exits 0, and we reap it */
        /* the zygote keeps nothing of it */
        assert_int_equal(settled_fds_of(z.pid), 0xf);
        /* a SPAWN with a descriptor attached still spawns; the descriptor is dropped */
        {
                int pass = open("/dev/null", O_RDONLY | O_CLOEXEC);

                assert_int_equal(privsep_send_fd(z.fd, spawn, sizeof spawn, pass, 0), 0);
                close(pass);
        }
        assert_int_equal(recv_spawned(z.fd, &status, &pid, &hfd), 0);
        assert_int_equal(status, 0);
        helper = (struct raw){.fd = hfd, .pid = pid};
        raw_hello(&helper);
        assert_int_equal(settled_fds_of(z.pid), 0xf);
        /* the helper does not die with the zygote: it follows its own socket */
        assert_int_equal(kill(z.pid, SIGKILL), 0);
        assert_int_equal(waitpid(z.pid, &st, 0), z.pid);
        close(z.fd);
        req = vpd("sdxy", 6);
        len = privsep_proto_encode_request(10, &req, buf, sizeof buf);
        raw_send(&helper, buf, (size_t)len);
        {
                static uint8_t rbuf[PRIVSEP_PROTO_RESPONSE_MAX];

                n = raw_recv(&helper, rbuf, sizeof rbuf);
                assert_true(n > 0);
                assert_int_equal(privsep_proto_decode_header(rbuf, (size_t)n, &h), 0);
                assert_int_equal(h.id, 10);
        }
        raw_stop(&helper);
}

/* EOF on its socket ends the zygote, with status 0. */
static void zygote_exits_at_eof(void **state)
{
        struct fixture *f = *state;
        struct raw z;

        zygote_raw_start(&z, f->dir);
        raw_send(&z, "x", 1);
        raw_stop(&z);
}

static void control_messages(void **state)
{
        uint8_t buf[64], spawn[PRIVSEP_PROTO_CTL_SIZE];
        int status;
        int32_t pid;

        (void)state;
        assert_int_equal(privsep_proto_encode_spawn(spawn, sizeof spawn), 16);
        assert_int_equal(privsep_proto_encode_spawn(buf, 15), -EINVAL);
        assert_int_equal(privsep_proto_encode_spawn(NULL, 64), -EINVAL);
        assert_true(privsep_proto_is_spawn(spawn, sizeof spawn));
        assert_false(privsep_proto_is_spawn(spawn, sizeof spawn - 1));
        assert_false(privsep_proto_is_spawn(NULL, 16));
        for (size_t i = 0; i < sizeof spawn; i++) {
                memcpy(buf, spawn, sizeof spawn);
                buf[i] ^= 0x80;
                assert_false(privsep_proto_is_spawn(buf, sizeof spawn));
        }
        /* SPAWNED: pid > 0 with status 0, pid 0 with -errno, nothing else */
        assert_int_equal(privsep_proto_encode_spawned(0, 42, buf, sizeof buf), 16);
        assert_int_equal(privsep_proto_decode_spawned(buf, 16, &status, &pid), 0);
        assert_int_equal(status, 0);
        assert_int_equal(pid, 42);
        assert_false(privsep_proto_is_spawn(buf, 16));
        assert_int_equal(privsep_proto_decode_spawned(buf, 15, &status, &pid), -EBADMSG);
        assert_int_equal(privsep_proto_decode_spawned(buf, 17, &status, &pid), -EBADMSG);
        assert_int_equal(privsep_proto_decode_spawned(spawn, 16, &status, &pid), -EBADMSG);
        assert_int_equal(privsep_proto_encode_spawned(-EAGAIN, 0, buf, sizeof buf), 16);
        assert_int_equal(privsep_proto_decode_spawned(buf, 16, &status, &pid), 0);
        assert_int_equal(status, -EAGAIN);
        assert_int_equal(pid, 0);
        assert_int_equal(privsep_proto_encode_spawned(0, 0, buf, sizeof buf), -EINVAL);
        assert_int_equal(privsep_proto_encode_spawned(0, -1, buf, sizeof buf), -EINVAL);
        assert_int_equal(privsep_proto_encode_spawned(-EIO, 5, buf, sizeof buf), -EINVAL);
        assert_int_equal(privsep_proto_encode_spawned(1, 5, buf, sizeof buf), -EINVAL);
        assert_int_equal(privsep_proto_encode_spawned(-5000, 0, buf, sizeof buf), -EINVAL);
        assert_int_equal(privsep_proto_encode_spawned(0, 5, buf, 15), -EINVAL);
        /* a decoder fed garbage refuses it */
        srand(3);
        for (int i = 0; i < 10000; i++) {
                for (size_t k = 0; k < 16; k++)
                        buf[k] = (uint8_t)rand();
                if (i % 2)
                        memcpy(buf, spawn, 8); /* right magic, version and type half the time */
                if (privsep_proto_decode_spawned(buf, 16, &status, &pid) == 0)
                        assert_true((status == 0 && pid > 0) ||
                                    (status < 0 && status >= -4095 && pid == 0));
        }
}

/* ---- capabilities ---- */

static uint64_t status_hex(const char *path, const char *key)
{
        char line[256];
        uint64_t v = UINT64_MAX;
        FILE *fp = fopen(path, "re");
        size_t kl = strlen(key);

        if (!fp)
                return UINT64_MAX;
        while (fgets(line, sizeof line, fp))
                if (strncmp(line, key, kl) == 0 && line[kl] == ':')
                        v = strtoull(line + kl + 1, NULL, 16);
        fclose(fp);
        return v;
}

static uint64_t status_dec(const char *path, const char *key)
{
        char line[256];
        uint64_t v = UINT64_MAX;
        FILE *fp = fopen(path, "re");
        size_t kl = strlen(key);

        if (!fp)
                return UINT64_MAX;
        while (fgets(line, sizeof line, fp))
                if (strncmp(line, key, kl) == 0 && line[kl] == ':')
                        v = strtoull(line + kl + 1, NULL, 10);
        fclose(fp);
        return v;
}

#define CAPS_HELPER ((UINT64_C(1) << 21) | (UINT64_C(1) << 17)) /* SYS_ADMIN | SYS_RAWIO */

static bool have_root_caps(void)
{
        uint64_t eff = status_hex("/proc/self/status", "CapEff");

        return geteuid() == 0 && eff != UINT64_MAX && (eff & CAPS_HELPER) == CAPS_HELPER &&
               (eff & (UINT64_C(1) << 8)); /* CAP_SETPCAP, for the bounding set */
}

static void helper_capabilities(void **state)
{
        struct fixture *f = *state;
        struct privsep_stats st;
        char path[64];

        if (!have_root_caps()) {
                print_message(
                    "skipped: needs root with CAP_SYS_ADMIN, CAP_SYS_RAWIO, CAP_SETPCAP\n");
                skip();
        }
        assert_int_equal(privsep_stats(f->io, &st), 0);
        snprintf(path, sizeof path, "/proc/%d/status", (int)st.helper_pid);
        assert_int_equal(status_hex(path, "CapEff"), CAPS_HELPER);
        assert_int_equal(status_hex(path, "CapPrm"), CAPS_HELPER);
        assert_int_equal(status_hex(path, "CapInh"), 0);
        assert_int_equal(status_hex(path, "CapBnd"), CAPS_HELPER);
        assert_int_equal(status_hex(path, "CapAmb"), 0);
        assert_int_equal(status_dec(path, "NoNewPrivs"), 1);
}

/* The zygote holds what the helper holds, no more, and nothing open but stdio and its socket;
 * a restarted helper has the same capabilities as the first. */
static void zygote_and_restarted_helper_capabilities(void **state)
{
        struct fixture *f = *state;
        struct privsep_stats st;
        char path[64];

        assert_int_equal(privsep_stats(f->io, &st), 0);
        snprintf(path, sizeof path, "/proc/%d/status", (int)st.zygote_pid);
        assert_int_equal(settled_fds_of(st.zygote_pid), 0xf);
        assert_true(fd_is_socket(st.zygote_pid, 3));
        assert_int_equal(status_dec(path, "Threads"), 1);
        assert_int_equal(status_dec(path, "NoNewPrivs"), 1);
        assert_int_equal(status_hex(path, "CapInh"), 0);
        assert_int_equal(status_hex(path, "CapAmb"), 0);
        if (!have_root_caps()) {
                print_message("capability sets skipped: needs root with CAP_SYS_ADMIN, "
                              "CAP_SYS_RAWIO, CAP_SETPCAP\n");
                return;
        }
        assert_int_equal(status_hex(path, "CapEff"), CAPS_HELPER);
        assert_int_equal(status_hex(path, "CapPrm"), CAPS_HELPER);
        assert_int_equal(status_hex(path, "CapBnd"), CAPS_HELPER);

        (void)kill_helper_and_time_restart(f->io, 1);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        snprintf(path, sizeof path, "/proc/%d/status", (int)st.helper_pid);
        assert_int_equal(status_hex(path, "CapEff"), CAPS_HELPER);
        assert_int_equal(status_hex(path, "CapPrm"), CAPS_HELPER);
        assert_int_equal(status_hex(path, "CapInh"), 0);
        assert_int_equal(status_hex(path, "CapBnd"), CAPS_HELPER);
        assert_int_equal(status_hex(path, "CapAmb"), 0);
        assert_int_equal(status_dec(path, "NoNewPrivs"), 1);
        assert_int_equal(status_dec(path, "Threads"), 1);
}

/* The zygote's and a helper's capability sets (process pid) are want, bounding set included. */
static void assert_caps(pid_t pid, uint64_t want)
{
        char path[64];

        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
        assert_int_equal(status_hex(path, "CapEff"), want);
        assert_int_equal(status_hex(path, "CapPrm"), want);
        assert_int_equal(status_hex(path, "CapInh"), 0);
        assert_int_equal(status_hex(path, "CapBnd"), want);
        assert_int_equal(status_hex(path, "CapAmb"), 0);
        assert_int_equal(status_dec(path, "NoNewPrivs"), 1);
}

/* Without device commands (SMART off) and with the table of functions given (biolatency's
 * loader) or not, the zygote and the helper keep only what is left to do: CAP_SYS_ADMIN for the
 * functions, nothing else; and so does the helper the zygote starts after one was killed. A
 * device request is refused (-EPERM) before any worker runs it. */
static void caps_dropped_for(struct fixture *f, uint64_t want)
{
        static struct devio_response resp;
        struct devio_request r = vpd("sdxq", 4);
        struct privsep_stats st;

        assert_int_equal(f->io->ops->run(f->io, &r, 5 * USEC_PER_SEC, &resp), -EPERM);
        if (!have_root_caps()) {
                print_message("capability sets skipped: needs root with CAP_SYS_ADMIN, "
                              "CAP_SYS_RAWIO, CAP_SETPCAP\n");
                return;
        }
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_caps(st.zygote_pid, want);
        assert_caps(st.helper_pid, want);
        (void)kill_helper_and_time_restart(f->io, 1);
        assert_int_equal(privsep_stats(f->io, &st), 0);
        assert_caps(st.helper_pid, want);
        assert_int_equal(f->io->ops->run(f->io, &r, 5 * USEC_PER_SEC, &resp), -EPERM);
}

static void no_devices_no_capabilities(void **state)
{
        caps_dropped_for(*state, 0);
}

static void functions_only_sys_admin(void **state)
{
        struct fixture *f = *state;
        char err[DEVIO_PRIV_ERR_MAX] = "";
        int fds[DEVIO_MAX_FDS];
        size_t n = 0;

        caps_dropped_for(f, UINT64_C(1) << 21); /* CAP_SYS_ADMIN */
        /* and the function still runs */
        assert_int_equal(f->io->ops->privileged(f->io, "noop", "", 0, 5 * USEC_PER_SEC, fds, &n,
                                                err, sizeof err),
                         0);
        assert_int_equal(n, 0);
}

/* privsep_start() without keep_privileges, in a child: the caller ends up with nothing, and the
 * helper still answers. Exit status: 0 ok, otherwise the number of the failed check. */
static int child_drops(const char *dir)
{
        struct privsep_config cfg = {.dev_dir = dir, .exec = fake_exec};
        static struct devio_response resp;
        struct devio_request r = vpd("sdxq", 4);
        struct devio *io;
        const char *self = "/proc/self/status";

        if (privsep_start(&cfg, &io) < 0)
                return 1;
        if (status_hex(self, "CapEff") != 0 || status_hex(self, "CapPrm") != 0 ||
            status_hex(self, "CapInh") != 0 || status_hex(self, "CapAmb") != 0)
                return 2;
        if (have_root_caps() || status_hex(self, "CapBnd") != 0)
                return 3;
        if (status_dec(self, "NoNewPrivs") != 1)
                return 4;
        {
                usec_t t0 = now_monotonic();
                int rc = io->ops->run(io, &r, 5 * USEC_PER_SEC, &resp);

                if (rc != 0 || resp.r[0].len != 6) {
                        fprintf(stderr, "child_drops: run %d, len %zu, result %d after %.3f s\n",
                                rc, (size_t)resp.r[0].len, (int)resp.r[0].err,
                                (now_monotonic() - t0) / 1e6);
                        return 5;
                }
        }
        /* and a helper that dies is replaced, although this process has nothing left */
        {
                struct privsep_stats st;
                usec_t end = now_monotonic() + 10 * USEC_PER_SEC;

                if (privsep_stats(io, &st) < 0 || kill(st.helper_pid, SIGKILL) < 0)
                        return 6;
                while (privsep_stats(io, &st) == 0 && !(st.helper_up && st.helper_restarts == 1))
                        if (now_monotonic() > end)
                                return 7;
                        else
                                usleep(5000);
                if (status_hex(self, "CapEff") != 0 || status_hex(self, "CapPrm") != 0)
                        return 8;
                if (io->ops->run(io, &r, 5 * USEC_PER_SEC, &resp) != 0 || resp.r[0].len != 6)
                        return 9;
        }
        io->ops->free(io);
        return no_children() ? 0 : 10;
}

static void parent_drops_everything(void **state)
{
        struct fixture *f = *state;
        pid_t pid;
        int st;

        if (!have_root_caps()) {
                print_message("skipped: needs root with CAP_SETPCAP to empty the bounding set\n");
                skip();
        }
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(child_drops(f->dir));
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

static void drop_all_unprivileged(void **state)
{
        (void)state;
        pid_t pid = fork();
        int st;

        assert_true(pid >= 0);
        if (pid == 0) {
                /* twice: idempotent, and fine without any capability left */
                if (privsep_drop_all() < 0 || privsep_drop_all() < 0)
                        _exit(1);
                _exit(status_hex("/proc/self/status", "CapEff") == 0 ? 0 : 2);
        }
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- privsep_send_fd() / privsep_recv_fd(), the one descriptor-passing code ---- */

/* Sends "abc" with n copies of fd by hand: what privsep_send_fd() never sends (more than one),
 * for the receiver's checks. */
static void send_raw_fds(int sock, int fd, size_t n)
{
        union {
                char buf[CMSG_SPACE(8 * sizeof(int))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = {.iov_base = "abc", .iov_len = 3};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = cbuf.buf,
                           .msg_controllen = CMSG_SPACE(n * sizeof(int))};
        struct cmsghdr *c;

        assert_true(n >= 1 && n <= 8);
        memset(&cbuf, 0, sizeof cbuf);
        c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        for (size_t i = 0; i < n; i++)
                memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof fd);
        assert_int_equal(sendmsg(sock, &m, MSG_NOSIGNAL), 3);
}

static void fd_passing(void **state)
{
        int sv[2], null, fd = -2, before;
        char buf[8];
        size_t n;

        (void)state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        null = open("/dev/null", O_RDONLY); /* without O_CLOEXEC: the receiver adds it */
        assert_true(null >= 0);
        before = open_fd_count();

        /* one descriptor: received, with FD_CLOEXEC */
        assert_int_equal(privsep_send_fd(sv[0], "hello", 5, null, 0), 0);
        assert_int_equal(privsep_recv_fd(sv[1], buf, sizeof buf, 0, &n, &fd), 0);
        assert_int_equal(n, 5);
        assert_memory_equal(buf, "hello", 5);
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        /* none: -1 */
        assert_int_equal(privsep_send_fd(sv[0], "x", 1, -1, 0), 0);
        assert_int_equal(privsep_recv_fd(sv[1], buf, sizeof buf, 0, &n, &fd), 0);
        assert_int_equal(n, 1);
        assert_int_equal(fd, -1);
        /* not wanted (ret_fd NULL): the message counts, the descriptor is gone */
        assert_int_equal(privsep_send_fd(sv[0], "y", 1, null, 0), 0);
        assert_int_equal(privsep_recv_fd(sv[1], buf, sizeof buf, 0, &n, NULL), 0);
        assert_int_equal(n, 1);
        assert_int_equal(open_fd_count(), before);
        /* two: -EBADMSG, both closed, the bytes still there */
        send_raw_fds(sv[0], null, 2);
        assert_int_equal(privsep_recv_fd(sv[1], buf, sizeof buf, 0, &n, &fd), -EBADMSG);
        assert_int_equal(n, 3);
        assert_int_equal(fd, -1);
        assert_int_equal(open_fd_count(), before);
        /* more than it has room for: MSG_CTRUNC, -EBADMSG, none kept */
        send_raw_fds(sv[0], null, 8);
        assert_int_equal(privsep_recv_fd(sv[1], buf, sizeof buf, 0, &n, &fd), -EBADMSG);
        assert_int_equal(fd, -1);
        assert_int_equal(open_fd_count(), before);
        /* longer than the buffer: -EMSGSIZE, its descriptor closed */
        assert_int_equal(privsep_send_fd(sv[0], "longer message", 14, null, 0), 0);
        assert_int_equal(privsep_recv_fd(sv[1], buf, 4, 0, &n, &fd), -EMSGSIZE);
        assert_int_equal(fd, -1);
        assert_int_equal(open_fd_count(), before);
        /* nothing waiting: -EAGAIN; the peer gone: 0 bytes (EOF) */
        assert_int_equal(privsep_recv_fd(sv[1], buf, sizeof buf, MSG_DONTWAIT, &n, &fd), -EAGAIN);
        assert_int_equal(n, 0);
        close(sv[0]);
        assert_int_equal(privsep_recv_fd(sv[1], buf, sizeof buf, 0, &n, &fd), 0);
        assert_int_equal(n, 0);
        assert_int_equal(fd, -1);
        /* a peer gone is -EPIPE for the sender, not SIGPIPE */
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv + 0), 0);
        close(sv[1]);
        assert_int_equal(privsep_send_fd(sv[0], "z", 1, null, 0), -EPIPE);
        close(sv[0]);
        close(null);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(missing_device, setup, teardown),
            cmocka_unit_test_setup_teardown(invalid_request, setup, teardown),
            cmocka_unit_test_setup_teardown(concurrent_callers, setup, teardown),
            cmocka_unit_test_setup_teardown(hang_times_out_and_busy, setup, teardown),
            cmocka_unit_test_setup_teardown(worker_killed, setup, teardown),
            cmocka_unit_test_setup_teardown(worker_limit, setup_two_workers, teardown),
            cmocka_unit_test_setup_teardown(worker_deadline, setup_short_deadline, teardown),
            cmocka_unit_test_setup_teardown(helper_killed, setup_slow_restart, teardown),
            cmocka_unit_test_setup_teardown(helper_killed_while_waiting, setup, teardown),
            cmocka_unit_test_setup_teardown(free_with_hung_worker, setup, teardown),
            cmocka_unit_test(stats_of_other_devio),
            cmocka_unit_test_setup_teardown(helper_restarted, setup_restart_200ms, teardown),
            cmocka_unit_test_setup_teardown(restart_backs_off, setup_restart_200ms, teardown),
            cmocka_unit_test_setup_teardown(backoff_resets_after_a_stable_helper,
                                            setup_restart_250ms_max_800ms, teardown),
            cmocka_unit_test_setup_teardown(zygote_killed_then_helper, setup_restart_100ms,
                                            teardown),
            cmocka_unit_test_setup_teardown(zygote_killed_during_backoff, setup_restart_200ms,
                                            teardown),
            cmocka_unit_test_setup_teardown(zygote_ignores_stray_signals, setup_restart_100ms,
                                            teardown),
            cmocka_unit_test_setup_teardown(free_during_backoff, setup_slow_restart, teardown),
            cmocka_unit_test_setup_teardown(free_during_spawn, setup_restart_100ms, teardown),
            cmocka_unit_test_setup_teardown(slow_zygote, setup_restart_100ms, teardown),
            cmocka_unit_test_setup_teardown(concurrent_callers_across_restarts, setup_restart_100ms,
                                            teardown),
            cmocka_unit_test_setup_teardown(waiter_across_restart, setup_restart_100ms, teardown),
            cmocka_unit_test_setup_teardown(garbage_does_not_kill_the_helper, setup_dir_only,
                                            teardown),
            cmocka_unit_test_setup_teardown(zygote_ignores_garbage, setup_dir_only, teardown),
            cmocka_unit_test_setup_teardown(zygote_exits_at_eof, setup_dir_only, teardown),
            cmocka_unit_test(control_messages),
            cmocka_unit_test(fd_passing),
            cmocka_unit_test_setup_teardown(helper_capabilities, setup, teardown),
            cmocka_unit_test_setup_teardown(zygote_and_restarted_helper_capabilities,
                                            setup_restart_100ms, teardown),
            cmocka_unit_test_setup_teardown(no_devices_no_capabilities, setup_no_devices, teardown),
            cmocka_unit_test_setup_teardown(functions_only_sys_admin, setup_functions_only,
                                            teardown),
            cmocka_unit_test_setup_teardown(parent_drops_everything, setup_dir_only, teardown),
            cmocka_unit_test_setup_teardown(drop_all_unprivileged, setup_dir_only, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
