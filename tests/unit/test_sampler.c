/* Unit tests of sampling that follows the scrapers (daemon/sampler.c): a simulated main loop runs
 * a round whenever sampler_next() says and feeds it the scrapes' arrivals; the rounds must fall
 * exactly a lead and a window before each expected scrape (so the gauges a scrape reads cover
 * the window), no more often than the scrapers need, and every SAMPLER_FLOOR without them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sampler.h"

#define S  USEC_PER_SEC
#define MS USEC_PER_MSEC

/* One simulated run. */
struct sim {
        struct sampler s;
        usec_t last, next;
        enum sample_kind kind;
        usec_t rounds[4096];
        enum sample_kind kinds[4096];
        size_t nrounds;
};

static void sim_init(struct sim *m, usec_t window, usec_t start)
{
        sampler_init(&m->s, window, USEC_PER_SEC);
        m->nrounds = 0;
        m->last = start; /* the start-up round */
        m->next = sampler_next(&m->s, start, start, &m->kind);
}

/* Runs the rounds due up to t, then the arrival at t (arrivals are taken at the next wake-up:
 * the simulated loop feeds them before planning, as the daemon does). */
static void sim_until(struct sim *m, usec_t t)
{
        while (m->next <= t) {
                usec_t now = m->next;
                assert_true(m->nrounds < 4096);
                m->rounds[m->nrounds] = now;
                m->kinds[m->nrounds++] = m->kind;
                m->last = now;
                m->next = sampler_next(&m->s, now, m->last, &m->kind);
                assert_true(m->next > now);
        }
}

static void sim_arrival(struct sim *m, usec_t t)
{
        sim_until(m, t);
        sampler_arrival(&m->s, t);
        m->next = sampler_next(&m->s, t, m->last, &m->kind);
}

/* Whether a round ran at exactly t. */
static bool ran_at(const struct sim *m, usec_t t)
{
        for (size_t i = 0; i < m->nrounds; i++)
                if (m->rounds[i] == t)
                        return true;
        return false;
}

static size_t rounds_between(const struct sim *m, usec_t a, usec_t b)
{
        size_t n = 0;

        for (size_t i = 0; i < m->nrounds; i++)
                n += m->rounds[i] > a && m->rounds[i] <= b;
        return n;
}

/* The most recent round at or before t. */
static usec_t round_before(const struct sim *m, usec_t t)
{
        usec_t r = 0;

        for (size_t i = 0; i < m->nrounds; i++)
                if (m->rounds[i] <= t && m->rounds[i] > r)
                        r = m->rounds[i];
        return r;
}

/* Prometheus's cadence, 15 s, window 10 s: from the third scrape on, every scrape reads a round
 * made SAMPLER_LEAD before it whose window starts at a round exactly 10 s earlier; two rounds a
 * period. */
static void test_steady_scraper(void **state)
{
        static struct sim m;
        usec_t t0 = 1000 * S, p = 15 * S, w = 10 * S;
        (void)state;

        sim_init(&m, w, t0);
        for (int k = 0; k < 40; k++) {
                usec_t d = t0 + 7 * S + (usec_t)k * p;
                sim_until(&m, d);
                if (k >= 3) {
                        /* what the scrape at d reads: the newest round, lead before d */
                        assert_true(ran_at(&m, d - SAMPLER_LEAD));
                        assert_int_equal(round_before(&m, d), d - SAMPLER_LEAD);
                        /* and the window's start: a round exactly w before that */
                        assert_true(ran_at(&m, d - SAMPLER_LEAD - w));
                        assert_int_equal(rounds_between(&m, d - p, d), 2);
                }
                sim_arrival(&m, d);
        }
        assert_int_equal(sampler_tracks(&m.s), 1);
        /* the kinds: a window round, then the scrape's */
        sim_until(&m, t0 + 7 * S + 40 * p - SAMPLER_LEAD);
        assert_int_equal(m.kinds[m.nrounds - 1], SAMPLE_SCRAPE);
        assert_int_equal(m.kinds[m.nrounds - 2], SAMPLE_WINDOW);
}

/* A window longer than the period (5 s scrapes, 10 s window): the window's start is the round
 * of the scrape two periods back; one round a period. */
static void test_window_over_period(void **state)
{
        static struct sim m;
        usec_t t0 = 50 * S, p = 5 * S, w = 10 * S;
        (void)state;

        sim_init(&m, w, t0);
        for (int k = 0; k < 60; k++) {
                usec_t d = t0 + S + (usec_t)k * p;
                sim_until(&m, d);
                if (k >= 5) {
                        assert_int_equal(round_before(&m, d), d - SAMPLER_LEAD);
                        assert_true(ran_at(&m, d - SAMPLER_LEAD - w));
                        assert_int_equal(rounds_between(&m, d - p, d), 1);
                }
                sim_arrival(&m, d);
        }
}

/* Scrapes that arrive up to 100 ms early or late, and a scraper whose clock runs 0.1 % slow:
 * still followed; each scrape finds a page made at most SAMPLER_LEAD + 100 ms before it, and the
 * window spans 10 s within the jitter. */
static void test_jitter_and_drift(void **state)
{
        static struct sim m;
        usec_t t0 = 100 * S, p = 15015 * MS, w = 10 * S;
        uint64_t x = 0x9E3779B97F4A7C15ULL;
        (void)state;

        sim_init(&m, w, t0);
        for (int k = 0; k < 200; k++) {
                usec_t d;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                d = t0 + (usec_t)k * p + (x % (200 * MS)) - 100 * MS;
                sim_until(&m, d);
                if (k >= 5) {
                        usec_t r = round_before(&m, d), start;
                        if (d - r > SAMPLER_LEAD + 250 * MS)
                                fail_msg("scrape %d at %llu: the page is %llu us old (period %llu)",
                                         k, (unsigned long long)d, (unsigned long long)(d - r),
                                         (unsigned long long)m.s.t[0].period);
                        start = round_before(&m, r - 1);
                        assert_true(r - start >= w - 250 * MS && r - start <= w + 250 * MS);
                }
                sim_arrival(&m, d);
        }
        assert_int_equal(sampler_tracks(&m.s), 1);
}

/* Two Prometheus servers scraping the same target 15 s apart at different offsets: two tracks,
 * each scrape served by its own round. */
static void test_two_scrapers(void **state)
{
        static struct sim m;
        usec_t t0 = 10 * S, p = 15 * S, w = 10 * S;
        (void)state;

        sim_init(&m, w, t0);
        for (int k = 0; k < 30; k++) {
                usec_t a = t0 + 2 * S + (usec_t)k * p, b = a + 4 * S;
                sim_until(&m, a);
                if (k >= 4) {
                        assert_int_equal(round_before(&m, a), a - SAMPLER_LEAD);
                        assert_true(ran_at(&m, a - SAMPLER_LEAD - w));
                }
                sim_arrival(&m, a);
                sim_until(&m, b);
                if (k >= 4) {
                        assert_int_equal(round_before(&m, b), b - SAMPLER_LEAD);
                        assert_true(ran_at(&m, b - SAMPLER_LEAD - w));
                }
                sim_arrival(&m, b);
        }
        assert_int_equal(sampler_tracks(&m.s), 2);
}

/* The scraper goes away: after two missed scrapes its track is dropped, and only the floor
 * remains (a round a minute). */
static void test_scraper_leaves(void **state)
{
        static struct sim m;
        usec_t t0 = 10 * S, p = 15 * S, w = 10 * S, end;
        (void)state;

        sim_init(&m, w, t0);
        for (int k = 0; k < 10; k++)
                sim_arrival(&m, t0 + S + (usec_t)k * p);
        end = t0 + S + 9 * p;
        sim_until(&m, end + 3 * p);
        assert_int_equal(sampler_tracks(&m.s), 0);
        sim_until(&m, end + 3 * p + 3600 * S);
        /* an hour without scrapes: 60 rounds, each a floor one */
        assert_int_equal(rounds_between(&m, end + 3 * p, end + 3 * p + 3600 * S), 60);
        assert_int_equal(m.kinds[m.nrounds - 1], SAMPLE_FLOOR);
}

/* No scraper at all: a round every SAMPLER_FLOOR. */
static void test_floor(void **state)
{
        static struct sim m;
        (void)state;

        sim_init(&m, 10 * S, 5 * S);
        assert_int_equal(m.next, 5 * S + SAMPLER_FLOOR);
        sim_until(&m, 5 * S + 10 * SAMPLER_FLOOR);
        assert_int_equal(m.nrounds, 10);
        for (size_t i = 0; i < m.nrounds; i++)
                assert_int_equal(m.kinds[i], SAMPLE_FLOOR);
}

/* A flood of requests (every 10 ms for 5 s, then every 300 ms) and a person's irregular curls:
 * no scraper is learned from them (on-demand rounds serve those). */
static void test_no_false_tracks(void **state)
{
        static struct sim m;
        usec_t t = 20 * S;
        static const usec_t curls[] = {3 * S, 11 * S, 12500 * MS, 31 * S, 32 * S, 77 * S};
        (void)state;

        sim_init(&m, 10 * S, t);
        for (int i = 0; i < 500; i++, t += 10 * MS)
                sim_arrival(&m, t);
        assert_int_equal(sampler_tracks(&m.s), 0);
        for (size_t i = 0; i < sizeof curls / sizeof curls[0]; i++)
                sim_arrival(&m, t + curls[i]);
        assert_int_equal(sampler_tracks(&m.s), 0);
}

/* Two arrivals 20 ms apart are one scrape; a scraper faster than SAMPLER_MIN_PERIOD is
 * followed at a multiple of its period at most (on-demand rounds serve the rest): no more than
 * two rounds a second. */
static void test_same_and_short(void **state)
{
        static struct sim m;
        (void)state;

        sim_init(&m, 10 * S, S);
        for (int k = 0; k < 4; k++) {
                sim_arrival(&m, 100 * S + (usec_t)k * 15 * S);
                sim_arrival(&m, 100 * S + (usec_t)k * 15 * S + 20 * MS);
        }
        assert_int_equal(sampler_tracks(&m.s), 1);
        sim_init(&m, 10 * S, S);
        for (int k = 0; k < 40; k++)
                sim_arrival(&m, 100 * S + (usec_t)k * 500 * MS);
        assert_true(rounds_between(&m, 100 * S, 120 * S) <= 2 * 20);
}

/* --diskstats.sampling=fixed: a simulated loop runs the planned rounds a little late, sometimes
 * far too late (a stall, a round longer than the period), and extra rounds between them (a device
 * that came, a reload). Every planned time stays on the grid of the first round, is the first of
 * it after the round before, and the grid's times that went by with no round are all counted. */
static void test_fixed_keeps_its_grid(void **state)
{
        const usec_t p = 100 * MS, t0 = 5 * S + 3 * MS;
        usec_t now, grid, next;
        uint64_t missed, missed_total = 0, served = 0, x = 0x9E3779B97F4A7C15ULL;
        (void)state;

        /* on time: the next time; at its exact time too */
        assert_int_equal(sampler_fixed_next(t0, p, t0 + MS, &missed), t0 + p);
        assert_int_equal(missed, 0);
        assert_int_equal(sampler_fixed_next(t0, p, t0, &missed), t0 + p);
        /* an extra round 37 ms after a round on time: the time planned stays */
        assert_int_equal(sampler_fixed_next(t0 + p, p, t0 + 37 * MS, &missed), t0 + p);
        assert_int_equal(missed, 0);
        /* stopped 350 ms past the time planned (t0 + p): it ran late for it; t0 + 2p to 4p went
         * by; the grid goes on at t0 + 5p (before: at the late round plus a period) */
        assert_int_equal(sampler_fixed_next(t0 + p, p, t0 + p + 351 * MS, &missed), t0 + 5 * p);
        assert_int_equal(missed, 3);
        sampler_fixed_next(t0, p, t0 + MS, NULL); /* ret_missed may be NULL */

        /* the grid starts at the start-up round, at t0: the first step plans after it */
        now = t0;
        grid = t0;
        for (int i = 0; i < 100000; i++) {
                unsigned r;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                r = (unsigned)(x % 16);
                if (r == 0 && grid > now + MS) /* an extra round before the time planned */
                        now += 1 + (x >> 8) % (grid - now - MS);
                else if (r == 1) /* a stall, or a round that took longer than the period */
                        now = grid + (x >> 8) % (5 * p);
                else /* the planned round, up to 2 ms late */
                        now = grid + (x >> 8) % (2 * MS);
                now += (x >> 40) % MS; /* the round's own time */
                next = sampler_fixed_next(grid, p, now, &missed);
                if ((next - t0) % p != 0 || next <= now || next - now > p)
                        fail_msg("round %d at %llu, planned %llu: next %llu", i,
                                 (unsigned long long)now, (unsigned long long)grid,
                                 (unsigned long long)next);
                served += now >= grid; /* the round ran at or after the time planned */
                missed_total += missed;
                grid = next;
        }
        /* every time of the grid before the one planned was served by a round or counted */
        assert_int_equal(served + missed_total, (grid - t0) / p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_steady_scraper),       cmocka_unit_test(test_window_over_period),
            cmocka_unit_test(test_jitter_and_drift),     cmocka_unit_test(test_two_scrapers),
            cmocka_unit_test(test_scraper_leaves),       cmocka_unit_test(test_floor),
            cmocka_unit_test(test_no_false_tracks),      cmocka_unit_test(test_same_and_short),
            cmocka_unit_test(test_fixed_keeps_its_grid),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
