/* Privilege separation (after OpenBSD ntpd): device ioctls run in a small forked helper that keeps
 * only CAP_SYS_ADMIN and CAP_SYS_RAWIO (only what the configuration needs: privsep_config's
 * no_devices and functions), while the daemon drops every capability; the daemon talks
 * to it through a struct devio (lib/devio.h).
 *
 * Processes:
 *   daemon (no capabilities, no_new_privs)
 *     ├─ zygote "diskpulse-zyg": the helper's capabilities, stdio and one SOCK_SEQPACKET
 *     │  control socket, nothing else. Its only job: for each SPAWN message (privsep_proto.h)
 *     │  it makes a socketpair, starts a helper with clone(CLONE_PARENT) - a child of the
 *     │  daemon, its sibling - and sends the daemon its socket (SCM_RIGHTS) and pid. Anything
 *     │  else on the socket is ignored. It follows the daemon: EOF on its socket, or
 *     │  PR_SET_PDEATHSIG.
 *     └─ helper "diskpulse-priv": reads requests from its SOCK_SEQPACKET socketpair, validates
 *        them, and forks one short-lived worker per request (at most max_workers at a time)
 *          └─ worker "diskpulse-io": privsep_devio_exec(), writes the response itself, exits;
 *             or, for a PRIV message, the named function of cfg->functions (CAP_SYS_ADMIN
 *             only), whose descriptors it sends along with its answer (fdpass.h).
 *        A worker that dies without answering (crash, signal) is answered for by the helper
 *        (-EIO), so a crash or a hung ioctl costs one request, never the helper.
 *
 * Every helper, the first one included, comes from the zygote, so the daemon never needs a
 * capability again after privsep_start(). Helpers are the daemon's children (CLONE_PARENT) so
 * that the daemon reaps them and may signal them without a pid-reuse race, and so that a helper
 * does not die with the zygote. The helper dies with the daemon (PR_SET_PDEATHSIG, and EOF on its
 * socket); workers die with the helper.
 *
 * A helper that dies (found by EOF or reset on its socket, or its exit) fails every request
 * waiting for it with -ECONNRESET; requests made while it is down fail at once with -ECONNRESET.
 * The client's thread asks the zygote for a new helper after restart_delay, doubling the delay
 * for each helper that dies again sooner than restart_max after it started (and for each failed
 * attempt), up to restart_max; a helper that lived that long resets it. A new helper counts in
 * privsep_stats.helper_restarts once it said HELLO. If the zygote itself is gone, nothing can
 * start a helper any more: a helper that dies then stays down (helper_up false) until the daemon
 * is restarted, and that is final. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "devio.h"
#include "util.h"

#define PRIVSEP_MAX_WORKERS_DEFAULT    32
#define PRIVSEP_WORKER_TIMEOUT_DEFAULT (5 * 60 * USEC_PER_SEC)
#define PRIVSEP_RESTART_DELAY_DEFAULT  (1 * USEC_PER_SEC)
#define PRIVSEP_RESTART_MAX_DEFAULT    (5 * 60 * USEC_PER_SEC)

/* What a worker runs: privsep_devio_exec in production. */
typedef int (*privsep_exec_fn)(const char *dev_dir, const struct devio_request *req,
                               struct devio_response *resp);

/* A privileged function (lib/collector.h, collector_def.privileged): runs in a worker of the
 * helper with CAP_SYS_ADMIN; arg as the daemon sent it (at most DEVIO_PRIV_ARG_MAX bytes). Puts
 * at most DEVIO_MAX_FDS descriptors in fds and their count in *nfds (0 on entry), which the
 * worker sends to the daemon; returns 0, or -errno with a message in err (errsz bytes). */
typedef int (*privsep_function_fn)(const void *arg, size_t len, int fds[], size_t *nfds, char *err,
                                   size_t errsz);

/* One entry of the table of privileged functions, found by name (1 to DEVIO_NAME_MAX - 1
 * bytes, unique in the table). */
struct privsep_function {
        const char *name;
        privsep_function_fn fn;
};

#define PRIVSEP_FUNCTIONS_MAX 64 /* entries in the table, at most */

struct privsep_config {
        const char *dev_dir;   /* device nodes (--path.dev, whose entry has the default); copied */
        unsigned max_workers;  /* requests running at once; 0: PRIVSEP_MAX_WORKERS_DEFAULT;
                                * beyond it a request is answered -EAGAIN at once */
        usec_t worker_timeout; /* a worker still running after this is killed (SIGKILL) and its
                                * request answered -ETIMEDOUT; 0: PRIVSEP_WORKER_TIMEOUT_DEFAULT */
        bool keep_privileges;  /* false (the default): privsep_start() calls privsep_drop_all()
                                * in the daemon once the helper runs. true: the caller does it */
        privsep_exec_fn
            exec; /* NULL: privsep_devio_exec. A test seam: it is fixed when the zygote is
                                * forked, in the zygote's memory; nothing the daemon sends later
                                * can change it */
        usec_t restart_delay; /* wait before replacing a helper that died; 0:
                                * PRIVSEP_RESTART_DELAY_DEFAULT. The client's, not the zygote's */
        usec_t restart_max;   /* the wait doubles up to this; a helper that lived this long
                                * resets it; 0: PRIVSEP_RESTART_MAX_DEFAULT (at least
                                * restart_delay) */
        /* The privileged functions that devio_ops.privileged() may name (n_functions entries,
         * at most PRIVSEP_FUNCTIONS_MAX; NULL/0: none). Like exec, fixed when the zygote is
         * forked, in the zygote's memory (the table, its names and its functions are those of
         * that moment): nothing the daemon sends later can add to it or change it; the daemon
         * sends only a name, which the helper looks up. */
        const struct privsep_function *functions;
        size_t n_functions;
        /* No device requests (no collector that sends them runs: SMART off): the zygote and
         * every helper keep neither CAP_SYS_RAWIO nor, unless a privileged function is in the
         * table, CAP_SYS_ADMIN (nor CAP_DAC_READ_SEARCH), bounding set included, so no helper
         * the zygote starts later has them either; a device request is answered -EPERM. Fixed
         * when the zygote is forked, like the table: nothing can give them back. */
        bool no_devices;
};

/* Forks the zygote, has it start the first helper, waits (up to 5 s each) for the helper's socket
 * and until the helper says it is ready, its capabilities dropped, and returns the client in
 * *ret_io (free it with io->ops->free(io), which closes both sockets, waits up to 300 ms for the
 * helper and the zygote to exit, then kills them). Unless cfg->keep_privileges, then drops every
 * capability of the calling thread (privsep_drop_all()). Finally starts the client's thread,
 * which receives answers and restarts the helper (with all signals blocked and no
 * capabilities).
 *
 * Call it from the main thread before any other thread exists: capabilities are per-thread
 * (capset(2) changes only the caller), PR_SET_PDEATHSIG fires when the forking *thread* exits,
 * and the zygote - so every helper - inherits the whole address space as it is now, so call it
 * before secrets (TLS keys, passwords) are loaded. Do not reap the zygote or a helper elsewhere
 * (a SIGCHLD handler that waits for any child); set SIGCHLD to anything but SIG_IGN.
 *
 * Works without privileges too: the helper then keeps what it has (nothing) and device commands
 * fail with EACCES / EPERM in their results. Returns 0, -EINVAL without cfg->dev_dir or for a
 * table of functions that breaks the rules of struct privsep_function (an empty, too long or
 * repeated name, a NULL function, too many), -EIO when the helper did not start (the zygote or
 * the helper exited or did not answer), or -errno from socketpair(), fork(), eventfd(),
 * privsep_drop_all() or pthread_create() (the helper and the zygote are stopped again then). */
int privsep_start(const struct privsep_config *cfg, struct devio **ret_io);

/* privsep_start() without the fork: the client of a zygote that the caller plays itself on the
 * other end of zfd (a SOCK_SEQPACKET socket, owned by the client from here on, closed on
 * failure too) and that has process id zpid (0: none to reap). Asks for the first helper as
 * privsep_start() does: sends SPAWN, waits for SPAWNED with the helper's socket and for its
 * HELLO. For tests and the fuzz target of the client, which answer with whatever bytes they
 * like; helpers named in SPAWNED that are not this process's children are never signalled.
 * The same rules and returns as privsep_start(). */
int privsep_client_start(int zfd, pid_t zpid, const struct privsep_config *cfg,
                         struct devio **ret_io);

/* Drops every capability of the calling thread: effective, permitted, inheritable, ambient, the
 * bounding set (when CAP_SETPCAP allows; without it the bounding set is left, which
 * no_new_privs makes harmless) and sets PR_SET_NO_NEW_PRIVS. Threads created afterwards inherit
 * this; threads that already exist keep their own sets. Idempotent. Returns 0 or -errno (from
 * capset(2) or prctl(2)); on failure the thread may hold fewer capabilities than before, never
 * more. Main thread. */
int privsep_drop_all(void);

/* The helper's side on fd (its end of the SOCK_SEQPACKET pair): drops capabilities, closes every
 * other fd but stderr, sends HELLO (privsep_proto.h), serves requests until EOF or SIGTERM,
 * then kills its workers and exits the process with _exit(). For the zygote's children and for
 * tests that speak the wire format themselves. Never returns. */
_Noreturn void privsep_helper_main(int fd, const struct privsep_config *cfg);

/* The zygote's side on fd (its end of the SOCK_SEQPACKET control pair), in a process forked for
 * it: keeps only the helper's capabilities (bounding set included, no_new_privs), moves fd to 3
 * and closes every other fd but stdio, then answers each SPAWN message (privsep_proto.h) with a
 * new helper - privsep_helper_main() with cfg, a child of this process's parent - and SPAWNED;
 * ignores every other message and SIGTERM, SIGINT, SIGHUP. Exits 0 at EOF. For privsep_start()'s
 * child and for tests that speak the control messages themselves. Never returns. */
_Noreturn void privsep_zygote_main(int fd, const struct privsep_config *cfg);

struct privsep_stats {
        bool helper_up;           /* false while no helper runs (it died, not replaced yet) */
        pid_t helper_pid;         /* the running helper's process id; 0 while helper_up is false */
        uint64_t helper_exits;    /* times a helper was found gone (shutdown not counted) */
        uint64_t helper_restarts; /* helpers started (and said HELLO) after one was gone */
        uint64_t failed_restarts; /* attempts to start one that failed (retried with backoff) */
        bool zygote_up;           /* false once the zygote is gone: no more restarts, ever */
        pid_t zygote_pid;         /* its process id; 0 once it is gone */
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

/* An eventfd that becomes readable (and stays so) once the zygote is gone and no helper can be
 * started any more: the daemon's loop watches it (a process without capabilities cannot make a
 * new zygote). -1 for an io that is not privsep's. Owned by io. */
int privsep_zygote_lost_fd(struct devio *io);
