/* What the files of the canary's statistics share (canary_stats.h has their API and describes
 * the algorithms). They call one way: canary_stats.c (one target: all of them, the export, the
 * ratios, the regimes) -> canary_baseline.c (hourly observations, the baseline) ->
 * canary_reference.c (daily medians, the reference, the trend) -> canary_recent.c (the recent
 * window, quantiles, medians) -> canary_hist.c (the histogram, the check of a latency). */
#pragma once

#include "canary_stats.h"

/* ---- canary_hist.c ---- */

/* 0 for a latency we accept, -EINVAL (NaN, negative, infinite) or -ERANGE (above
 * CANARY_MAX_SECONDS) otherwise. */
int canary_seconds_check(double v);

/* ---- canary_reference.c ---- */

/* Recomputes b's trend from its daily medians (after a day closed, a restore, a new period). */
void canary_trend_update(struct canary_baseline *b);
/* Accounts one hourly observation m (seconds, at CLOCK_REALTIME real), the warm-up's too: the
 * running day, and at the day's end its median (the reference refined or replaced, the trend).
 * Returns true with that median in *ret_day when m closed a day (*ret_day untouched otherwise):
 * the first day's is the first baseline. */
bool canary_reference_observe(struct canary_baseline *b, double m, usec_t real, double *ret_day);
