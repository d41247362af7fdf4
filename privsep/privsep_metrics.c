/* The helper's metrics: its liveness, restarts and requests, as the client counted them. */
#include "privsep_metrics.h"

#include "privsep.h"

void privsep_export(struct devio *io, struct mset *out)
{
        struct privsep_stats st;
        struct mfamily *f;

        if (!io || privsep_stats(io, &st) < 0)
                return;
        mset_gauge(out, "diskpulse_helper_up",
                   "Whether the privileged helper that runs device commands is alive.",
                   st.helper_up ? 1.0 : 0.0, NULL);
        mset_gauge(out, "diskpulse_helper_zygote_up",
                   "Whether the privileged zygote that starts helpers is alive; 0: diskpulse "
                   "exits for a restart after --helper.zygote-grace.",
                   st.zygote_up ? 1.0 : 0.0, NULL);
        f = mset_family(out, "diskpulse_helper_restarts_total",
                        "Privileged helpers started to replace one that died.", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.helper_restarts, NULL);
        f = mset_family(out, "diskpulse_helper_requests_total",
                        "Requests sent to the privileged helper.", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.requests, NULL);
        f = mset_family(out, "diskpulse_helper_timeouts_total",
                        "Requests the daemon stopped waiting for (--smart.timeout).", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.timeouts, NULL);
        f = mset_family(out, "diskpulse_helper_worker_failures_total",
                        "Requests whose worker process died or was killed without answering.",
                        MT_COUNTER);
        mfamily_add_u64(out, f, "", st.worker_failures, NULL);
        mset_gauge(out, "diskpulse_helper_inflight_requests",
                   "Requests sent and not answered yet (hung devices included).",
                   (double)st.inflight, NULL);
}
