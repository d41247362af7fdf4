/* The canary's statistics of one target: a probe accounted in the histogram, the recent window
 * and the baseline; the families exported; the degradation, drift and busy/idle ratios; the
 * regimes. The parts live in canary_hist.c, canary_recent.c, canary_baseline.c and
 * canary_reference.c; canary_stats.h describes the algorithms. */
#include "canary_stats.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "canary_stats_internal.h"

int canary_degradation_ratio(double recent_median, double baseline, double *ret)
{
        double v;

        if (!(baseline >= CANARY_BASELINE_FLOOR) || isinf(baseline))
                return -ENODATA;
        if (!isfinite(recent_median) || recent_median < 0)
                return -EINVAL;
        v = recent_median / baseline;
        if (!isfinite(v))
                return -ERANGE;
        *ret = v + 0.0; /* no "-0" */
        return 0;
}

static const char *const regime_names[_CANARY_REGIME_MAX] = {
    [CANARY_REGIME_IDLE] = "idle",
    [CANARY_REGIME_BUSY] = "busy",
};

const char *canary_regime_to_string(enum canary_regime r)
{
        if ((unsigned)r >= _CANARY_REGIME_MAX)
                return NULL;
        return regime_names[r];
}

int canary_regime_from_string(const char *s, enum canary_regime *ret)
{
        if (!s)
                return -EINVAL;
        for (unsigned i = 0; i < _CANARY_REGIME_MAX; i++)
                if (strcmp(s, regime_names[i]) == 0) {
                        *ret = (enum canary_regime)i;
                        return 0;
                }
        return -EINVAL;
}

int canary_stats_init(struct canary_stats *s, usec_t window, size_t max_samples)
{
        int r;

        memset(s, 0, sizeof(*s));
        r = canary_recent_init(&s->recent, window, max_samples);
        if (r < 0)
                return r;
        canary_hist_init(&s->hist);
        canary_baseline_init(&s->baseline);
        return 0;
}

void canary_stats_done(struct canary_stats *s)
{
        canary_recent_done(&s->recent);
}

int canary_stats_add(struct canary_stats *s, double seconds, usec_t mono, usec_t real)
{
        int r = canary_seconds_check(seconds);

        if (r < 0)
                return r;
        seconds += 0.0; /* -0 becomes 0 */
        (void)canary_hist_add(&s->hist, seconds);
        (void)canary_recent_add(&s->recent, seconds, mono);
        s->last = seconds;
        s->has_last = true;
        return canary_baseline_add(&s->baseline, seconds, mono, real);
}

void canary_stats_export(const struct canary_stats *s, struct mset *set, const char *labels,
                         usec_t mono)
{
        double base, median = 0, ratio, ref, trend;
        bool has_median;
        unsigned days;
        struct mfamily *f;

        canary_hist_export(&s->hist, set, labels);
        f = mset_family(set, CANARY_FAMILY_LAST, "Latency of the last finished canary probe.",
                        MT_GAUGE);
        if (s->has_last)
                mfamily_add_sample(set, f, &(struct msample_args){.labels = labels, .d = s->last});
        canary_recent_export(&s->recent, set, labels, mono);
        f = mset_family(set, CANARY_FAMILY_BASELINE,
                        "Long-term reference latency of the canary: hourly medians learnt slowly, "
                        "never a degraded state; persisted per disk; absent during warm-up.",
                        MT_GAUGE);
        if (!canary_baseline_get(&s->baseline, &base))
                return;
        mfamily_add_sample(set, f, &(struct msample_args){.labels = labels, .d = base});
        has_median = canary_recent_median(&s->recent, mono, &median) == 0;
        f = mset_family(set, CANARY_FAMILY_DEGRADATION,
                        "Median canary latency over the recent window divided by the baseline.",
                        MT_GAUGE);
        if (has_median && canary_degradation_ratio(median, base, &ratio) == 0)
                mfamily_add_sample(set, f, &(struct msample_args){.labels = labels, .d = ratio});
        f = mset_family(set, CANARY_FAMILY_REFERENCE,
                        "As-new commit latency of this disk: the median of its first 7 daily "
                        "medians (the first baseline until then); never learns a slow creep; "
                        "persisted per disk.",
                        MT_GAUGE);
        if (!canary_reference_get(&s->baseline, &ref))
                return;
        mfamily_add_sample(set, f, &(struct msample_args){.labels = labels, .d = ref});
        f = mset_family(set, CANARY_FAMILY_DRIFT,
                        "Median canary latency over the recent window divided by the reference.",
                        MT_GAUGE);
        if (has_median && canary_degradation_ratio(median, ref, &ratio) == 0)
                mfamily_add_sample(set, f, &(struct msample_args){.labels = labels, .d = ratio});
        if (canary_trend_get(&s->baseline, &trend, &days)) {
                f = mset_family(set, CANARY_FAMILY_TREND,
                                "Growth of the daily median canary latency per 30 days: a "
                                "Theil-Sen fit in log space over the last 30 daily medians "
                                "(1.1 = 10 % slower a month).",
                                MT_GAUGE);
                mfamily_add_sample(set, f, &(struct msample_args){.labels = labels, .d = trend});
                f = mset_family(set, CANARY_FAMILY_TREND_DAYS,
                                "Daily medians the trend factor rests on (at most 30).", MT_GAUGE);
                mfamily_add_sample(
                    set, f, &(struct msample_args){.labels = labels, .is_int = true, .u = days});
        }
}

int canary_busy_idle_ratio(const struct canary_stats *idle, const struct canary_stats *busy,
                           usec_t mono, double *ret)
{
        double i, b, v;

        if (canary_recent_median(&idle->recent, mono, &i) < 0 ||
            canary_recent_median(&busy->recent, mono, &b) < 0 || !(i >= CANARY_BASELINE_FLOOR))
                return -ENODATA;
        v = b / i;
        if (!isfinite(v))
                return -ENODATA;
        *ret = v + 0.0;
        return 0;
}

void canary_busy_idle_export(const struct canary_stats *idle, const struct canary_stats *busy,
                             struct mset *set, const char *labels, usec_t mono)
{
        struct mfamily *f = mset_family(
            set, CANARY_FAMILY_BUSY_IDLE,
            "Median canary latency of the busy regime (back-to-back) divided by the idle one "
            "(spaced) over the recent window.",
            MT_GAUGE);
        double v;

        if (canary_busy_idle_ratio(idle, busy, mono, &v) == 0)
                mfamily_add_sample(set, f, &(struct msample_args){.labels = labels, .d = v});
}
