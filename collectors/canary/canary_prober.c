/* The canary's prober threads: one cycle (the spaced probe, then the burst) every interval,
 * stuck detection, error accounting, the flush ratio's samples. */
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

/* Sleeps the interval with +-10 % jitter, or until stopped. Prober thread. */
static void jittered_sleep(struct ctarget *t, uint64_t *rng)
{
        struct canary *c = t->c;
        usec_t interval, d;
        double u = prng_unit(rng);

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
        int s = canary_stats_add(&t->stats[g], seconds, end, t->c->ops.realtime(t->c->ops.ud));
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
        int r;
        uint64_t rng =
            prng_seed((uint64_t)(uintptr_t)t ^ now_realtime() ^ UINT64_C(0x9e3779b97f4a7c15));
        (void)pthread_setname_np(pthread_self(), "dp-canary"); /* top -H, ionice -p */
        r = canary_set_ioprio();
        if (r < 0)
                log_debug("cannot lower the canary's I/O priority", "path", t->path);
        if (canary_ops_real_open(&c->ops))
                canary_sweep(t->path);

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
                                target_failed(t, "canary directory is gone", -r);
                                goto next;
                        }
                }
                if (!is_open) {
                        size_t size;

                        have_b = resolve(t, &b);
                        canary_update_key(t, have_b ? &b : NULL);
                        pthread_mutex_lock(&c->lock);
                        size = c->size;
                        pthread_mutex_unlock(&c->lock);
                        r = c->ops.open(c->ops.ud, t->path, t->mode, size, &f);
                        if (r < 0) {
                                target_failed(t, "cannot open the canary file", -r);
                                goto next;
                        }
                        is_open = true;
                } else if (!t->key_loaded) {
                        canary_update_key(t, have_b ? &b : NULL);
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
                        canary_target_log_error(t, "canary probe failed", -r, end);
                        c->ops.close(c->ops.ud, &f);
                        is_open = false;
                } else {
                        canary_maybe_save(t, end);
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
                pthread_mutex_lock(&t->lock);
                t->exited = true;
                pthread_mutex_unlock(&t->lock);
                return -r;
        }
        return 0;
}
