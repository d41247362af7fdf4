/* The fdatasync canary's statistics (histogram, recent quantiles, baseline, reference, trend);
 * the algorithms are described in canary_stats.h. */
#include "canary_stats.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Samples ---- */

/* 0 for a latency we accept, -EINVAL / -ERANGE otherwise. */
static int check_seconds(double v)
{
        if (isnan(v) || isinf(v) || v < 0)
                return -EINVAL;
        if (v > CANARY_MAX_SECONDS)
                return -ERANGE;
        return 0;
}

/* ---- Histogram ---- */

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
        int r = check_seconds(seconds);

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
                mfamily_add_raw(set, f, "_bucket", labels, "le", canary_hist_le(i), true, cum,
                                (double)cum);
        }
        mfamily_add_raw(set, f, "_sum", labels, NULL, NULL, false, 0, h->sum);
        mfamily_add_raw(set, f, "_count", labels, NULL, NULL, true, h->count, (double)h->count);

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

/* ---- Recent window ---- */

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
        int r = check_seconds(seconds);
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
                        mfamily_add_raw(set, f, "", labels, "quantile", qnames[i], false, 0, v[i]);
        mfamily_add_raw(set, f, "_sum", labels, NULL, NULL, false, 0, w->sum);
        mfamily_add_raw(set, f, "_count", labels, NULL, NULL, true, w->count, (double)w->count);
        f = mset_family(set, CANARY_FAMILY_SAMPLES,
                        "Probes in the recent window, which its quantiles and ratios rest on.",
                        MT_GAUGE);
        mfamily_add_raw(set, f, "", labels, NULL, NULL, true, n, (double)n);
}

/* ---- Baseline ---- */

static void trend_update(struct canary_baseline *b);

void canary_baseline_init(struct canary_baseline *b)
{
        memset(b, 0, sizeof(*b));
        b->period_len = CANARY_BASELINE_PERIOD;
}

void canary_baseline_set_period(struct canary_baseline *b, usec_t period)
{
        b->period_len = period > 0 ? period : CANARY_BASELINE_PERIOD;
        trend_update(b);
}

usec_t canary_recent_window_for(usec_t period)
{
        double w;

        if (period == 0)
                return CANARY_RECENT_WINDOW;
        w = (double)CANARY_RECENT_WINDOW * ((double)period / (double)CANARY_BASELINE_PERIOD);
        if (w < 1)
                return 1;
        if (w >= (double)UINT64_MAX)
                return UINT64_MAX;
        return (usec_t)w;
}

bool canary_baseline_value_ok(double v)
{
        return isfinite(v) && v >= CANARY_BASELINE_FLOOR && v <= CANARY_MAX_SECONDS;
}

int canary_baseline_state_check(const struct canary_baseline_state *st)
{
        if (st->value != 0 && !canary_baseline_value_ok(st->value))
                return -EINVAL;
        if (st->value != 0 ? st->n_warmup != 0 : st->n_warmup >= CANARY_BASELINE_WARMUP)
                return -EINVAL;
        for (unsigned i = 0; i < st->n_warmup; i++)
                if (!canary_baseline_value_ok(st->warmup[i]))
                        return -EINVAL;
        if (st->reference != 0 && !canary_baseline_value_ok(st->reference))
                return -EINVAL;
        if (st->n_refdays >= CANARY_REF_DAYS || (st->ref_final && st->n_refdays != 0) ||
            st->n_dayobs >= CANARY_DAY_OBS || st->n_days > CANARY_DAYS_KEPT)
                return -EINVAL;
        for (unsigned i = 0; i < st->n_refdays; i++)
                if (!canary_baseline_value_ok(st->refdays[i]))
                        return -EINVAL;
        for (unsigned i = 0; i < st->n_dayobs; i++)
                if (!canary_baseline_value_ok(st->dayobs[i]))
                        return -EINVAL;
        for (unsigned i = 0; i < st->n_days; i++)
                if (!canary_baseline_value_ok(st->days[i].v))
                        return -EINVAL;
        return 0;
}

bool canary_baseline_state_clock(struct canary_baseline_state *st, usec_t now, usec_t tolerance,
                                 struct canary_clock_fix *ret)
{
        usec_t limit = now > UINT64_MAX - tolerance ? UINT64_MAX : now + tolerance;
        unsigned kept = 0;

        *ret = (struct canary_clock_fix){0};
        if (st->updated > limit) {
                ret->future_updated = true;
                ret->latest = st->updated;
                st->updated = now;
        }
        for (unsigned i = 0; i < st->n_days; i++) {
                const struct canary_day *day = &st->days[i];

                if (day->t > limit) {
                        ret->future_days++;
                        if (day->t > ret->latest)
                                ret->latest = day->t;
                } else if (kept > 0 && day->t <= st->days[kept - 1].t) {
                        ret->unordered_days++;
                } else {
                        st->days[kept++] = *day;
                }
        }
        for (unsigned i = kept; i < st->n_days; i++)
                st->days[i] = (struct canary_day){0};
        st->n_days = kept;
        return ret->future_updated || ret->future_days > 0 || ret->unordered_days > 0;
}

int canary_baseline_restore(struct canary_baseline *b, const struct canary_baseline_state *st)
{
        int r = canary_baseline_state_check(st);
        usec_t period = b->period_len;

        canary_baseline_init(b);
        if (period > 0)
                b->period_len = period;
        if (r < 0)
                return r;
        b->st = *st;
        trend_update(b);
        return 0;
}

bool canary_baseline_get(const struct canary_baseline *b, double *ret)
{
        if (b->st.value <= 0)
                return false;
        *ret = b->st.value;
        return true;
}

double canary_baseline_next(double b, double m)
{
        /* per observation: 1 - 2^(-1/halflife) */
        const double a = -expm1(-M_LN2 / CANARY_BASELINE_HALFLIFE);
        const double c = -expm1(-M_LN2 / CANARY_BASELINE_HALFLIFE_BETTER);
        const double creep = log1p(CANARY_BASELINE_CREEP_PER_DAY) / 24;
        double r = m / b, step;

        if (r > CANARY_BASELINE_GUARD) {
                step = a * log(r);
                if (step > creep)
                        step = creep;
        } else if (r < 1 / CANARY_BASELINE_GUARD) {
                step = c * log(r);
        } else {
                step = a * log(r);
        }
        b *= exp(step);
        if (b < CANARY_BASELINE_FLOOR)
                b = CANARY_BASELINE_FLOOR;
        if (b > CANARY_MAX_SECONDS)
                b = CANARY_MAX_SECONDS;
        return b;
}

/* ---- Reference and trend ---- */

bool canary_reference_get(const struct canary_baseline *b, double *ret)
{
        if (b->st.reference <= 0)
                return false;
        *ret = b->st.reference;
        return true;
}

bool canary_trend_get(const struct canary_baseline *b, double *factor, unsigned *days)
{
        if (!b->has_trend)
                return false;
        *factor = b->trend_factor;
        *days = b->st.n_days;
        return true;
}

int canary_trend_fit(const struct canary_day *in, size_t n, usec_t day_len, double *ret)
{
        double slopes[CANARY_DAYS_KEPT * (CANARY_DAYS_KEPT - 1) / 2], v;
        struct canary_day d[CANARY_DAYS_KEPT];
        size_t k = 0, m = 0;

        if (n > CANARY_DAYS_KEPT)
                n = CANARY_DAYS_KEPT;
        /* only days in order: one not later than the day taken before it is left out */
        for (size_t i = 0; i < n; i++)
                if (m == 0 || in[i].t > d[m - 1].t)
                        d[m++] = in[i];
        n = m;
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                        double dt = ((double)d[j].t - (double)d[i].t) / (double)day_len;
                        if (dt < 0.5)
                                continue; /* a clock set back, or days closing fast */
                        slopes[k++] = (log(d[j].v) - log(d[i].v)) / dt;
                }
        if (k == 0)
                return -ENODATA;
        v = exp(CANARY_TREND_HORIZON * canary_median(slopes, k));
        if (!isfinite(v))
                v = v > 0 ? CANARY_MAX_SECONDS : 0;
        *ret = v;
        return 0;
}

static void trend_update(struct canary_baseline *b)
{
        b->has_trend = b->st.n_days >= CANARY_TREND_MIN_DAYS &&
                       canary_trend_fit(b->st.days, b->st.n_days, b->period_len * CANARY_DAY_OBS,
                                        &b->trend_factor) == 0;
}

/* A day of observations ends with median d at real: kept for the trend, and the reference
 * refined (first days) or replaced by a much faster week (a firmware fix, an emptied drive). */
static void day_close(struct canary_baseline *b, double d, usec_t real)
{
        struct canary_baseline_state *st = &b->st;
        usec_t t;

        if (st->n_days == CANARY_DAYS_KEPT) {
                memmove(st->days, st->days + 1, (CANARY_DAYS_KEPT - 1) * sizeof(st->days[0]));
                st->n_days--;
        }
        t = real / USEC_PER_SEC * USEC_PER_SEC;
        /* A clock set back never puts a day before the last one: it comes a day after it. */
        if (st->n_days > 0 && t <= st->days[st->n_days - 1].t)
                t = (st->days[st->n_days - 1].t + b->period_len * CANARY_DAY_OBS) / USEC_PER_SEC *
                    USEC_PER_SEC;
        st->days[st->n_days++] = (struct canary_day){.t = t, .v = d};
        if (!st->ref_final) {
                double v[CANARY_REF_DAYS];

                st->refdays[st->n_refdays++] = d;
                memcpy(v, st->refdays, st->n_refdays * sizeof(v[0]));
                st->reference = canary_median(v, st->n_refdays);
                if (st->n_refdays == CANARY_REF_DAYS) {
                        st->ref_final = true;
                        st->n_refdays = 0;
                        memset(st->refdays, 0, sizeof st->refdays);
                }
        } else if (st->n_days >= CANARY_REF_DAYS) {
                double v[CANARY_REF_DAYS], week;

                for (unsigned i = 0; i < CANARY_REF_DAYS; i++)
                        v[i] = st->days[st->n_days - CANARY_REF_DAYS + i].v;
                week = canary_median(v, CANARY_REF_DAYS);
                if (week * CANARY_REF_REFRESH < st->reference)
                        st->reference = week;
        }
        trend_update(b);
}

/* One hourly observation m after the warm-up. */
static void reference_observe(struct canary_baseline *b, double m, usec_t real)
{
        struct canary_baseline_state *st = &b->st;

        if (st->reference <= 0)
                st->reference = st->value; /* provisional: the first baseline */
        st->dayobs[st->n_dayobs++] = m;
        if (st->n_dayobs == CANARY_DAY_OBS) {
                double v[CANARY_DAY_OBS];

                memcpy(v, st->dayobs, sizeof v);
                st->n_dayobs = 0;
                memset(st->dayobs, 0, sizeof st->dayobs);
                day_close(b, canary_median(v, CANARY_DAY_OBS), real);
        }
}

void canary_reference_reset(struct canary_baseline_state *st)
{
        st->reference = st->value;
        st->ref_final = false;
        st->n_refdays = st->n_dayobs = st->n_days = 0;
        memset(st->refdays, 0, sizeof st->refdays);
        memset(st->dayobs, 0, sizeof st->dayobs);
        memset(st->days, 0, sizeof st->days);
}

void canary_reference_migrate(struct canary_baseline_state *st)
{
        canary_reference_reset(st);
        st->ref_final = st->value > 0;
}

int canary_baseline_observe(struct canary_baseline *b, double median, usec_t real)
{
        struct canary_baseline_state *st = &b->st;
        int r = check_seconds(median);

        if (r < 0)
                return r;
        if (median < CANARY_BASELINE_FLOOR)
                median = CANARY_BASELINE_FLOOR;
        if (st->value > 0) {
                st->value = canary_baseline_next(st->value, median);
        } else {
                if (st->n_warmup >= CANARY_BASELINE_WARMUP)
                        st->n_warmup = CANARY_BASELINE_WARMUP - 1; /* never past the array */
                st->warmup[st->n_warmup++] = median;
                if (st->n_warmup == CANARY_BASELINE_WARMUP) {
                        double v[CANARY_BASELINE_WARMUP];

                        memcpy(v, st->warmup, sizeof v);
                        qsort(v, CANARY_BASELINE_WARMUP, sizeof(v[0]), cmp_double);
                        st->value = canary_quantile_sorted(v, CANARY_BASELINE_WARMUP, 0.5);
                        st->n_warmup = 0;
                        memset(st->warmup, 0, sizeof st->warmup);
                }
        }
        if (st->updates < UINT64_MAX)
                st->updates++;
        st->updated = real;
        if (st->value > 0)
                reference_observe(b, median, real);
        return 0;
}

/* The period's median from the kept probes. */
static double period_median(const struct canary_baseline *b)
{
        double v[CANARY_PERIOD_KEEP];

        memcpy(v, b->period, b->period_kept * sizeof(v[0]));
        qsort(v, b->period_kept, sizeof(v[0]), cmp_double);
        return canary_quantile_sorted(v, b->period_kept, 0.5);
}

static void period_open(struct canary_baseline *b, usec_t start)
{
        b->period_open = true;
        b->period_start = start;
        b->period_end = start + b->period_len;
        b->period_hours = 1;
        b->period_n = 0;
        b->period_stride = 1;
        b->period_kept = 0;
}

/* The start of the hour of the grid from `from` on that holds mono (>= from). */
static usec_t grid_floor(const struct canary_baseline *b, usec_t from, usec_t mono)
{
        return from + (mono - from) / b->period_len * b->period_len;
}

/* Applies the ended period: its median once per hour of it that held a probe, each stamped with
 * the wall clock at that hour's end (real was read at mono, past the period's end). */
static int period_apply(struct canary_baseline *b, usec_t mono, usec_t real)
{
        double m = period_median(b);

        for (unsigned i = 0; i < b->period_hours; i++) {
                usec_t back =
                    mono - b->period_end + (usec_t)(b->period_hours - 1 - i) * b->period_len;
                int r = canary_baseline_observe(b, m, real > back ? real - back : real);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Keeps every period_stride-th probe; when full, every other kept one goes and the stride
 * doubles, so the kept probes stay evenly spread over the period. */
static void period_keep(struct canary_baseline *b, double v)
{
        if (b->period_n % b->period_stride == 0) {
                if (b->period_kept == CANARY_PERIOD_KEEP) {
                        for (size_t i = 0; i < CANARY_PERIOD_KEEP / 2; i++)
                                b->period[i] = b->period[2 * i];
                        b->period_kept = CANARY_PERIOD_KEEP / 2;
                        b->period_stride *= 2;
                }
                if (b->period_n % b->period_stride == 0)
                        b->period[b->period_kept++] = v;
        }
        b->period_n++;
}

int canary_baseline_add(struct canary_baseline *b, double seconds, usec_t mono, usec_t real)
{
        int r = check_seconds(seconds), applied = 0;

        if (r < 0)
                return r;
        if (seconds < CANARY_BASELINE_FLOOR)
                seconds = CANARY_BASELINE_FLOOR;
        if (!b->period_open) {
                period_open(b, mono);
        } else if (mono < b->period_start) {
                /* a clock that went back: the hour starts again, and the grid with it */
                b->period_start = mono;
                b->period_end = mono + b->period_len;
        } else if (mono >= b->period_end && b->period_n >= CANARY_BASELINE_MIN_SAMPLES) {
                r = period_apply(b, mono, real);
                if (r < 0)
                        return r;
                applied = 1;
                period_open(b, grid_floor(b, b->period_end, mono));
        } else if (mono >= b->period_end) {
                /* too few probes: the period runs on to the end of the hour that holds mono */
                b->period_end = grid_floor(b, b->period_end, mono) + b->period_len;
                b->period_hours++;
        }
        period_keep(b, seconds);
        return applied;
}

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

/* ---- Regimes ---- */

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

double canary_median(double *v, size_t n)
{
        qsort(v, n, sizeof(*v), cmp_double);
        return canary_quantile_sorted(v, n, 0.5);
}

/* ---- One target ---- */

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
        int r = check_seconds(seconds);

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
                mfamily_add_raw(set, f, "", labels, NULL, NULL, false, 0, s->last);
        canary_recent_export(&s->recent, set, labels, mono);
        f = mset_family(set, CANARY_FAMILY_BASELINE,
                        "Long-term reference latency of the canary: hourly medians learnt slowly, "
                        "never a degraded state; persisted per disk; absent during warm-up.",
                        MT_GAUGE);
        if (!canary_baseline_get(&s->baseline, &base))
                return;
        mfamily_add_raw(set, f, "", labels, NULL, NULL, false, 0, base);
        has_median = canary_recent_median(&s->recent, mono, &median) == 0;
        f = mset_family(set, CANARY_FAMILY_DEGRADATION,
                        "Median canary latency over the recent window divided by the baseline.",
                        MT_GAUGE);
        if (has_median && canary_degradation_ratio(median, base, &ratio) == 0)
                mfamily_add_raw(set, f, "", labels, NULL, NULL, false, 0, ratio);
        f = mset_family(set, CANARY_FAMILY_REFERENCE,
                        "As-new commit latency of this disk: the median of its first 7 daily "
                        "medians (the first baseline until then); never learns a slow creep; "
                        "persisted per disk.",
                        MT_GAUGE);
        if (!canary_reference_get(&s->baseline, &ref))
                return;
        mfamily_add_raw(set, f, "", labels, NULL, NULL, false, 0, ref);
        f = mset_family(set, CANARY_FAMILY_DRIFT,
                        "Median canary latency over the recent window divided by the reference.",
                        MT_GAUGE);
        if (has_median && canary_degradation_ratio(median, ref, &ratio) == 0)
                mfamily_add_raw(set, f, "", labels, NULL, NULL, false, 0, ratio);
        if (canary_trend_get(&s->baseline, &trend, &days)) {
                f = mset_family(set, CANARY_FAMILY_TREND,
                                "Growth of the daily median canary latency per 30 days: a "
                                "Theil-Sen fit in log space over the last 30 daily medians "
                                "(1.1 = 10 % slower a month).",
                                MT_GAUGE);
                mfamily_add_raw(set, f, "", labels, NULL, NULL, false, 0, trend);
                f = mset_family(set, CANARY_FAMILY_TREND_DAYS,
                                "Daily medians the trend factor rests on (at most 30).", MT_GAUGE);
                mfamily_add_raw(set, f, "", labels, NULL, NULL, true, days, (double)days);
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
                mfamily_add_raw(set, f, "", labels, NULL, NULL, false, 0, v);
}
