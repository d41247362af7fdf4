/* When the next collection round is wanted, with sampling that follows the scrapers
 * (--diskstats.sampling=scrape): a round just before each scrape a steady scraper is expected
 * to make, and one a window before it, so that the derived gauges the scrape reads cover exactly
 * --diskstats.window (iostat's gauges over that interval); one at least every SAMPLER_FLOOR
 * otherwise. A request nobody expected gets a round of its own (publisher_fresh()); this part
 * only plans. Pure: times are given, nothing is read. Main thread.
 *
 * A scraper is learned from the arrival times of requests for the page: three arrivals evenly
 * spaced (within the tolerance of sampler_tolerance()) make a track of that period; a track
 * whose scraper missed two of its times in a row is dropped. Several scrapers (a pair of
 * Prometheus servers, a second job) make several tracks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define SAMPLER_TRACKS  4  /* scrapers followed at once */
#define SAMPLER_HISTORY 32 /* arrivals kept to find a new scraper's period */
/* A round at least this often with no scraper: 32-bit counters of /proc/diskstats (ms fields)
 * and the block-latency program's u32 bucket counts are summed as deltas, safe while no two
 * rounds are further apart than a wrap (over an hour at a million requests in flight). */
#define SAMPLER_FLOOR (60 * USEC_PER_SEC)
/* The round for an expected scrape runs this long before it, so that its page is made. */
#define SAMPLER_LEAD (200 * USEC_PER_MSEC)
/* Two arrivals nearer than this are the same scrape (a scraper's retry, two forms). */
#define SAMPLER_SAME (50 * USEC_PER_MSEC)
/* Scrape periods followed: shorter ones are served by on-demand rounds, longer ones by the
 * floor. */
#define SAMPLER_MIN_PERIOD (1 * USEC_PER_SEC)
#define SAMPLER_MAX_PERIOD (3600 * USEC_PER_SEC)

/* Why a round runs (diskpulse_collection_rounds_total's reason). */
enum sample_kind {
        SAMPLE_SCRAPE, /* just before a scrape a steady scraper is expected to make */
        SAMPLE_WINDOW, /* a window before one: the start of the gauges it reads */
        SAMPLE_FLOOR,  /* none for SAMPLER_FLOOR */
        SAMPLE_DEMAND, /* a request found the page older than --diskstats.interval */
        SAMPLE_FIXED,  /* --diskstats.sampling=fixed */
        SAMPLE_OTHER,  /* start, reload, a device that came or went, the zygote's loss */
        _SAMPLE_KIND_MAX
};

struct sampler_track {
        usec_t period;
        usec_t due;      /* the next arrival expected */
        unsigned misses; /* expected arrivals that did not come, in a row */
};

struct sampler {
        usec_t window; /* --diskstats.window */
        usec_t gap;    /* --diskstats.interval: planned rounds no nearer to the last one */
        usec_t hist[SAMPLER_HISTORY];
        size_t nhist, hpos; /* arrivals, a ring: the newest at hist[(hpos + N - 1) % N] */
        struct sampler_track t[SAMPLER_TRACKS];
        size_t nt;
};

/* A sampler with no scraper known. */
void sampler_init(struct sampler *s, usec_t window, usec_t gap);
/* A new window or interval (SIGHUP): the scrapers known are kept. */
void sampler_set(struct sampler *s, usec_t window, usec_t gap);
/* How far from its expected time an arrival still belongs to a scraper of period p. */
usec_t sampler_tolerance(usec_t p);
/* A request for the page arrived at t (arrivals in time order). */
void sampler_arrival(struct sampler *s, usec_t t);
/* When the next round is wanted (never before now), given that the last one ran at last (0:
 * none) and it is now: the earliest of last + SAMPLER_FLOOR and the rounds the tracks want after
 * last (each expected scrape less SAMPLER_LEAD, and that less the window; one within the gap,
 * at least SAMPLER_SAME, after last is served by it: rounds no more often than a fixed rate would
 * make them, however many scrapers); *kind (may be NULL) says which. Drops the tracks whose
 * scraper missed twice. */
usec_t sampler_next(struct sampler *s, usec_t now, usec_t last, enum sample_kind *kind);
/* Scrapers followed. */
size_t sampler_tracks(const struct sampler *s);

/* --diskstats.sampling=fixed: the first time after now of the cadence of period p (> 0) through
 * grid (the time of its round to come, or of the last one run), so that every round keeps to one
 * grid: a round run in between (a device that came or went, a reload) does not move it, and after
 * a stall the times that went by are skipped rather than the grid moved onto the late round.
 * *ret_missed (may be NULL): the times before the one returned that went by with no round (the
 * round run at or after grid served it). */
usec_t sampler_fixed_next(usec_t grid, usec_t p, usec_t now, uint64_t *ret_missed);
