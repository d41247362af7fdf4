/* The canary's baseline: probes grouped in hours on a grid, an hour's median an observation, a
 * warm-up of the first day, then learnt slowly and never towards a degraded state; its persisted
 * state checked and made safe from a wrong clock (canary_stats.h, "Baseline"). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "canary_stats_internal.h"

void canary_baseline_init(struct canary_baseline *b)
{
        memset(b, 0, sizeof(*b));
        b->period_len = CANARY_BASELINE_PERIOD;
}

void canary_baseline_set_period(struct canary_baseline *b, usec_t period)
{
        b->period_len = period > 0 ? period : CANARY_BASELINE_PERIOD;
        canary_trend_update(b);
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
        canary_trend_update(b);
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

int canary_baseline_observe(struct canary_baseline *b, double median, usec_t real)
{
        struct canary_baseline_state *st = &b->st;
        int r = canary_seconds_check(median);
        double day;

        if (r < 0)
                return r;
        if (median < CANARY_BASELINE_FLOOR)
                median = CANARY_BASELINE_FLOOR;
        if (st->value > 0)
                st->value = canary_baseline_next(st->value, median);
        if (st->updates < UINT64_MAX)
                st->updates++;
        st->updated = real;
        /* the warm-up is the first day: its median, when it closes, is the first baseline */
        if (canary_reference_observe(b, median, real, &day) && st->value <= 0)
                st->value = day;
        return 0;
}

/* The period's median from the kept probes. */
static double period_median(const struct canary_baseline *b)
{
        double v[CANARY_PERIOD_KEEP];

        memcpy(v, b->period, b->period_kept * sizeof(v[0]));
        return canary_median(v, b->period_kept);
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
        int r = canary_seconds_check(seconds), applied = 0;

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
