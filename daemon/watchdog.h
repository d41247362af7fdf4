/* systemd's service watchdog (sd_watchdog_enabled(3), WatchdogSec= in systemd.service(5)):
 * WATCHDOG=1 sent by the main loop itself (sd_event_set_watchdog(3)), which runs at least every
 * third of WATCHDOG_USEC. */
#pragma once

#include <systemd/sd-event.h>

/* If systemd asked this process for watchdog pings (WATCHDOG_USEC set, and WATCHDOG_PID unset or
 * this process), turns on e's watchdog, which sends WATCHDOG=1 at once and then as a loop
 * iteration starts a quarter of the period or more after the last, and arms a timer that wakes
 * the loop every WATCHDOG_USEC / 3: pings within half the period even when the loop runs a little
 * late, and none at all while the loop is stalled, so systemd notices. Both belong to e and go
 * with it. Returns 1 when armed, 0 when no watchdog is wanted, -errno (from sd-event, or a bad
 * WATCHDOG_USEC) on failure. Main thread, before the loop runs. */
int watchdog_start(sd_event *e);
