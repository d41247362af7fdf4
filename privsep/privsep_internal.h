/* What the files of privsep/ share, and nothing outside privsep/ may use. Every name is
 * prefixed privsep_; a function used by one file only is static there.
 *
 * Calls between the files go one way (tests/layout/check_calls.py proves it from the compiler's
 * call graph), lowest first:
 *   processes:  fdpass.c, caps.c, child.c  <-  helper.c  <-  zygote.c
 *   the client: client_conn.c  <-  client_spawn.c  <-  client_thread.c  <-  client.c
 * (client.c also starts the zygote, privsep_zygote_main(), and checks the table of privileged
 * functions with helper.c's privsep_functions_valid(); privsep_proto.c and devio_linux.c are
 * below everything). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "devio.h"
#include "privsep_proto.h"
#include "privsep.h"
#include "refcount.h"
#include "util.h"

/* ---- caps.c ---- */

/* Leaves the calling thread with at most keep (effective = permitted = keep ∩ what it had),
 * nothing inheritable or ambient, and no_new_privs. With bounding, also drops every other
 * capability from the bounding set, which needs CAP_SETPCAP (skipped without it). Returns 0 or
 * -errno. */
int privsep_caps_restrict(uint64_t keep, bool bounding);
/* What the zygote and the helper keep: only what cfg needs (its no_devices and functions). */
uint64_t privsep_helper_caps(const struct privsep_config *cfg);
/* What a worker keeps for a request of kind (enum devio_kind). */
uint64_t privsep_worker_caps(uint32_t kind);
/* What a worker keeps for a privileged function. */
uint64_t privsep_function_caps(void);
/* 0 when the table of cfg (functions, n_functions) follows the rules of struct
 * privsep_function, -EINVAL otherwise. */
int privsep_functions_valid(const struct privsep_config *cfg);

/* ---- child.c: the setup of the zygote's and a helper's process ---- */

/* Every signal's disposition back to SIG_DFL (SIGKILL and SIGSTOP aside). */
void privsep_child_signals(void);
/* fd onto fd 3, stdin and stdout (and stderr when fd was 2) onto /dev/null, every fd above 3
 * closed. Returns 3 or -errno. */
int privsep_child_fds(int fd);

/* ---- the client (in the daemon): its state ---- */

/* One helper and its socket. Freed with the last reference. */
struct conn {
        int fd;
        int pidfd; /* -1 where pidfd_open() is missing (Linux < 5.3, valgrind) */
        pid_t pid;
        uint64_t gen;         /* which helper: pending requests carry it */
        usec_t started;       /* when it said HELLO */
        struct refcount refs; /* under the lock: the client thread's, one per run() sending */
        bool lost;            /* under the lock: found gone; the client thread reaps it */
};

/* Where the client thread puts a privileged function's answer for its waiting caller. */
struct priv_out {
        int fds[DEVIO_MAX_FDS]; /* nfds of them, the caller's from then on */
        size_t nfds;
        char err[DEVIO_PRIV_ERR_MAX];
};

struct pending {
        struct pending *next;
        uint64_t id;
        uint64_t gen;              /* the helper it was sent to */
        char name[DEVIO_NAME_MAX]; /* the device, or the privileged function */
        bool priv;                 /* a privileged function's (PRIV), not a device request */
        /* The waiting caller's: resp for a device request, out for a privileged function;
         * both NULL once it gave up (an answer then is late: its descriptors are closed). */
        struct devio_response *resp;
        struct priv_out *out;
        bool done;
        int status;
};

struct privsep {
        struct devio io; /* first: a struct devio * is a struct privsep * */
        /* Used by the client thread only (and by privsep_start() and privsep_free() while that
         * thread does not run). */
        int zfd;    /* the zygote's control socket; -1 once the zygote is gone */
        pid_t zpid; /* 0 once reaped */
        usec_t delay_min, delay_max;
        /* Set at start, read by anyone. */
        int wake; /* eventfd: cancel, free and run() wake the client thread */
        int lost; /* eventfd: readable once the zygote is gone (privsep_zygote_lost_fd()) */
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock; /* guards everything below */
        pthread_cond_t cond;  /* broadcast when an answer arrives or a helper is lost */
        struct conn *conn;    /* the current helper (maybe lost), NULL while none runs */
        bool closing;
        usec_t delay;        /* the next restart's wait */
        usec_t next_restart; /* while conn is NULL: when to ask the zygote */
        uint64_t gen;
        uint64_t next_id;
        struct pending *pending;
        struct privsep_stats stats;
};

/* ---- client_conn.c: the connection, its count, the pending table ---- */

/* Milliseconds from now until deadline for poll(): -1 for USEC_INFINITY, 0 once past. */
int privsep_ms_until(usec_t deadline);
/* Empties the wake eventfd. Returns true when the client is closing. Takes the lock. */
bool privsep_woken(struct privsep *ps);
/* Takes one more reference to c (the caller holds one, or the lock and ps->conn is c) and
 * returns c; drops one, the last closes its descriptors and frees it, and returns NULL. Both
 * accept NULL. With the lock held (or before the client thread runs / after it ended). */
struct conn *privsep_conn_ref(struct conn *c);
struct conn *privsep_conn_unref(struct conn *c);
/* Makes c (from privsep_spawn_helper()) the current helper, holding the client thread's
 * reference; restart counts it in helper_restarts. With the lock held. */
void privsep_conn_install(struct privsep *ps, struct conn *c, bool restart);
/* Marks c gone for new requests (helper_up false, the next restart scheduled) and leaves its
 * waiting callers be: answers c sent before it closed may still wait in the socket. With the
 * lock held, by run() when a send found the socket closed; the client thread, woken, takes those
 * answers and then calls privsep_conn_lost(). Idempotent. */
void privsep_conn_mark_lost(struct privsep *ps, struct conn *c);
/* Marks c gone as privsep_conn_mark_lost() does, and its waiting callers get -ECONNRESET, its
 * abandoned entries are freed. With the lock held, by the client thread (EOF, exit, or after
 * run() marked it) and by cancel; idempotent. */
void privsep_conn_lost(struct privsep *ps, struct conn *c);
/* Takes x out of the pending table (the caller frees it). With the lock held. */
void privsep_pending_unlink(struct privsep *ps, struct pending *x);

/* ---- client_spawn.c: helpers from the zygote ---- */

/* Collects a child of ours (a helper or the zygote), killing it first if it still runs. Returns
 * its wait status, or -1 when pid is not (or no longer) our child. */
int privsep_reap_child(pid_t pid);
/* A wait status (or -1) as words, into buf. Returns buf. */
const char *privsep_describe_status(int st, char *buf, size_t size);
/* Takes whatever the zygote sent that nobody waits for (an answer that came after its SPAWN
 * timed out): those helpers are not wanted. Also notices the zygote's EOF. Client thread. */
void privsep_zygote_drain(struct privsep *ps);
/* Asks the zygote for a helper and waits for its socket and its HELLO (up to 5 s each). Returns
 * 0 and *ret (not installed yet), -ENOTCONN when the zygote is gone, -ECANCELED when the client
 * is closing, or another -errno. Without the lock: the client thread, or privsep_start()
 * before that thread exists. */
int privsep_spawn_helper(struct privsep *ps, struct conn **ret);
/* Ends a helper from privsep_spawn_helper() that will not be installed: closes its socket,
 * reaps it and frees c. Without the lock. */
void privsep_spawn_discard(struct conn *c);
/* Ends the helper (if any), every helper the zygote still answers with, and the zygote: EOF on
 * their sockets first, then up to 300 ms for them to exit, then SIGKILL. The client thread does
 * not run. */
void privsep_stop_children(struct privsep *ps);

/* ---- client_thread.c ---- */

/* The client thread (pthread_create()'s start routine, arg the struct privsep): dispatches the
 * helper's answers by id; when the helper is gone, reaps it and, after the backoff, asks the
 * zygote for a new one. Runs until the client closes. */
void *privsep_client_thread(void *arg);
