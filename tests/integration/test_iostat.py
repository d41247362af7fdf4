"""The daemon's derived disk gauges agree within 5% with sysstat's iostat -x over the same 10 s window
(fixed sampling: iostat's two reads made at two of the daemon's samples, 10 s apart, as seen in
/proc). And on a daemon nobody scrapes (scrape sampling: it samples once a minute), a person's
request for / gets numbers over the span the page prints, which agree within 5% with iostat -dxy
over that span: iostat starts at the daemon's once-a-minute sample (seen as its read of
/proc/diskstats) and / is asked for when iostat ends."""
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
ATTEMPTS = 3
EDGE = 0.010    # the most iostat's read and the daemon's sample at either end of the window may be
                # apart, as far as can be seen (each is seen within a poll's gap)
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


def read_chars(pid):
    """The bytes the threads of process pid have read (rchar of /proc/PID/io). A round of the
    daemon reads all of /proc/diskstats, iostat reads it at each report; nothing else reads in
    either while nobody talks to the daemon (a scrape's request is received, not read)."""
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/%d/io" % pid)


def mid(e):
    return (e[0] + e[1]) / 2


def most_apart(a, b):
    """The most two events, each known to lie in its (lo, hi], can be apart."""
    return max(a[1] - b[0], b[1] - a[0])


class Watch:
    """Polls, about every millisecond while asked to, what the daemon and iostat read: the
    daemon's rounds, iostat's reads and its first wait in pause() (after its first read), each
    as the (lo, hi] between the poll before and the poll that saw it. Reading the processes'
    counters in /proc asks nothing of them, unlike polling the page (as this test did): each
    request took the daemon's CPU, and the round times it measured were late by as long as a
    scrape took under load, 10 ms and more under the sanitizers."""

    def __init__(self, pid, least):
        self.pid, self.least = pid, least
        self.rounds = []
        self.io = None
        self.reads, self.paused, self.exited = [], None, None
        self.resume()

    def resume(self):
        """Polls from now on (what happened while not polling is not reported)."""
        self.t = time.monotonic()
        self.d_last = read_chars(self.pid)
        if self.io is not None and self.exited is None:
            try:
                self.io_last = read_chars(self.io.pid)
            except OSError:
                pass

    def attach(self, proc):
        self.io, self.io_last = proc, 0
        self.reads, self.paused, self.exited = [], None, None

    def poll(self):
        d = read_chars(self.pid)
        io = wchan = None
        if self.io is not None and self.exited is None:
            try:
                io = read_chars(self.io.pid)
                with open("/proc/%d/wchan" % self.io.pid) as f:
                    wchan = f.read()
            except OSError:
                io = None
            if self.io.poll() is not None:
                io = None
        now = time.monotonic()
        if d - self.d_last >= self.least:
            self.rounds.append((self.t, now))
        self.d_last = d
        if self.io is not None and self.exited is None:
            if io is None:
                self.exited = (self.t, now)
            else:
                if io != self.io_last:
                    self.reads.append((self.t, now))
                    self.io_last = io
                if self.paused is None and "pause" in wchan:
                    self.paused = (self.t, now)
        self.t = now

    def until(self, t, cond=lambda: False):
        while time.monotonic() < t and not cond():
            time.sleep(0.001)
            self.poll()


def rounds_total(m):
    return sum(v for (n, _), v in m.items() if n == "diskpulse_collection_rounds_total")


def sleep_until(t):
    if t > time.monotonic():
        time.sleep(t - time.monotonic())


def prompt(pid=0):
    """Makes process pid (0: this thread) wake as soon as its sleep ends, however busy the
    machine: SCHED_FIFO, or failing that the highest nice value. The watcher and iostat sleep
    almost all the time (a poll a millisecond), so this takes nothing from the rest; it only
    keeps them from waiting for a CPU while the edge they measure goes by. Returns how."""
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(10))
        return "SCHED_FIFO"
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, -20)
        return "nice -20"
    except OSError:
        return "as it was (no SCHED_FIFO or nice allowed here)"


def unprompt():
    """This thread back to the normal policy."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError:
        pass


def aligned_report(d, name, least):
    """Has iostat read the counters at two of the daemon's samples WINDOW seconds apart, and
    shows that it did; returns (iostat's disk dict for that window, the page of the window's
    last sample, [reasons the windows did not match], timings).

    The daemon samples every INTERVAL on a fixed grid; its gauges on a page cover the WINDOW
    seconds up to the page's sample. Over even 100 ms the ticks of a few slow requests can move
    an await by more than 5%, so iostat's window must be the daemon's to a few ms at both ends.
    Timing iostat's start to land its first read on a sample does not give that on a loaded
    machine: its start-up varies by 10-20 ms, and a sample or an alarm can come that late. So
    iostat is started early with an interval it never reaches, and its reads are made when they
    are wanted: SIGALRM, on which iostat times its reports, sent as soon as the daemon's sample
    is seen (its read of /proc/diskstats, in /proc/PID/io), once for the window's start and once
    for its end. What decides is what happened: both pairs of reads are seen, and each must be
    at most EDGE apart; the page must be that sample's (its rounds counted from a page taken two
    rounds before) and cover the span between the two samples (diskpulse_disk_window_seconds).
    The watcher (this thread) and iostat are made prompt() meanwhile: at load 9 under the
    sanitizers, one attempt in five otherwise saw a pair 12 to 20 ms apart, the watcher or
    iostat waiting for a CPU; the daemon is left as it is (its sample is waited for, and a late
    one changes nothing)."""
    w = Watch(d.proc.pid, least)
    problems = []
    facts = {}
    t0 = time.monotonic()
    p = subprocess.Popen(["iostat", "-dx", "-y", "-o", "JSON", "3600", "2", name],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        facts["prompt"] = prompt()
        prompt(p.pid)
        w.attach(p)
        # its handler is set once it waits in pause() (before, SIGALRM would end it)
        w.until(t0 + 10, lambda: w.paused is not None or w.exited is not None)
        if w.paused is None:
            return None, None, ["iostat did not start (%s)" % ("it exited" if w.exited else
                                                              "no pause() in 10 s")], facts

        def read_at_next_round():
            n = len(w.rounds)
            w.until(time.monotonic() + 1.0, lambda: len(w.rounds) > n)
            if len(w.rounds) == n:
                return None, None
            p.send_signal(signal.SIGALRM)
            k = len(w.reads)
            w.until(time.monotonic() + 1.0, lambda: len(w.reads) > k or w.exited is not None)
            return w.rounds[-1], (w.reads[k] if len(w.reads) > k else w.exited)

        d_start, i_first = read_at_next_round()
        if d_start is None or i_first is None:
            return None, None, ["no round or no read of iostat at the window's start"], facts
        # a page two rounds before the window's end, half a round after one: the reference
        t_end = mid(d_start) + WINDOW
        sleep_until(t_end - 2 * IV - IV / 4)
        w.resume()
        w.rounds = []
        w.until(t_end - 2 * IV + IV / 2)
        for _ in range(3):
            # a round while it is taken (a late one) leaves open which the page is: again
            w.poll()
            before = len(w.rounds)
            n_ref = rounds_total(d.scrape())
            w.poll()
            if len(w.rounds) == before:
                break
            w.until(time.monotonic() + IV / 4)
        else:
            problems.append("a round while each reference page was taken")
        mark = len(w.rounds)
        # the window's end: the daemon's sample nearest WINDOW after its start
        w.until(t_end - IV / 2)
        d_end, i_second = read_at_next_round()
        if d_end is None or i_second is None:
            return None, None, ["no round or no read of iostat at the window's end"], facts
        k = len(w.rounds) - 1 - mark  # rounds after the reference page's, before d_end
        # its page (published once the round is done, which can take tens of ms under the
        # sanitizers): the rounds counted since the reference page are the rounds seen
        while True:
            m = d.scrape()
            n = rounds_total(m)
            if n != n_ref + k or time.monotonic() > mid(d_end) + 0.8 * IV:
                break
            time.sleep(0.002)
        t2 = time.monotonic()
        if n != n_ref + k + 1:
            problems.append("the page scraped is round %+d from the window's last sample's" % (
                n - (n_ref + k + 1)))
        out, err = p.communicate(timeout=10)
    finally:
        unprompt()
        if p.poll() is None:
            p.kill()
            p.communicate()
    if p.returncode == -signal.SIGALRM:
        raise RuntimeError("iostat ended on SIGALRM: this iostat does not time its reports with "
                           "alarm(2) (sysstat 12.6 does)")
    if p.returncode != 0:
        raise RuntimeError("iostat failed (%d): %s" % (p.returncode, err))
    disks = json.loads(out)["sysstat"]["hosts"][0]["statistics"][-1]["disk"]
    found = [x for x in disks if x["disk_device"] == name]
    if len(found) != 1:
        raise RuntimeError("iostat reported no %s: %s" % (name, out))
    start_gap, end_gap = most_apart(d_start, i_first), most_apart(d_end, i_second)
    span = dp.value(m, "diskpulse_disk_window_seconds")
    seen_span = mid(d_end) - mid(d_start)
    span_slack = (d_end[1] - d_end[0] + d_start[1] - d_start[0]) / 2 + 0.002
    facts.update({"scraped": t2 - mid(d_end), "start": start_gap, "end": end_gap, "span": span,
                  "seen_span": seen_span})
    if start_gap > EDGE:
        problems.append("iostat's first read and the daemon's sample up to %.1f ms apart" % (
            1e3 * start_gap))
    if end_gap > EDGE:
        problems.append("iostat's second read and the daemon's sample up to %.1f ms apart" % (
            1e3 * end_gap))
    if span is None or abs(span - seen_span) > span_slack:
        problems.append("the page's window, %s s, is not the %.4f s between the samples seen" % (
            span, seen_span))
    return found[0], m, problems, facts


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


def run_load(d, name, dev, label, fio_args, nonzero, worst, tick, backing_dir, least):
    fio = start_fio(label, dev, fio_args, backing_dir)
    try:
        for attempt in range(1, ATTEMPTS + 1):
            io, m, problems, f = aligned_report(d, name, least)
            if "end" in f:
                print("%s: iostat's reads at most %.1f ms from the daemon's sample at the window's "
                      "start and %.1f ms at its end (watcher and iostat %s); the page scraped %.0f "
                      "ms after its sample, its window %.4f s (seen %.4f s)" % (
                          label, 1e3 * f["start"], 1e3 * f["end"], f["prompt"],
                          1e3 * f["scraped"], f["span"] or 0, f["seen_span"]))
            if not problems:
                break
            # Only the timing decides a retry, never the values compared.
            print("%s: windows not aligned (%s)%s" % (
                label, "; ".join(problems), ", measuring again" if attempt < ATTEMPTS else ""))
        dp.check(not problems, "%s: iostat's and the daemon's windows aligned (%s)" % (
            label, "; ".join(problems) or "within %.0f ms at both ends" % (1e3 * EDGE)))
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

        # fixed sampling: iostat's window is aligned with the daemon's 100 ms grid
        with open("/proc/diskstats") as f:
            least = len(f.read()) // 2  # a round reads all of it
        with dp.Daemon(binary, "--diskstats.sampling=fixed", "--diskstats.interval=" + INTERVAL,
                       "--diskstats.window=%ds" % WINDOW,
                       "--collector.diskstats.device-include=^%s$" % name) as d:
            for label, fio_args, nonzero in LOADS:
                run_load(d, name, dev, label, fio_args, nonzero, worst, tick, tmp, least)
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
