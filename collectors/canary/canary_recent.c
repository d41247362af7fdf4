/* The canary's recent window: the samples of the last minutes (at least the newest ten), their
 * exact quantiles and the recent summary (canary_stats.h, "Recent window"); medians. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "canary_stats_internal.h"

int canary_recent_init(struct canary_recent *w, usec_t window, size_t max_samples)
{
        if (window == 0 || max_samples == 0 || max_samples > CANARY_RECENT_MAX_SAMPLES)
                return -EINVAL;
        memset(w, 0, sizeof(*w));
        w->window = window;
        w->max = max_samples;
        w->min = max_samples < CANARY_RECENT_MIN_SAMPLES ? max_samples : CANARY_RECENT_MIN_SAMPLES;
        return 0;
}

void canary_recent_done(struct canary_recent *w)
{
        free(w->ring);
        w->ring = NULL;
        w->cap = w->head = w->n = 0;
}

static const struct canary_sample *sample_at(const struct canary_recent *w, size_t i)
{
        return &w->ring[(w->head + i) % w->cap];
}

static bool in_window(const struct canary_recent *w, usec_t t, usec_t now)
{
        return now <= t || now - t < w->window;
}

/* Index (from the oldest) of the first sample still in the window at now: in time or among the
 * newest w->min; samples are in time order, so a binary search. */
static size_t first_live(const struct canary_recent *w, usec_t now)
{
        size_t lo = 0, hi = w->n > w->min ? w->n - w->min : 0;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (in_window(w, sample_at(w, mid)->t, now))
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return lo;
}

static void resize(struct canary_recent *w, size_t cap)
{
        struct canary_sample *ring = xmalloc(cap * sizeof(*ring));

        for (size_t i = 0; i < w->n; i++)
                ring[i] = *sample_at(w, i);
        free(w->ring);
        w->ring = ring;
        w->cap = cap;
        w->head = 0;
}

int canary_recent_add(struct canary_recent *w, double seconds, usec_t now)
{
        int r = canary_seconds_check(seconds);
        size_t skip;

        if (r < 0)
                return r;
        seconds += 0.0; /* -0 becomes 0 */
        if (w->n > 0 && now < sample_at(w, w->n - 1)->t)
                now = sample_at(w, w->n - 1)->t;
        skip = first_live(w, now);
        if (w->n > 0) {
                w->head = (w->head + skip) % w->cap;
                w->n -= skip;
        }
        if (w->n == w->max) {
                w->head = (w->head + 1) % w->cap;
                w->n--;
                w->dropped++;
        }
        if (w->n == w->cap) {
                size_t cap = w->cap ? w->cap * 2 : 16;
                resize(w, cap < w->max ? cap : w->max);
        } else if (w->cap > 64 && w->n < w->cap / 4) {
                resize(w, w->cap / 2);
        }
        w->ring[(w->head + w->n) % w->cap] = (struct canary_sample){.t = now, .v = seconds};
        w->n++;
        w->count++;
        w->sum += seconds;
        return 0;
}

size_t canary_recent_count(const struct canary_recent *w, usec_t now)
{
        return w->n - first_live(w, now);
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

double canary_quantile_sorted(const double *sorted, size_t n, double q)
{
        double h = (double)(n - 1) * q, frac, v;
        size_t lo;

        if (!(h > 0))
                return sorted[0];
        lo = (size_t)h;
        if (lo >= n - 1)
                return sorted[n - 1];
        frac = h - (double)lo;
        v = sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
        /* rounding must not leave the interval between the two ranks */
        if (v < sorted[lo])
                v = sorted[lo];
        if (v > sorted[lo + 1])
                v = sorted[lo + 1];
        return v;
}

int canary_recent_quantiles(const struct canary_recent *w, usec_t now, const double *q, size_t n,
                            double *ret)
{
        size_t first = first_live(w, now), k = w->n - first;
        _cleanup_free_ double *v = NULL;

        for (size_t i = 0; i < n; i++)
                if (!(q[i] >= 0 && q[i] <= 1))
                        return -EINVAL;
        if (k == 0)
                return -ENODATA;
        v = xmalloc(k * sizeof(*v));
        for (size_t i = 0; i < k; i++)
                v[i] = sample_at(w, first + i)->v;
        qsort(v, k, sizeof(*v), cmp_double);
        for (size_t i = 0; i < n; i++)
                ret[i] = canary_quantile_sorted(v, k, q[i]);
        return 0;
}

int canary_recent_median(const struct canary_recent *w, usec_t now, double *ret)
{
        static const double half = 0.5;
        return canary_recent_quantiles(w, now, &half, 1, ret);
}

void canary_recent_export(const struct canary_recent *w, struct mset *set, const char *labels,
                          usec_t now)
{
        static const double qs[] = {0.5, 0.9, 0.99};
        static const char *const qnames[] = {"0.5", "0.9", "0.99"};
        double v[ARRAY_SIZE(qs)];
        struct mfamily *f = mset_family(
            set, CANARY_FAMILY_RECENT,
            "Quantiles of the canary probe latency over the recent window (the last 5 minutes "
            "unless configured, and at least the last 10 probes); _sum and _count since start.",
            MT_SUMMARY);
        size_t n = canary_recent_count(w, now);

        if (canary_recent_quantiles(w, now, qs, ARRAY_SIZE(qs), v) == 0)
                for (size_t i = 0; i < ARRAY_SIZE(qs); i++)
                        mfamily_add_sample(set, f,
                                           &(struct msample_args){.labels = labels,
                                                                  .extra_name = "quantile",
                                                                  .extra_value = qnames[i],
                                                                  .d = v[i]});
        mfamily_add_sample(set, f,
                           &(struct msample_args){.suffix = "_sum", .labels = labels, .d = w->sum});
        mfamily_add_sample(
            set, f,
            &(struct msample_args){
                .suffix = "_count", .labels = labels, .is_int = true, .u = w->count});
        f = mset_family(set, CANARY_FAMILY_SAMPLES,
                        "Probes in the recent window, which its quantiles and ratios rest on.",
                        MT_GAUGE);
        mfamily_add_sample(set, f,
                           &(struct msample_args){.labels = labels, .is_int = true, .u = n});
}

double canary_median(double *v, size_t n)
{
        qsort(v, n, sizeof(*v), cmp_double);
        return canary_quantile_sorted(v, n, 0.5);
}
