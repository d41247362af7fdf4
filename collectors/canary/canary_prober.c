/* The canary's prober threads: one cycle (the spaced probe, then the burst) every interval,
 * stuck detection, error accounting, the flush ratio's samples.
 *
 * A prober's loop is made of steps, each its own function: get the work file ready (check its
 * directory, resolve the device, open), run the cycle's probes (outside every lock), record the
 * cycle's result, count the cycle, sleep. Each step that touches what the export reads takes
 * t->lock once, in a helper named for what it does (probe_begin(), probe_end(), record_idle(),
 * record_cycle(), count_cycle(), ...); the collector's settings are read under c->lock once per
 * use by settings_read(). No helper takes both locks. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "canary_internal.h"

static atomic_uint threads_running;

unsigned canary_threads_running(void)
{
        return atomic_load(&threads_running);
}

/* The prober thread's own state, between its cycles. */
struct prober {
        struct ctarget *t;
        struct canary_file f;
        struct canary_backing b;
        bool is_open;  /* f is open */
        bool have_b;   /* b holds the device backing the path, resolved at the last open */
        bool flush_ok; /* the disks' flush counts can be read */
        uint64_t rng;  /* the sleep's jitter */
};

/* What one cycle measured, recorded at its end by record_cycle(). */
struct cycle {
        int r;         /* 0, or the failing probe's -errno */
        usec_t end;    /* when its last probe ended (monotonic) */
        double busy;   /* the busy regime's sample (seconds), when done > 0 */
        unsigned done; /* probes of the burst done */
        int rf;        /* 0: before and after are the disks' flush counts around the probes */
        uint64_t before, after;
};

/* The collector's settings (--canary.interval, timeout, size, burst), which a reconfiguration
 * may change while the prober runs. */
struct settings {
        usec_t interval, timeout;
        size_t size;
        unsigned burst;
};

/* The settings in force now, read under c->lock. Prober thread. */
static struct settings settings_read(struct canary *c)
{
        struct settings s;

        pthread_mutex_lock(&c->lock);
        s = (struct settings){
            .interval = c->interval, .timeout = c->timeout, .size = c->size, .burst = c->burst};
        pthread_mutex_unlock(&c->lock);
        return s;
}

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

/* A failure to reach the target's directory or file: counted under the target's lock and logged
 * (once per reason, canary_target_log_error). Prober thread. */
static void target_failed(struct ctarget *t, const char *msg, int err)
{
        struct canary *c = t->c;

        pthread_mutex_lock(&t->lock);
        count_error(t, err);
        pthread_mutex_unlock(&t->lock);
        canary_target_log_error(t, msg, err, c->ops.now(c->ops.ud));
}

/* Sets the device and disks the export labels the target with, from b (NULL: none). Takes
 * t->lock. Prober thread. */
static void target_set_backing(struct ctarget *t, const struct canary_backing *b)
{
        pthread_mutex_lock(&t->lock);
        t->n_disks = 0;
        if (!b) {
                t->device[0] = 0;
        } else {
                strscpy(t->device, b->device, sizeof t->device);
                for (size_t i = 0; i < b->n_disks && i < CANARY_DISKS_MAX; i++)
                        strscpy(t->disks[t->n_disks++], b->disks[i].name, CANARY_NAME_MAX);
        }
        pthread_mutex_unlock(&t->lock);
}

/* Which device backs the path; logs a failure once per reason. A path on no single device
 * (-ENODEV: tmpfs, btrfs, nfs) has no device label; one that cannot be resolved now (its
 * directory moved away or removed, the disk's sysfs entry gone) keeps the labels of the disk it
 * was on, so that one incident stays one series with the disk named (its errors, target_up)
 * and the disk's verdict shows the target down. Prober thread. */
static bool resolve(struct ctarget *t, struct canary_backing *b)
{
        struct canary *c = t->c;
        int r = c->sysfs_fd < 0 ? -ENOENT : c->ops.resolve(c->ops.ud, c->sysfs_fd, t->path, b);
        bool keep = r < 0 && r != -ENODEV;

        if (!keep)
                target_set_backing(t, r < 0 ? NULL : b);
        if (r < 0 && (!t->resolve_logged || t->last_resolve_error != r)) {
                t->resolve_logged = true;
                t->last_resolve_error = r;
                pthread_mutex_lock(&t->lock);
                keep = keep && t->device[0];
                pthread_mutex_unlock(&t->lock);
                log_info(keep ? "cannot find the canary path's block device now; its labels keep "
                                "the disk it was on"
                              : "canary path has no single block device; device label left empty",
                         "path", t->path, "reason", canary_resolve_reason(r));
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

/* Waits on t->wake until the monotonic deadline or until the target is stopped. Takes t->lock.
 * Prober thread. */
static void wait_until(struct ctarget *t, usec_t deadline)
{
        struct timespec ts = {.tv_sec = (time_t)(deadline / USEC_PER_SEC),
                              .tv_nsec = (long)(deadline % USEC_PER_SEC) * 1000};

        pthread_mutex_lock(&t->lock);
        while (!t->stop && now_monotonic() < deadline)
                if (pthread_cond_timedwait(&t->wake, &t->lock, &ts) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&t->lock);
}

/* Sleeps the interval with +-10 % jitter, or until stopped. Prober thread. */
static void jittered_sleep(struct prober *p)
{
        struct canary *c = p->t->c;
        double u = prng_unit(&p->rng);
        usec_t d = (usec_t)((double)settings_read(c).interval * (0.9 + 0.2 * u));

        if (c->fake_sleep) {
                c->ops.sleep(c->ops.ud, d);
                return;
        }
        wait_until(p->t, now_monotonic() + d);
}

/* Marks a probe in flight from now on, with the timeout in force. Returns 0 with its start in
 * *ret_start, or -ECANCELED when the target was stopped (nothing marked). Takes t->lock. */
static int probe_begin(struct ctarget *t, usec_t timeout, usec_t *ret_start)
{
        struct canary *c = t->c;

        pthread_mutex_lock(&t->lock);
        if (t->stop) {
                pthread_mutex_unlock(&t->lock);
                return -ECANCELED;
        }
        *ret_start = c->ops.now(c->ops.ud);
        t->inflight = true;
        t->probe_start = *ret_start;
        t->probe_timeout = timeout;
        pthread_mutex_unlock(&t->lock);
        return 0;
}

/* Ends the probe in flight since start: counts it, and in stuck_probes when it ran past timeout
 * (*ret_stuck). Returns 0, or -ECANCELED when the target was stopped meanwhile (abandoned or
 * stopping: nothing counted). Takes t->lock. */
static int probe_end(struct ctarget *t, usec_t start, usec_t timeout, bool *ret_stuck)
{
        struct canary *c = t->c;
        usec_t now;

        pthread_mutex_lock(&t->lock);
        /* Read under the lock: never earlier than an export that already saw it stuck. */
        now = c->ops.now(c->ops.ud);
        t->inflight = false;
        if (t->stop) {
                pthread_mutex_unlock(&t->lock);
                return -ECANCELED;
        }
        t->probes++;
        *ret_stuck = now > start && now - start > timeout;
        if (*ret_stuck)
                t->stuck_probes++;
        pthread_mutex_unlock(&t->lock);
        return 0;
}

/* One timed probe of the cycle, marked in flight while it runs. Returns the probe's result (0
 * with *ret_lat), or -ECANCELED when the target was stopped before or during it (nothing is
 * recorded then). *ret_stuck: it ran past the timeout in force when it started; such a probe
 * is counted once in stuck_probes, continuing what the export showed while it hung. Prober
 * thread; the probe itself runs under no lock. */
static int timed_probe(struct ctarget *t, struct canary_file *f, usec_t *ret_lat, usec_t *ret_end,
                       bool *ret_stuck)
{
        struct canary *c = t->c;
        usec_t timeout = settings_read(c).timeout, start;
        int r, e;

        r = probe_begin(t, timeout, &start);
        if (r < 0)
                return r;
        r = c->ops.probe(c->ops.ud, f, ret_lat);
        *ret_end = c->ops.now(c->ops.ud);
        e = probe_end(t, start, timeout, ret_stuck);
        return e < 0 ? e : r;
}

/* Accounts one sample of a regime (seconds). Under t->lock. */
static void record_sample(struct ctarget *t, enum canary_regime g, double seconds, usec_t end)
{
        int s = canary_stats_add(&t->stats[g], seconds, end, t->c->ops.realtime(t->c->ops.ud));
        if (s > 0)
                t->save_pending = true;
}

/* Records the spaced probe's latency as the idle regime's sample at once, before the burst.
 * Takes t->lock. */
static void record_idle(struct ctarget *t, usec_t lat, usec_t end)
{
        pthread_mutex_lock(&t->lock);
        record_sample(t, CANARY_REGIME_IDLE, (double)lat / (double)USEC_PER_SEC, end);
        pthread_mutex_unlock(&t->lock);
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

/* Closes the work file. Prober thread. */
static void file_close(struct prober *p)
{
        struct canary *c = p->t->c;

        c->ops.close(c->ops.ud, &p->f);
        p->is_open = false;
}

/* Whether the open work file's directory is still the target's (a file works on in a removed
 * or covered directory): a replaced or remounted one closes the file, to be opened again; a
 * gone one closes it and counts an error. Returns false after that error. Prober thread. */
static bool file_check_dir(struct prober *p)
{
        struct ctarget *t = p->t;
        struct canary *c = t->c;
        int r = c->ops.check_dir(c->ops.ud, t->path, &p->f);

        if (r < 0)
                file_close(p);
        if (r == -ESTALE) {
                log_info("canary directory replaced or remounted; reopening", "path", t->path);
        } else if (r < 0) {
                target_failed(t, "canary directory is gone", -r);
                return false;
        }
        return true;
}

/* Opens the work file, after finding the device that backs the path and the disk identity its
 * baselines are kept under. Returns false after counting an error. Prober thread. */
static bool file_open(struct prober *p)
{
        struct ctarget *t = p->t;
        struct canary *c = t->c;
        int r;

        p->have_b = resolve(t, &p->b);
        canary_update_key(t, p->have_b ? &p->b : NULL);
        r = c->ops.open(c->ops.ud, t->path, t->mode, settings_read(c).size, &p->f);
        if (r < 0) {
                target_failed(t, "cannot open the canary file", -r);
                return false;
        }
        p->is_open = true;
        return true;
}

/* Gets the work file ready for a cycle: checked when open, opened when not. Returns false when
 * the cycle cannot probe (an error counted). Prober thread. */
static bool file_ready(struct prober *p)
{
        struct ctarget *t = p->t;

        if (p->is_open && t->c->ops.check_dir && !file_check_dir(p))
                return false;
        if (!p->is_open)
                return file_open(p);
        if (!t->key_loaded)
                canary_update_key(t, p->have_b ? &p->b : NULL);
        return true;
}

/* The disks' flush count into *ret, when they can be counted (a path without a device, or disks
 * without flush counts, never again: -ENODATA). Returns 0 or -errno. Prober thread. */
static int flushes_read(struct prober *p, uint64_t *ret)
{
        struct canary *c = p->t->c;
        int r = p->have_b && p->flush_ok ? c->ops.flushes(c->ops.ud, c->sysfs_fd, &p->b, ret)
                                         : -ENODATA;

        if (r == -ENODATA)
                p->flush_ok = false;
        return r;
}

/* Runs one cycle's probes under no lock: the spaced probe (idle regime, recorded at once),
 * then the burst (busy regime); a stuck spaced probe ends the cycle, so nothing piles onto a
 * device that hangs. The disks' flush counts are read around them. Returns 0 with *ret filled
 * (ret->r: the probes' result), or -ECANCELED when the target was stopped. Prober thread. */
static int run_cycle(struct prober *p, struct cycle *ret)
{
        struct ctarget *t = p->t;
        unsigned n_burst;
        usec_t lat = 0;
        bool stuck = false;
        int r;

        *ret = (struct cycle){0};
        ret->rf = flushes_read(p, &ret->before);
        n_burst = settings_read(t->c).burst;
        r = timed_probe(t, &p->f, &lat, &ret->end, &stuck);
        if (r == -ECANCELED)
                return r;
        if (r == 0) {
                record_idle(t, lat, ret->end);
                if (!stuck && n_burst > 0) {
                        r = burst(t, &p->f, n_burst, &ret->busy, &ret->end, &ret->done);
                        if (r == -ECANCELED)
                                return r;
                }
        }
        ret->r = r;
        ret->rf = r == 0 && ret->rf == 0 ? flushes_read(p, &ret->after) : -1;
        return 0;
}

/* Records a cycle's result for the export: its error, or the busy sample, the target up again
 * and the flush sample. Takes t->lock. Prober thread. */
static void record_cycle(struct ctarget *t, const struct cycle *cy)
{
        pthread_mutex_lock(&t->lock);
        if (cy->r < 0) {
                count_error(t, -cy->r);
        } else {
                if (cy->done > 0)
                        record_sample(t, CANARY_REGIME_BUSY, cy->busy, cy->end);
                if (!t->up && t->n_errs > 0)
                        log_info("canary target healthy again", "path", t->path, "mode",
                                 canary_mode_to_string(t->mode));
                t->up = true; /* the file was opened fresh after any earlier error */
                if (cy->rf == 0 && cy->after >= cy->before)
                        flush_add(t, cy->end, cy->after - cy->before, 1 + cy->done);
        }
        pthread_mutex_unlock(&t->lock);
}

/* After a recorded cycle: a failed probe's file is never probed again (fsyncgate) and is
 * reopened next time; a good cycle saves the baselines when they changed. Prober thread. */
static void finish_cycle(struct prober *p, const struct cycle *cy)
{
        if (cy->r < 0) {
                canary_target_log_error(p->t, "canary probe failed", -cy->r, cy->end);
                file_close(p);
        } else {
                canary_maybe_save(p->t, cy->end);
        }
}

/* Counts a cycle, whether it probed or failed to reach the file. Takes t->lock. */
static void count_cycle(struct ctarget *t)
{
        pthread_mutex_lock(&t->lock);
        t->cycles++;
        pthread_mutex_unlock(&t->lock);
}

/* Marks the prober gone for the export and canary_free(). Takes t->lock. */
static void mark_exited(struct ctarget *t)
{
        pthread_mutex_lock(&t->lock);
        t->exited = true;
        pthread_mutex_unlock(&t->lock);
}

/* The thread's start: names it, lowers its I/O priority, sweeps what a crash left. */
static void prober_setup(struct prober *p)
{
        struct ctarget *t = p->t;

        (void)pthread_setname_np(pthread_self(), "dp-canary"); /* top -H, ionice -p */
        if (canary_set_ioprio() < 0)
                log_debug("cannot lower the canary's I/O priority", "path", t->path);
        if (canary_ops_real_open(&t->c->ops))
                canary_sweep(t->path);
}

static void *prober(void *arg)
{
        struct ctarget *t = arg;
        struct prober p = {
            .t = t,
            .f = {.fd = -1},
            .flush_ok = true,
            .rng =
                prng_seed((uint64_t)(uintptr_t)t ^ now_realtime() ^ UINT64_C(0x9e3779b97f4a7c15)),
        };

        prober_setup(&p);
        for (;;) {
                struct cycle cy;

                if (target_stopped(t))
                        break;
                if (file_ready(&p)) {
                        if (run_cycle(&p, &cy) == -ECANCELED)
                                break;
                        record_cycle(t, &cy);
                        finish_cycle(&p, &cy);
                }
                count_cycle(t);
                if (target_stopped(t))
                        break;
                jittered_sleep(&p);
        }
        if (p.is_open)
                file_close(&p);
        mark_exited(t);
        canary_target_unref(t);
        atomic_fetch_sub(&threads_running, 1);
        return NULL;
}

int canary_target_start(struct ctarget *t)
{
        pthread_attr_t attr;
        pthread_t th;
        int r;

        canary_target_ref(t); /* the thread's */
        atomic_fetch_add(&threads_running, 1);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&th, &attr, prober, t);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                atomic_fetch_sub(&threads_running, 1);
                canary_target_unref(t); /* the thread's, never the last: the caller holds one */
                mark_exited(t);
                return -r;
        }
        return 0;
}
