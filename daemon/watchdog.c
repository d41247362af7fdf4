/* systemd's service watchdog through sd-event's own (sd_event_set_watchdog(3)), and a timer that
 * makes the loop run at least every third of the period. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "util.h"
#include "watchdog.h"

struct watchdog {
        uint64_t interval; /* µs between wake-ups */
};

/* Does nothing but wake the loop: sd-event sends the ping as the iteration starts. */
static int on_wake(sd_event_source *s, uint64_t usec, void *userdata)
{
        const struct watchdog *w = userdata;

        (void)usec;
        /* From now, not from when it was due: after a stall the next wake is a full interval on. */
        return sd_event_source_set_time(s, now_monotonic() + w->interval);
}

int watchdog_start(sd_event *e)
{
        sd_event_source *s = NULL;
        struct watchdog *w;
        uint64_t period = 0;
        char interval[32];
        int r;

        /* sd-event pings at the start of a loop iteration when a quarter of the period has passed
         * since the last ping, and wakes itself for one only after half to three quarters of it
         * (systemd's sd-event.c); the wake-up below keeps every gap within half. */
        r = sd_event_set_watchdog(e, 1);
        if (r <= 0)
                return r;
        r = sd_watchdog_enabled(0, &period);
        if (r <= 0)
                return r < 0 ? r : -EINVAL;
        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        /* A third: a wake due now may run late by a loop iteration and still be within half. */
        w->interval = period / 3 > 0 ? period / 3 : 1;
        snprintf(interval, sizeof interval, "%" PRIu64 "ms", w->interval / USEC_PER_MSEC);
        r = sd_event_add_time(e, &s, CLOCK_MONOTONIC, now_monotonic() + w->interval, USEC_PER_MSEC,
                              on_wake, w);
        if (r < 0) {
                free(w);
                return r;
        }
        (void)sd_event_source_set_destroy_callback(s, free);
        (void)sd_event_source_set_enabled(s, SD_EVENT_ON);
        r = sd_event_source_set_floating(s, 1);
        sd_event_source_unref(s); /* the loop holds it now (or, on failure, it is gone) */
        if (r < 0)
                return r;
        log_debug("watchdog pings armed", "interval", interval);
        return 1;
}
