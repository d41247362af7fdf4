/* What the canary collector's files share: the collector and target structs, their locks and
 * references (canary.h's opening comment tells the threads and lifetimes), and the calls between
 * the lifecycle (canary.c), the prober threads (canary_prober.c), persistence
 * (canary_persist.c), the real host (canary_host.c) and the export (canary_export.c). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "canary.h"
#include "canary_records.h"
#include "log.h"
#include "refcount.h"

struct cerr {
        int err;
        uint64_t n;
};

struct fsample {
        usec_t t;        /* monotonic */
        uint64_t delta;  /* flushes that reached the disks during the cycle's probes */
        uint32_t probes; /* probes of the cycle */
};

struct ctarget {
        struct refcount ref;
        struct canary *c; /* a reference */
        char *path;
        enum canary_mode mode;
        pthread_mutex_t lock;
        pthread_cond_t wake; /* CLOCK_MONOTONIC */

        /* under lock */
        bool stop;
        bool exited;
        bool inflight;
        usec_t probe_start;   /* monotonic, while inflight */
        usec_t probe_timeout; /* --canary.timeout when the probe in flight started */
        bool up;
        uint64_t probes;
        uint64_t stuck_probes; /* probes that ran past their timeout and returned */
        uint64_t cycles;       /* open attempts that failed + probes that returned */
        struct cerr *errs;
        size_t n_errs, cap_errs;
        struct canary_stats stats[_CANARY_REGIME_MAX];
        char device[CANARY_NAME_MAX];
        char disks[CANARY_DISKS_MAX][CANARY_NAME_MAX]; /* the whole disks below device */
        size_t n_disks;
        struct fsample flush[CANARY_FLUSH_WINDOW_MAX];
        size_t fhead, fn;
        bool has_key;
        char key[CANARY_DISK_ID_MAX];
        bool save_pending;

        /* prober thread only */
        usec_t last_save;
        bool saved;
        bool key_loaded;
        bool resolve_logged;
        int last_resolve_error;
        struct ratelimit log_rl;
};

struct canary {
        struct refcount ref;
        pthread_mutex_t lock; /* targets, interval, size, timeout, burst */
        usec_t interval, timeout, baseline_period;
        size_t size;
        unsigned burst;
        int state_dir_fd, sysfs_fd; /* owned duplicates */
        struct canary_ops ops;      /* every member set */
        bool fake_sleep;
        canary_disk_id_fn disk_id;
        void *disk_id_ud;
        struct ctarget **t;
        size_t n, cap;
        bool started, stopped;

        pthread_mutex_t state_lock; /* records; held while the state file is written */
        struct canary_records records;
        bool records_dirty; /* records put that no write has included yet */
        /* The file holds what the records do not (bad lines, kept aside): rewrite it at the next
         * save of any target rather than set it aside again at every start. Any thread. */
        atomic_bool file_stale;
        int state_frozen; /* -errno: the file could not be read nor set aside; never written */
        bool persist;     /* a state directory was given */
        atomic_uint_least64_t state_write_errors;
};

/* ---- canary_ref.c: references, the error log ---- */

/* Takes a reference to the collector (the caller holds one) and returns c; drops one, the last
 * frees it, and returns NULL. Both accept NULL. Any thread. */
struct canary *canary_ref(struct canary *c);
struct canary *canary_unref(struct canary *c);
/* Takes a reference to the target (the caller holds one) and returns t; drops one, the last
 * frees it and drops its collector reference, and returns NULL. Both accept NULL. Any thread. */
struct ctarget *canary_target_ref(struct ctarget *t);
struct ctarget *canary_target_unref(struct ctarget *t);
/* Logs a target's error, at most once per hour per target. Prober thread. */
void canary_target_log_error(struct ctarget *t, const char *msg, int err, usec_t now);

/* ---- canary_prober.c ---- */

/* Starts t's detached prober thread, which holds a reference to t. Returns 0 or -errno of
 * pthread_create() (t is then marked exited). Under c->lock. */
int canary_target_start(struct ctarget *t);

/* ---- canary_persist.c ---- */

/* Writes the records to the state file. Under c->state_lock. Returns 0 or -errno (counted in
 * state_write_errors). */
int canary_write_records(struct canary *c);
/* Saves t's baseline when it changed, at most once per CANARY_SAVE_INTERVAL; never waits for
 * another thread's save. Prober thread. */
void canary_maybe_save(struct ctarget *t, usec_t now);
/* Finds the disk identity of b (NULL: unknown) and restores its baselines. Prober thread, t->lock
 * not held. */
void canary_update_key(struct ctarget *t, const struct canary_backing *b);
/* Puts t's records into c's records when t holds something no write has included yet. Returns
 * whether it did. Under c->state_lock. */
bool canary_target_put_record(struct canary *c, struct ctarget *t);
/* Loads the records from the state file at creation (see canary_persist.c). Main thread. */
void canary_load_records(struct canary *c);

/* ---- canary_host.c ---- */

/* Fills *ret from o (NULL: all real) with every member set: o's, or the real implementation for
 * a NULL one (sleep and check_dir as canary.h says). */
void canary_ops_fill(struct canary_ops *ret, const struct canary_ops *o);
/* Whether ops opens work files on the real host (then a prober sweeps what a crash left). */
bool canary_ops_real_open(const struct canary_ops *ops);
/* Removes work files a crash left in dir (named fallback only). Prober thread, at start. */
void canary_sweep(const char *dir);
