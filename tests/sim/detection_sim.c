/* The detection table's simulator: one canary target driven through the real statistics and
 * persistence code (canary_stats.c) over simulated days, with an injected clock.
 *
 *   detection_sim CASE DAYS SEED|noise-free
 *
 * Probes: the idle regime's spaced probe every 3 minutes (+-10 % jitter), as --canary.interval
 * at its default. Latency: base 1 ms x the case's factor at that time x a daily load cycle
 * (+-20 %, busiest at 14:00) x lognormal jitter (sigma SIGMA, the spread of a spaced fdatasync
 * measured on a shared virtual disk: see the README's detection table) x rare 50x spikes (one
 * probe in 500) x 3 for one hour of maintenance load each week (Sunday 02:00). The daemon
 * restarts every 10 days and after day 3: the records are formatted, parsed back and restored,
 * so the running hour and the recent window are lost as in a real restart.
 *
 * SEED (a positive integer) picks the random draws: the same seed gives the same output on every
 * run. "noise-free" leaves out everything random (the jitter, the spikes, the probes' +-10 %)
 * and keeps the rest (the case, the daily cycle, the weekly maintenance, the restarts): the
 * crossing a noisy disk's figures scatter around.
 *
 * Output, one line every 10 minutes (the slow alert group's interval): seconds since the start,
 * then the gauges as the exporter shows them at that moment, "_" when absent:
 *   T drift_ratio trend_factor trend_daily_medians degradation_ratio
 * Cases: flat, creep:PCT (PCT % a day from day 0), step:X:DAY (x X from day DAY), replace:X:DAY
 * (a new disk X times as fast from DAY: a new identity), spell:X:DAY:HOURS (x X for HOURS from
 * DAY). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canary_records.h"

#define SIGMA      0.35
#define BASE       0.001
#define INTERVAL   (180 * USEC_PER_SEC)
#define EMIT_EVERY (600 * USEC_PER_SEC)
#define DAY        (86400 * USEC_PER_SEC)
#define HOUR       (3600 * USEC_PER_SEC)
#define REAL0      ((usec_t)1767225600 * USEC_PER_SEC) /* 2026-01-01 00:00 UTC, a Thursday */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static bool noise = true; /* false: "noise-free", no random draw at all */

static double uniform(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void)
{
        return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform());
}

struct scase {
        char kind[16];
        double x;
        double day, hours;
};

/* The case's factor on the disk's latency at day d (fractional); *disk set to the identity. */
static double factor(const struct scase *c, double d, int *disk)
{
        *disk = 0;
        if (strcmp(c->kind, "creep") == 0)
                return pow(1 + c->x / 100, d);
        if (strcmp(c->kind, "step") == 0)
                return d >= c->day ? c->x : 1;
        if (strcmp(c->kind, "replace") == 0) {
                *disk = d >= c->day;
                return d >= c->day ? 1 / c->x : 1;
        }
        if (strcmp(c->kind, "spell") == 0)
                return d >= c->day && d < c->day + c->hours / 24 ? c->x : 1;
        return 1;
}

static int parse_case(const char *s, struct scase *c)
{
        memset(c, 0, sizeof *c);
        if (strcmp(s, "flat") == 0) {
                strcpy(c->kind, "flat");
                return 0;
        }
        if (sscanf(s, "creep:%lf", &c->x) == 1 && strncmp(s, "creep:", 6) == 0) {
                strcpy(c->kind, "creep");
                return 0;
        }
        if (sscanf(s, "step:%lf:%lf", &c->x, &c->day) == 2 && strncmp(s, "step:", 5) == 0) {
                strcpy(c->kind, "step");
                return 0;
        }
        if (sscanf(s, "replace:%lf:%lf", &c->x, &c->day) == 2 && strncmp(s, "replace:", 8) == 0) {
                strcpy(c->kind, "replace");
                return 0;
        }
        if (sscanf(s, "spell:%lf:%lf:%lf", &c->x, &c->day, &c->hours) == 3 &&
            strncmp(s, "spell:", 6) == 0) {
                strcpy(c->kind, "spell");
                return 0;
        }
        return -EINVAL;
}

/* SEED, a positive integer, mixed into the generator; or "noise-free". 0 or -EINVAL. */
static int parse_seed(const char *s)
{
        char *end;
        unsigned long long seed;

        if (strcmp(s, "noise-free") == 0) {
                noise = false;
                return 0;
        }
        errno = 0;
        seed = strtoull(s, &end, 10);
        if (errno != 0 || end == s || *end != 0 || seed == 0 || s[0] == '-')
                return -EINVAL;
        rng ^= seed * 0x2545f4914f6cdd1dull;
        return 0;
}

/* A restart: the record written as the daemon writes it, read back and restored into fresh
 * statistics (the running hour and the recent window are lost). */
static void restart(struct canary_stats *s, const char *disk)
{
        struct canary_records recs = {0}, back;
        struct canary_record rec;
        char *text;
        size_t len;

        if (canary_record_init(&rec, disk, "fdatasync", "/var/lib/pg") < 0)
                abort();
        rec.st = s->baseline.st;
        if (canary_records_put(&recs, &rec) < 0 || canary_records_format(&recs, &text, &len) < 0 ||
            canary_records_parse(text, len, &back) < 0 || back.n != 1 || back.bad != 0)
                abort();
        canary_stats_done(s);
        if (canary_stats_init(s, CANARY_RECENT_WINDOW, CANARY_RECENT_MAX_SAMPLES) < 0 ||
            canary_baseline_restore(&s->baseline, &back.v[0].st) < 0)
                abort();
        free(text);
        canary_records_free(&recs);
        canary_records_free(&back);
}

static void value(double v, bool ok)
{
        if (ok)
                printf(" %.6g", v);
        else
                printf(" _");
}

int main(int argc, char **argv)
{
        struct canary_stats s;
        struct scase c;
        usec_t mono = 0, next_emit = 0, next_probe = 0, end, next_restart = 3 * DAY;
        int disk = 0;

        if (argc != 4 || parse_case(argv[1], &c) < 0 || parse_seed(argv[3]) < 0) {
                fprintf(stderr, "usage: detection_sim flat|creep:PCT|step:X:DAY|replace:X:DAY|"
                                "spell:X:DAY:HOURS DAYS SEED|noise-free\n");
                return 2;
        }
        end = (usec_t)(atof(argv[2]) * DAY);
        if (canary_stats_init(&s, CANARY_RECENT_WINDOW, CANARY_RECENT_MAX_SAMPLES) < 0)
                return 1;
        while (mono <= end) {
                if (mono >= next_probe) {
                        double d = (double)mono / DAY, hour = fmod(d, 1) * 24;
                        double weekday = fmod(d + 4, 7); /* day 0 is a Thursday; 0 = Sunday */
                        int id;
                        double lat = BASE * factor(&c, d, &id);

                        if (id != disk) { /* a new disk behind the path: a new record */
                                disk = id;
                                canary_stats_done(&s);
                                if (canary_stats_init(&s, CANARY_RECENT_WINDOW,
                                                      CANARY_RECENT_MAX_SAMPLES) < 0)
                                        return 1;
                        }
                        lat *= 1 + 0.2 * sin(2 * M_PI * (hour - 8) / 24);
                        if (noise) {
                                lat *= exp(SIGMA * normal());
                                if (uniform() < 0.002)
                                        lat *= 50;
                        }
                        if (weekday >= 0 && weekday < 1 && hour >= 2 && hour < 3)
                                lat *= 3;
                        if (canary_stats_add(&s, lat, mono, REAL0 + mono) < 0)
                                return 1;
                        next_probe =
                            mono + (usec_t)(INTERVAL * (noise ? 0.9 + 0.2 * uniform() : 1));
                }
                if (mono >= next_restart) {
                        restart(&s, disk ? "wwn:0x5000bbbb" : "wwn:0x5000aaaa");
                        next_restart += 10 * DAY;
                }
                if (mono >= next_emit) {
                        double med, ref, base, ratio, trend;
                        bool has_med = canary_recent_median(&s.recent, mono, &med) == 0;
                        unsigned days = 0;
                        bool t;

                        printf("%llu", (unsigned long long)(mono / USEC_PER_SEC));
                        value(has_med && canary_reference_get(&s.baseline, &ref) &&
                                      canary_degradation_ratio(med, ref, &ratio) == 0
                                  ? ratio
                                  : 0,
                              has_med && canary_reference_get(&s.baseline, &ref));
                        t = canary_trend_get(&s.baseline, &trend, &days);
                        value(trend, t);
                        value(days, t);
                        value(has_med && canary_baseline_get(&s.baseline, &base) &&
                                      canary_degradation_ratio(med, base, &ratio) == 0
                                  ? ratio
                                  : 0,
                              has_med && canary_baseline_get(&s.baseline, &base));
                        printf("\n");
                        next_emit += EMIT_EVERY;
                }
                mono = next_probe < next_emit ? next_probe : next_emit;
                if (next_restart < mono)
                        mono = next_restart;
        }
        canary_stats_done(&s);
        return 0;
}
