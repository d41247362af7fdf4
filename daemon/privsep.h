/* Privilege separation (after OpenBSD ntpd): device ioctls run in a small forked helper that keeps
 * only CAP_SYS_ADMIN and CAP_SYS_RAWIO, while the daemon drops every capability; the daemon talks
 * to it through a struct devio (lib/devio.h).
 *
 * Processes:
 *   daemon (no capabilities, no_new_privs)
 *     └─ helper "diskpulse-priv": reads requests from a SOCK_SEQPACKET socketpair, validates
 *        them, and forks one short-lived worker per request (at most max_workers at a time)
 *          └─ worker "diskpulse-io": devio_exec(), writes the response itself, exits.
 *        A worker that dies without answering (crash, signal) is answered for by the helper
 *        (-EIO), so a crash or a hung ioctl costs one request, never the helper.
 *
 * The helper dies with the daemon (PR_SET_PDEATHSIG, and EOF on the socket); workers die with
 * the helper. The daemon has no capabilities left to start a new helper: if the helper dies,
 * every later run() fails with -ECONNRESET and privsep_stats() reports helper_up = false until
 * the daemon is restarted (e.g. by systemd when the collector makes the daemon exit). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "devio.h"
#include "util.h"

#define PRIVSEP_MAX_WORKERS_DEFAULT    32
#define PRIVSEP_WORKER_TIMEOUT_DEFAULT (5 * 60 * USEC_PER_SEC)

/* What a worker runs: devio_exec in production. */
typedef int (*privsep_exec_fn)(const char *dev_dir, const struct devio_request *req,
                               struct devio_response *resp);

struct privsep_config {
        const char *dev_dir;   /* device nodes, "/dev" (--path.dev); copied */
        unsigned max_workers;  /* requests running at once; 0: PRIVSEP_MAX_WORKERS_DEFAULT;
                                * beyond it a request is answered -EAGAIN at once */
        usec_t worker_timeout; /* a worker still running after this is killed (SIGKILL) and its
                                * request answered -ETIMEDOUT; 0: PRIVSEP_WORKER_TIMEOUT_DEFAULT */
        bool keep_privileges;  /* false (the default): privsep_start() calls privsep_drop_all()
                                * in the daemon once the helper runs. true: the caller does it */
        privsep_exec_fn exec;  /* NULL: devio_exec. A test seam: it is fixed when the helper is
                                * forked, in the helper's memory; nothing the daemon sends later
                                * can change it */
};

/* Forks the helper, waits (up to 5 s) until it says it is ready, its capabilities dropped, and
 * returns the client in *ret_io (free it with io->ops->free(io), which closes the socket, waits
 * up to 300 ms for the helper to exit, then kills it). Unless
 * cfg->keep_privileges, then drops every capability of the calling thread (privsep_drop_all()).
 * Finally starts the client's receiver thread (with all signals blocked and no capabilities).
 *
 * Call it from the main thread before any other thread exists: capabilities are per-thread
 * (capset(2) changes only the caller), PR_SET_PDEATHSIG fires when the forking *thread* exits,
 * and the helper inherits the whole address space as it is now, so call it before secrets (TLS
 * keys, passwords) are loaded. Do not reap the helper elsewhere (a SIGCHLD handler that waits
 * for any child); set SIGCHLD to anything but SIG_IGN.
 *
 * Works without privileges too: the helper then keeps what it has (nothing) and device commands
 * fail with EACCES / EPERM in their results. Returns 0, -EIO when the helper did not start
 * (it exited or did not say hello), or -errno from socketpair(), fork(), privsep_drop_all() or
 * pthread_create() (the helper is stopped again then). */
int privsep_start(const struct privsep_config *cfg, struct devio **ret_io);

/* Drops every capability of the calling thread: effective, permitted, inheritable, ambient, the
 * bounding set (when CAP_SETPCAP allows; without it the bounding set is left, which
 * no_new_privs makes harmless) and sets PR_SET_NO_NEW_PRIVS. Threads created afterwards inherit
 * this; threads that already exist keep their own sets. Idempotent. Returns 0 or -errno (from
 * capset(2) or prctl(2)); on failure the thread may hold fewer capabilities than before, never
 * more. Main thread. */
int privsep_drop_all(void);

/* The helper's side on fd (its end of the SOCK_SEQPACKET pair): drops capabilities, closes every
 * other fd but stderr, sends HELLO (lib/devio_proto.h), serves requests until EOF or SIGTERM,
 * then kills its workers and exits
 * the process with _exit(). For privsep_start()'s child and for tests that speak the wire format
 * themselves. Never returns. */
_Noreturn void privsep_helper_main(int fd, const struct privsep_config *cfg);

struct privsep_stats {
        bool helper_up;           /* false once the helper is gone (EOF, reset, or it exited) */
        pid_t helper_pid;         /* its process id (also while it is up only) */
        uint64_t helper_exits;    /* times it was found gone: 0 or 1, there is no restart */
        uint64_t requests;        /* requests sent */
        uint64_t timeouts;        /* run() calls that returned -ETIMEDOUT */
        uint64_t late_responses;  /* answers that came after their caller gave up */
        uint64_t dropped;         /* malformed messages, or answers with an unknown id */
        uint64_t worker_failures; /* requests answered -EIO / -ETIMEDOUT by the helper itself */
        uint64_t overloaded;      /* requests answered -EAGAIN (too many workers) */
        unsigned inflight;        /* requests sent and not answered yet (timed-out ones too) */
};

/* Copies the counters of a client made by privsep_start() into *ret. Returns 0, or -EINVAL when
 * io is not such a client. Any thread. */
int privsep_stats(struct devio *io, struct privsep_stats *ret);

/* Shorthand: true while the helper of io (made by privsep_start()) is up. Any thread. */
bool privsep_helper_up(struct devio *io);
