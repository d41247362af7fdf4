/* The canary's latency histogram: fixed classic buckets and the native counterpart, counted from
 * the same probes (canary_stats.h, "Histogram"); the check of a latency every part applies. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "canary_stats_internal.h"

int canary_seconds_check(double v)
{
        if (isnan(v) || isinf(v) || v < 0)
                return -EINVAL;
        if (v > CANARY_MAX_SECONDS)
                return -ERANGE;
        return 0;
}

static const double hist_bounds[CANARY_HIST_NBOUNDS] = {
    1e-05, 2.5e-05, 5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05,    0.1,   0.25,   0.5,     1,      2.5,   5,      10,
};

/* As client_golang writes them (strconv 'g', shortest): the same as "%.15g" here. */
static const char *const hist_le[CANARY_HIST_NBOUNDS] = {
    "1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01",
    "0.025", "0.05",    "0.1",   "0.25",   "0.5",     "1",      "2.5",   "5",      "10",
};

double canary_hist_bound(size_t i)
{
        return i < CANARY_HIST_NBOUNDS ? hist_bounds[i] : INFINITY;
}

const char *canary_hist_le(size_t i)
{
        return i < CANARY_HIST_NBOUNDS ? hist_le[i] : "+Inf";
}

void canary_hist_init(struct canary_hist *h)
{
        memset(h, 0, sizeof(*h));
}

int canary_hist_add(struct canary_hist *h, double seconds)
{
        size_t i = 0;
        int r = canary_seconds_check(seconds);

        if (r < 0)
                return r;
        while (i < CANARY_HIST_NBOUNDS && seconds > hist_bounds[i])
                i++;
        h->counts[i]++;
        if (seconds <= CANARY_NATIVE_ZERO)
                h->native_zero++;
        else
                h->native[mnative_index(seconds, CANARY_NATIVE_SCHEMA) - CANARY_NATIVE_MIN_INDEX]++;
        h->count++;
        h->sum += seconds;
        return 0;
}

void canary_hist_export(const struct canary_hist *h, struct mset *set, const char *labels)
{
        struct mfamily *f = mset_family(
            set, CANARY_FAMILY_LATENCY,
            "Latency of one canary probe (a small write and fdatasync, or the mode's equivalent).",
            MT_HISTOGRAM);
        uint64_t cum = 0;

        for (size_t i = 0; i <= CANARY_HIST_NBOUNDS; i++) {
                cum += h->counts[i];
                mfamily_add_sample(set, f,
                                   &(struct msample_args){.suffix = "_bucket",
                                                          .labels = labels,
                                                          .extra_name = "le",
                                                          .extra_value = canary_hist_le(i),
                                                          .is_int = true,
                                                          .u = cum});
        }
        mfamily_add_sample(set, f,
                           &(struct msample_args){.suffix = "_sum", .labels = labels, .d = h->sum});
        mfamily_add_sample(
            set, f,
            &(struct msample_args){
                .suffix = "_count", .labels = labels, .is_int = true, .u = h->count});

        /* the native buckets from the first to the last that counted something */
        size_t lo = 0, hi = CANARY_NATIVE_NBUCKETS;
        while (lo < hi && !h->native[lo])
                lo++;
        while (hi > lo && !h->native[hi - 1])
                hi--;
        struct mnative nh = {
            .schema = CANARY_NATIVE_SCHEMA,
            .zero_threshold = CANARY_NATIVE_ZERO,
            .zero_count = h->native_zero,
            .count = h->count,
            .sum = h->sum,
            .offset = CANARY_NATIVE_MIN_INDEX + (int32_t)lo,
            .n = hi - lo,
            .counts = h->native + lo,
        };
        mfamily_add_native(set, f, labels, &nh);
}
