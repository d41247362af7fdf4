"""The daemon's derived disk gauges agree within 5% with sysstat's iostat -x over the same 10 s window
(fixed sampling, aligned on the daemon's cadence). And on a daemon nobody scrapes (scrape
sampling: it samples once a minute), a person's request for / gets numbers over the span the page
prints, which agree within 5% with iostat -dxy over that span: iostat starts at the daemon's
once-a-minute sample (seen as its read of /proc/diskstats) and / is asked for when iostat ends."""
import re
import errno
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import dp

BACKING_MB = 64
RAMP = 2.0      # seconds of load before the compared window starts
WINDOW = 10     # iostat's interval and the daemon's --diskstats.window, seconds
INTERVAL = "100ms"
IV = 0.1        # INTERVAL in seconds
STARTUP = 0.002 # seconds from starting iostat to its first read, the first guess (measured on an
                # idle machine: ~2 ms; under fio's load 10-20 ms, so each attempt measures it
                # and the next one starts iostat that much earlier)
ATTEMPTS = 3
measured_startups = []  # every start-up measured so far; their median is the next guess


def startup_guess():
    s = sorted(measured_startups)
    return s[len(s) // 2] if s else STARTUP
REL = 0.05      # the bound: 5% of iostat's value ...
ROUND = 0.005   # ... once iostat's own rounding ("%.2f": +-0.005 in its unit) is allowed for

# (iostat key, diskpulse gauge, factor from iostat's unit to the gauge's)
PAIRS = [
    ("r/s", "diskpulse_disk_read_iops", 1.0),
    ("w/s", "diskpulse_disk_write_iops", 1.0),
    ("rkB/s", "diskpulse_disk_read_bytes_per_second", 1024.0),
    ("wkB/s", "diskpulse_disk_write_bytes_per_second", 1024.0),
    ("r_await", "diskpulse_disk_read_await_seconds", 1e-3),
    ("w_await", "diskpulse_disk_write_await_seconds", 1e-3),
    ("d_await", "diskpulse_disk_discard_await_seconds", 1e-3),
    ("f_await", "diskpulse_disk_flush_await_seconds", 1e-3),
    ("util", "diskpulse_disk_utilization_ratio", 1e-2),
    ("aqu-sz", "diskpulse_disk_queue_depth", 1.0),
]

# Steady loads on the loop device, each compared over its own iostat window: fio's arguments
# without --filename and --runtime, and the iostat keys the load must make non-zero (so that
# they are not compared 0 against 0). No load issues discards: d_await must be 0 on both sides.
LOADS = [
    # small 4 KiB writes, one at a time: small awaits and queue. util is compared but need not
    # be non-zero: the kernel counts io_ticks only for jiffies a request is in flight across, and
    # 0.1 ms requests every 3.3 ms may cross none (identical 10 s runs moved io_ticks by 72 to
    # 340 ms, and by 0 in two runs, iostat and diskpulse agreeing); the other loads require it.
    ("randwrite", ["--rw=randwrite", "--bs=4k", "--rate_iops=300", "--ioengine=psync"],
     ["w/s", "wkB/s", "w_await", "aqu-sz"]),
    # reads, writes and flushes, a few in flight
    ("mixed", ["--rw=randrw", "--rwmixread=50", "--bs=64k", "--rate_iops=400,400",
               "--ioengine=libaio", "--iodepth=4", "--fsync=4"],
     ["r/s", "w/s", "rkB/s", "wkB/s", "r_await", "w_await", "f_await", "util", "aqu-sz"]),
    # large requests submitted in bursts of 8: awaits near a millisecond, where iostat's two
    # decimals leave the 5% bound to the daemon
    ("bursts", ["--rw=randrw", "--rwmixread=50", "--bs=1m", "--rate_iops=150,150",
                "--ioengine=libaio", "--iodepth=8", "--iodepth_batch_submit=8", "--fsync=8"],
     ["r/s", "w/s", "rkB/s", "wkB/s", "r_await", "w_await", "f_await", "util", "aqu-sz"]),
]


def kernel_tick():
    """The kernel's jiffy in seconds, measured from the jiffies counter in /proc/timer_list (HZ
    is not exported to user space; CONFIG_HZ is 100 to 1000). io_ticks, behind util, counts
    whole jiffies: two windows that start and end within a few ms of each other can still differ
    by a jiffy at each edge. None when it cannot be measured."""
    def jiffies():
        try:
            with open("/proc/timer_list") as f:
                for line in f:
                    if line.startswith("jiffies:"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            return None
        return None
    j0, t0 = jiffies(), time.monotonic()
    time.sleep(0.5)
    j1, t1 = jiffies(), time.monotonic()
    if j0 is None or j1 is None or j1 <= j0:
        return None
    hz = (j1 - j0) / (t1 - t0)
    # the nearest of the kernel's choices
    return 1.0 / min((100, 250, 300, 1000), key=lambda h: abs(h - hz))


def next_round(d, timeout=2.0):
    """Polls the page until it changes, i.e. the daemon just published a new round (one sample
    of /proc/diskstats); returns the monotonic time of that round, to about a millisecond."""
    prev = d.scrape_text()
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        t = time.monotonic()
        body = d.scrape_text()
        if body != prev:
            return (t + time.monotonic()) / 2
        prev = body
    raise RuntimeError("the page did not change for %.1f s under load" % timeout)


def iostat_report(name, seconds=WINDOW):
    """Runs iostat for one report of name over seconds; returns (its disk dict, the monotonic
    time of its first read or None when that could not be seen)."""
    p = subprocess.Popen(["iostat", "-dx", "-y", "-o", "JSON", str(seconds), "1", name],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # After its first read iostat waits in pause() for its alarm: watch for that, lightly.
    first = None
    t0 = time.monotonic()
    while first is None and p.poll() is None and time.monotonic() - t0 < 0.2:
        try:
            with open("/proc/%d/wchan" % p.pid) as f:
                if "pause" in f.read():
                    first = time.monotonic()
        except OSError:
            break
        time.sleep(0.0005)
    out, err = p.communicate(timeout=seconds + 10)
    if p.returncode != 0:
        raise RuntimeError("iostat failed (%d): %s" % (p.returncode, err))
    doc = json.loads(out)
    disks = doc["sysstat"]["hosts"][0]["statistics"][-1]["disk"]
    found = [x for x in disks if x["disk_device"] == name]
    if len(found) != 1:
        raise RuntimeError("iostat reported no %s: %s" % (name, out))
    return found[0], first


def compare(label, io, m, name, nonzero, worst, tick, span=WINDOW):
    """Checks every pair. The printed iostat value p stands for a true value within ROUND of
    it; the daemon's value g must be within REL of that: |g - p| <= REL*|p| + ROUND (in
    iostat's unit). 'beyond rounding' is |g - p| - ROUND relative to p: what the 5% bounds.
    util also allows one kernel tick at each edge of the window (io_ticks counts jiffies; at a
    util of a few percent one tick is more than 5% of it): 2 * tick / span, in percent."""
    for key, gauge, factor in PAIRS:
        if not dp.check(key in io, "%s: iostat printed %s" % (label, key)):
            continue
        got = dp.value(m, gauge, device=name)
        if not dp.check(got is not None, "%s: %s{device=%s} on the page" % (label, gauge, name)):
            continue
        p = io[key]
        g = got / factor  # in iostat's unit
        diff = g - p
        rounding = ROUND + (100.0 * 2 * tick / span if key == "util" else 0.0)
        beyond = max(0.0, abs(diff) - rounding)
        rel = abs(diff) / abs(p) if p else (0.0 if g == 0 else float("inf"))
        rel_beyond = beyond / abs(p) if p else (0.0 if beyond == 0 else float("inf"))
        w = worst.setdefault(key, [0.0, 0.0])
        w[0], w[1] = max(w[0], rel), max(w[1], rel_beyond)
        dp.check(abs(diff) <= REL * abs(p) + rounding,
                 "%s: %-7s iostat %9.2f  %s %-12.6g (%9.4f)  diff %+7.2f%%  beyond rounding %5.2f%%" % (
                     label, key, p, gauge, got, g, 100 * (diff / p if p else 0.0), 100 * rel_beyond))
        if key in nonzero:
            dp.check(p > 0, "%s: the load made iostat's %s non-zero (%.2f)" % (label, key, p))


def aligned_report(d, name, startup):
    """Runs iostat so that its window matches the daemon's to a few ms; returns (iostat's disk
    dict, the page scraped for the same window, [reasons the windows may not match], timings).

    The daemon samples every INTERVAL on a fixed cadence; its gauges at a scrape cover the
    WINDOW seconds up to its newest sample. iostat reads the counters when it starts and again
    WINDOW seconds later. Scraping "when iostat returns" leaves up to one interval (100 ms)
    between the windows' ends, and over 100 ms the ticks of a few slow requests can move an
    await by more than 5%. So: find the cadence, start iostat so that its first read falls on
    a daemon sample (startup is its start-up time), and scrape after the sample that falls on
    its second read. The page is polled well before the window opens, so the polling does not
    disturb the I/O at the window's edge. Afterwards, check that it went as planned: iostat's
    first read on time, the scrape before the following sample, the cadence unchanged (a
    device added or removed anywhere makes the daemon sample early and shifts it)."""
    tick = next_round(d)
    t_launch = tick + 5 * IV - startup
    while t_launch - time.monotonic() < 0.3:
        t_launch += IV
    time.sleep(t_launch - time.monotonic())
    t_start = t_launch + startup           # the daemon sample that opens the window
    t_end = t_start + WINDOW               # the one that closes it
    t0 = time.monotonic()
    io, first = iostat_report(name)
    t1 = time.monotonic()
    if t_end + 0.015 > time.monotonic():
        time.sleep(t_end + 0.015 - time.monotonic())
    m = d.scrape()
    t2 = time.monotonic()
    a1 = next_round(d)
    a2 = next_round(d)
    # One late round is CPU contention; both off by the same is a moved cadence.
    drift = min(a1 - (t_end + IV), a2 - (t_end + 2 * IV), key=abs)
    facts = {"late": t0 - t_launch, "ran": t1 - t0, "scraped": t2 - t_end, "drift": drift,
             "first": None if first is None else first - t_start}
    problems = []
    if first is not None and abs(first - t_start) > 0.010:
        problems.append("iostat's first read came %+.1f ms from the daemon's sample" % (
            1e3 * (first - t_start)))
    if t2 > t_end + IV - 0.005:
        problems.append("the scrape ended %.0f ms after the window's last sample, too near the next" % (
            1e3 * (t2 - t_end)))
    if abs(drift) > 0.005:
        problems.append("the daemon's cadence moved by %+.1f ms" % (1e3 * drift))
    return io, m, problems, facts


def fio_death(fio, out):
    """What fio said when it exited: its status and both streams. Job errors ("fio: pid=N,
    err=...", a job killed by a signal) go to standard output, io_u errors to standard error."""
    out.seek(0)
    said = (out.read().decode(errors="replace") + fio.stderr.read()).strip()
    rc = fio.returncode
    how = "killed by signal %d" % -rc if rc < 0 else "exit status %d" % rc
    return "%s; %s" % (how, said.replace(";", " ")[:2000] if said else "it printed nothing")


def start_fio(label, dev, fio_args, backing_dir, runtime=None):
    """Starts fio's load and lets it run RAMP seconds; a fio that dies in that time (never
    the daemon's doing: the daemon only reads /proc/diskstats) is reported in full and started
    once more, since the comparison needs the load, not that first process."""
    for attempt in (1, 2):
        out = tempfile.TemporaryFile()
        fio = subprocess.Popen(
            ["fio", "--name=" + label, "--filename=" + dev, "--direct=1", "--time_based",
             "--runtime=%d" % int(runtime or RAMP + ATTEMPTS * (WINDOW + 1) + 5),
             "--output-format=terse"] + fio_args,
            stdout=out, stderr=subprocess.PIPE, text=True)
        time.sleep(RAMP)
        if fio.poll() is None:
            out.close()
            return fio
        why = fio_death(fio, out)
        out.close()
        st = os.statvfs(backing_dir)
        print("%s: fio %s exited within its %.0f s ramp: %s (free beside the backing file: %d MB)" % (
            label, " ".join(fio_args), RAMP, why, st.f_bavail * st.f_frsize >> 20))
        if attempt == 2:
            raise RuntimeError("fio %s exited early twice; last: %s" % (" ".join(fio_args), why))


def run_load(d, name, dev, label, fio_args, nonzero, worst, tick, backing_dir):
    fio = start_fio(label, dev, fio_args, backing_dir)
    try:
        startup = startup_guess()
        for attempt in range(1, ATTEMPTS + 1):
            io, m, problems, f = aligned_report(d, name, startup)
            print("%s: iostat's first read %s from the daemon's sample (start-up allowed %.1f ms); "
                  "iostat ran %.3f s; scraped %.0f ms after the window's last sample; cadence "
                  "%+.1f ms" % (
                      label, "unseen" if f["first"] is None else "%+.1f ms" % (1e3 * f["first"]),
                      1e3 * startup, f["ran"], 1e3 * f["scraped"], 1e3 * f["drift"]))
            # The start-up this attempt took (under this load) goes into the next guess.
            if f["first"] is not None:
                measured_startups.append(min(0.1, max(0.0, startup + f["first"])))
            if not problems:
                break
            # Only the timing decides a retry, never the values compared.
            startup = startup_guess()
            print("%s: windows not aligned (%s)%s" % (
                label, "; ".join(problems), ", measuring again" if attempt < ATTEMPTS else ""))
        dp.check(not problems, "%s: iostat's and the daemon's windows aligned (%s)" % (
            label, "; ".join(problems) or "to a few ms"))
        dp.check(fio.poll() is None, "%s: fio still running when the window closed" % label)
    finally:
        if fio.poll() is None:
            dp.end_process(fio, signal.SIGINT)
        fio.wait()
    print("%s: fio %s" % (label, " ".join(fio_args)))
    if not problems:
        compare(label, io, m, name, nonzero, worst, tick)


IDLE_SPAN = 45     # seconds from the daemon's once-a-minute sample to the request for /
FLOOR = 60         # the daemon's sampling floor without a scraper (README, "When diskpulse samples")
IDLE_ATTEMPTS = 2  # another sample within the report (a hotplug event elsewhere) measures again
PAGE_COLS = ["r/s", "w/s", "r_await_ms", "w_await_ms", "aqu-sz", "%util"]


def read_chars(pid):
    """The bytes the daemon's threads have read (rchar of /proc/PID/io): it moves when a round
    reads /proc/diskstats, and nothing else reads while nobody talks to the daemon."""
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/%d/io" % pid)


def page_row(text, name):
    """The span the page's Devices note states (seconds) and the device's row {column: value}."""
    m = re.search(r"as iostat -x prints them,\s+over the last\s+([0-9.]+)s", text)
    span = float(m.group(1)) if m else None
    lines = text.split("\nDevices\n", 1)[1].split("\n\n", 1)[0].splitlines() if "\nDevices\n" in text else []
    row = {}
    if lines:
        head = lines[0].split()
        for line in lines[1:]:
            cells = line.split()
            if cells and cells[0] == name:
                row = {h: float(c) for h, c in zip(head[1:], cells[1:]) if c != "-"}
    return span, row


def next_idle_round(pid, least, timeout):
    """The monotonic time of the daemon's next round (rchar moved by a read of /proc/diskstats),
    or None after timeout seconds."""
    before = read_chars(pid)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if read_chars(pid) - before >= least:
            return time.monotonic()
        time.sleep(0.002)
    return None


def watch_rounds(pid, least, stop, out):
    """Appends the time of every round until stop is set."""
    last = read_chars(pid)
    while not stop.wait(0.005):
        now = read_chars(pid)
        if now - last >= least:
            out.append(time.monotonic())
        last = now


def idle_page(binary, name, dev, backing_dir, worst, tick):
    """A daemon nobody scrapes, a steady load; / asked for when iostat's report ends, iostat
    having started at the daemon's once-a-minute sample."""
    label, fio_args, nonzero = LOADS[1]
    label = "idle-" + label
    fio = start_fio(label, dev, fio_args, backing_dir,
                    runtime=RAMP + IDLE_ATTEMPTS * (FLOOR + IDLE_SPAN + 5) + 30)
    try:
        with dp.Daemon(binary, "--diskstats.window=%ds" % WINDOW, "--no-collector.smart",
                       "--no-collector.canary", "--no-collector.biolatency",
                       "--collector.diskstats.device-include=^%s$" % name) as d:
            pid = d.proc.pid
            t_healthy = time.monotonic()
            # a round reads all of /proc/diskstats; a timer's wake-up reads 8 bytes
            with open("/proc/diskstats") as f:
                least = len(f.read()) // 2
            for attempt in range(1, IDLE_ATTEMPTS + 1):
                t_floor = next_idle_round(pid, least, FLOOR + 15)
                if not dp.check(t_floor is not None,
                                "%s: the daemon took its once-a-minute sample (%.1f s after "
                                "start)" % (label, (t_floor or time.monotonic()) - t_healthy)):
                    return
                # A device added or removed anywhere on the machine makes the daemon sample at
                # once: watch for rounds while iostat runs.
                extra = []
                stop = threading.Event()
                watcher = threading.Thread(target=watch_rounds, args=(pid, least, stop, extra))
                watcher.start()
                try:
                    io, first = iostat_report(name, IDLE_SPAN)
                finally:
                    stop.set()
                    watcher.join()
                st, _, body = dp.http_get(d.url + "/")
                t_page = time.monotonic()
                m = d.scrape()  # the same snapshot: it is younger than --diskstats.interval
                extra = [t for t in extra if t > t_floor + 0.5]  # not the end of that round
                if not extra:
                    break
                print("%s: the daemon sampled %.1f s into iostat's report (a device event "
                      "elsewhere on the machine)%s" % (
                          label, extra[0] - t_floor,
                          ", measuring again" if attempt < IDLE_ATTEMPTS else ""))
            dp.check(not extra, "%s: no other sample within iostat's report" % label)
            text = body.decode("utf-8")
            span, row = page_row(text, name)
            late = None if first is None else first - t_floor
            print("%s: the daemon's sample %.1f s after start; iostat's first read %s after it; "
                  "/ asked %.3f s after iostat's report began" % (
                      label, t_floor - t_healthy,
                      "unseen" if late is None else "%.1f ms" % (1e3 * late),
                      t_page - (first or t_floor)))
            dp.check(st == 200 and span is not None,
                     "%s: / states the span of its numbers (%s)" % (label, span))
            if span is None:
                return
            gauge = dp.value(m, "diskpulse_disk_window_seconds")
            dp.check(gauge is not None and abs(gauge - span) <= 0.05,
                     "%s: /metrics' diskpulse_disk_window_seconds %s is the span / printed (%.1f s)"
                     % (label, gauge, span))
            dp.check(abs(span - IDLE_SPAN) <= 0.05 * IDLE_SPAN,
                     "%s: the span / printed, %.1f s, is iostat's %d s within 5%%" % (
                         label, span, IDLE_SPAN))
            dp.check(first is None or abs(late) <= 0.05,
                     "%s: iostat's first read within 50 ms of the daemon's sample" % label)
            dp.check(d.proc.poll() is None, "%s: daemon still running" % label)
            compare(label, io, m, name, nonzero, worst, tick, span=span)
            # the page's row shows the same numbers as /metrics, to its decimals
            for col, gauge_name, scale, dec in (
                    ("r/s", "diskpulse_disk_read_iops", 1, 1),
                    ("w/s", "diskpulse_disk_write_iops", 1, 1),
                    ("r_await_ms", "diskpulse_disk_read_await_seconds", 1000, 2),
                    ("w_await_ms", "diskpulse_disk_write_await_seconds", 1000, 2),
                    ("aqu-sz", "diskpulse_disk_queue_depth", 1, 2),
                    ("%util", "diskpulse_disk_utilization_ratio", 100, 1)):
                g = dp.value(m, gauge_name, device=name)
                dp.check(col in row and g is not None and abs(row[col] - g * scale) <= 0.51 * 10 ** -dec,
                         "%s: / shows %s %s, /metrics %s" % (label, col, row.get(col),
                                                             None if g is None else g * scale))
    finally:
        if fio.poll() is None:
            dp.end_process(fio, signal.SIGINT)
        fio.wait()


def main():
    binary = dp.loop_test_binary("test_iostat.py", "a loop device")
    for tool, pkg in (("iostat", "sysstat"), ("fio", "fio"), ("losetup", "util-linux")):
        if shutil.which(tool) is None:
            dp.skip("%s is missing (install the %s package)" % (tool, pkg))
    engines = subprocess.run(["fio", "--enghelp"], capture_output=True, text=True).stdout
    if "libaio" not in engines:
        dp.skip("fio has no libaio engine")

    tick = kernel_tick()
    if tick is None:
        tick = 0.010  # the longest jiffy a kernel can have (HZ=100)
        print("kernel tick: unmeasurable (no jiffies in /proc/timer_list); util allows 10 ms")
    else:
        print("kernel tick: %.1f ms (util allows one at each edge: %.3f%%)" % (
            1e3 * tick, 100.0 * 2 * tick / WINDOW))
    t_start = time.monotonic()
    # /var/tmp rather than /tmp: a disk file system, where the loop device can use direct I/O.
    tmp = tempfile.mkdtemp(prefix="dp-iostat-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    ctl = os.open(dp.LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
    n = None
    bound = False
    worst = {}
    try:
        backing = os.path.join(tmp, "backing.img")
        chunk = b"\xa5" * (1 << 20)
        with open(backing, "wb") as f:  # written, not sparse: no block allocation under load
            for _ in range(BACKING_MB):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        n = dp.loop_add(ctl, 300, 399)
        name = "loop%d" % n
        dev = "/dev/" + name
        r = subprocess.run(["losetup", "--direct-io=on", dev, backing], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("losetup --direct-io=on %s: %s" % (dev, r.stderr.strip()))
        bound = True
        with open("/sys/block/%s/loop/dio" % name) as f:
            print("%s over %s, direct I/O %s" % (dev, backing, f.read().strip()))

        # fixed sampling: iostat's window is aligned with the daemon's 100 ms cadence
        with dp.Daemon(binary, "--diskstats.sampling=fixed", "--diskstats.interval=" + INTERVAL,
                       "--diskstats.window=%ds" % WINDOW,
                       "--collector.diskstats.device-include=^%s$" % name) as d:
            for label, fio_args, nonzero in LOADS:
                run_load(d, name, dev, label, fio_args, nonzero, worst, tick, tmp)
            dp.check(d.proc.poll() is None, "daemon still running at the end")
        # scrape sampling, nobody scraping: a person's curl /
        idle_page(binary, name, dev, tmp, worst, tick)
    finally:
        if bound:
            subprocess.run(["losetup", "-d", "/dev/loop%d" % n], capture_output=True)
        if n is not None:
            try:
                dp.loop_remove(ctl, n)
            except OSError as e:
                print("cleanup: cannot remove loop%d: %s" % (n, e))
        os.close(ctl)
        shutil.rmtree(tmp, ignore_errors=True)

    print("worst differences (raw / beyond iostat's rounding): " + ", ".join(
        "%s %.2f%%/%.2f%%" % (k, 100 * v[0], 100 * v[1]) for k, v in worst.items()))
    print("runtime %.1f s" % (time.monotonic() - t_start))
    dp.finish()


if __name__ == "__main__":
    main()
