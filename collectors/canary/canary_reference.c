/* The canary's reference and trend: days of hourly observations, the reference made of the
 * first week's daily medians (refreshed only by a much faster week) and the Theil-Sen trend of
 * the last 30 (canary_stats.h, "Reference" and "Trend"). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "canary_stats_internal.h"

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

void canary_trend_update(struct canary_baseline *b)
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
        canary_trend_update(b);
}

/* One hourly observation m, the warm-up's too. */
bool canary_reference_observe(struct canary_baseline *b, double m, usec_t real, double *ret_day)
{
        struct canary_baseline_state *st = &b->st;
        double v[CANARY_DAY_OBS], d;

        if (st->reference <= 0)
                st->reference = st->value; /* after a reset: the baseline, provisional */
        st->dayobs[st->n_dayobs++] = m;
        if (st->n_dayobs < CANARY_DAY_OBS)
                return false;
        memcpy(v, st->dayobs, sizeof v);
        st->n_dayobs = 0;
        memset(st->dayobs, 0, sizeof st->dayobs);
        d = canary_median(v, CANARY_DAY_OBS);
        day_close(b, d, real);
        *ret_day = d;
        return true;
}

void canary_reference_reset(struct canary_baseline_state *st)
{
        st->reference = st->value;
        st->ref_final = false;
        st->n_refdays = st->n_days = 0;
        memset(st->refdays, 0, sizeof st->refdays);
        memset(st->days, 0, sizeof st->days);
        if (st->value <= 0)
                return; /* warming up: the running day is the warm-up, kept */
        st->n_dayobs = 0;
        memset(st->dayobs, 0, sizeof st->dayobs);
}

void canary_reference_migrate(struct canary_baseline_state *st)
{
        canary_reference_reset(st);
        st->ref_final = st->value > 0;
}
