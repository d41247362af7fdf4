/* What the files of the privileged helper share, and nothing outside privsep/ may use: the
 * capability sets (caps.c), the setup of a helper's or the zygote's process (helper.c), the
 * client's state and the functions its three files call in one another (client.c,
 * client_thread.c, client_spawn.c). Each function's comment is at its definition. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "devio.h"
#include "privsep.h"
#include "util.h"

/* caps.c */
int caps_restrict(uint64_t keep, bool bounding);
uint64_t helper_caps(void);
uint64_t worker_caps(uint32_t kind);

/* helper.c: also the zygote's process setup */
void signals_default(void);
int helper_fds(int fd);

/* ---- the client (in the daemon) ---- */

/* One helper and its socket. Freed with the last reference. */
struct conn {
        int fd;
        int pidfd; /* -1 where pidfd_open() is missing (Linux < 5.3, valgrind) */
        pid_t pid;
        uint64_t gen;   /* which helper: pending requests carry it */
        usec_t started; /* when it said HELLO */
        unsigned refs;  /* under the lock: the client thread's, and one per run() sending */
        bool lost;      /* under the lock: found gone; the client thread reaps it */
};

struct pending {
        struct pending *next;
        uint64_t id;
        uint64_t gen; /* the helper it was sent to */
        char name[DEVIO_NAME_MAX];
        struct devio_response *resp; /* the waiting caller's; NULL once it gave up */
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

/* client.c */
void pending_unlink(struct privsep *ps, struct pending *x);
int ms_until(usec_t deadline);
void conn_unref(struct conn *c);
void conn_lost(struct privsep *ps, struct conn *c);

/* client_thread.c */
bool woken(struct privsep *ps);
void *client_thread(void *arg);

/* client_spawn.c */
int reap_child(pid_t pid);
const char *describe_status(int st, char *buf, size_t size);
void zygote_drain(struct privsep *ps);
int spawn_helper(struct privsep *ps, struct conn **ret);
void conn_install(struct privsep *ps, struct conn *c, bool restart);
void stop_children(struct privsep *ps);
