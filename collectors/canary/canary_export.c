/* The canary's export: every target's latest results as metric families (main loop). */
#include "canary_internal.h"

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
        mfamily_add_sample(out, f, &(struct msample_args){.labels = labels, .d = inflight});
        f = mset_family(out, "diskpulse_sync_stuck",
                        "1 while a canary probe runs longer than --canary.timeout.", MT_GAUGE);
        mfamily_add_sample(out, f, &(struct msample_args){.labels = labels, .d = stuck ? 1 : 0});
        f = mset_family(out, "diskpulse_sync_stuck_probes_total",
                        "Canary probes that ran longer than --canary.timeout, each counted once "
                        "from the moment it passed it.",
                        MT_COUNTER);
        mfamily_add_sample(out, f,
                           &(struct msample_args){.labels = labels,
                                                  .is_int = true,
                                                  .u = t->stuck_probes + (stuck ? 1 : 0)});
        f = mset_family(out, "diskpulse_sync_errors_total",
                        "Failed canary opens and probes by errno.", MT_COUNTER);
        for (size_t i = 0; i < t->n_errs; i++) {
                char eb[16];
                mfamily_add_sample(out, f,
                                   &(struct msample_args){.labels = labels,
                                                          .extra_name = "errno",
                                                          .extra_value = canary_errno_name(
                                                              t->errs[i].err, eb, sizeof eb),
                                                          .is_int = true,
                                                          .u = t->errs[i].n});
        }
        for (size_t i = 0; i < t->fn; i++) {
                const struct fsample *s = &t->flush[(t->fhead + i) % CANARY_FLUSH_WINDOW_MAX];
                if (now - s->t < CANARY_RECENT_WINDOW || s->t > now) {
                        flushes += s->delta;
                        nf += s->probes;
                }
        }
        f = mset_family(out, CANARY_FAMILY_FLUSH_RATIO,
                        "Cache flushes that reached the backing disks per canary probe over the "
                        "recent window.",
                        MT_GAUGE);
        if (nf > 0)
                mfamily_add_sample(
                    out, f,
                    &(struct msample_args){.labels = labels, .d = (double)flushes / (double)nf});
        f = mset_family(out, "diskpulse_sync_backing_disk_info",
                        "The whole disks that receive the canary's writes and flushes: the device "
                        "itself, or the disks below a dm or md device (its slaves, recursively; a "
                        "partition as its disk).",
                        MT_GAUGE);
        for (size_t i = 0; i < t->n_disks; i++)
                mfamily_add_sample(
                    out, f,
                    &(struct msample_args){.labels = mset_labels(out, "path", t->path, "device",
                                                                 t->device, "mode", mode, "disk",
                                                                 t->disks[i], NULL),
                                           .d = 1});
        f = mset_family(out, CANARY_FAMILY_PROBES,
                        "Canary probes that returned (successful or not), of both regimes.",
                        MT_COUNTER);
        mfamily_add_sample(
            out, f, &(struct msample_args){.labels = labels, .is_int = true, .u = t->probes});
        f = mset_family(out, CANARY_FAMILY_TARGET_UP,
                        "1 when the last canary cycle (open and probe) succeeded.", MT_GAUGE);
        mfamily_add_sample(out, f, &(struct msample_args){.labels = labels, .d = t->up ? 1 : 0});
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
        mfamily_add_sample(
            out, f,
            &(struct msample_args){.labels = mset_labels(out, "file", CANARY_STATE_FILE, NULL),
                                   .is_int = true,
                                   .u = atomic_load(&c->state_write_errors)});
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
