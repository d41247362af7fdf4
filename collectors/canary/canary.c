/* The sync canary collector: prober threads, stuck detection, errors, flush ratio, baselines. */
#include "canary.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "canary_stats.h"
#include "log.h"
#include "statefile.h"

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
        atomic_int ref;
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
        atomic_int ref;
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

static atomic_uint threads_running;

unsigned canary_threads_running(void)
{
        return atomic_load(&threads_running);
}

const char *canary_errno_name(int err, char *buf, size_t size)
{
        const char *s = strerrorname_np(err);

        if (s)
                return s;
        snprintf(buf, size, "E%d", err);
        return buf;
}

/* ---- The real host ---- */

static int real_open(void *ud, const char *dir, enum canary_mode mode, size_t size,
                     struct canary_file *ret)
{
        _cleanup_close_ int fd = -1;

        (void)ud;
        fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return canary_file_open(fd, mode, size, ret);
}

/* Removes work files a crash left in dir (named fallback only). Prober thread, at start. */
static void sweep(const char *dir)
{
        _cleanup_close_ int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int r = fd < 0 ? -errno : canary_remove_stale(fd);

        if (r > 0)
                log_info("removed canary files left by a crash", "path", dir);
}

static int real_check_dir(void *ud, const char *dir, const struct canary_file *f)
{
        (void)ud;
        return canary_dir_check(f, dir);
}

static int real_probe(void *ud, struct canary_file *f, usec_t *ret_latency)
{
        (void)ud;
        return canary_probe_once(f, ret_latency);
}

static void real_close(void *ud, struct canary_file *f)
{
        (void)ud;
        canary_file_close(f);
}

static usec_t real_now(void *ud)
{
        (void)ud;
        return now_monotonic();
}

static int real_flushes(void *ud, int sysfs_fd, const struct canary_backing *b, uint64_t *ret)
{
        (void)ud;
        return canary_flushes(sysfs_fd, b, ret);
}

static int real_resolve(void *ud, int sysfs_fd, const char *dir, struct canary_backing *ret)
{
        struct stat st;

        (void)ud;
        if (stat(dir, &st) < 0)
                return -errno;
        return canary_resolve(sysfs_fd, st.st_dev, ret);
}

/* ---- References ---- */

static void canary_unref(struct canary *c)
{
        if (!c || atomic_fetch_sub(&c->ref, 1) != 1)
                return;
        free(c->t);
        canary_records_free(&c->records);
        if (c->state_dir_fd >= 0)
                close(c->state_dir_fd);
        if (c->sysfs_fd >= 0)
                close(c->sysfs_fd);
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->state_lock);
        free(c);
}

static void target_unref(struct ctarget *t)
{
        if (!t || atomic_fetch_sub(&t->ref, 1) != 1)
                return;
        for (int g = 0; g < _CANARY_REGIME_MAX; g++)
                canary_stats_done(&t->stats[g]);
        free(t->errs);
        free(t->path);
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->wake);
        canary_unref(t->c);
        free(t);
}

/* ---- Prober thread ---- */

static bool target_stopped(struct ctarget *t)
{
        bool s;

        pthread_mutex_lock(&t->lock);
        s = t->stop;
        pthread_mutex_unlock(&t->lock);
        return s;
}

/* Counts one error; the target is down until a fresh cycle succeeds. Under t->lock. */
static void count_error(struct ctarget *t, int err)
{
        size_t i;

        t->up = false;
        for (i = 0; i < t->n_errs; i++)
                if (t->errs[i].err == err)
                        break;
        if (i == t->n_errs) {
                GROW(t->errs, t->cap_errs, t->n_errs + 1);
                t->errs[t->n_errs++] = (struct cerr){.err = err, .n = 0};
        }
        t->errs[i].n++;
}

static void log_target_error(struct ctarget *t, const char *msg, int err, usec_t now)
{
        char buf[16];

        if (ratelimit_ok(&t->log_rl, now))
                log_warn(msg, "path", t->path, "mode", canary_mode_to_string(t->mode), "errno",
                         canary_errno_name(err, buf, sizeof buf));
}

/* Builds this target's records under t->lock: the idle regime's always (it records the disk),
 * the busy regime's once it learnt something (bursts may be off). Returns how many (0 to
 * _CANARY_REGIME_MAX) or -errno. */
static int target_records(struct ctarget *t, struct canary_record rec[_CANARY_REGIME_MAX])
{
        int n = 0;

        if (!t->has_key)
                return -ENOENT;
        for (int g = 0; g < _CANARY_REGIME_MAX; g++) {
                const struct canary_baseline_state *st = &t->stats[g].baseline.st;
                int r;

                if (g != CANARY_REGIME_IDLE && st->updates == 0)
                        continue;
                r = canary_record_init(&rec[n], t->key, canary_mode_to_string(t->mode), t->path);
                if (r < 0)
                        return r;
                rec[n].regime = (enum canary_regime)g;
                rec[n++].st = *st;
        }
        return n;
}

/* Puts n records into c's records. Under c->state_lock. Returns 0 or -errno. */
static int put_records(struct canary *c, const struct canary_record *rec, int n)
{
        for (int i = 0; i < n; i++) {
                int r = canary_records_put(&c->records, &rec[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Writes the records. Under c->state_lock. Returns 0 or -errno. */
static int write_records(struct canary *c)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        if (c->state_dir_fd < 0)
                return 0;
        r = c->state_frozen;
        if (r == 0)
                r = canary_records_format(&c->records, &buf, &len);
        if (r == 0)
                r = statefile_write_atomic(c->state_dir_fd, CANARY_STATE_FILE, buf, len);
        if (r < 0)
                atomic_fetch_add(&c->state_write_errors, 1);
        return r;
}

/* Saves this target's baseline when it changed, at most once per CANARY_SAVE_INTERVAL; never
 * waits for another thread's save (tries again later). Prober thread. */
static void maybe_save(struct ctarget *t, usec_t now)
{
        struct canary *c = t->c;
        struct canary_record rec[_CANARY_REGIME_MAX];
        bool stale = atomic_load(&c->file_stale);
        int r, n;

        pthread_mutex_lock(&t->lock);
        if (c->state_dir_fd < 0 || (t->saved && now - t->last_save < CANARY_SAVE_INTERVAL) ||
            !((t->save_pending && t->has_key) || stale)) {
                pthread_mutex_unlock(&t->lock);
                return;
        }
        n = t->save_pending && t->has_key ? target_records(t, rec) : 0;
        if (n > 0)
                t->save_pending = false;
        pthread_mutex_unlock(&t->lock);
        if (n < 0)
                return;
        if (pthread_mutex_trylock(&c->state_lock) != 0) {
                if (n > 0) {
                        pthread_mutex_lock(&t->lock);
                        t->save_pending = true;
                        pthread_mutex_unlock(&t->lock);
                }
                return;
        }
        r = put_records(c, rec, n);
        if (r >= 0)
                r = write_records(c);
        /* A failed write leaves the file behind the records: the next save (the next hourly
         * observation) includes them, and the shutdown tries once more; not for a file this
         * process must leave alone (state_frozen: never written until a restart). */
        c->records_dirty = r < 0 && c->state_frozen == 0;
        if (r >= 0)
                atomic_store(&c->file_stale, false);
        pthread_mutex_unlock(&c->state_lock);
        t->last_save = now;
        t->saved = true;
        if (r < 0)
                log_target_error(t, "cannot save the canary baselines", -r, now);
}

/* Finds the disk identity of the backing device and restores its baseline (a different disk
 * starts afresh). Prober thread, t->lock not held. */
static void update_key(struct ctarget *t, const struct canary_backing *b)
{
        struct canary *c = t->c;
        char key[CANARY_DISK_ID_MAX] = "";
        bool has = false;
        struct canary_record *rec[_CANARY_REGIME_MAX];

        if (b && c->disk_id) {
                const char *dev = b->n_disks == 1 ? b->disks[0].name : b->device;
                has = c->disk_id(c->disk_id_ud, dev, key, sizeof key) == 0 && key[0];
        }
        pthread_mutex_lock(&t->lock);
        if (!has) {
                /* Unknown disk: keep learning in memory, persist nothing. */
                t->has_key = false;
                pthread_mutex_unlock(&t->lock);
                t->key_loaded = true;
                return;
        }
        if (t->has_key && strcmp(t->key, key) == 0 && t->key_loaded) {
                pthread_mutex_unlock(&t->lock);
                return;
        }
        pthread_mutex_unlock(&t->lock);

        if (pthread_mutex_trylock(&c->state_lock) != 0) {
                t->key_loaded = false; /* a save is running: try at the next cycle */
                return;
        }
        for (int g = 0; g < _CANARY_REGIME_MAX; g++)
                rec[g] = canary_records_find(&c->records, key, canary_mode_to_string(t->mode),
                                             t->path, (enum canary_regime)g);
        pthread_mutex_lock(&t->lock);
        for (int g = 0; g < _CANARY_REGIME_MAX; g++) {
                struct canary_baseline *bl = &t->stats[g].baseline;

                if (!t->has_key || strcmp(t->key, key) != 0) {
                        /* Another disk (or the first one we know): its own baselines, or fresh
                         * ones. */
                        canary_baseline_init(bl);
                        t->save_pending = false;
                }
                if (rec[g] && canary_baseline_restore(bl, &rec[g]->st) < 0)
                        canary_baseline_init(bl);
                canary_baseline_set_period(bl, c->baseline_period); /* init resets it */
        }
        /* A disk the file does not know yet is recorded by the next save of this thread, not
         * left to the shutdown (which writes only what no save has written). */
        if (!rec[CANARY_REGIME_IDLE])
                t->save_pending = true;
        strscpy(t->key, key, sizeof t->key);
        t->has_key = true;
        pthread_mutex_unlock(&t->lock);
        pthread_mutex_unlock(&c->state_lock);
        t->key_loaded = true;
}

/* Which device backs the path; logs a failure once per reason. Prober thread. */
static bool resolve(struct ctarget *t, struct canary_backing *b)
{
        struct canary *c = t->c;
        int r = c->sysfs_fd < 0 ? -ENOENT : c->ops.resolve(c->ops.ud, c->sysfs_fd, t->path, b);

        pthread_mutex_lock(&t->lock);
        t->n_disks = 0;
        if (r < 0) {
                t->device[0] = 0;
        } else {
                strscpy(t->device, b->device, sizeof t->device);
                for (size_t i = 0; i < b->n_disks && i < CANARY_DISKS_MAX; i++)
                        strscpy(t->disks[t->n_disks++], b->disks[i].name, CANARY_NAME_MAX);
        }
        pthread_mutex_unlock(&t->lock);
        if (r < 0 && (!t->resolve_logged || t->last_resolve_error != r)) {
                t->resolve_logged = true;
                t->last_resolve_error = r;
                log_info("canary path has no single block device; device label left empty", "path",
                         t->path, "reason", canary_resolve_reason(r));
        }
        return r >= 0;
}

static void flush_add(struct ctarget *t, usec_t now, uint64_t delta, uint32_t probes)
{
        size_t i = (t->fhead + t->fn) % CANARY_FLUSH_WINDOW_MAX;

        t->flush[i] = (struct fsample){.t = now, .delta = delta, .probes = probes};
        if (t->fn < CANARY_FLUSH_WINDOW_MAX)
                t->fn++;
        else
                t->fhead = (t->fhead + 1) % CANARY_FLUSH_WINDOW_MAX;
}

static uint64_t xorshift(uint64_t *s)
{
        uint64_t x = *s;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return *s = x;
}

/* Sleeps the interval with +-10 % jitter, or until stopped. Prober thread. */
static void jittered_sleep(struct ctarget *t, uint64_t *rng)
{
        struct canary *c = t->c;
        usec_t interval, d;
        double u = (double)(xorshift(rng) >> 11) / (double)(UINT64_C(1) << 53);

        pthread_mutex_lock(&c->lock);
        interval = c->interval;
        pthread_mutex_unlock(&c->lock);
        d = (usec_t)((double)interval * (0.9 + 0.2 * u));
        if (c->fake_sleep) {
                c->ops.sleep(c->ops.ud, d);
                return;
        }
        usec_t deadline = now_monotonic() + d;
        struct timespec ts = {.tv_sec = (time_t)(deadline / USEC_PER_SEC),
                              .tv_nsec = (long)(deadline % USEC_PER_SEC) * 1000};
        pthread_mutex_lock(&t->lock);
        while (!t->stop && now_monotonic() < deadline)
                if (pthread_cond_timedwait(&t->wake, &t->lock, &ts) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&t->lock);
}

/* One timed probe of the cycle, marked in flight while it runs. Returns the probe's result (0
 * with *ret_lat), or -ECANCELED when the target was stopped before or during it (nothing is
 * recorded then). *ret_stuck: it ran past the timeout in force when it started; such a probe
 * is counted once in stuck_probes, continuing what the export showed while it hung. Prober
 * thread. */
static int timed_probe(struct ctarget *t, struct canary_file *f, usec_t *ret_lat, usec_t *ret_end,
                       bool *ret_stuck)
{
        struct canary *c = t->c;
        usec_t timeout, start, now;
        int r;

        pthread_mutex_lock(&c->lock);
        timeout = c->timeout;
        pthread_mutex_unlock(&c->lock);
        pthread_mutex_lock(&t->lock);
        if (t->stop) {
                pthread_mutex_unlock(&t->lock);
                return -ECANCELED;
        }
        start = c->ops.now(c->ops.ud);
        t->inflight = true;
        t->probe_start = start;
        t->probe_timeout = timeout;
        pthread_mutex_unlock(&t->lock);

        r = c->ops.probe(c->ops.ud, f, ret_lat);

        *ret_end = c->ops.now(c->ops.ud);
        pthread_mutex_lock(&t->lock);
        /* Read under the lock: never earlier than an export that already saw it stuck. */
        now = c->ops.now(c->ops.ud);
        t->inflight = false;
        if (t->stop) {
                /* Abandoned or stopping: record nothing. */
                pthread_mutex_unlock(&t->lock);
                return -ECANCELED;
        }
        t->probes++;
        *ret_stuck = now > start && now - start > timeout;
        if (*ret_stuck)
                t->stuck_probes++;
        pthread_mutex_unlock(&t->lock);
        return r;
}

/* Accounts one sample of a regime (seconds). Under t->lock. */
static void record_sample(struct ctarget *t, enum canary_regime g, double seconds, usec_t end)
{
        int s = canary_stats_add(&t->stats[g], seconds, end, now_realtime());
        if (s > 0)
                t->save_pending = true;
}

/* A cycle's probes after the spaced one: up to n back-to-back, no pause between them. Returns
 * 0 with the busy sample in *ret_busy (the median of the burst's second half; the latency of a
 * probe that ran past the timeout, which ends the burst, as a busy stream would have waited
 * that long) and the probes done in *ret_done, or the first failing probe's -errno (-ECANCELED:
 * stopped) with no sample. The first half is the warm-up: after a quiet spell the first
 * back-to-back commits still pay for idle CPUs waking up (on a loop device over a virtio disk
 * the 1st, 2nd and 3rd took 262, 206 and 174 us, the 8th to 16th 126 to 137, a long run 120).
 * Prober thread. */
static int burst(struct ctarget *t, struct canary_file *f, unsigned n, double *ret_busy,
                 usec_t *ret_end, unsigned *ret_done)
{
        double v[CANARY_BURST_MAX];
        usec_t lat = 0;
        unsigned k;

        *ret_done = 0;
        for (k = 0; k < n; k++) {
                bool stuck = false;
                int r = timed_probe(t, f, &lat, ret_end, &stuck);

                if (r < 0)
                        return r;
                *ret_done = k + 1;
                v[k] = (double)lat / (double)USEC_PER_SEC;
                if (stuck) {
                        *ret_busy = v[k];
                        return 0;
                }
        }
        *ret_busy = canary_median(v + n / 2, n - n / 2); /* n >= 1 */
        return 0;
}

static void *prober(void *arg)
{
        struct ctarget *t = arg;
        struct canary *c = t->c;
        struct canary_file f = {.fd = -1};
        struct canary_backing b;
        bool is_open = false, have_b = false, flush_ok = true;
        uint64_t rng = (uint64_t)(uintptr_t)t ^ now_realtime() ^ UINT64_C(0x9e3779b97f4a7c15);
        int r;

        if (rng == 0)
                rng = 1;
        (void)pthread_setname_np(pthread_self(), "dp-canary"); /* top -H, ionice -p */
        r = canary_set_ioprio();
        if (r < 0)
                log_debug("cannot lower the canary's I/O priority", "path", t->path);
        if (c->ops.open == real_open)
                sweep(t->path);

        for (;;) {
                usec_t lat = 0, end = 0;
                double busy = 0;
                uint64_t before = 0, after = 0;
                unsigned n_burst, done = 0;
                bool stuck = false;
                int rf = -ENODATA;

                if (target_stopped(t))
                        break;
                if (is_open && c->ops.check_dir) {
                        /* The open file works on in a removed or covered directory: notice. */
                        r = c->ops.check_dir(c->ops.ud, t->path, &f);
                        if (r < 0) {
                                c->ops.close(c->ops.ud, &f);
                                is_open = false;
                        }
                        if (r == -ESTALE) {
                                log_info("canary directory replaced or remounted; reopening",
                                         "path", t->path);
                        } else if (r < 0) {
                                pthread_mutex_lock(&t->lock);
                                count_error(t, -r);
                                pthread_mutex_unlock(&t->lock);
                                log_target_error(t, "canary directory is gone", -r,
                                                 c->ops.now(c->ops.ud));
                                goto next;
                        }
                }
                if (!is_open) {
                        size_t size;

                        have_b = resolve(t, &b);
                        update_key(t, have_b ? &b : NULL);
                        pthread_mutex_lock(&c->lock);
                        size = c->size;
                        pthread_mutex_unlock(&c->lock);
                        r = c->ops.open(c->ops.ud, t->path, t->mode, size, &f);
                        if (r < 0) {
                                pthread_mutex_lock(&t->lock);
                                count_error(t, -r);
                                pthread_mutex_unlock(&t->lock);
                                log_target_error(t, "cannot open the canary file", -r,
                                                 c->ops.now(c->ops.ud));
                                goto next;
                        }
                        is_open = true;
                } else if (!t->key_loaded) {
                        update_key(t, have_b ? &b : NULL);
                }

                if (have_b && flush_ok)
                        rf = c->ops.flushes(c->ops.ud, c->sysfs_fd, &b, &before);
                if (rf == -ENODATA)
                        flush_ok = false;
                pthread_mutex_lock(&c->lock);
                n_burst = c->burst;
                pthread_mutex_unlock(&c->lock);

                /* The spaced probe (idle regime), then at once the burst (busy regime); a stuck
                 * spaced probe ends the cycle, so nothing piles onto a device that hangs. */
                r = timed_probe(t, &f, &lat, &end, &stuck);
                if (r == -ECANCELED)
                        break;
                if (r == 0) {
                        pthread_mutex_lock(&t->lock);
                        record_sample(t, CANARY_REGIME_IDLE, (double)lat / (double)USEC_PER_SEC,
                                      end);
                        pthread_mutex_unlock(&t->lock);
                        if (!stuck && n_burst > 0) {
                                r = burst(t, &f, n_burst, &busy, &end, &done);
                                if (r == -ECANCELED)
                                        break;
                        }
                }
                if (r == 0 && rf == 0)
                        rf = c->ops.flushes(c->ops.ud, c->sysfs_fd, &b, &after);
                else
                        rf = -1;
                if (rf == -ENODATA)
                        flush_ok = false;

                pthread_mutex_lock(&t->lock);
                if (r < 0) {
                        count_error(t, -r);
                } else {
                        if (done > 0)
                                record_sample(t, CANARY_REGIME_BUSY, busy, end);
                        if (!t->up && t->n_errs > 0)
                                log_info("canary target healthy again", "path", t->path, "mode",
                                         canary_mode_to_string(t->mode));
                        t->up = true; /* the file was opened fresh after any earlier error */
                        if (rf == 0 && after >= before)
                                flush_add(t, end, after - before, 1 + done);
                }
                pthread_mutex_unlock(&t->lock);

                if (r < 0) {
                        /* fsyncgate: never probe this file again; reopen next time. */
                        log_target_error(t, "canary probe failed", -r, end);
                        c->ops.close(c->ops.ud, &f);
                        is_open = false;
                } else {
                        maybe_save(t, end);
                }
        next:
                pthread_mutex_lock(&t->lock);
                t->cycles++;
                pthread_mutex_unlock(&t->lock);
                if (target_stopped(t))
                        break;
                jittered_sleep(t, &rng);
        }

        if (is_open)
                c->ops.close(c->ops.ud, &f);
        pthread_mutex_lock(&t->lock);
        t->exited = true;
        pthread_mutex_unlock(&t->lock);
        target_unref(t);
        atomic_fetch_sub(&threads_running, 1);
        return NULL;
}

/* ---- Targets ---- */

static struct ctarget *target_new(struct canary *c, const struct canary_target_config *tc)
{
        struct ctarget *t = xcalloc(1, sizeof(*t));
        pthread_condattr_t ca;

        atomic_init(&t->ref, 1);
        atomic_fetch_add(&c->ref, 1);
        t->c = c;
        t->path = xstrdup(tc->path);
        t->mode = tc->mode;
        pthread_mutex_init(&t->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->wake, &ca);
        pthread_condattr_destroy(&ca);
        for (int g = 0; g < _CANARY_REGIME_MAX; g++)
                if (canary_stats_init(&t->stats[g], CANARY_RECENT_WINDOW,
                                      CANARY_RECENT_MAX_SAMPLES) < 0)
                        abort(); /* constant arguments */
                else
                        canary_baseline_set_period(&t->stats[g].baseline, c->baseline_period);
        t->log_rl.interval = 3600 * USEC_PER_SEC;
        return t;
}

static int target_start(struct ctarget *t)
{
        pthread_attr_t attr;
        pthread_t th;
        int r;

        atomic_fetch_add(&t->ref, 1); /* the thread's */
        atomic_fetch_add(&threads_running, 1);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&th, &attr, prober, t);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                atomic_fetch_sub(&threads_running, 1);
                atomic_fetch_sub(&t->ref, 1);
                pthread_mutex_lock(&t->lock);
                t->exited = true;
                pthread_mutex_unlock(&t->lock);
                return -r;
        }
        return 0;
}

/* Tells the thread to stop and wakes its sleep. */
static void target_signal_stop(struct ctarget *t)
{
        pthread_mutex_lock(&t->lock);
        t->stop = true;
        pthread_cond_broadcast(&t->wake);
        pthread_mutex_unlock(&t->lock);
}

/* Puts a target's record into the records (for the next write) when it holds something no
 * write has included yet (save_pending). Returns whether it did. Under c->state_lock. */
static bool target_put_record(struct canary *c, struct ctarget *t)
{
        struct canary_record rec[_CANARY_REGIME_MAX];
        int n;

        pthread_mutex_lock(&t->lock);
        n = t->save_pending ? target_records(t, rec) : -ENODATA;
        t->save_pending = false;
        pthread_mutex_unlock(&t->lock);
        return n > 0 && put_records(c, rec, n) == 0;
}

/* ---- Collector ---- */

/* Read errors that say the file itself is bad (no header, another version, too big, not a
 * regular file, a symlink), as opposed to a failing disk or a lack of memory or permission. */
static bool state_corrupt(int r)
{
        return r == -EBADMSG || r == -EPROTONOSUPPORT || r == -EFBIG || r == -EINVAL ||
               r == -ELOOP || r == -ENXIO;
}

/* Loads the records. Nothing is ever lost: a file that is bad as a whole is renamed aside
 * (learning starts afresh); one with bad lines keeps its good records in use and a copy of all
 * of it aside; one that cannot be read (EACCES, EIO) or set aside is left alone and not
 * written by this process (state_frozen), rather than replaced by fewer records. */
static void load_records(struct canary *c)
{
        _cleanup_free_ char *buf = NULL;
        char aside[NAME_MAX + 1], eb[16], nb[16];
        size_t len;
        int r, s;

        if (c->state_dir_fd < 0)
                return;
        (void)statefile_remove_stale(c->state_dir_fd, CANARY_STATE_FILE);
        r = statefile_read(c->state_dir_fd, CANARY_STATE_FILE, CANARY_STATE_MAX_BYTES, &buf, &len);
        if (r == -ENOENT)
                return;
        if (r >= 0)
                r = canary_records_parse(buf, len, &c->records);
        if (r >= 0 && c->records.bad == 0) {
                (void)statefile_restrict_mode(c->state_dir_fd, CANARY_STATE_FILE);
                if (c->records.version < CANARY_STATE_VERSION &&
                    statefile_set_aside(c->state_dir_fd, CANARY_STATE_FILE, "oldversion",
                                        STATEFILE_ASIDE_KEEP, aside, sizeof aside) == 0)
                        /* a downgrade reads the copy; every write from now on is the new version */
                        log_info("canary baselines of an older version migrated: each baseline is "
                                 "its disk's reference; the old file is kept aside",
                                 "file", CANARY_STATE_FILE, "set_aside", aside);
                return;
        }
        if (r < 0 && !state_corrupt(r)) {
                c->state_frozen = r;
                log_error("cannot read the canary baselines; the file is left as it is and not "
                          "written until a restart",
                          "file", CANARY_STATE_FILE, "errno", canary_errno_name(-r, eb, sizeof eb));
                return;
        }
        s = statefile_set_aside(c->state_dir_fd, CANARY_STATE_FILE,
                                r == -EPROTONOSUPPORT ? "unsupported" : "corrupt",
                                r < 0 ? 0 : STATEFILE_ASIDE_KEEP, aside, sizeof aside);
        if (s < 0) {
                c->state_frozen = s;
                log_error("cannot set the bad canary baselines file aside; it is left as it is "
                          "and not written until a restart",
                          "file", CANARY_STATE_FILE, "errno", canary_errno_name(-s, eb, sizeof eb));
                return;
        }
        if (r < 0) {
                log_warn("canary baselines file unusable, set aside; learning starts afresh",
                         "file", CANARY_STATE_FILE, "set_aside", aside, "errno",
                         canary_errno_name(-r, eb, sizeof eb));
                return;
        }
        snprintf(nb, sizeof nb, "%u", c->records.bad);
        log_warn("bad lines in the canary baselines skipped; the other disks' records are used, "
                 "the whole file is kept aside",
                 "file", CANARY_STATE_FILE, "bad_lines", nb, "set_aside", aside);
        (void)statefile_restrict_mode(c->state_dir_fd, CANARY_STATE_FILE);
        atomic_store(&c->file_stale, true);
}

static void apply_values(struct canary *c, const struct canary_config *cfg)
{
        c->interval = cfg->interval > 0 ? cfg->interval : 10 * USEC_PER_SEC;
        c->timeout = cfg->timeout;
        c->size = cfg->size;
        c->burst = cfg->burst < CANARY_BURST_MAX ? cfg->burst : CANARY_BURST_MAX;
}

struct canary *canary_new(const struct canary_config *cfg)
{
        struct canary *c = xcalloc(1, sizeof(*c));
        const struct canary_ops *o = cfg->ops;

        atomic_init(&c->ref, 1);
        atomic_init(&c->file_stale, false);
        pthread_mutex_init(&c->lock, NULL);
        pthread_mutex_init(&c->state_lock, NULL);
        apply_values(c, cfg);
        c->baseline_period = cfg->baseline_period;
        c->state_dir_fd =
            cfg->state_dir_fd >= 0 ? fcntl(cfg->state_dir_fd, F_DUPFD_CLOEXEC, 3) : -1;
        c->sysfs_fd = cfg->sysfs_fd >= 0 ? fcntl(cfg->sysfs_fd, F_DUPFD_CLOEXEC, 3) : -1;
        c->persist = c->state_dir_fd >= 0;
        c->ops = (struct canary_ops){
            .ud = o ? o->ud : NULL,
            .open = o && o->open ? o->open : real_open,
            .probe = o && o->probe ? o->probe : real_probe,
            .close = o && o->close ? o->close : real_close,
            .now = o && o->now ? o->now : real_now,
            .sleep = o ? o->sleep : NULL,
            .flushes = o && o->flushes ? o->flushes : real_flushes,
            .resolve = o && o->resolve ? o->resolve : real_resolve,
            .check_dir = o ? o->check_dir : real_check_dir,
        };
        c->fake_sleep = c->ops.sleep != NULL;
        c->disk_id = cfg->disk_id;
        c->disk_id_ud = cfg->disk_id_ud;
        load_records(c);
        for (size_t i = 0; i < cfg->n_targets; i++) {
                GROW(c->t, c->cap, c->n + 1);
                c->t[c->n++] = target_new(c, &cfg->targets[i]);
        }
        return c;
}

int canary_start(struct canary *c)
{
        int ret = 0;

        pthread_mutex_lock(&c->lock);
        if (!c->started && !c->stopped) {
                c->started = true;
                for (size_t i = 0; i < c->n; i++) {
                        int r = target_start(c->t[i]);
                        if (r < 0 && ret == 0)
                                ret = r;
                }
        }
        pthread_mutex_unlock(&c->lock);
        return ret;
}

static bool wanted(const struct canary_config *cfg, const struct ctarget *t)
{
        for (size_t i = 0; i < cfg->n_targets; i++)
                if (cfg->targets[i].mode == t->mode && strcmp(cfg->targets[i].path, t->path) == 0)
                        return true;
        return false;
}

int canary_reconfigure(struct canary *c, const struct canary_config *cfg)
{
        struct ctarget **removed = NULL;
        size_t n_removed = 0, cap_removed = 0, kept = 0;
        int ret = 0;

        pthread_mutex_lock(&c->lock);
        apply_values(c, cfg);
        if (c->stopped) {
                pthread_mutex_unlock(&c->lock);
                return 0;
        }
        for (size_t i = 0; i < c->n; i++) {
                if (wanted(cfg, c->t[i])) {
                        c->t[kept++] = c->t[i];
                } else {
                        GROW(removed, cap_removed, n_removed + 1);
                        removed[n_removed++] = c->t[i];
                }
        }
        c->n = kept;
        for (size_t k = 0; k < cfg->n_targets; k++) {
                bool have = false;
                for (size_t i = 0; i < c->n && !have; i++)
                        have = c->t[i]->mode == cfg->targets[k].mode &&
                               strcmp(c->t[i]->path, cfg->targets[k].path) == 0;
                if (have)
                        continue;
                GROW(c->t, c->cap, c->n + 1);
                c->t[c->n] = target_new(c, &cfg->targets[k]);
                if (c->started) {
                        int r = target_start(c->t[c->n]);
                        if (r < 0 && ret == 0)
                                ret = r;
                }
                c->n++;
        }
        pthread_mutex_unlock(&c->lock);

        /* Removed targets: their baselines go into the records (written by the next save), their
         * threads are told to stop and not waited for. */
        bool locked = pthread_mutex_trylock(&c->state_lock) == 0;
        for (size_t i = 0; i < n_removed; i++) {
                if (locked && target_put_record(c, removed[i]))
                        c->records_dirty = true;
                target_signal_stop(removed[i]);
                target_unref(removed[i]);
        }
        if (locked)
                pthread_mutex_unlock(&c->state_lock);
        free(removed);
        return ret;
}

void canary_stop(struct canary *c)
{
        usec_t deadline = now_monotonic() + CANARY_STOP_WAIT;
        struct ctarget **t;
        size_t n;

        pthread_mutex_lock(&c->lock);
        if (c->stopped) {
                pthread_mutex_unlock(&c->lock);
                return;
        }
        c->stopped = true;
        t = c->t;
        n = c->n;
        c->t = NULL;
        c->n = c->cap = 0;
        pthread_mutex_unlock(&c->lock);

        for (size_t i = 0; i < n; i++)
                target_signal_stop(t[i]);
        /* Wait for the threads that are not blocked in a probe (they return from a sleep or a
         * quick call at once); a thread in a probe is abandoned. */
        for (;;) {
                bool busy = false;
                for (size_t i = 0; i < n && !busy; i++) {
                        pthread_mutex_lock(&t[i]->lock);
                        busy = !t[i]->exited && !t[i]->inflight;
                        pthread_mutex_unlock(&t[i]->lock);
                }
                if (!busy || now_monotonic() >= deadline)
                        break;
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        }

        /* One last save, only of what no save has written yet (a baseline that changed since
         * its thread's last save, a removed target's, a failed write): a clean state file costs
         * no write and no fsync at shutdown, which on a busy disk took longer than SIGTERM's
         * second. */
        if (c->state_dir_fd >= 0) {
                usec_t rt = now_realtime() + CANARY_STOP_WAIT;
                struct timespec ts = {.tv_sec = (time_t)(rt / USEC_PER_SEC),
                                      .tv_nsec = (long)(rt % USEC_PER_SEC) * 1000};
                if (pthread_mutex_timedlock(&c->state_lock, &ts) == 0) {
                        bool any = false;
                        for (size_t i = 0; i < n; i++)
                                any |= target_put_record(c, t[i]);
                        if (any || c->records_dirty || atomic_load(&c->file_stale)) {
                                int r = write_records(c);
                                if (r < 0) {
                                        char eb[16];
                                        log_warn("cannot save the canary baselines", "errno",
                                                 canary_errno_name(-r, eb, sizeof eb));
                                }
                        }
                        pthread_mutex_unlock(&c->state_lock);
                } else {
                        log_warn("canary baselines not saved: a save is blocked");
                }
        }
        for (size_t i = 0; i < n; i++)
                target_unref(t[i]);
        free(t);
}

size_t canary_targets_down(struct canary *c)
{
        size_t down = 0;

        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < c->n; i++) {
                pthread_mutex_lock(&c->t[i]->lock);
                down += !c->t[i]->up;
                pthread_mutex_unlock(&c->t[i]->lock);
        }
        pthread_mutex_unlock(&c->lock);
        return down;
}

int canary_wait_first(struct canary *c, usec_t max)
{
        usec_t deadline = now_monotonic() + max;

        for (;;) {
                int pending = 0;

                pthread_mutex_lock(&c->lock);
                for (size_t i = 0; i < c->n; i++) {
                        struct ctarget *t = c->t[i];
                        pthread_mutex_lock(&t->lock);
                        if (t->cycles == 0 && !t->exited)
                                pending++;
                        pthread_mutex_unlock(&t->lock);
                }
                pthread_mutex_unlock(&c->lock);
                if (pending == 0 || now_monotonic() >= deadline)
                        return pending;
                (void)nanosleep(&(struct timespec){.tv_nsec = 2 * 1000 * 1000}, NULL);
        }
}

struct canary *canary_free(struct canary *c)
{
        if (!c)
                return NULL;
        canary_stop(c);
        canary_unref(c);
        return NULL;
}

static void export_target(struct canary *c, struct ctarget *t, struct mset *out, usec_t now,
                          unsigned n_burst)
{
        const char *mode = canary_mode_to_string(t->mode);
        const struct canary_stats *idle = &t->stats[CANARY_REGIME_IDLE];
        const struct canary_stats *busy = &t->stats[CANARY_REGIME_BUSY];
        struct mfamily *f;
        char *labels;
        double inflight = 0;
        uint64_t flushes = 0, nf = 0;
        bool stuck;

        (void)c;
        labels = mset_labels(out, "path", t->path, "device", t->device, "mode", mode, NULL);
        /* The latency families per regime; busy only while bursts are on or once it has
         * samples (a counter that vanished on a reload would look like a reset). */
        for (int g = 0; g < _CANARY_REGIME_MAX; g++) {
                if (g == CANARY_REGIME_BUSY && n_burst == 0 && busy->hist.count == 0)
                        continue;
                canary_stats_export(
                    &t->stats[g], out,
                    mset_labels(out, "path", t->path, "device", t->device, "mode", mode, "regime",
                                canary_regime_to_string((enum canary_regime)g), NULL),
                    now);
        }
        canary_busy_idle_export(idle, busy, out, labels, now);
        stuck = t->inflight && now > t->probe_start && now - t->probe_start > t->probe_timeout;
        if (t->inflight && now > t->probe_start)
                inflight = (double)(now - t->probe_start) / (double)USEC_PER_SEC;
        f = mset_family(out, "diskpulse_sync_inflight_seconds",
                        "Age of the canary probe that has not returned yet; 0 if none.", MT_GAUGE);
        mfamily_add_raw(out, f, "", labels, NULL, NULL, false, 0, inflight);
        f = mset_family(out, "diskpulse_sync_stuck",
                        "1 while a canary probe runs longer than --canary.timeout.", MT_GAUGE);
        mfamily_add_raw(out, f, "", labels, NULL, NULL, false, 0, stuck ? 1 : 0);
        f = mset_family(out, "diskpulse_sync_stuck_probes_total",
                        "Canary probes that ran longer than --canary.timeout, each counted once "
                        "from the moment it passed it.",
                        MT_COUNTER);
        mfamily_add_raw(out, f, "", labels, NULL, NULL, true, t->stuck_probes + (stuck ? 1 : 0), 0);
        f = mset_family(out, "diskpulse_sync_errors_total",
                        "Failed canary opens and probes by errno.", MT_COUNTER);
        for (size_t i = 0; i < t->n_errs; i++) {
                char eb[16];
                mfamily_add_raw(out, f, "", labels, "errno",
                                canary_errno_name(t->errs[i].err, eb, sizeof eb), true,
                                t->errs[i].n, 0);
        }
        for (size_t i = 0; i < t->fn; i++) {
                const struct fsample *s = &t->flush[(t->fhead + i) % CANARY_FLUSH_WINDOW_MAX];
                if (now - s->t < CANARY_RECENT_WINDOW || s->t > now) {
                        flushes += s->delta;
                        nf += s->probes;
                }
        }
        f = mset_family(out, "diskpulse_sync_flush_ratio",
                        "Cache flushes that reached the backing disks per canary probe over the "
                        "recent window.",
                        MT_GAUGE);
        if (nf > 0)
                mfamily_add_raw(out, f, "", labels, NULL, NULL, false, 0,
                                (double)flushes / (double)nf);
        f = mset_family(out, "diskpulse_sync_backing_disk_info",
                        "The whole disks that receive the canary's writes and flushes: the device "
                        "itself, or the disks below a dm or md device (its slaves, recursively; a "
                        "partition as its disk).",
                        MT_GAUGE);
        for (size_t i = 0; i < t->n_disks; i++)
                mfamily_add_raw(out, f, "",
                                mset_labels(out, "path", t->path, "device", t->device, "mode", mode,
                                            "disk", t->disks[i], NULL),
                                NULL, NULL, false, 0, 1);
        f = mset_family(out, "diskpulse_sync_probes_total",
                        "Canary probes that returned (successful or not), of both regimes.",
                        MT_COUNTER);
        mfamily_add_raw(out, f, "", labels, NULL, NULL, true, t->probes, 0);
        f = mset_family(out, "diskpulse_sync_target_up",
                        "1 when the last canary cycle (open and probe) succeeded.", MT_GAUGE);
        mfamily_add_raw(out, f, "", labels, NULL, NULL, false, 0, t->up ? 1 : 0);
}

/* The state file's write failures (ENOSPC, EROFS, ...; each leaves the previous file intact). */
static void export_state(struct canary *c, struct mset *out)
{
        struct mfamily *f;

        if (!c->persist)
                return;
        f = mset_family(out, "diskpulse_state_write_errors_total",
                        "Failed writes of a state file (the previous file is kept intact).",
                        MT_COUNTER);
        mfamily_add_raw(out, f, "", mset_labels(out, "file", CANARY_STATE_FILE, NULL), NULL, NULL,
                        true, atomic_load(&c->state_write_errors), 0);
}

void canary_export(struct canary *c, struct mset *out)
{
        usec_t now = c->ops.now(c->ops.ud);
        unsigned n_burst;

        pthread_mutex_lock(&c->lock);
        n_burst = c->burst;
        for (size_t i = 0; i < c->n; i++) {
                struct ctarget *t = c->t[i];
                pthread_mutex_lock(&t->lock);
                export_target(c, t, out, now, n_burst);
                pthread_mutex_unlock(&t->lock);
        }
        pthread_mutex_unlock(&c->lock);
        export_state(c, out);
}
