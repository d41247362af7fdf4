/* The collection round: a loop over the registered collectors. */
#include "round.h"

static usec_t round_now(const struct round *r)
{
        return r->now ? r->now() : now_monotonic();
}

void round_self_metrics(const struct round *r, struct mset *out)
{
        struct mfamily *f;

        mset_gauge(out, "diskpulse_build_info",
                   "A metric with a constant '1' value labeled by version and revision.", 1.0,
                   "version", r->version, "revision", r->revision, NULL);
        f = mset_family(out, "diskpulse_collector_duration_seconds",
                        "How long the collector's last round took.", MT_GAUGE);
        for (size_t i = 0; i < registry_count(); i++)
                if (r->stats[i].ran)
                        mfamily_add(out, f, "", r->stats[i].duration, "collector",
                                    registry_def(i)->name, NULL);
        f = mset_family(out, "diskpulse_collector_success",
                        "Whether the collector's last round succeeded.", MT_GAUGE);
        for (size_t i = 0; i < registry_count(); i++)
                if (r->stats[i].ran)
                        mfamily_add(out, f, "", r->stats[i].success ? 1.0 : 0.0, "collector",
                                    registry_def(i)->name, NULL);
}

struct snapshot *round_run(struct round *r, usec_t realtime)
{
        struct mset *sets[REGISTRY_MAX + 1];
        summarize_fn summarize[REGISTRY_MAX + 1] = {0};
        struct snapshot *snap;
        size_t n = 0;

        for (size_t i = 0; i < registry_count(); i++) {
                struct collector *c = r->c[i];
                struct collector_stat *st = &r->stats[i];
                usec_t t0;
                int e = 0;

                if (!c)
                        continue;
                t0 = round_now(r);
                if (c->ops->collect)
                        e = c->ops->collect(c, t0);
                sets[n] = mset_new();
                c->ops->export(c, sets[n]);
                st->duration = (double)(round_now(r) - t0) / (double)USEC_PER_SEC;
                st->success = c->ops->healthy ? c->ops->healthy(c) : e >= 0;
                st->ran = true;
                summarize[n++] = c->ops->summarize;
        }
        sets[n] = mset_new();
        round_self_metrics(r, sets[n]);
        if (r->self_export)
                r->self_export(r->ud, sets[n]);
        n++;
        r->count++;
        snap = snapshot_new(sets, n, realtime);
        snapshot_set_summarizers(snap, summarize);
        return snap;
}

int round_sample(struct round *r)
{
        int err = 0;

        for (size_t i = 0; i < registry_count(); i++) {
                struct collector *c = r->c[i];
                int e = c && c->ops->sample ? c->ops->sample(c, round_now(r)) : 0;

                if (e < 0 && err == 0)
                        err = e;
        }
        return err;
}

void round_drop(struct round *r, size_t id)
{
        r->c[id] = collector_free(r->c[id]);
        r->stats[id].ran = false;
}

void round_free(struct round *r)
{
        for (size_t i = 0; i < registry_count(); i++)
                r->c[i] = collector_free(r->c[i]);
}
