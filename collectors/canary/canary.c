/* The sync canary collector: the lifecycle (creation, start, reconfiguration, stop). */
#include "canary.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "canary_internal.h"
#include "statefile.h"

static struct ctarget *target_new(struct canary *c, const struct canary_target_config *tc)
{
        struct ctarget *t = xcalloc(1, sizeof(*t));
        pthread_condattr_t ca;

        refcount_init(&t->ref);
        t->c = canary_ref(c);
        t->path = xstrdup(tc->path);
        t->mode = tc->mode;
        pthread_mutex_init(&t->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->wake, &ca);
        pthread_condattr_destroy(&ca);
        for (int g = 0; g < _CANARY_REGIME_MAX; g++)
                if (canary_stats_init(&t->stats[g], canary_recent_window_for(c->baseline_period),
                                      CANARY_RECENT_MAX_SAMPLES) < 0)
                        abort(); /* constant arguments */
                else
                        canary_baseline_set_period(&t->stats[g].baseline, c->baseline_period);
        t->log_rl.interval = 3600 * USEC_PER_SEC;
        return t;
}

/* Tells the thread to stop and wakes its sleep. */
static void target_signal_stop(struct ctarget *t)
{
        pthread_mutex_lock(&t->lock);
        t->stop = true;
        pthread_cond_broadcast(&t->wake);
        pthread_mutex_unlock(&t->lock);
}

static void apply_values(struct canary *c, const struct canary_config *cfg)
{
        if (cfg->interval == 0)
                abort(); /* canary.h: > 0; --canary.interval's entry holds the default, >= 100 ms */
        c->interval = cfg->interval;
        c->timeout = cfg->timeout;
        c->size = cfg->size;
        c->burst = cfg->burst < CANARY_BURST_MAX ? cfg->burst : CANARY_BURST_MAX;
}

struct canary *canary_new(const struct canary_config *cfg)
{
        struct canary *c = xcalloc(1, sizeof(*c));
        const struct canary_ops *o = cfg->ops;

        refcount_init(&c->ref);
        atomic_init(&c->file_stale, false);
        pthread_mutex_init(&c->lock, NULL);
        pthread_mutex_init(&c->state_lock, NULL);
        apply_values(c, cfg);
        c->baseline_period = cfg->baseline_period;
        c->state_dir_fd =
            cfg->state_dir_fd >= 0 ? fcntl(cfg->state_dir_fd, F_DUPFD_CLOEXEC, 3) : -1;
        c->sysfs_fd = cfg->sysfs_fd >= 0 ? fcntl(cfg->sysfs_fd, F_DUPFD_CLOEXEC, 3) : -1;
        c->persist = c->state_dir_fd >= 0;
        canary_ops_fill(&c->ops, o);
        c->fake_sleep = c->ops.sleep != NULL;
        c->disk_id = cfg->disk_id;
        c->disk_id_ud = cfg->disk_id_ud;
        canary_load_records(c);
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
                        int r = canary_target_start(c->t[i]);
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
                        int r = canary_target_start(c->t[c->n]);
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
                if (locked && canary_target_put_record(c, removed[i]))
                        c->records_dirty = true;
                target_signal_stop(removed[i]);
                canary_target_unref(removed[i]);
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
                                any |= canary_target_put_record(c, t[i]);
                        if (any || c->records_dirty || atomic_load(&c->file_stale)) {
                                int r = canary_write_records(c);
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
                canary_target_unref(t[i]);
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
