"""--diskstats.sampling=fixed keeps its times: every --diskstats.interval on one grid, through
what a loaded host does to a daemon. The daemon is stopped for 330 ms (SIGSTOP: a loop starved of
CPU for that long), sent SIGHUP, and sees a block device come and go (a loop device added and
removed); each makes an extra round or a late one, and the rounds after it must fall on the same
grid as before, the times that went by with no round counted in
diskpulse_collection_rounds_missed_total. (Before, the grid moved onto the late or extra round:
by 30 to 50 ms here, by up to 400 ms under the sanitizers at load 8, and integration/iostat's
windows no longer matched iostat's.)

The rounds are seen without talking to the daemon: each reads /proc/diskstats, which moves the
bytes its threads have read (rchar of /proc/PID/io); nothing else reads while nobody scrapes."""
import os
import signal
import statistics
import sys
import time

import dp

IV = 0.1           # --diskstats.interval, seconds
WATCH = 2.5        # seconds of rounds watched for each phase measured
TOLERANCE = 0.012  # the grid's phase may seem to move by this much (the poll's lag varies with
                   # the load); a moved grid moves by 30 to 50 ms here


def read_chars(pid):
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/%d/io" % pid)


def rounds(pid, least, seconds):
    """The monotonic times of the daemon's rounds over the next seconds (polled every ms)."""
    out = []
    last = read_chars(pid)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.001)
        now = read_chars(pid)
        if now - last >= least:
            out.append(time.monotonic())
        last = now
    return out


def next_round(pid, least, timeout=5.0):
    last = read_chars(pid)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.001)
        now = read_chars(pid)
        if now - last >= least:
            return time.monotonic()
        last = now
    raise RuntimeError("no round for %.1f s" % timeout)


def phase(times, origin):
    """The median offset of times from the grid origin + k * IV, in (-IV/2, IV/2]."""
    return statistics.median(((t - origin + IV / 2) % IV) - IV / 2 for t in times)


def apart(a, b):
    """Circular distance of two phases."""
    d = abs(a - b) % IV
    return min(d, IV - d)


def counters(d):
    m = d.scrape()
    return (dp.value(m, "diskpulse_collection_rounds_missed_total"),
            dp.value(m, "diskpulse_collection_rounds_total", reason="other"),
            dp.value(m, "diskpulse_collection_rounds_total", reason="fixed"))


def disturbed(label, pid, least, origin, base, act, settle=0.3, attempts=3):
    """Runs act() just after a round of the grid and watches the rounds: in the first settle
    seconds the one it made off the grid (late or extra), then rounds on the grid. act is tried
    again (up to attempts times) when it made no round off the grid (an event that came so near
    the grid's next round that this round served it)."""
    for attempt in range(1, attempts + 1):
        next_round(pid, least)
        act()
        t_act = time.monotonic()
        seen = rounds(pid, least, settle + WATCH)
        off = [t for t in seen if t < t_act + settle and apart(phase([t], origin), base) > 0.02]
        seen = [t for t in seen if t >= t_act + settle]
        if off:
            break
        print("%s: no round off the grid within %.1f s%s" % (
            label, settle, ", again" if attempt < attempts else ""))
    dp.check(bool(off), "%s: a round off the grid (%s)" % (
        label, ", ".join("%+.1f ms" % (1e3 * phase([t], origin)) for t in off) or "none"))
    dp.check(len(seen) >= 0.8 * WATCH / IV,
             "%s: %d rounds in %.1f s at --diskstats.interval=100ms" % (label, len(seen), WATCH))
    if seen:
        ph = phase(seen, origin)
        dp.check(apart(ph, base) <= TOLERANCE,
                 "%s: the rounds after it keep the grid (phase %+.1f ms, before %+.1f ms)" % (
                     label, 1e3 * ph, 1e3 * base))


def stop_for(pid, seconds):
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


def main():
    if len(sys.argv) != 2:
        print("usage: test_cadence.py DISKPULSE_BINARY")
        sys.exit(2)
    binary = sys.argv[1]
    with open("/proc/diskstats") as f:
        least = len(f.read()) // 2  # a round reads all of it
    with dp.Daemon(binary, "--diskstats.sampling=fixed", "--diskstats.interval=100ms",
                   "--no-collector.smart", "--no-collector.canary",
                   "--no-collector.biolatency") as d:
        pid = d.proc.pid
        time.sleep(0.5)
        seen = rounds(pid, least, WATCH)
        dp.check(len(seen) >= 0.8 * WATCH / IV, "start: %d rounds in %.1f s" % (len(seen), WATCH))
        origin = seen[0]
        base = phase(seen, origin)
        gaps = sorted(b - a for a, b in zip(seen, seen[1:]))
        print("start: the rounds' median gap %.1f ms, phase %+.1f ms" % (
            1e3 * gaps[len(gaps) // 2], 1e3 * base))
        missed0, other0, _ = counters(d)
        dp.check(missed0 is not None, "diskpulse_collection_rounds_missed_total on the page (%s)"
                 % missed0)

        # Stopped for 330 ms, 20 ms after a round: it resumes 50 ms off the grid; the times at
        # +100, +200 and +300 ms went by (the first is served late, by the round at resume).
        disturbed("stopped 330 ms", pid, least, origin, base,
                  lambda: (time.sleep(0.02), stop_for(pid, 0.33)))
        missed1, other1, _ = counters(d)
        dp.check(missed1 is not None and missed0 is not None and missed1 - missed0 >= 2,
                 "stopped 330 ms: diskpulse_collection_rounds_missed_total counts the times that "
                 "went by (%s -> %s)" % (missed0, missed1))

        # SIGHUP half a period after a round: a round at once (a reload), then the grid's.
        disturbed("SIGHUP", pid, least, origin, base,
                  lambda: (time.sleep(IV / 2), d.signal(signal.SIGHUP)))
        _, other2, _ = counters(d)
        dp.check(other2 is not None and other1 is not None and other2 > other1,
                 "SIGHUP: its round ran (rounds_total{reason=\"other\"} %s -> %s)" % (other1, other2))

        # A block device that comes and goes just after a round: a round 50 ms after each event.
        if os.geteuid() == 0 and os.path.exists(dp.LOOP_CONTROL):
            ctl = os.open(dp.LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
            made = []
            try:
                def add():
                    made.append(dp.loop_add(ctl, 400, 499))

                def remove():
                    dp.loop_remove(ctl, made.pop())

                disturbed("a loop device added", pid, least, origin, base, add, attempts=1)
                disturbed("a loop device removed", pid, least, origin, base, remove, attempts=1)
            finally:
                for n in made:
                    dp.loop_remove(ctl, n)
                os.close(ctl)
        else:
            print("not run: a loop device added and removed (needs root and %s)" % dp.LOOP_CONTROL)
        dp.check(d.proc.poll() is None, "daemon still running")
    dp.finish()


if __name__ == "__main__":
    main()
