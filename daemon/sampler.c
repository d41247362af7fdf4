/* Sampling that follows the scrapers: the tracks of steady scrapers and the rounds they want. */
#include "sampler.h"

#include <stdint.h>
#include <string.h>

void sampler_init(struct sampler *s, usec_t window, usec_t gap)
{
        memset(s, 0, sizeof(*s));
        sampler_set(s, window, gap);
}

void sampler_set(struct sampler *s, usec_t window, usec_t gap)
{
        s->window = window;
        s->gap = gap > SAMPLER_SAME ? gap : SAMPLER_SAME;
}

size_t sampler_tracks(const struct sampler *s)
{
        return s->nt;
}

usec_t sampler_tolerance(usec_t p)
{
        usec_t tol = p / 20;

        if (tol < 250 * USEC_PER_MSEC)
                return 250 * USEC_PER_MSEC;
        return tol > 2 * USEC_PER_SEC ? 2 * USEC_PER_SEC : tol;
}

static bool near(usec_t a, usec_t b, usec_t tol)
{
        return a > b ? a - b <= tol : b - a <= tol;
}

static usec_t hist_at(const struct sampler *s, size_t age)
{
        return s->hist[(s->hpos + SAMPLER_HISTORY - 1 - age) % SAMPLER_HISTORY];
}

/* The period of a scraper whose third evenly spaced arrival is t, or 0: the nearest earlier
 * arrival that has another one period before it. */
static usec_t find_period(const struct sampler *s, usec_t t)
{
        for (size_t i = 0; i < s->nhist; i++) {
                usec_t h = hist_at(s, i), p, tol;

                if (h >= t)
                        continue;
                p = t - h;
                if (p < SAMPLER_MIN_PERIOD)
                        continue;
                if (p > SAMPLER_MAX_PERIOD)
                        break; /* older ones are further still */
                tol = sampler_tolerance(p);
                for (size_t j = i + 1; j < s->nhist; j++)
                        if (near(hist_at(s, j), h - p, tol))
                                return p;
        }
        return 0;
}

static void add_track(struct sampler *s, usec_t period, usec_t t)
{
        size_t k = s->nt;

        if (k == SAMPLER_TRACKS) {
                /* full: the one that missed most gives way */
                k = 0;
                for (size_t i = 1; i < s->nt; i++)
                        if (s->t[i].misses > s->t[k].misses)
                                k = i;
        } else {
                s->nt++;
        }
        s->t[k] = (struct sampler_track){.period = period, .due = t + period};
}

void sampler_arrival(struct sampler *s, usec_t t)
{
        bool matched = false;
        usec_t p;

        if (s->nhist && t >= hist_at(s, 0) && t - hist_at(s, 0) < SAMPLER_SAME)
                return; /* the same scrape */
        for (size_t i = 0; i < s->nt; i++) {
                struct sampler_track *k = &s->t[i];
                usec_t tol = sampler_tolerance(k->period);
                int64_t err;

                if (!near(t, k->due, tol))
                        continue;
                /* On time, within tol. The expected times follow the scraper's as a phase-locked
                 * loop does: half of each error moves the phase, an eighth the period, so one
                 * late or early request (a busy scraper) moves neither far, and a scraper whose
                 * clock runs apart from ours is followed. */
                err = (int64_t)t - (int64_t)k->due;
                if (k->misses == 0)
                        k->period = (usec_t)((int64_t)k->period + err / 8);
                if (k->period < SAMPLER_MIN_PERIOD / 2)
                        k->period = SAMPLER_MIN_PERIOD / 2;
                k->due = (usec_t)((int64_t)k->due + err / 2) + k->period;
                k->misses = 0;
                matched = true;
        }
        if (!matched && (p = find_period(s, t)) != 0)
                add_track(s, p, t);
        s->hist[s->hpos] = t;
        s->hpos = (s->hpos + 1) % SAMPLER_HISTORY;
        if (s->nhist < SAMPLER_HISTORY)
                s->nhist++;
}

/* The first time base + k * p (k >= 0) after floor. */
static int64_t first_after(int64_t base, int64_t p, int64_t floor)
{
        if (base > floor)
                return base;
        return base + ((floor - base) / p + 1) * p;
}

usec_t sampler_next(struct sampler *s, usec_t now, usec_t last, enum sample_kind *kind)
{
        int64_t served = (int64_t)last + (int64_t)s->gap - 1; /* a round gap after last runs */
        int64_t next = last ? (int64_t)(last + SAMPLER_FLOOR) : (int64_t)now;
        enum sample_kind why = SAMPLE_FLOOR;
        size_t i = 0;

        while (i < s->nt) {
                struct sampler_track *k = &s->t[i];
                usec_t tol = sampler_tolerance(k->period);
                int64_t p = (int64_t)k->period, at;

                if (now > k->due + tol) {
                        /* its expected arrivals since did not come */
                        usec_t late = (now - k->due - tol) / k->period + 1;
                        k->due += late * k->period;
                        k->misses += (unsigned)(late > 2 ? 2 : late);
                }
                if (k->misses >= 2) {
                        s->t[i] = s->t[--s->nt];
                        continue;
                }
                at = first_after((int64_t)k->due - (int64_t)SAMPLER_LEAD, p, served);
                if (at < next) {
                        next = at;
                        why = SAMPLE_SCRAPE;
                }
                at = first_after((int64_t)k->due - (int64_t)SAMPLER_LEAD - (int64_t)s->window, p,
                                 served);
                if (at < next) {
                        next = at;
                        why = SAMPLE_WINDOW;
                }
                i++;
        }
        if (kind)
                *kind = why;
        return next > (int64_t)now ? (usec_t)next : now;
}

usec_t sampler_fixed_next(usec_t grid, usec_t p, usec_t now, uint64_t *ret_missed)
{
        usec_t k;

        if (grid > now) {
                if (ret_missed)
                        *ret_missed = 0;
                return grid;
        }
        k = (now - grid) / p + 1; /* grid + k * p is the first after now */
        if (ret_missed)
                *ret_missed = k - 1;
        return grid + k * p;
}
