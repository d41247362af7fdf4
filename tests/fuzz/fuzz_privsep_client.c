/* Fuzz target of the daemon's end of the helper protocol: the real client of privsep/client*.c
 * (its receiver thread, the table of pending requests, the zygote's SPAWNED answers with their
 * descriptors) against a helper and a zygote that this target plays itself, over real
 * SOCK_SEQPACKET sockets, with any bytes the input asks for. A model of the client's rules
 * predicts each caller's result (the status of the first framed RESPONSE with its id, -EIO for a
 * bad payload, -ECONNRESET when the helper goes away first, -EBUSY for a second request to a busy
 * device) and the counters (dropped messages, worker failures, overloads); every prediction is
 * checked, and so is that no descriptor leaks and nothing hangs.
 *
 * The input is a script of operations (each a byte, then its arguments):
 *   0 REQ k           a caller asks for device "sd" + "abcd"[k % 4]
 *   1 ANSWER i L data send L bytes as a helper message, the id field set to request i's
 *   2 RAW L data      send L bytes as they are
 *   3 CLOSE           the helper closes its socket (the client starts another)
 *   4 SPAWN f data16  the zygote answers the next SPAWN with these 16 bytes (with a descriptor
 *                     if f is odd and the bytes are not a good SPAWNED), then CLOSE
 *   5 FDS L data      RAW with a descriptor attached
 *   6 BIG n           a message longer than any response
 *   7 HELLO           a second HELLO
 *   8 PRIV            a caller runs the privileged function "f" (devio_ops.privileged)
 *   9 ANSWERFD i L data  ANSWER with a descriptor attached
 * A privileged function's caller gets the answer's status, its message and exactly the
 * descriptors that came, when they are as many as the answer announces; -EIO otherwise (and
 * for a device answer with a descriptor, or an answer of the other kind). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "devio.h"
#include "privsep_proto.h"
#include "fdpass.h"
#include "log.h"
#include "privsep.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OPS  48
#define MAX_REQS 24
#define WAIT_MS  5000

static void check(int cond, const char *what)
{
        if (!cond) {
                fprintf(stderr, "fuzz_privsep_client: %s\n", what);
                abort();
        }
}

/* ---- the zygote, played by a thread ---- */

struct zygote {
        int fd;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int helper;       /* our end of the newest helper's socket, taken by the script */
        unsigned spawned; /* good SPAWNED sent */
        uint8_t bad[16];  /* the next answer, when has_bad */
        bool has_bad, bad_fd;
        int devnull;
};

/* Any bytes, with attach (>= 0) as the one descriptor: privsep_recv_fd() on the client's side
 * is what parses them. */
static void send_with_fd(int fd, const void *buf, size_t len, int attach)
{
        /* The peer may be gone already (a closed helper): that is its business. */
        (void)privsep_send_fd(fd, buf, len, attach, 0);
}

static void *zygote_main(void *arg)
{
        struct zygote *z = arg;

        for (;;) {
                uint8_t buf[64], msg[PRIVSEP_PROTO_CTL_SIZE], hello[PRIVSEP_PROTO_HDR_SIZE];
                int sv[2], status;
                int32_t pid;
                ssize_t n = recv(z->fd, buf, sizeof buf, 0);

                if (n <= 0)
                        break;
                check(privsep_proto_is_spawn(buf, (size_t)n),
                      "the client sent the zygote no SPAWN");
                pthread_mutex_lock(&z->lock);
                if (z->has_bad) {
                        bool good =
                            privsep_proto_decode_spawned(z->bad, sizeof z->bad, &status, &pid) == 0;
                        z->has_bad = false;
                        pthread_mutex_unlock(&z->lock);
                        /* A good SPAWNED without its descriptor, or anything else with or
                         * without one: never a pid of a process the client could watch. */
                        send_with_fd(z->fd, z->bad, sizeof z->bad,
                                     z->bad_fd && !good ? z->devnull : -1);
                        continue;
                }
                pthread_mutex_unlock(&z->lock);
                check(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
                /* pid: this process, which is not our child, so the client never signals it */
                check(privsep_proto_encode_spawned(0, (int32_t)getpid(), msg, sizeof msg) > 0,
                      "encode SPAWNED");
                check(privsep_proto_encode_hello(hello, sizeof hello) > 0, "encode HELLO");
                check(send(sv[1], hello, sizeof hello, MSG_NOSIGNAL) == (ssize_t)sizeof hello,
                      "send HELLO");
                send_with_fd(z->fd, msg, sizeof msg, sv[0]);
                close(sv[0]);
                pthread_mutex_lock(&z->lock);
                if (z->helper >= 0)
                        close(z->helper);
                z->helper = sv[1];
                z->spawned++;
                pthread_cond_broadcast(&z->cond);
                pthread_mutex_unlock(&z->lock);
        }
        /* The client waits for our end after it shut its own: EOF now. */
        close(z->fd);
        z->fd = -1;
        return NULL;
}

/* ---- callers ---- */

struct req {
        struct devio *io;
        bool priv; /* a privileged function's caller */
        char name[8];
        uint64_t id; /* 0 until its message was seen */
        pthread_t th;
        int efd; /* written when run() returned */
        int got;
        struct devio_response *resp; /* the caller's */
        /* the model */
        bool answered;    /* an answer (or the helper's end) decided it */
        int expect;       /* its result then */
        bool expect_resp; /* with expect 0: resp must equal want */
        struct devio_response *want;
        bool joined;
        /* a privileged function's: what it got, what the model expects with expect 0 */
        int fds[DEVIO_MAX_FDS];
        size_t nfds, expect_nfds;
        char err[DEVIO_PRIV_ERR_MAX], expect_err[DEVIO_PRIV_ERR_MAX];
};

static void *caller(void *arg)
{
        struct req *q = arg;
        struct devio_request r = {.kind = DEVIO_SCSI, .n = 1};
        uint64_t one = 1;

        strscpy(r.name, q->name, sizeof r.name);
        r.cmds[0].cmd = DEVIO_SCSI_INQUIRY;
        if (q->priv)
                q->got = q->io->ops->privileged(q->io, q->name, "a", 1, 60 * USEC_PER_SEC, q->fds,
                                                &q->nfds, q->err, sizeof q->err);
        else
                q->got = q->io->ops->run(q->io, &r, 60 * USEC_PER_SEC, q->resp);
        check(write(q->efd, &one, sizeof one) == sizeof one, "eventfd");
        return NULL;
}

static void join(struct req *q)
{
        struct pollfd p = {.fd = q->efd, .events = POLLIN};

        if (q->joined)
                return;
        check(poll(&p, 1, WAIT_MS) == 1, "a caller did not return");
        pthread_join(q->th, NULL);
        close(q->efd);
        q->joined = true;
}

/* ---- the script ---- */

struct state {
        struct devio *io;
        struct zygote z;
        int helper; /* our end of the current helper's socket */
        struct req reqs[MAX_REQS];
        size_t n_reqs;
        uint64_t last_id;
        /* the model's counters */
        uint64_t dropped, worker_failures, overloaded, requests;
};

static struct req *pending_by_id(struct state *s, uint64_t id)
{
        for (size_t i = 0; i < s->n_reqs; i++)
                if (s->reqs[i].id == id && !s->reqs[i].answered)
                        return &s->reqs[i];
        return NULL;
}

static bool name_pending(struct state *s, const char *name)
{
        for (size_t i = 0; i < s->n_reqs; i++)
                if (s->reqs[i].id && !s->reqs[i].answered && !s->reqs[i].priv &&
                    strcmp(s->reqs[i].name, name) == 0)
                        return true;
        return false;
}

/* The client's rules for one message from the helper (client_thread.c deliver()), attach: it
 * came with a descriptor. */
static void model_message(struct state *s, const uint8_t *buf, size_t len, bool attach)
{
        static struct devio_response r;
        struct privsep_proto_hdr h;
        struct req *q;

        if (len > PRIVSEP_PROTO_RESPONSE_MAX || privsep_proto_decode_header(buf, len, &h) < 0 ||
            (h.type != PRIVSEP_PROTO_RESPONSE && h.type != PRIVSEP_PROTO_PRIV_ANSWER)) {
                s->dropped++;
                return;
        }
        q = pending_by_id(s, h.id);
        if (!q) {
                s->dropped++;
                return;
        }
        if (h.status == -EIO || h.status == -ETIMEDOUT)
                s->worker_failures++;
        else if (h.status == -EAGAIN)
                s->overloaded++;
        q->answered = true;
        q->expect = h.status;
        if (q->priv) {
                struct privsep_proto_priv_answer a;
                size_t nfds = attach ? 1 : 0;

                if (h.type != PRIVSEP_PROTO_PRIV_ANSWER ||
                    privsep_proto_decode_priv_answer(&h, buf, len, &a) < 0 || a.nfds != nfds) {
                        s->dropped++;
                        q->expect = -EIO;
                } else {
                        q->expect_nfds = nfds;
                        memcpy(q->expect_err, a.err, sizeof a.err);
                }
        } else if (attach || h.type != PRIVSEP_PROTO_RESPONSE) {
                /* a device answer never carries a descriptor; a privileged function's answer
                 * is not one for a device request */
                s->dropped++;
                q->expect = -EIO;
        } else if (h.status == 0) {
                if (privsep_proto_decode_response(&h, buf, len, &r) < 0) {
                        s->dropped++;
                        q->expect = -EIO;
                } else {
                        q->expect_resp = true;
                        q->want = malloc(sizeof r);
                        check(q->want != NULL, "malloc");
                        memcpy(q->want, &r, sizeof r);
                }
        }
        join(q); /* so that its entry is gone before the next request */
}

static void lost(struct state *s, bool close_ours, unsigned next);

static unsigned next_spawn(struct state *s)
{
        unsigned n;

        pthread_mutex_lock(&s->z.lock);
        n = s->z.spawned + 1;
        pthread_mutex_unlock(&s->z.lock);
        return n;
}

static void send_helper(struct state *s, const uint8_t *buf, size_t len, bool attach)
{
        unsigned next = next_spawn(s);

        send_with_fd(s->helper, buf, len, attach ? s->z.devnull : -1);
        if (len == 0) {
                lost(s, false, next); /* an empty message reads as the helper's EOF */
                return;
        }
        model_message(s, buf, len, attach);
        /* Every message either completes a request (joined above) or is dropped: wait for the
         * drop too, or a message with the id of a request made next could reach that one. */
        for (int i = 0; i < WAIT_MS * 20; i++) {
                struct privsep_stats st;

                check(privsep_stats(s->io, &st) == 0, "privsep_stats");
                if (st.dropped >= s->dropped)
                        return;
                nanosleep(&(struct timespec){.tv_nsec = 50000}, NULL);
        }
        check(0, "the client did not take a message");
}

static void op_req(struct state *s, const char *name, size_t limit, bool priv)
{
        struct req *q;
        struct pollfd p[2];
        uint8_t buf[PRIVSEP_PROTO_RESPONSE_MAX];
        struct privsep_proto_hdr h;
        struct devio_request r;
        struct privsep_proto_priv pr;
        bool busy;
        ssize_t n;

        if (s->n_reqs >= limit)
                return;
        q = &s->reqs[s->n_reqs++];
        memset(q, 0, sizeof *q);
        q->io = s->io;
        strscpy(q->name, name, sizeof q->name);
        q->priv = priv;
        q->resp = malloc(sizeof *q->resp);
        check(q->resp != NULL, "malloc");
        busy = !priv && name_pending(s, q->name);
        q->efd = eventfd(0, EFD_CLOEXEC);
        check(q->efd >= 0, "eventfd");
        check(pthread_create(&q->th, NULL, caller, q) == 0, "pthread_create");
        if (busy) {
                join(q);
                check(q->got == -EBUSY, "a second request to a busy device was not -EBUSY");
                q->answered = true;
                q->expect = -EBUSY;
                return;
        }
        p[0] = (struct pollfd){.fd = s->helper, .events = POLLIN};
        p[1] = (struct pollfd){.fd = q->efd, .events = POLLIN};
        check(poll(p, 2, WAIT_MS) >= 1, "neither a request nor a result");
        check(p[0].revents & POLLIN, "run() returned without sending its request");
        n = recv(s->helper, buf, sizeof buf, 0);
        if (priv) {
                check(n == (ssize_t)(PRIVSEP_PROTO_HDR_SIZE + DEVIO_NAME_MAX + 1),
                      "the PRIV has the wrong size");
                check(privsep_proto_decode_header(buf, (size_t)n, &h) == 0 &&
                          h.type == PRIVSEP_PROTO_PRIV,
                      "the client sent a malformed PRIV");
                check(privsep_proto_decode_priv(&h, buf, (size_t)n, &pr) == 0 &&
                          strcmp(pr.name, q->name) == 0 && pr.len == 1 && pr.arg[0] == 'a',
                      "the PRIV names another function or argument");
                check(h.id > s->last_id, "request ids do not increase");
                s->last_id = h.id;
                q->id = h.id;
                s->requests++;
                return;
        }
        check(n == (ssize_t)PRIVSEP_PROTO_REQUEST_SIZE, "the request has the wrong size");
        check(privsep_proto_decode_header(buf, (size_t)n, &h) == 0 &&
                  h.type == PRIVSEP_PROTO_REQUEST,
              "the client sent a malformed request");
        check(privsep_proto_decode_request(&h, buf, (size_t)n, &r) == 0, "an invalid request");
        check(strcmp(r.name, q->name) == 0, "the request names another device");
        check(h.id > s->last_id, "request ids do not increase");
        s->last_id = h.id;
        q->id = h.id;
        s->requests++;
}

/* Waits until the client has a helper again, the spawned-th one. */
static void wait_helper(struct state *s, unsigned spawned)
{
        struct timespec ts;
        struct privsep_stats st;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += WAIT_MS / 1000;
        pthread_mutex_lock(&s->z.lock);
        while (s->z.spawned < spawned)
                check(pthread_cond_timedwait(&s->z.cond, &s->z.lock, &ts) == 0,
                      "no new helper was asked for");
        s->helper = s->z.helper;
        s->z.helper = -1;
        pthread_mutex_unlock(&s->z.lock);
        for (int i = 0; i < WAIT_MS * 20; i++) {
                check(privsep_stats(s->io, &st) == 0, "privsep_stats");
                if (st.helper_up)
                        return;
                nanosleep(&(struct timespec){.tv_nsec = 50000}, NULL);
        }
        check(0, "the new helper did not come up");
}

/* The helper is gone for the client: its waiting callers fail, a new one comes. */
static void lost(struct state *s, bool close_ours, unsigned next)
{
        if (close_ours)
                close(s->helper);
        for (size_t i = 0; i < s->n_reqs; i++)
                if (s->reqs[i].id && !s->reqs[i].answered) {
                        s->reqs[i].answered = true;
                        s->reqs[i].expect = -ECONNRESET;
                        join(&s->reqs[i]);
                }
        if (!close_ours)
                close(s->helper);
        s->helper = -1;
        wait_helper(s, next);
}

/* Open descriptors of this process (the directory's own included, the same each time). */
static int count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        int n = 0;

        check(d != NULL, "opendir /proc/self/fd");
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

static bool same_file(int a, int b)
{
        struct stat x, y;

        return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
               x.st_ino == y.st_ino;
}

static void set_id(uint8_t *buf, size_t len, uint64_t id)
{
        if (len >= offsetof(struct privsep_proto_hdr, id) + sizeof id)
                memcpy(buf + offsetof(struct privsep_proto_hdr, id), &id, sizeof id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static uint8_t msg[PRIVSEP_PROTO_RESPONSE_MAX + 300];
        struct privsep_config cfg = {
            .dev_dir = "/dev", .restart_delay = 1, .restart_max = 1, .keep_privileges = true};
        struct state *s = calloc(1, sizeof *s);
        struct privsep_stats st;
        pthread_t zth;
        int zsv[2], fds_before, ops = 0;
        size_t i = 0;

        check(s != NULL, "calloc");
        log_setup((enum log_level)(LOG_LEVEL_ERROR + 1), LOG_FORMAT_LOGFMT); /* quiet */
        signal(SIGPIPE, SIG_IGN);
        fds_before = count_fds();
        check(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, zsv) == 0, "socketpair");
        s->z.fd = zsv[1];
        s->z.helper = -1;
        s->z.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        pthread_mutex_init(&s->z.lock, NULL);
        pthread_cond_init(&s->z.cond, NULL);
        check(pthread_create(&zth, NULL, zygote_main, &s->z) == 0, "pthread_create");
        check(privsep_client_start(zsv[0], 0, &cfg, &s->io) == 0, "the client did not start");
        wait_helper(s, 1);

        while (i < size && ops++ < MAX_OPS) {
                uint8_t op = data[i++] % 10;
                size_t len;

                switch (op) {
                case 0: {
                        char name[8];
                        snprintf(name, sizeof name, "sd%c", "abcd"[(i < size ? data[i++] : 0) % 4]);
                        op_req(s, name, MAX_REQS - 1, false);
                        break;
                }
                case 8:
                        op_req(s, "f", MAX_REQS - 1, true);
                        break;
                case 1:
                case 2:
                case 5:
                case 9: {
                        uint8_t which = 0;

                        if (op == 1 || op == 9)
                                which = i < size ? data[i++] : 0;
                        len = 0;
                        if (i + 2 <= size) {
                                len = (size_t)data[i] | (size_t)data[i + 1] << 8;
                                i += 2;
                        }
                        len %= sizeof msg + 1;
                        if (len > size - i)
                                len = size - i;
                        memcpy(msg, data + i, len);
                        i += len;
                        if ((op == 1 || op == 9) && s->n_reqs > 0)
                                set_id(msg, len, s->reqs[which % s->n_reqs].id);
                        send_helper(s, msg, len, op == 5 || op == 9);
                        break;
                }
                case 3:
                        lost(s, true, next_spawn(s));
                        break;
                case 4:
                        pthread_mutex_lock(&s->z.lock);
                        s->z.bad_fd = i < size && (data[i++] & 1);
                        memset(s->z.bad, 0, sizeof s->z.bad);
                        len = size - i < sizeof s->z.bad ? size - i : sizeof s->z.bad;
                        memcpy(s->z.bad, data + i, len);
                        i += len;
                        s->z.has_bad = true;
                        pthread_mutex_unlock(&s->z.lock);
                        lost(s, true, next_spawn(s));
                        break;
                case 6:
                        len = PRIVSEP_PROTO_RESPONSE_MAX + 1 + (i < size ? data[i++] : 0);
                        memset(msg, 0, len);
                        send_helper(s, msg, len, false);
                        break;
                case 7:
                        check(privsep_proto_encode_hello(msg, sizeof msg) > 0, "encode HELLO");
                        send_helper(s, msg, PRIVSEP_PROTO_HDR_SIZE, false);
                        break;
                }
        }

        /* A last request, answered properly: once it returns, the client has taken every
         * message sent before it, so the counters must be the model's. */
        {
                struct devio_response none = {.n = 0};
                int len;

                struct req *last;

                op_req(s, "sdz", MAX_REQS, false);
                last = &s->reqs[s->n_reqs - 1];
                check(last->id != 0, "the last request was not sent");
                len = privsep_proto_encode_response(last->id, 0, &none, msg, sizeof msg);
                check(len > 0, "encode");
                send_helper(s, msg, (size_t)len, false);
                check(last->got == 0 && last->resp->n == 0, "the last request failed");
        }
        check(privsep_stats(s->io, &st) == 0, "privsep_stats");
        check(st.dropped == s->dropped, "dropped messages differ from the model");
        check(st.worker_failures == s->worker_failures, "worker failures differ from the model");
        check(st.overloaded == s->overloaded, "overloads differ from the model");
        check(st.requests == s->requests, "requests differ from the model");
        check(st.late_responses == 0 && st.timeouts == 0, "a late response or a timeout");
        check(st.helper_up, "no helper at the end");

        /* Requests nobody answered end with the client: -ECONNRESET. */
        s->io->ops->cancel(s->io);
        for (size_t k = 0; k < s->n_reqs; k++) {
                struct req *q = &s->reqs[k];

                if (!q->answered) {
                        q->answered = true;
                        q->expect = -ECONNRESET;
                }
                join(q);
                if (q->got != q->expect) {
                        fprintf(stderr, "request %zu (%s, id %llu): got %d, want %d\n", k, q->name,
                                (unsigned long long)q->id, q->got, q->expect);
                        check(0, "a caller's result differs from the model");
                }
                if (q->expect == 0 && q->expect_resp)
                        check(memcmp(q->resp, q->want, sizeof *q->want) == 0,
                              "a caller's response differs from what was sent");
                if (q->priv && q->got == 0) {
                        check(q->nfds == q->expect_nfds, "a caller got other descriptors");
                        for (size_t k2 = 0; k2 < q->nfds; k2++)
                                check(same_file(q->fds[k2], s->z.devnull) &&
                                          (fcntl(q->fds[k2], F_GETFD) & FD_CLOEXEC) &&
                                          close(q->fds[k2]) == 0,
                                      "a caller's descriptor is not the one sent");
                        check(q->err[0] == '\0', "a message with status 0");
                } else if (q->priv) {
                        check(q->nfds == 0, "descriptors with an error");
                        check(q->err[0] != '\0', "an error without a message");
                        if (q->expect_err[0])
                                check(strcmp(q->err, q->expect_err) == 0,
                                      "a caller's message differs from what was sent");
                }
        }
        s->io->ops->free(s->io);
        for (size_t k = 0; k < s->n_reqs; k++) {
                free(s->reqs[k].resp);
                free(s->reqs[k].want);
        }
        pthread_join(zth, NULL);
        if (s->helper >= 0)
                close(s->helper);
        pthread_mutex_lock(&s->z.lock);
        if (s->z.helper >= 0)
                close(s->z.helper);
        pthread_mutex_unlock(&s->z.lock);
        close(s->z.devnull);
        pthread_mutex_destroy(&s->z.lock);
        pthread_cond_destroy(&s->z.cond);
        free(s);
        check(count_fds() == fds_before, "a descriptor leaked");
        return 0;
}
