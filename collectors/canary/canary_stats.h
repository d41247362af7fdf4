/* The fdatasync canary's statistics: latency histogram, recent window with quantiles, long-term
 * baseline, reference, trend and degradation ratio. Pure: no I/O, no globals,
 * no clock reads; every time is passed in as usec_t.
 *
 * The prober measures one probe (write + fdatasync) and calls canary_stats_add() with the
 * latency, a monotonic time (CLOCK_MONOTONIC or CLOCK_BOOTTIME) and the wall-clock time
 * (CLOCK_REALTIME, only stored in the state file). The collector calls canary_stats_export()
 * into its metric set. Every object here belongs to one target; the caller serializes all calls
 * on it (one lock per target, or one thread); different objects are independent.
 *
 * One file per part: canary_hist.c (histogram), canary_recent.c (recent window, quantiles),
 * canary_baseline.c (baseline), canary_reference.c (reference, trend), canary_stats.c (one
 * target: all of them, the export, the ratios, the regimes).
 *
 * Histogram (diskpulse_sync_latency_seconds): fixed bounds 1-2.5-5 per decade from 10 us to
 * 10 s (19 bounds, neighbours at most x2.5 apart) plus +Inf; "le" formatted like the Prometheus
 * client libraries ("1e-05", "2.5e-05", "0.0001", ..., "10", "+Inf"); cumulative since start.
 *
 * Recent window (diskpulse_sync_recent_seconds, default 5 min; with a shorter baseline period
 * for tests, 5 min x period / 1 h: canary_recent_window_for()): the samples whose monotonic
 * time t satisfies now - window < t, and at least the newest CANARY_RECENT_MIN_SAMPLES (10)
 * however old (at a probe every 3 minutes a 5-minute window holds one or two: a median of one
 * probe and a p99 that is its value; ten probes make a median and a p90 of some meaning, the
 * p99 of ten is close to their maximum), at most max_samples of them (default and limit 4096, i.e.
 * 64 KiB per target at most; memory grows and shrinks with what the window holds). While the
 * probes come faster than window/max_samples (73 ms for 5 min), the oldest samples are dropped
 * early: the window then covers the last max_samples probes, still exactly. Quantiles are
 * computed exactly from the samples, by linear interpolation between closest ranks (type 7 of
 * Hyndman & Fan: numpy.percentile's default, PostgreSQL's percentile_cont, Excel's
 * PERCENTILE.INC): with the n samples sorted x[0..n-1], h = (n-1)q, and the quantile is
 * x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h]); the median of an even count is the
 * mean of the two middle samples. An empty window exports no quantile samples (absent, not 0:
 * zero latency would look like perfect health). The summary's _sum and _count are cumulative
 * since start like in every Prometheus client (OpenMetrics makes them counters; a windowed
 * count would fall and rate() would read that as a reset); they equal the histogram's.
 *
 * Baseline (diskpulse_sync_baseline_seconds), the long-term reference latency:
 *  - Observations: the probes are grouped in periods of one hour of monotonic time that lie on
 *    a grid: the first probe opens a period at its time, and every period starts where the one
 *    before it ended or a whole number of hours later (after time without probes), so the
 *    hours end by time, never at the probe that happens to come after them, and N hours of
 *    probing last N hours whatever the spacing of the probes. A period is applied (its
 *    observation m: the median of its probes as defined above) at the first probe at or after
 *    its end, stamped with the CLOCK_REALTIME of its end. A period that holds fewer than 6
 *    probes when it ends is not applied alone: it runs on over the next hour of the grid (and
 *    the next, until it holds 6), and its median then counts as one observation for each hour
 *    of it that held a probe (an hour without any, time without probes, counts for nothing).
 *    The median is exact while a period holds at most 1024 probes (intervals >= 3.6 s); with
 *    faster probing every 2nd, 4th, ... probe is kept, so that at most 1024 remain, spread
 *    evenly over the hour (8 KiB per target). Probes are floored at 1 us. The running period
 *    is not persisted: a restart loses at most its last hour (the first probe after it starts
 *    a new grid).
 *  - Warm-up: the first day of probing, 24 observations (CANARY_BASELINE_WARMUP), collected as
 *    any day's are (the running day's observations); when it closes, the baseline is its median
 *    (mean of the 12th and 13th), so up to 11 bad hours among them do not matter, and it is the
 *    reference's first daily median too (below). A whole day, because a daily load cycle is the
 *    rule on a database host: a baseline of the first 6 hours was a figure of the hours the
 *    daemon or the disk happened to start in (at night 0.8 to 0.9 of the day's level under a
 *    +-20 % cycle), against which every afternoon peak read as degraded until the baseline had
 *    followed the day, days later. Against the day's median a +-20 % cycle reads 0.8 to 1.2
 *    whatever the hour probing started. Until then the baseline and the degradation ratio are
 *    absent from the exposition.
 *  - Afterwards, per observation, in log space (ratios, not differences, matter for latency),
 *    with b the baseline and r = m / b:
 *      1/1.5 <= r <= 1.5 (normal):   b <- b * r^a, a = 1 - 2^(-1/168): half-life 7 days of
 *                                     probing (a steady 1.2x shift is learnt halfway in 7 days,
 *                                     to 95 % of the log distance in 30.3 days);
 *      r < 1/1.5 (improvement):       b <- b * r^c, c = 1 - 2^(-1/24): half-life 1 day (a 10x
 *                                     faster disk brings b within 1.5x of it in 2.5 days, then
 *                                     the normal rule finishes);
 *      r > 1.5 (degraded):            b <- b * min(r^a, 1.01^(1/24)): at most +1 % per day of
 *                                     probing, however bad; a day at 3x moves b by 1.0 %, a week
 *                                     by 7.2 %; a lasting 2x shift comes back within the band
 *                                     only after 29 days, a 3x one after 70 days, and the ratio
 *                                     shows it all that time.
 *    Speeds count observations, i.e. hours of probing: time without probes (daemon stopped,
 *    probe stuck) neither ages nor moves the baseline. A slow drift inside the 1.5x band is
 *    partly learnt: a steady doubling per month shows as a ratio of about 1.26, a doubling per
 *    week exceeds 1.5 within days and is then held by the guard.
 *  - Persisted per key (disk WWN or serial, canary mode, path) in the state directory: a
 *    renamed disk (sdb became sdc) keeps its baseline, a replaced one starts a new warm-up. A
 *    warm-up in progress is persisted as the running day's observations; one an older diskpulse
 *    wrote (up to 5 of its 6-hour warm-up's observations, "warmup=" in canary_records.h) goes on
 *    as the first hours of that day.
 *
 * Reference (diskpulse_sync_reference_seconds), the as-new figure that never learns a creep:
 *  - Observations are grouped in days of 24 (days of probing, like the baseline's speeds) from
 *    the first one on; a day's median is its "daily median". The first day is the baseline's
 *    warm-up, and when it closes its median is both the first baseline and the provisional
 *    reference. The reference is the median of the daily medians so far until 7 exist, then it
 *    is final: the median of the first week of probing, so a disk's first days of heavy restore
 *    load or up to 3 bad days do not make it, and a daily load cycle is inside every daily
 *    median. Why not the first day alone: a disk's first day may be its restore. Why not a low
 *    quantile: the best days of a noisy disk would page on its ordinary ones.
 *  - Final, it moves only down, and only a lot: when the median of the last 7 daily medians is
 *    more than 1.5x faster (a firmware fix, an emptied drive, a disk changed under the same
 *    identity), that median replaces it. Slower is never learnt, however long it lasts.
 *  - Reset only by a new disk identity (a new record) or canary_reference_reset() on one
 *    target (the operator's --canary.reset-reference).
 *  - Drift ratio (diskpulse_sync_drift_ratio) = recent median / reference.
 *
 * Trend (diskpulse_sync_trend_factor): the Theil-Sen slope of ln(daily median) against the
 * daily medians' CLOCK_REALTIME in days, over the last 30 daily medians (the median of the
 * slopes of every pair at least half a day apart: indifferent to up to 29 % bad days, e.g. a
 * week of maintenance load, and to spikes), as a factor per 30 days (1.35 = 1 % a day). Exported
 * with diskpulse_sync_trend_daily_medians (the daily medians it rests on) once there are 3.
 *
 * Degradation ratio (diskpulse_sync_degradation_ratio) = recent median / baseline; absent while
 * the baseline warms up or the window is empty; never NaN or Inf (baseline >= 1 us, samples
 * <= 1e9 s).
 *
 * Regimes: each probe cycle measures two things with these statistics, one canary_stats each:
 * the spaced probe that opens a cycle after --canary.interval of quiet ("idle": what a lone
 * commit costs) and the median of the second half of the back-to-back burst that follows it
 * ("busy": what a commit costs in a stream; the first half is the warm-up after the quiet). Their families carry a regime label; the busy/idle ratio compares the two
 * recent medians.
 *
 * The state file that persists the baselines: canary_records.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "util.h"

/* Largest accepted latency (about 31 years); a larger or non-finite value is a caller bug. */
#define CANARY_MAX_SECONDS 1e9

#define CANARY_FAMILY_LATENCY     "diskpulse_sync_latency_seconds"
#define CANARY_FAMILY_LAST        "diskpulse_sync_last_seconds"
#define CANARY_FAMILY_RECENT      "diskpulse_sync_recent_seconds"
#define CANARY_FAMILY_BASELINE    "diskpulse_sync_baseline_seconds"
#define CANARY_FAMILY_DEGRADATION "diskpulse_sync_degradation_ratio"
#define CANARY_FAMILY_REFERENCE   "diskpulse_sync_reference_seconds"
#define CANARY_FAMILY_DRIFT       "diskpulse_sync_drift_ratio"
#define CANARY_FAMILY_TREND       "diskpulse_sync_trend_factor"
#define CANARY_FAMILY_TREND_DAYS  "diskpulse_sync_trend_daily_medians"
#define CANARY_FAMILY_SAMPLES     "diskpulse_sync_recent_samples"

/* ---- Histogram ---- */

#define CANARY_HIST_NBOUNDS 19

/* The native counterpart (Prometheus' native histograms, sent in the protobuf exposition):
 * schema 2 (bucket i holds (2^((i-1)/4), 2^(i/4)] seconds, neighbours 1.19x apart), a zero
 * bucket up to 2^-30 s (below a nanosecond: a clock that did not move), buckets from the first
 * above it to the one of CANARY_MAX_SECONDS. The same observations as the classic counts, kept
 * in memory only like them (the state file holds the baseline alone): both start at zero. */
#define CANARY_NATIVE_SCHEMA    2
#define CANARY_NATIVE_ZERO      0x1p-30
#define CANARY_NATIVE_MIN_INDEX (-30 * 4 + 1)
#define CANARY_NATIVE_MAX_INDEX 120 /* mnative_index(CANARY_MAX_SECONDS, 2) */
#define CANARY_NATIVE_NBUCKETS  (CANARY_NATIVE_MAX_INDEX - CANARY_NATIVE_MIN_INDEX + 1)

struct canary_hist {
        uint64_t counts[CANARY_HIST_NBOUNDS + 1]; /* per bucket (not cumulative); last: +Inf */
        uint64_t count;
        double sum;                              /* seconds */
        uint64_t native_zero;                    /* at most CANARY_NATIVE_ZERO */
        uint64_t native[CANARY_NATIVE_NBUCKETS]; /* index CANARY_NATIVE_MIN_INDEX + k */
};

/* Bucket upper bound i (0 <= i < CANARY_HIST_NBOUNDS) in seconds, and its "le" label text. */
double canary_hist_bound(size_t i);
const char *canary_hist_le(size_t i);

/* Empties h. */
void canary_hist_init(struct canary_hist *h);
/* Counts one latency in the first bucket whose bound is >= seconds. Returns 0, or -EINVAL for
 * NaN, negative or infinite values, -ERANGE above CANARY_MAX_SECONDS (h unchanged). */
int canary_hist_add(struct canary_hist *h, double seconds);
/* Adds the CANARY_FAMILY_LATENCY histogram (cumulative _bucket with "le", _sum, _count, and the
 * native part, mfamily_add_native) to set, labelled with labels (rendered by mset_labels(), e.g.
 * path, device, mode; "" for none). */
void canary_hist_export(const struct canary_hist *h, struct mset *set, const char *labels);

/* ---- Recent window ---- */

#define CANARY_RECENT_WINDOW      (5 * 60 * USEC_PER_SEC)
#define CANARY_RECENT_MAX_SAMPLES 4096
#define CANARY_RECENT_MIN_SAMPLES 10 /* kept past the window's age: quantiles rest on them */

struct canary_sample {
        usec_t t; /* monotonic */
        double v; /* seconds */
};

struct canary_recent {
        usec_t window;
        size_t max;                 /* most samples held */
        size_t min;                 /* samples kept however old (min(max, MIN_SAMPLES)) */
        struct canary_sample *ring; /* cap entries, n of them from head on, oldest first */
        size_t cap, head, n;
        uint64_t count;   /* every sample ever added (summary _count) */
        double sum;       /* their sum in seconds (summary _sum) */
        uint64_t dropped; /* samples pushed out by max before they expired */
};

/* Sets up an empty window of window microseconds (> 0) holding at most max_samples (1 ..
 * CANARY_RECENT_MAX_SAMPLES) samples. Returns 0 or -EINVAL. Free with canary_recent_done(). */
int canary_recent_init(struct canary_recent *w, usec_t window, size_t max_samples);
/* Frees the samples; w may be reinitialized. Accepts a zeroed w. */
void canary_recent_done(struct canary_recent *w);
/* Adds a sample taken at monotonic time now (an earlier time than the newest sample's is taken
 * as the newest's) and forgets the expired ones. Returns 0, -EINVAL or -ERANGE as
 * canary_hist_add() (w unchanged). Aborts on out-of-memory. */
int canary_recent_add(struct canary_recent *w, double seconds, usec_t now);
/* Number of samples in the window at now. */
size_t canary_recent_count(const struct canary_recent *w, usec_t now);
/* The q-quantiles (0 <= q <= 1, as defined above) of the window at now, for n values of q.
 * Returns 0, -ENODATA when the window is empty, -EINVAL for a q outside [0, 1]. ret untouched
 * on failure. */
int canary_recent_quantiles(const struct canary_recent *w, usec_t now, const double *q, size_t n,
                            double *ret);
/* The median of the window at now: canary_recent_quantiles() with q = 0.5. */
int canary_recent_median(const struct canary_recent *w, usec_t now, double *ret);
/* The q-quantile of n sorted values (n >= 1) by the definition above. */
double canary_quantile_sorted(const double *sorted, size_t n, double q);
/* Adds the CANARY_FAMILY_RECENT summary: quantile="0.5", "0.9", "0.99" when the window is not
 * empty, then _sum and _count (cumulative), labelled with labels. */
void canary_recent_export(const struct canary_recent *w, struct mset *set, const char *labels,
                          usec_t now);

/* ---- Baseline ---- */

#define CANARY_BASELINE_PERIOD          (3600 * USEC_PER_SEC)
#define CANARY_BASELINE_MIN_SAMPLES     6
#define CANARY_BASELINE_WARMUP          CANARY_DAY_OBS /* observations: the first day */
#define CANARY_BASELINE_GUARD           1.5
#define CANARY_BASELINE_HALFLIFE        168 /* observations (hours), normal band */
#define CANARY_BASELINE_HALFLIFE_BETTER 24  /* observations, improvements beyond the band */
#define CANARY_BASELINE_CREEP_PER_DAY   0.01
#define CANARY_BASELINE_FLOOR           1e-6
#define CANARY_PERIOD_KEEP              1024 /* probes kept per period */

/* Reference and trend (see "Reference" above). */
#define CANARY_DAY_OBS        24  /* hourly observations per day of probing */
#define CANARY_REF_DAYS       7   /* daily medians the reference is the median of */
#define CANARY_DAYS_KEPT      30  /* daily medians the trend is fitted to */
#define CANARY_TREND_MIN_DAYS 3   /* fewer daily medians export no trend */
#define CANARY_TREND_HORIZON  30  /* the trend factor is per this many days */
#define CANARY_REF_REFRESH    1.5 /* a week this much faster than the reference replaces it */

struct canary_day {
        usec_t t; /* CLOCK_REALTIME of the day's last observation in us, whole seconds; each
                   * day later than the one before (a clock set back: a day_len after it) */
        double v; /* the day's median, seconds */
};

/* What is persisted of a baseline. */
struct canary_baseline_state {
        double value;       /* seconds; 0 while warming up */
        uint64_t updates;   /* observations applied, the warm-up ones included */
        usec_t updated;     /* CLOCK_REALTIME of the last observation in us; 0 = never */
        double reference;   /* seconds; 0 until the warm-up ends */
        bool ref_final;     /* made of CANARY_REF_DAYS days (or migrated): no longer refined */
        unsigned n_refdays; /* daily medians of the reference so far while not final */
        double refdays[CANARY_REF_DAYS];
        unsigned n_dayobs; /* observations of the running day (the warm-up's while value == 0) */
        double dayobs[CANARY_DAY_OBS];
        unsigned n_days; /* daily medians kept, oldest first */
        struct canary_day days[CANARY_DAYS_KEPT];
};

struct canary_baseline {
        struct canary_baseline_state st;
        usec_t period_len;   /* CANARY_BASELINE_PERIOD unless canary_baseline_set_period() */
        bool has_trend;      /* from st.days, recomputed when a day closes or on restore */
        double trend_factor; /* growth of the daily median per CANARY_TREND_HORIZON days */
        bool period_open;
        usec_t period_start;    /* monotonic, on the grid */
        usec_t period_end;      /* period_start + period_len x hours (more with sparse probes) */
        unsigned period_hours;  /* hours of the grid in the period that held a probe */
        uint64_t period_n;      /* probes in the period */
        uint64_t period_stride; /* every period_stride-th of them is kept (a power of 2) */
        size_t period_kept;
        double period[CANARY_PERIOD_KEEP];
};

/* Starts a baseline in warm-up with no period open. */
void canary_baseline_init(struct canary_baseline *b);
/* For tests and evaluation only (--canary.baseline-period): the baseline's "hour", and so its
 * day (24 of them) and the trend's time scale, lasts period (> 0) instead. Kept by restore.
 * The recent window behind the ratios is scaled with it: canary_recent_window_for(). */
void canary_baseline_set_period(struct canary_baseline *b, usec_t period);
/* The recent window for a baseline period (0: CANARY_BASELINE_PERIOD): CANARY_RECENT_WINDOW
 * scaled by period / 1 h (5 min at 1 h, 83.333 ms at 1 s), at least 1 us; so that the
 * degradation and drift ratios see the same share of a day at any period. */
usec_t canary_recent_window_for(usec_t period);
/* Replaces b's persisted part with st (from the state file) and drops the running period.
 * Returns 0, or -EINVAL when st is inconsistent (b then starts afresh as after init). */
int canary_baseline_restore(struct canary_baseline *b, const struct canary_baseline_state *st);
/* Whether v is a valid persisted baseline value (seconds): finite, CANARY_BASELINE_FLOOR to
 * CANARY_MAX_SECONDS. */
bool canary_baseline_value_ok(double v);
/* Validates a persisted state: 0 or -EINVAL. */
int canary_baseline_state_check(const struct canary_baseline_state *st);

/* How far ahead of the wall clock a persisted time may be before it counts as written under a
 * wrong clock (a boot with a bad hardware clock, corrected since): a day. */
#define CANARY_CLOCK_TOLERANCE (24 * 3600 * USEC_PER_SEC)

/* What canary_baseline_state_clock() changed. */
struct canary_clock_fix {
        unsigned future_days;    /* daily medians stamped after now + tolerance, dropped */
        unsigned unordered_days; /* daily medians not after the one before them, dropped */
        bool future_updated;     /* updated was after now + tolerance: now set to now */
        usec_t latest;           /* the latest future time seen (CLOCK_REALTIME), 0: none */
};

/* Makes a persisted state safe from a clock gone wrong, at wall-clock time now: daily medians
 * stamped more than tolerance after now, and any not later than the one kept before it (the
 * trend needs them in order), are dropped; an updated time more than tolerance after now
 * becomes now. The reference, the baseline and the first week's daily medians (refdays, which
 * carry no time) stay: they are measurements whatever the clock said. Returns whether anything
 * changed, with *ret filled. Pure. */
bool canary_baseline_state_clock(struct canary_baseline_state *st, usec_t now, usec_t tolerance,
                                 struct canary_clock_fix *ret);
/* Accounts one probe at monotonic time mono; when it ends a period, applies the period's median
 * as an observation stamped real (CLOCK_REALTIME). Returns 1 when an observation was applied
 * (time to save the state file), 0 when not, -EINVAL / -ERANGE for a bad value (b unchanged). */
int canary_baseline_add(struct canary_baseline *b, double seconds, usec_t mono, usec_t real);
/* Applies one observation (a period's median, seconds) by the rules above. Returns 0 or
 * -EINVAL / -ERANGE (b unchanged). */
int canary_baseline_observe(struct canary_baseline *b, double median, usec_t real);
/* The update rule after warm-up: the next baseline from baseline b > 0 and observation m > 0. */
double canary_baseline_next(double b, double m);
/* Sets *ret to the baseline and returns true once warmed up; false (ret untouched) before. */
bool canary_baseline_get(const struct canary_baseline *b, double *ret);

/* Sets *ret to the reference once there is one and returns true; false before. */
bool canary_reference_get(const struct canary_baseline *b, double *ret);
/* Sets *factor to the trend (growth per CANARY_TREND_HORIZON days) and *days to the daily
 * medians it rests on, and returns true, once CANARY_TREND_MIN_DAYS daily medians exist. */
bool canary_trend_get(const struct canary_baseline *b, double *factor, unsigned *days);
/* The Theil-Sen slope of ln(v) against t in days of day_len microseconds (86400 s; shorter with
 * canary_baseline_set_period()) over n daily medians (pairs less than half a day apart
 * ignored; a day not later than the last one taken before it, out of order, is not fitted at
 * all), as a factor per CANARY_TREND_HORIZON days. Returns 0, or -ENODATA when no pair
 * qualifies. */
int canary_trend_fit(const struct canary_day *d, size_t n, usec_t day_len, double *ret);
/* Forgets the reference, the days and the trend (an operator's request for one target): the
 * current baseline becomes the provisional reference (none while warming up) and the next
 * CANARY_REF_DAYS days refine it as for a new disk. */
void canary_reference_reset(struct canary_baseline_state *st);
/* A version 2 state (no reference): its baseline becomes the final reference. */
void canary_reference_migrate(struct canary_baseline_state *st);

/* Recent median / baseline. Returns 0, or -ENODATA when baseline <= 0 (none) and -EINVAL for a
 * non-finite or negative median (ret untouched); the result is finite. */
int canary_degradation_ratio(double recent_median, double baseline, double *ret);

/* ---- Regimes ---- */

enum canary_regime {
        CANARY_REGIME_IDLE, /* the spaced probe of a cycle */
        CANARY_REGIME_BUSY, /* the median of the back-to-back burst after it */
        _CANARY_REGIME_MAX,
};

#define CANARY_FAMILY_BUSY_IDLE "diskpulse_sync_busy_idle_ratio"

/* "idle", "busy"; NULL for an invalid value. */
const char *canary_regime_to_string(enum canary_regime r);
/* Returns 0 and sets *ret, or -EINVAL for an unknown name. */
int canary_regime_from_string(const char *s, enum canary_regime *ret);
/* The median of n values (n >= 1) as defined above; sorts v in place. */
double canary_median(double *v, size_t n);

/* ---- One target: all of the above ---- */

struct canary_stats {
        struct canary_hist hist;
        struct canary_recent recent;
        struct canary_baseline baseline;
        double last;
        bool has_last;
};

/* Sets up empty statistics (window and max_samples as canary_recent_init()). Returns 0 or
 * -EINVAL. Free with canary_stats_done(). */
int canary_stats_init(struct canary_stats *s, usec_t window, size_t max_samples);
/* Frees what init allocated; accepts a zeroed s. */
void canary_stats_done(struct canary_stats *s);
/* Accounts one probe's latency everywhere. Returns canary_baseline_add()'s result (1: the
 * baseline changed, save it), or -EINVAL / -ERANGE (s unchanged). */
int canary_stats_add(struct canary_stats *s, double seconds, usec_t mono, usec_t real);
/* Adds every family of a target to set, labelled with labels: the histogram, last (once a
 * probe finished), the recent summary, baseline (once warmed up) and degradation ratio (with a
 * baseline and a non-empty window). */
void canary_stats_export(const struct canary_stats *s, struct mset *set, const char *labels,
                         usec_t mono);
/* Busy recent median / idle recent median at mono. Returns 0, or -ENODATA when a window is
 * empty or the idle median is below 1 us (ret untouched); the result is finite. */
int canary_busy_idle_ratio(const struct canary_stats *idle, const struct canary_stats *busy,
                           usec_t mono, double *ret);
/* Adds the CANARY_FAMILY_BUSY_IDLE gauge (when canary_busy_idle_ratio() has a value), labelled
 * with labels (those of the target, without regime). */
void canary_busy_idle_export(const struct canary_stats *idle, const struct canary_stats *busy,
                             struct mset *set, const char *labels, usec_t mono);
