/* The sync canary collector: one prober thread per target (path + mode), stuck detection, error
 * accounting, flush ratio, persisted baselines; the main loop exports the latest results.
 *
 * Threads and lifetime: every target has its own detached thread, so a hung fdatasync() on one
 * disk never delays another target, a diskstats sample or a scrape. The collector (struct
 * canary) and each target are reference counted: the caller's handle holds one reference, each
 * prober thread holds one on its target and the target one on the collector. canary_free() and
 * canary_reconfigure() never wait for a probe that is blocked in the kernel: they mark the
 * target stopped and drop their reference; the thread, when its probe finally returns, sees the
 * stop flag, closes its file, records nothing and drops the last references, which frees the
 * memory. The file descriptors of the configuration are duplicated (F_DUPFD_CLOEXEC) so that an
 * abandoned thread never uses a descriptor the daemon has closed or reused. The ops table's
 * user data (ops->ud) must stay valid until canary_threads_running() reaches 0 (the real ops
 * have none).
 *
 * Error state: after any error (open or probe) the file is closed (fsyncgate: a poisoned file
 * is never probed again), the error is counted by errno name, diskpulse_sync_target_up drops to
 * 0 and comes back only when a complete fresh cycle (open + probe) has succeeded.
 *
 * Baselines are persisted in the state file CANARY_STATE_FILE of the state directory, keyed by
 * (disk identity, mode, path) as canary_stats.h describes; the disk identity comes from the
 * caller's disk_id callback. Saves happen on the prober threads when a baseline changed or a
 * disk is new to the file, at most once per CANARY_SAVE_INTERVAL per target, and in
 * canary_stop() only for what no save has written yet. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "canary_probe.h"
#include "canary_records.h" /* the disk identity of canary_disk_id_fn: canary_disk_id() */
#include "canary_target.h"
#include "metrics.h"
#include "util.h"

/* The state file of the baselines in the state directory. */
/* Families the landing page's summary reads back from the exported set (canary_collector.c),
 * named once here (the others it reads are canary_stats.h's CANARY_FAMILY_*). */
#define CANARY_FAMILY_TARGET_UP   "diskpulse_sync_target_up"
#define CANARY_FAMILY_FLUSH_RATIO "diskpulse_sync_flush_ratio"
#define CANARY_FAMILY_PROBES      "diskpulse_sync_probes_total"

#define CANARY_STATE_FILE "canary-baselines"
/* Least time between two saves of one target's baseline (monotonic). */
#define CANARY_SAVE_INTERVAL (60 * USEC_PER_SEC)
/* Probes kept for the flush ratio (and their window: CANARY_RECENT_WINDOW). */
#define CANARY_FLUSH_WINDOW_MAX 256
/* Most back-to-back probes after the spaced one in a cycle (--canary.burst). */
#define CANARY_BURST_MAX 100
/* How long canary_stop() waits for threads that are not blocked in a probe. */
#define CANARY_STOP_WAIT (200 * USEC_PER_MSEC)

struct canary_target_config {
        const char *path; /* the directory (copied) */
        enum canary_mode mode;
};

/* The host seam: every call a prober thread makes to the outside. NULL members and a NULL table
 * mean the real implementation. Called from the prober threads (concurrently for different
 * targets, one call at a time per target); must be thread-safe. */
struct canary_ops {
        void *ud;
        /* Opens the work file in the directory dir: 0 or -errno (*ret untouched on failure).
         * Real: open(dir, O_PATH|O_DIRECTORY) and canary_file_open(). */
        int (*open)(void *ud, const char *dir, enum canary_mode mode, size_t size,
                    struct canary_file *ret);
        /* One probe: 0 and *ret_latency, or -errno (real: canary_probe_once()). May block. */
        int (*probe)(void *ud, struct canary_file *f, usec_t *ret_latency);
        /* Closes the work file (real: canary_file_close()). */
        void (*close)(void *ud, struct canary_file *f);
        /* Monotonic time in microseconds (real: now_monotonic()). */
        usec_t (*now)(void *ud);
        /* Wall-clock time in microseconds (real: now_realtime()): the daily medians' times,
         * and what the state file's times are checked against when it is loaded. */
        usec_t (*realtime)(void *ud);
        /* Sleeps for usec (real: a wait on the target's condition that canary_stop() and
         * canary_reconfigure() interrupt). A fake should return soon; the thread checks its
         * stop flag after every return. */
        void (*sleep)(void *ud, usec_t usec);
        /* The summed flush counter of b's disks (real: canary_flushes()). */
        int (*flushes)(void *ud, int sysfs_fd, const struct canary_backing *b, uint64_t *ret);
        /* Whether dir still is the directory the open file f was created in: 0, -ESTALE for
         * another one (the file is reopened there, no error counted), other -errno (counted,
         * the file is closed). Real: canary_dir_check(). NULL in a fake table: no check. */
        int (*check_dir)(void *ud, const char *dir, const struct canary_file *f);
        /* Which device backs the directory dir (real: stat() and canary_resolve()); 0 or
         * -errno as canary_resolve() (-ENODEV for tmpfs, overlayfs, ...). */
        int (*resolve)(void *ud, int sysfs_fd, const char *dir, struct canary_backing *ret);
};

/* The persistent identity of a disk for the baseline key: writes "wwn:..." or "serial:..."
 * (canary_disk_id()) for the kernel device name into buf (size bytes) and returns 0, or returns
 * -ENOENT when unknown (the baseline then lives in memory only). device is the single physical
 * disk below the canary path (sda for sda1 or for a dm-0 on sda1), or the dm/md device itself
 * when several disks back it. Called from the prober threads, with ud: must be thread-safe and
 * must not block on I/O (answer from the diskstats/udev device facts held in memory). */
typedef int (*canary_disk_id_fn)(void *ud, const char *device, char *buf, size_t size);

struct canary_config {
        const struct canary_target_config *targets; /* copied */
        size_t n_targets;
        usec_t interval;              /* between cycles, +-10 % uniform jitter; > 0 */
        unsigned burst;               /* back-to-back probes after the spaced one; 0: none */
        size_t size;                  /* bytes per probe */
        usec_t timeout;               /* a probe running longer is "stuck" */
        usec_t baseline_period;       /* tests: the baselines' "hour"; 0: 1 h; at creation */
        int state_dir_fd;             /* borrowed (duplicated); -1: no persistence */
        int sysfs_fd;                 /* borrowed (duplicated); -1: no device resolution */
        const struct canary_ops *ops; /* borrowed, NULL = real; must outlive every thread */
        canary_disk_id_fn disk_id;    /* may be NULL: baselines are not persisted */
        void *disk_id_ud;
};

struct canary;

/* Creates the collector and loads the baselines from the state file (a missing file is fine,
 * an unreadable one is logged and ignored); no thread yet. Returns the collector (owned by the
 * caller: canary_free()). Never fails (aborts on OOM). Main thread. */
struct canary *canary_new(const struct canary_config *cfg);
/* Starts one prober thread per configured target; each runs a cycle at once (the spaced probe,
 * then the burst of cfg.burst back-to-back probes), then one every interval after the burst
 * ended (+-10 % jitter), at I/O priority best-effort 7. Returns 0 or -errno of pthread_create() (the
 * targets started so far keep running). Main thread. */
int canary_start(struct canary *c);
/* Applies a new configuration (SIGHUP): interval, burst (from the next cycle), timeout and size
 * (size at the next reopen),
 * threads started for new targets (path + mode) and stopped for removed ones (a removed target
 * blocked in a probe is abandoned as described above). The fds, ops and disk_id of cfg are
 * ignored: those of canary_new() stay. Returns 0 or -errno of pthread_create(). Main thread. */
int canary_reconfigure(struct canary *c, const struct canary_config *cfg);
/* Stops every thread: waits at most CANARY_STOP_WAIT for the threads that are not blocked in a
 * probe, abandons the others, then writes the state file once if it lacks something (a baseline
 * that changed since its thread's last save, a removed target's record, a failed write), waiting
 * at most CANARY_STOP_WAIT for a save in progress; a state file that is up to date is not
 * touched. Idempotent. Main thread. */
void canary_stop(struct canary *c);
/* Targets whose last cycle failed or that have not finished one yet (diskpulse_sync_target_up
 * 0). Main thread. */
size_t canary_targets_down(struct canary *c);
/* Waits until every started target has finished its first cycle (an open that failed, or the
 * spaced probe and its burst), at most max (--once: one cycle per target). Returns how many targets had not.
 * Main thread. */
int canary_wait_first(struct canary *c, usec_t max);
/* canary_stop() and drops the caller's reference (the memory lives on while an abandoned
 * thread holds a reference). Accepts NULL; returns NULL. Main thread. */
struct canary *canary_free(struct canary *c);
/* Writes the latest results of every target into out. Main thread (any thread in fact); takes
 * the collector's and each target's lock briefly, never waits for a probe. */
void canary_export(struct canary *c, struct mset *out);
/* Prober threads of every collector of the process still alive (abandoned ones included).
 * Any thread. */
unsigned canary_threads_running(void);
/* The errno name ("EIO", "ENOSPC", ...) of a positive errno value; "E<number>" (in buf) for
 * one without a name. Returns buf or a static string. */
const char *canary_errno_name(int err, char *buf, size_t size);
