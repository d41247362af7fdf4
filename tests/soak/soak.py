#!/usr/bin/env python3
"""Soak test of the real daemon (needs root): scrapes at a steady rate for a long time while loop
devices appear and vanish, canary targets fail and recover, and SIGHUP arrives; records the
memory, descriptors and threads of the daemon and its helper processes once per cycle and fails
on growth.

    soak.py BINARY [--duration=3600] [--cycle=60] [--warmup=600] [--rate=10] [--markdown=FILE]

Every cycle (--cycle seconds, default a minute) begins quiet (every canary target up): then the
daemon, its helper and its zygote are sampled (RSS and PSS from /proc/PID/smaps_rollup, open
descriptors and threads, each the least of five reads so that a scrape's connection in flight
does not count), the config file is rewritten and SIGHUP sent (one canary target moves between
two directories, the diskstats window changes), and one fault is made and healed, in turn:
  ENOSPC  the canary filesystem is filled (append probes fail), then emptied;
  EIO     the filesystem is shut down (EXT4_IOC_SHUTDOWN), then unmounted and mounted again;
  ENOENT  a target's directory is removed, then made again.
Each fault must be counted by its errno and every target must be up again before the next cycle.
Meanwhile a thread scrapes /metrics --rate times a second (text, gzip and OpenMetrics in turn;
every 50th page checked strictly), and another adds a loop device every three seconds (each
with a number never used before) and removes the oldest beyond three.

Fails (exit 1) on: a failed scrape, a fault not counted or not recovered from, a process's RSS
growing by 256 KiB or more after --warmup (the median of the last third of the samples against
that of the first third: a single sample moves by a few hundred KiB with the transient buffers of
the scrape or probe that runs at that moment; judged only after a warm-up of at least 6 minutes,
as the canary's memory grows while its 5-minute window of recent probes fills, and not for an
AddressSanitizer build, whose quarantine keeps freed memory), or any change of a process's
descriptor or thread count after the warm-up. The short run in ctest (label soak) therefore
checks scrapes, faults, descriptors and threads and reports memory; the hour-long run by hand
(docs/SOAK.md) judges memory too. Prints one line per cycle (and writes a
Markdown table with --markdown). Exit 77 without root or loop devices."""
import argparse
import errno
import fcntl
import gzip
import os
import re
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import dp  # noqa: E402

EXT4_IOC_SHUTDOWN = 0x8004587D
EXT4_GOING_FLAGS_NOLOGFLUSH = 2
RSS_GROWTH_MAX_KIB = 256
# The warm-up RSS is judged after: the canary keeps each target's probes of the last 5 minutes
# (the diskpulse_sync_recent_seconds window), so its memory grows for that long at first.
RSS_WARMUP_MIN = 360
# Loop devices of the churn: a fresh number each time (state kept per removed device would grow),
# far above the numbers losetup and the other tests use.
LOOP_BASE = 100000
ACCEPTS = (
    {},
    {"Accept-Encoding": "gzip"},
    {"Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"},
)


def log(msg):
    print("[%7.1f] %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


# ---- processes ----

def proc_stat(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    comm = data[data.index("(") + 1:data.rindex(")")]
    fields = data[data.rindex(")") + 2:].split()
    return comm, fields[0], int(fields[1])


def child_named(pid, comm):
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = proc_stat(int(name))
            if s and s[2] == pid and s[0] == comm and s[1] not in ("Z", "X"):
                return int(name)
    return None


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def pss_kib(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return None


def least_of(fn, n=5, pause=0.05):
    best = None
    for i in range(n):
        v = fn()
        best = v if best is None else min(best, v)
        if i + 1 < n:
            time.sleep(pause)
    return best


def sample(pid):
    """{rss, pss (KiB), fds, threads} of a live process, or None."""
    try:
        return {
            "rss": status_kib(pid, "VmRSS"),
            "anon": status_kib(pid, "RssAnon"),
            "file": status_kib(pid, "RssFile"),
            "pss": pss_kib(pid),
            "fds": least_of(lambda: len(os.listdir("/proc/%d/fd" % pid))),
            "threads": least_of(lambda: status_kib(pid, "Threads")),
        }
    except (OSError, TypeError, ValueError):
        return None


# ---- scraping ----

class Scraper(threading.Thread):
    def __init__(self, url, rate):
        super().__init__(daemon=True)
        self.url, self.period = url, 1.0 / rate
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.n = self.failed = 0
        self.lat = []
        self.failures = []

    def one(self, i):
        headers = ACCEPTS[i % len(ACCEPTS)]
        t = time.monotonic()
        req = urllib.request.Request(self.url + "/metrics", headers=headers)
        with urllib.request.urlopen(req, timeout=5) as r:
            body, status, enc = r.read(), r.status, r.headers.get("Content-Encoding")
        lat = time.monotonic() - t
        if status != 200:
            raise RuntimeError("status %d" % status)
        if enc == "gzip":
            body = gzip.decompress(body)
        text = body.decode("utf-8")
        if "diskpulse_build_info" not in text:
            raise RuntimeError("no diskpulse_build_info in the page")
        if "openmetrics" in headers.get("Accept", ""):
            if not text.endswith("# EOF\n"):
                raise RuntimeError("OpenMetrics page without # EOF")
        elif i % 50 == 0:
            dp.parse(text)  # strict exposition check
        return lat

    def run(self):
        i, next_t = 0, time.monotonic()
        while not self.stop.is_set():
            try:
                lat = self.one(i)
                with self.lock:
                    self.n += 1
                    self.lat.append(lat)
            except (OSError, RuntimeError, AssertionError, ValueError, urllib.error.URLError) as e:
                with self.lock:
                    self.n += 1
                    self.failed += 1
                    self.failures.append("%.1f s: %s" % (time.monotonic() - T0, e))
            i += 1
            next_t += self.period
            delay = next_t - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            else:
                next_t = time.monotonic()

    def take(self):
        """(scrapes, failed, p50, p99, max latency in ms) since the last take."""
        with self.lock:
            lat, n, failed = sorted(self.lat), self.n, self.failed
            self.lat, self.n, self.failed = [], 0, 0
        if not lat:
            return n, failed, None, None, None
        q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3  # noqa: E731
        return n, failed, q(0.5), q(0.99), lat[-1] * 1e3


# ---- loop device churn ----

class Churn(threading.Thread):
    def __init__(self, every=3.0, keep=3):
        super().__init__(daemon=True)
        self.every, self.keep = every, keep
        self.stop = threading.Event()
        self.added = self.removed = self.errors = 0
        self.live = []
        self.next = LOOP_BASE + (os.getpid() % 80) * 10000

    def add(self, ctl):
        while True:
            n = self.next
            self.next += 1
            try:
                return fcntl.ioctl(ctl, dp.LOOP_CTL_ADD, n)
            except OSError as e:
                if e.errno != errno.EEXIST:
                    raise

    def run(self):
        with open("/dev/loop-control", "rb", buffering=0) as ctl:
            while not self.stop.wait(self.every):
                try:
                    self.live.append(self.add(ctl.fileno()))
                    self.added += 1
                    while len(self.live) > self.keep:
                        dp.loop_remove(ctl.fileno(), self.live.pop(0))
                        self.removed += 1
                except (OSError, RuntimeError) as e:
                    self.errors += 1
                    log("loop churn: %s" % e)
            for n in self.live:
                try:
                    dp.loop_remove(ctl.fileno(), n)
                    self.removed += 1
                except OSError:
                    pass
            self.live = []


# ---- the daemon's config and faults ----

class Soak:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="diskpulse-soak-", dir="/var/tmp")
        self.fs = dp.LoopFs(size_mb=64, mkfs_args=["-m", "0"])
        self.c = os.path.join(self.fs.mnt, "c")
        self.gone = os.path.join(self.fs.mnt, "gone")
        os.mkdir(self.c)
        os.mkdir(self.gone)
        self.swap = [os.path.join(self.tmp, "swap-a"), os.path.join(self.tmp, "swap-b")]
        for d in self.swap:
            os.mkdir(d)
        self.state = os.path.join(self.tmp, "state")
        os.mkdir(self.state)
        self.conf = os.path.join(self.tmp, "diskpulse.conf")
        self.generation = 0
        self.write_conf()
        self.faults = []  # (cycle, kind, ok, seconds to recover)

    def targets(self):
        return [(self.c, "fdatasync"), (self.c, "append"), (self.gone, "fdatasync"),
                (self.swap[self.generation % 2], "dsync")]

    def write_conf(self):
        lines = ["canary.path = %s:%s" % t for t in self.targets()]
        lines.append("diskstats.window = %ds" % (10 + 5 * (self.generation % 2)))
        with open(self.conf + ".new", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.rename(self.conf + ".new", self.conf)

    def start(self):
        include = "^(loop[0-9]{6}|%s|vd[a-z]|sd[a-z]|nvme[0-9]+n[0-9]+)$" % self.fs.dev
        self.d = dp.Daemon(self.args.binary, "--config.file=" + self.conf, "--state.directory=" + self.state,
                           "--canary.interval=200ms", "--diskstats.interval=250ms",
                           "--collector.diskstats.device-include=" + include)
        self.pids = {"daemon": self.d.proc.pid,
                     "helper": child_named(self.d.proc.pid, "diskpulse-priv"),
                     "zygote": child_named(self.d.proc.pid, "diskpulse-zyg")}
        log("daemon %(daemon)d, helper %(helper)s, zygote %(zygote)s" % self.pids)

    def metrics(self):
        return self.d.scrape()

    def up(self, m, path, mode):
        return dp.value(m, "diskpulse_sync_target_up", path=path, mode=mode) == 1

    def errors(self, m, path, mode, err):
        return dp.value(m, "diskpulse_sync_errors_total", path=path, mode=mode, errno=err) or 0

    def wait(self, pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                m = self.metrics()
                if pred(m):
                    return m
            except (OSError, AssertionError):
                pass
            time.sleep(0.2)
        return None

    def all_up(self, timeout=30):
        return self.wait(lambda m: all(self.up(m, p, mo) for p, mo in self.targets()), timeout) is not None

    def reload(self):
        self.generation += 1
        self.write_conf()
        self.d.signal(signal.SIGHUP)

    def fault(self, cycle):
        kind = ("ENOSPC", "EIO", "ENOENT")[cycle % 3]
        path, mode = {"ENOSPC": (self.c, "append"), "EIO": (self.c, "fdatasync"),
                      "ENOENT": (self.gone, "fdatasync")}[kind]
        m = self.metrics()
        before = self.errors(m, path, mode, kind)
        if kind == "ENOSPC":
            dp.fill_filesystem(self.fs.mnt)
        elif kind == "EIO":
            fd = os.open(self.fs.mnt, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
            finally:
                os.close(fd)
        else:
            os.rmdir(self.gone)
        counted = self.wait(lambda m: self.errors(m, path, mode, kind) > before and not self.up(m, path, mode),
                            20) is not None
        t = time.monotonic()
        if kind == "ENOSPC":
            dp.unfill_filesystem(self.fs.mnt)
        elif kind == "EIO":
            self.remount()
        else:
            os.mkdir(self.gone)
        recovered = self.all_up(30)
        took = time.monotonic() - t
        ok = counted and recovered
        self.faults.append((cycle, kind, ok, took))
        log("fault %s on %s:%s: counted %s, recovered %s in %.1f s" % (kind, path, mode, counted, recovered, took))
        return ok

    def remount(self):
        """Unmounts the shut-down filesystem and mounts it again. A process in another mount
        namespace made while it was mounted (another test's unshare or systemd-nspawn, running
        beside this one) keeps the shut-down superblock alive, and a new mount of the same
        device gets that one back: then a new filesystem on a new loop device is mounted in its
        place (a replaced disk), with the targets' directories made again."""
        self.fs.umount(timeout=30)
        self.fs.mount()
        if self.writable():
            return
        log("remount: the filesystem is still shut down (another mount namespace holds its "
            "superblock): a new one on a new loop device is mounted in its place")
        self.fs.umount(timeout=30)
        self.fs.replace()
        for d in (self.c, self.gone):
            os.makedirs(d, exist_ok=True)
        if not self.writable():
            raise RuntimeError("a new filesystem on %s is not writable" % self.fs.dev)

    def writable(self):
        probe = os.path.join(self.fs.mnt, ".soak-probe")
        try:
            with open(probe, "w") as f:
                f.write("x")
            os.unlink(probe)
            return True
        except OSError as e:
            log("remount: %s" % e)
            return False

    def close(self):
        try:
            if self.d.proc.poll() is None:
                rc, took = self.d.stop()
                log("SIGTERM: exit %s in %.2f s" % (rc, took))
            self.d.__exit__()
        finally:
            self.fs.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


def sanitized(binary):
    """True for a binary built with AddressSanitizer, whose quarantine holds freed memory (RSS
    then grows by design and is reported, not judged)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def verdict(rows, warm_cycle, scrape_fail, faults, markdown, judge_rss=True):
    problems = []
    after = [r for r in rows if r["cycle"] >= warm_cycle]
    if scrape_fail:
        problems.append("%d failed scrapes" % scrape_fail)
    for c, kind, ok, _ in faults:
        if not ok:
            problems.append("cycle %d: fault %s not counted or not recovered" % (c, kind))
    if len(after) < 2:
        problems.append("fewer than two samples after the warm-up: run longer")
    else:
        for who in ("daemon", "helper", "zygote"):
            s = [r[who] for r in after if r.get(who)]
            if len(s) != len(after):
                problems.append("%s: gone or restarted during the run" % who)
                continue
            growth, slope = trend([x["rss"] for x in s])
            print("%s: RSS %d -> %d KiB after the warm-up (min %d, max %d; growth %+d KiB from the median of "
                  "the first third to that of the last, least-squares slope %+.0f KiB/h), anon %d -> %d, "
                  "file %d -> %d, PSS %d -> %d KiB, fds %s, threads %s"
                  % (who, s[0]["rss"], s[-1]["rss"], min(x["rss"] for x in s), max(x["rss"] for x in s), growth,
                     slope, s[0]["anon"], s[-1]["anon"], s[0]["file"], s[-1]["file"], s[0]["pss"], s[-1]["pss"],
                     sorted({x["fds"] for x in s}), sorted({x["threads"] for x in s})))
            if growth >= RSS_GROWTH_MAX_KIB and judge_rss:
                problems.append("%s: RSS grew by %d KiB after the warm-up (limit %d)" % (who, growth, RSS_GROWTH_MAX_KIB))
            if len({x["fds"] for x in s}) != 1:
                problems.append("%s: descriptor count not flat: %s" % (who, [x["fds"] for x in s]))
            if len({x["threads"] for x in s}) != 1:
                problems.append("%s: thread count not flat: %s" % (who, [x["threads"] for x in s]))
    if markdown:
        with open(markdown, "w") as f:
            f.write("| cycle | min | load 1m | scrapes | failed | p50 ms | p99 ms | max ms | daemon RSS KiB "
                    "(anon + file) | daemon PSS KiB | fds | threads | helper RSS/PSS KiB, fds | "
                    "zygote RSS/PSS KiB, fds | fault |\n")
            f.write("|" + "---|" * 15 + "\n")
            for r in rows:
                dd, h, z = r["daemon"], r.get("helper"), r.get("zygote")
                f.write("| %d%s | %.1f | %.2f | %d | %d | %s | %s | %s | %d (%d + %d) | %d | %d | %d | %s | %s | %s |\n"
                        % (r["cycle"], "" if r["cycle"] >= warm_cycle else " (warm-up)", r["t"] / 60, r["load"],
                           r["scrapes"], r["failed"], fmt(r["p50"]), fmt(r["p99"]), fmt(r["max"]), dd["rss"],
                           dd["anon"], dd["file"], dd["pss"], dd["fds"], dd["threads"], hz(h), hz(z), r["fault"]))
    return problems


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def trend(v):
    """(growth, slope): the median of the last third of v minus that of the first third (RSS
    moves by a few hundred KiB with the transient buffers of whatever scrape or probe is running
    at the moment of a sample, so one sample against another says little), and the least-squares
    slope in units per hour, for samples one cycle apart (set by the caller's CYCLE)."""
    k = max(1, len(v) // 3)
    growth = median(v[-k:]) - median(v[:k])
    n = len(v)
    if n < 2:
        return growth, 0.0
    mx, my = (n - 1) / 2, sum(v) / n
    sxx = sum((i - mx) ** 2 for i in range(n))
    slope = sum((i - mx) * (y - my) for i, y in enumerate(v)) / sxx
    return growth, slope * 3600 / CYCLE


CYCLE = 60.0


def fmt(v):
    return "-" if v is None else "%.1f" % v


def hz(s):
    return "-" if not s else "%d/%d, %d" % (s["rss"], s["pss"], s["fds"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("binary")
    p.add_argument("--duration", type=float, default=3600)
    p.add_argument("--cycle", type=float, default=60)
    p.add_argument("--warmup", type=float, default=600)
    p.add_argument("--rate", type=float, default=10)
    p.add_argument("--markdown")
    args = p.parse_args()
    global CYCLE
    CYCLE = args.cycle
    dp.need_loop_fs("umount")

    # SIGTERM ends the run like ^C: the daemon stopped, the filesystem and loop devices removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    s = Soak(args)
    rows, problems = [], []
    scraper = churn = None
    total_scrapes = total_failed = 0
    try:
        s.start()
        if not s.all_up(30):
            problems.append("the canary targets did not come up")
            raise RuntimeError("start")
        scraper = Scraper(s.d.url, args.rate)
        churn = Churn()
        scraper.start()
        churn.start()
        cycles = max(1, int(args.duration // args.cycle))
        warm_cycle = int(args.warmup // args.cycle)
        for cycle in range(cycles):
            start = time.monotonic()
            n, failed, p50, p99, mx = scraper.take()
            total_scrapes += n
            total_failed += failed
            row = {"cycle": cycle, "t": start - T0, "load": os.getloadavg()[0], "scrapes": n, "failed": failed,
                   "p50": p50, "p99": p99, "max": mx}
            for who, pid in s.pids.items():
                row[who] = sample(pid) if pid else None
            if row["daemon"] is None:
                problems.append("the daemon is gone")
                break
            s.reload()
            row["fault"] = ("ENOSPC", "EIO", "ENOENT")[cycle % 3]
            rows.append(row)
            try:
                s.fault(cycle)
            except (OSError, RuntimeError) as e:
                problems.append("cycle %d: fault %s: %s" % (cycle, row["fault"], e))
                break
            dd = row["daemon"]
            log("cycle %d: load %.2f, %d scrapes (%d failed, p99 %s ms), daemon RSS %d KiB PSS %d KiB fds %d threads %d, "
                "helper %s, zygote %s; loops +%d -%d" % (cycle, row["load"], n, failed, fmt(p99), dd["rss"], dd["pss"],
                                                         dd["fds"], dd["threads"], hz(row["helper"]), hz(row["zygote"]),
                                                         churn.added, churn.removed))
            if not s.all_up(30):
                problems.append("cycle %d: not every target up again" % cycle)
            rest = args.cycle - (time.monotonic() - start)
            if rest > 0:
                time.sleep(rest)
        scraper.stop.set()
        scraper.join(10)
        n, failed, _, _, _ = scraper.take()
        total_scrapes += n
        total_failed += failed
        for c in scraper.failures[:20]:
            print("failed scrape at %s" % c)
        print("scrapes: %d, failed: %d; loop devices added %d, removed %d (errors %d); faults %d (%d recovered)" % (
            total_scrapes, total_failed, churn.added, churn.removed, churn.errors, len(s.faults),
            sum(1 for f in s.faults if f[2])))
        asan = sanitized(args.binary)
        if asan:
            print("note: an AddressSanitizer build: RSS growth is reported, not judged")
        elif args.warmup < RSS_WARMUP_MIN:
            print("note: a warm-up under %d s (the canary's 5-minute window still fills): RSS growth is "
                  "reported, not judged" % RSS_WARMUP_MIN)
        problems += verdict(rows, warm_cycle, total_failed, s.faults, args.markdown,
                            judge_rss=not asan and args.warmup >= RSS_WARMUP_MIN)
        errors = [l for l in s.d.output().splitlines() if "level=error" in l]
        print("daemon log: %d error lines%s" % (len(errors), (": " + errors[0]) if errors else ""))
    finally:
        if scraper:
            scraper.stop.set()
        if churn:
            churn.stop.set()
            churn.join(30)
        s.close()
    for pr in problems:
        print("FAILED " + pr)
    print("soak %s" % ("failed" if problems else "passed"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
