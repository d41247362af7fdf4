/* Unit tests of the privileged helper and its client: answers by id, timeouts and busy devices,
 * worker crashes and deadlines, the worker limit, garbage on the socket, helper death,
 * capability sets. A fake exec (the config's test seam) makes workers echo, hang or die. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "devio.h"
#include "devio_proto.h"
#include "privsep.h"
#include "util.h"

#define HANG_USEC (1500 * USEC_PER_MSEC)

/* Runs in the worker. "sdhang*" sleeps HANG_USEC then echoes, "sdkill" dies by SIGKILL,
 * "sdx*" echoes its name and each command's param, anything else is the real devio_exec. */
static int fake_exec(const char *dev_dir, const struct devio_request *req,
                     struct devio_response *resp)
{
        if (strncmp(req->name, "sdhang", 6) == 0)
                usleep(HANG_USEC);
        else if (strcmp(req->name, "sdkill") == 0)
                raise(SIGKILL);
        else if (strncmp(req->name, "sdx", 3) != 0)
                return devio_exec(dev_dir, req, resp);
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
        };

        return privsep_start(&cfg, &f->io);
}

static int setup_common(void **state, unsigned max_workers, usec_t worker_timeout)
{
        struct fixture *f = calloc(1, sizeof *f);

        snprintf(f->dir, sizeof f->dir, "/tmp/diskpulse-test-privsep-XXXXXX");
        if (!mkdtemp(f->dir) || start(f, max_workers, worker_timeout) < 0)
                return -1;
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

static int teardown(void **state)
{
        struct fixture *f = *state;

        if (f->io)
                f->io->ops->free(f->io);
        rmdir(f->dir);
        free(f);
        return 0;
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
        struct devio_proto_hdr hdr;
        ssize_t n = raw_recv(h, buf, sizeof buf);

        assert_int_equal(n, (ssize_t)DEVIO_PROTO_HDR_SIZE);
        assert_int_equal(devio_proto_decode_header(buf, (size_t)n, &hdr), 0);
        assert_int_equal(hdr.type, DEVIO_PROTO_HELLO);
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
        static uint8_t buf[DEVIO_PROTO_RESPONSE_MAX + 16], big[65536];
        static struct devio_response resp;
        struct devio_request req = vpd("sdxz", 5);
        struct devio_proto_hdr h;
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
        len = devio_proto_encode_request(1, &req, buf, sizeof buf);
        buf[4] = 9;
        raw_send(&raw, buf, (size_t)len);
        len = devio_proto_encode_response(2, -EIO, NULL, buf, sizeof buf);
        raw_send(&raw, buf, (size_t)len);
        len = devio_proto_encode_request(3, &req, buf, sizeof buf);
        raw_send(&raw, buf, (size_t)len - 1);
        /* a file descriptor passed along is closed, not kept */
        {
                int pass = open("/dev/null", O_RDONLY | O_CLOEXEC);
                char cbuf[CMSG_SPACE(sizeof(int))] = {0};
                struct iovec iov = {.iov_base = buf, .iov_len = (size_t)len};
                struct msghdr m = {.msg_iov = &iov,
                                   .msg_iovlen = 1,
                                   .msg_control = cbuf,
                                   .msg_controllen = sizeof cbuf};
                struct cmsghdr *c = CMSG_FIRSTHDR(&m);

                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &pass, sizeof pass);
                devio_proto_encode_request(4, &req, buf, sizeof buf);
                assert_int_equal(sendmsg(raw.fd, &m, MSG_NOSIGNAL), len);
                close(pass);
        }
        /* answered: id 4 (the one with the fd) */
        n = raw_recv(&raw, buf, sizeof buf);
        assert_true(n > 0);
        assert_int_equal(devio_proto_decode_header(buf, (size_t)n, &h), 0);
        assert_int_equal(h.id, 4);
        assert_int_equal(h.status, 0);
        /* a framed but invalid request is answered -EINVAL */
        req = vpd("sd/a", 5);
        len = devio_proto_encode_request(5, &req, buf, sizeof buf);
        raw_send(&raw, buf, (size_t)len);
        n = raw_recv(&raw, buf, sizeof buf);
        assert_int_equal(devio_proto_decode_header(buf, (size_t)n, &h), 0);
        assert_int_equal(h.id, 5);
        assert_int_equal(h.status, -EINVAL);
        /* and a good one still works, with the real devio_exec */
        req = vpd("sda", 0x80);
        len = devio_proto_encode_request(6, &req, buf, sizeof buf);
        raw_send(&raw, buf, (size_t)len);
        n = raw_recv(&raw, buf, sizeof buf);
        assert_true(n > 0);
        assert_int_equal(devio_proto_decode_header(buf, (size_t)n, &h), 0);
        assert_int_equal(h.id, 6);
        assert_int_equal(h.status, 0);
        assert_int_equal(devio_proto_decode_response(&h, buf, (size_t)n, &resp), 0);
        assert_int_equal(resp.n, 1);
        assert_int_equal(resp.r[0].err, -ENOENT);
        /* nothing else was answered */
        struct pollfd p = {.fd = raw.fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 100), 0);
        /* EOF ends the helper with status 0 */
        raw_stop(&raw);
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
        if (io->ops->run(io, &r, 5 * USEC_PER_SEC, &resp) != 0 || resp.r[0].len != 6)
                return 5;
        io->ops->free(io);
        return 0;
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
            cmocka_unit_test_setup_teardown(helper_killed, setup, teardown),
            cmocka_unit_test_setup_teardown(helper_killed_while_waiting, setup, teardown),
            cmocka_unit_test_setup_teardown(free_with_hung_worker, setup, teardown),
            cmocka_unit_test(stats_of_other_devio),
            cmocka_unit_test_setup_teardown(garbage_does_not_kill_the_helper, setup, teardown),
            cmocka_unit_test_setup_teardown(helper_capabilities, setup, teardown),
            cmocka_unit_test_setup_teardown(parent_drops_everything, setup, teardown),
            cmocka_unit_test_setup_teardown(drop_all_unprivileged, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
