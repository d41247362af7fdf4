/* systemd's service watchdog (sd_watchdog_enabled(3), WatchdogSec= in systemd.service(5)):
 * WATCHDOG=1 sent from the main loop at a third of WATCHDOG_USEC. */
#pragma once

#include <systemd/sd-event.h>

/* If systemd asked this process for watchdog pings (WATCHDOG_USEC set, and WATCHDOG_PID unset or
 * this process), arms a timer on e that sends WATCHDOG=1 every WATCHDOG_USEC / 3: within half
 * the period even when the loop runs a little late, and not at all while the loop is stalled,
 * so systemd notices. The timer belongs to e and goes with it. Returns 1 when armed, 0 when no
 * watchdog is wanted, -errno (from sd-event, or a bad WATCHDOG_USEC) on failure. Main thread,
 * before the loop runs. */
int watchdog_start(sd_event *e);
