#!/usr/bin/env python3
"""What an exporter costs per host-day: diskpulse beside node_exporter (Debian's
prometheus-node-exporter, diskstats collector only), each scraped as Prometheus scrapes it, on the
synthetic host trees of tests/bench/fixture.py with every counter advancing every second (a busy
host), and each left idle on the real host.

For each scrape interval (--scrape-intervals, default 15 and 60 s), one after the other, every
exporter of every size (--sizes) runs at once on its size's tree:

- node_exporter as bench_scrape.py starts it (--collector.disable-defaults --collector.diskstats,
  the same --path.* roots and device filter);
- diskpulse "compare": bench_scrape.py's flags with canary, SMART and biolatency off (node_exporter
  has none of them);
- diskpulse "fixed": the same with --diskstats.sampling=fixed (sampling every --diskstats.interval
  whether or not scrapes need it), when the binary's --help knows that flag;
- diskpulse "full": bench_scrape.py's roots and filter, every collector at its defaults, its own
  state directory on disk: what a user who installs it pays.

Each has one scraper thread that behaves like Prometheus: one keep-alive HTTP/1.1 connection
(reopened when closed), OpenMetrics with gzip as Prometheus asks for them, the whole body read,
a request every interval at the exporter's own phase in the interval. The CPU time (user +
system) of the exporter's whole process tree (diskpulse's privileged helper, zygote and their
workers included) is taken after --warmup seconds (default four intervals, so that a daemon that
learns the scrape cadence has learned it) and at the end of --duration seconds (default twenty
intervals, at least five minutes): CPU seconds per host-day are cpu / elapsed * 86400.

Then the idle wake-ups: diskpulse with its defaults on the real /proc and /sys (its own state
directory, a free port) and node_exporter with the diskstats collector alone, neither scraped,
for --idle seconds after 20 s of settling: the voluntary and involuntary context switches of
every thread of each process tree, per minute and per second, thread by thread.

Prints Markdown (machine, command, one table per interval, the idle table); --update-doc FILE
replaces the part of FILE between the "hostday:begin" and "hostday:end" markers with it. Asserts
nothing about speed; exits 1 when an exporter fails to start or serve, 77 (SKIP) when the kernel
lacks what is measured. Without node_exporter, diskpulse runs alone.

Usage: bench_hostday.py [--binary PATH] [--sizes 2,100,1000] [--scrape-intervals 15,60]
                        [--duration S] [--warmup S] [--idle 180] [--update-doc FILE]
Without --binary it builds a release binary in build-bench/, as bench_scrape.py does."""
import argparse
import gzip
import http.client
import math
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_scrape as bs  # noqa: E402
import fixture  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
SETTLE = 20.0  # seconds between an idle daemon's start and its measurement
START_TIMEOUT = 120
SCRAPE_TIMEOUT = 10.0  # Prometheus's default scrape_timeout
# What Prometheus sends (bench_scrape's "prometheus" cold form) and the timeout it announces.
HEADERS = dict(bs.COLD_FORMS["prometheus"],
               **{"X-Prometheus-Scrape-Timeout-Seconds": "%g" % SCRAPE_TIMEOUT})
COMPARE_OFF = ("canary", "smart", "biolatency")

log = bs.log


# --- process trees -----------------------------------------------------------------------------

def proc_stats():
    """{pid: fields of /proc/PID/stat after the command name} of every process."""
    out = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open("/proc/%s/stat" % e) as f:
                    st = f.read()
                out[int(e)] = st[st.rindex(")") + 2:].split()
            except (OSError, ValueError):
                pass
    return out


def tree(root, stats):
    """root and its descendants, parents first."""
    kids = {}
    for pid, f in stats.items():
        kids.setdefault(int(f[1]), []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo += sorted(kids.get(pid, []))
    return out


def thread_ns(pid):
    """{tid: nanoseconds on CPU (schedstat)} of the live threads of pid."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def tree_cpu(root, stats):
    """A mark of a process tree's CPU time: {pid: (its threads' nanoseconds by tid, its own
    user + system ticks in seconds, its reaped children's in seconds)}; cpu_between() subtracts
    two."""
    out = {}
    for pid in tree(root, stats):
        f = stats.get(pid)
        if f is None:
            continue
        utime, stime, cutime, cstime = (int(x) for x in f[11:15])
        out[pid] = (thread_ns(pid), (utime + stime) / TICK, (cutime + cstime) / TICK)
    return out


def cpu_between(m0, m1):
    """CPU seconds (user + system) a tree spent between two marks: per process, its threads' time
    on CPU (schedstat, nanoseconds; a thread born between counts from 0), or, when threads of it
    have ended between, its tick count where that is more (their nanoseconds are gone), plus the
    children it reaped (a helper's workers). Each measure is taken as a difference of itself:
    mixing the tick count (10 ms steps) at one mark with nanoseconds at the other would move a
    light exporter's figure by a tick either way."""
    total = 0.0
    for pid, (ns1, ticks1, cticks1) in m1.items():
        ns0, ticks0, cticks0 = m0.get(pid, ({}, 0.0, 0.0))
        live = sum(v - ns0.get(tid, 0) for tid, v in ns1.items()) / 1e9
        ended = any(tid not in ns1 for tid in ns0)
        total += (max(live, ticks1 - ticks0) if ended else live) + (cticks1 - cticks0)
    return total


def comm(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "?"


def threads(root):
    """{tid: (process name, thread name, voluntary + involuntary switches, involuntary)} of every
    thread of the tree; a process's main thread is named "NAME (main)"."""
    out = {}
    for pid in tree(root, proc_stats()):
        pname = comm("/proc/%d/comm" % pid)
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            vol = invol = None
            name = "?"
            try:
                with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                    for line in f:
                        k, _, v = line.partition(":")
                        if k == "Name":
                            name = v.strip()
                        elif k == "voluntary_ctxt_switches":
                            vol = int(v)
                        elif k == "nonvoluntary_ctxt_switches":
                            invol = int(v)
            except (OSError, ValueError):
                continue
            if vol is not None and invol is not None:
                out[int(tid)] = (pname, name + (" (main)" if int(tid) == pid else ""), vol + invol,
                                 invol)
    return out


# --- exporters ---------------------------------------------------------------------------------

class Running(bs.Exporter):
    """An exporter as run here: its command line made for a port found free, its output kept."""

    def __init__(self, name, argv_of, size=None):
        super().__init__(name, None, None)
        self.argv_of, self.size = argv_of, size

    def launch(self, idle=False):
        """Starts it on a free port, on another (three tries) when a process took that one first."""
        for attempt in range(3):
            self.port = bs.free_port()
            self.argv = self.argv_of(self.port)
            try:
                if idle:
                    self.start_idle(START_TIMEOUT)
                elif self.start(START_TIMEOUT) is None:
                    raise RuntimeError("%s%s served no complete page within %d s" % (
                        self.name, " (%d devices)" % self.size if self.size else "", START_TIMEOUT))
                return
            except RuntimeError as e:
                self.stop()
                if attempt == 2 or "already in use" not in str(e).lower():
                    raise

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def output(self):
        if not self.logf:
            return ""
        self.logf.seek(0)
        return self.logf.read().decode(errors="replace")[-2000:]

    def start_idle(self, timeout):
        """Starts it and waits until its port accepts a connection: no request, so that nothing
        looks like a scrape."""
        self.logf = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited: %s" % (self.name, self.output()))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("%s did not listen within %d s" % (self.name, timeout))


def stop_all(exporters):
    """Stops them all; those left when a stop is interrupted (Ctrl-C) are killed."""
    try:
        for ex in exporters:
            ex.stop()
    finally:
        for ex in exporters:
            if ex.alive():
                ex.proc.kill()
                ex.proc.wait()


class Scraper(threading.Thread):
    """Prometheus's scrape loop for one target: a request every interval at a fixed phase, over
    one kept-alive connection, the whole body read."""

    def __init__(self, ex, interval, phase, t0, stop_ev):
        super().__init__(daemon=True)
        self.ex, self.interval, self.phase, self.t0, self.stop_ev = ex, interval, phase, t0, stop_ev
        self.conn = None
        self.scrapes = []  # (start, seconds, status)
        self.failures = []
        self.checked = False

    def request(self):
        fresh = self.conn is None
        if fresh:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.ex.port, timeout=SCRAPE_TIMEOUT)
        try:
            self.conn.request("GET", "/metrics", headers=HEADERS)
            r = self.conn.getresponse()
            return r, r.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.conn.close()
            self.conn = None
            if fresh:
                raise
            return self.request()  # the server closed the kept-alive connection: a new one

    def run(self):
        k = 0
        while not self.stop_ev.wait(max(0.0, self.t0 + self.phase + k * self.interval -
                                        time.monotonic())):
            start = time.monotonic()
            t = time.perf_counter()
            try:
                r, body = self.request()
                dt = time.perf_counter() - t
                self.scrapes.append((start, dt, r.status))
                if r.status != 200:
                    self.failures.append("status %d" % r.status)
                elif not self.checked:
                    if r.getheader("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    if not bs.complete(body):
                        self.failures.append("an incomplete page")
                    self.checked = True
            except (OSError, http.client.HTTPException) as e:
                self.failures.append("%s: %s" % (type(e).__name__, e))
                if self.conn:
                    self.conn.close()
                    self.conn = None
            # the next slot after now: a scrape longer than the interval skips slots
            k = max(k + 1, math.ceil((time.monotonic() - self.t0 - self.phase) / self.interval))
        if self.conn:
            self.conn.close()


def has_sampling(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return "--diskstats.sampling" in out.stdout + out.stderr


def exporters_for(root, binary, have_ne, fixed, state):
    """The exporters of one size: [(name, its command line for a port)]; state: the full daemon's
    state directory."""
    roots = bs.tree_roots(root)
    out = []
    if have_ne:
        out.append(("node_exporter", lambda port: bs.node_exporter_argv(port, roots)))
    out.append(("compare", lambda port: bs.diskpulse_argv(binary, port, roots, root + "/state-compare",
                                                          COMPARE_OFF)))
    if fixed:
        out.append(("fixed", lambda port: bs.diskpulse_argv(binary, port, roots, root + "/state-fixed",
                                                            COMPARE_OFF) +
                    ["--diskstats.sampling=fixed"]))
    out.append(("full", lambda port: bs.diskpulse_argv(binary, port, roots, state, ())))
    return out


def run_interval(interval, warmup, duration, trees, binary, have_ne, fixed):
    """Every exporter of every size at once, scraped every interval: {(size, name): result}."""
    running, scrapers, states = [], [], []
    stop_ev = threading.Event()
    try:
        for n, root in trees:
            # the full daemon's state directory (the canary's default target): on a disk
            states.append(tempfile.mkdtemp(prefix="diskpulse-hostday-state-"))
            for name, argv_of in exporters_for(root, binary, have_ne, fixed, states[-1]):
                running.append(Running(name, argv_of, n))
                running[-1].launch()
        log("every %g s: %d exporters, %g s warm-up, %g s measured" % (interval, len(running),
                                                                         warmup, duration))
        t0 = time.monotonic()
        for i, ex in enumerate(running):
            # Prometheus spreads its targets over the interval
            scrapers.append(Scraper(ex, interval, interval * i / len(running), t0, stop_ev))
            scrapers[-1].start()
        marks = []
        for t in (t0 + warmup, t0 + warmup + duration):
            stop_ev.wait(max(0.0, t - time.monotonic()))
            stats = proc_stats()
            marks.append([(tree_cpu(ex.proc.pid, stats), time.monotonic()) for ex in running])
        stop_ev.set()
        for s in scrapers:
            s.join(SCRAPE_TIMEOUT + 5)
        facts = [full_facts(ex) for ex in running if ex.name == "full" and ex.alive()][:1]
        res = {}
        for ex, s, (c0, w0), (c1, w1) in zip(running, scrapers, marks[0], marks[1]):
            if not ex.alive():
                raise RuntimeError("%s (%d devices) exited: %s" % (ex.name, ex.size, ex.output()))
            lat = [dt for st, dt, code in s.scrapes if t0 + warmup <= st < t0 + warmup + duration]
            res[ex.size, ex.name] = {
                "cpu": cpu_between(c0, c1), "elapsed": w1 - w0,
                "day": cpu_between(c0, c1) / (w1 - w0) * 86400,
                "p50": statistics.median(lat) if lat else None, "scrapes": len(lat),
                "failures": s.failures}
        return res, facts[0] if facts else None
    finally:
        stop_ev.set()
        try:
            stop_all(running)
        finally:
            for d in states:
                shutil.rmtree(d, ignore_errors=True)


def full_facts(ex):
    """What the full daemon's own collectors did on a tree, from its page (after the measurement)."""
    st, body = bs.get(ex.port, {})
    ups = {}
    for line in body.decode().splitlines():
        m = re.match(r"(diskpulse_(?:io_latency|sync_target|smart)_up)(?:{[^}]*})? (\S+)$", line)
        if m:
            ups.setdefault(m.group(1), []).append(m.group(2))
    return "; ".join("`%s` %s" % (k, "/".join(sorted(set(v)))) for k, v in sorted(ups.items()))


def run_idle(binary, have_ne, seconds):
    """diskpulse at its defaults and node_exporter, on the real host, unscraped."""
    running = []
    state = tempfile.mkdtemp(prefix="diskpulse-hostday-idle-")
    try:
        running.append(Running("diskpulse (defaults)",
                               lambda port: [binary, "--web.listen-address=127.0.0.1:%d" % port,
                                             "--state.directory=" + state]))
        running[-1].launch(idle=True)
        if have_ne:
            running.append(Running("node_exporter (diskstats)",
                                   lambda port: bs.node_exporter_argv(port, [], exclude=None)))
            running[-1].launch(idle=True)
        log("idle: %g s settling, %g s measured" % (SETTLE, seconds))
        time.sleep(SETTLE)
        stats = proc_stats()
        first = [threads(ex.proc.pid) for ex in running]
        c0 = [(tree_cpu(ex.proc.pid, stats), time.monotonic()) for ex in running]
        last = [dict(f) for f in first]
        t0 = time.monotonic()
        # Threads (and the helper's workers) may come and go: each poll keeps the last count seen.
        while True:
            left = t0 + seconds - time.monotonic()
            time.sleep(max(0.0, min(1.0, left)))
            for ex, l in zip(running, last):
                l.update(threads(ex.proc.pid))
            if left <= 1.0:
                break
        stats = proc_stats()
        c1 = [(tree_cpu(ex.proc.pid, stats), time.monotonic()) for ex in running]
        out = []
        for ex, f, l, (a0, w0), (a1, w1) in zip(running, first, last, c0, c1):
            if not ex.alive():
                raise RuntimeError("%s exited: %s" % (ex.name, ex.output()))
            st, body = bs.get(ex.port, HEADERS, timeout=START_TIMEOUT)
            if st != 200:
                raise RuntimeError("%s answered %d" % (ex.name, st))
            # a thread born in the window counts from 0
            per = [(pname, tname, sw - f.get(tid, (0, 0, 0, 0))[2], inv - f.get(tid, (0, 0, 0, 0))[3])
                   for tid, (pname, tname, sw, inv) in sorted(l.items())]
            wall = w1 - w0
            out.append({"name": ex.name, "per": per, "seconds": wall,
                        "switches": sum(p[2] for p in per), "invol": sum(p[3] for p in per),
                        "threads": len(l),
                        "gone": len(set(l) - set(threads(ex.proc.pid))),
                        "born": len(set(l) - set(f)), "day": cpu_between(a0, a1) / wall * 86400})
        return out
    finally:
        try:
            stop_all(running)
        finally:
            shutil.rmtree(state, ignore_errors=True)


# --- report ------------------------------------------------------------------------------------

COLUMNS = (("node_exporter", "node_exporter"), ("compare", "diskpulse compare"),
           ("fixed", "diskpulse fixed"), ("full", "diskpulse full"))


def interval_table(interval, warmup, duration, res, sizes, names):
    head = "| devices |"
    rule = "|---:|"
    for key, label in COLUMNS:
        if key not in names:
            continue
        head += " %s CPU-s/day |" % label
        rule += "---:|"
        if key != "node_exporter" and "node_exporter" in names:
            head += " ratio |"
            rule += "---:|"
    for key, label in COLUMNS:
        if key in names:
            head += " median scrape, %s |" % label
            rule += "---:|"
    rows = [head, rule]
    for n in sizes:
        ne = res.get((n, "node_exporter"))
        row = "| %s |" % "{:,}".format(n)
        for key, _ in COLUMNS:
            if key not in names:
                continue
            r = res[n, key]
            row += " %s |" % bs.fmt_num(r["day"])
            if key != "node_exporter" and ne:
                row += " %s |" % bs.ratio(ne["day"], r["day"])
        for key, _ in COLUMNS:
            if key in names:
                row += " %s |" % bs.fmt_ms(res[n, key]["p50"])
        rows.append(row)
    scrapes = sorted({r["scrapes"] for r in res.values()})
    title = ("**Scraped every %g s** (OpenMetrics + gzip, one keep-alive connection; %g s warm-up, "
             "then %g s measured, %s scrapes each)" % (interval, warmup, duration,
                                                      "/".join(str(s) for s in scrapes)))
    if "node_exporter" in names:
        title += "; ratio: node_exporter's CPU over that column's%s" % (
            ", target ≥ 2× for compare" if interval == 15 else "")
    fails = ["- %s, %d devices: %d failed scrapes (%s)" % (k, n, len(r["failures"]),
                                                           r["failures"][0])
             for (n, k), r in sorted(res.items()) if r["failures"]]
    return "\n".join([title + ":", ""] + rows + ([""] + fails if fails else []))


def code(tname):
    """A thread's name as the table shows it: `comm`, and (main) outside the backquotes."""
    return "`%s` (main)" % tname[:-7] if tname.endswith(" (main)") else "`%s`" % tname


def idle_table(idle):
    rows = ["**Idle on this host, not scraped** (%.0f s after %.0f s settling): context switches of "
            "every thread of the process tree, voluntary + involuntary:" % (idle[0]["seconds"], SETTLE),
            "", "| exporter | wake-ups/min | wake-ups/s | of them involuntary, /min | threads | CPU-s/day |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in idle:
        m = 60.0 / r["seconds"]
        rows.append("| %s | %s | %.3g | %s | %d%s | %s |" % (
            r["name"], bs.fmt_num(r["switches"] * m), r["switches"] / r["seconds"],
            bs.fmt_num(r["invol"] * m), r["threads"],
            " (%d started, %d ended)" % (r["born"], r["gone"]) if r["born"] or r["gone"] else "",
            bs.fmt_num(r["day"])))
    rows += ["", "| exporter | process | thread | wake-ups/min |", "|---|---|---|---:|"]
    for r in idle:
        m = 60.0 / r["seconds"]
        # one row per thread, most wake-ups first; threads of one name that never woke in one row
        quiet = {}
        for pname, tname, sw, _ in sorted(r["per"], key=lambda p: -p[2]):
            if sw:
                rows.append("| %s | `%s` | %s | %s |" % (r["name"], pname, code(tname),
                                                         bs.fmt_num(sw * m)))
            else:
                quiet[pname, tname] = quiet.get((pname, tname), 0) + 1
        for (pname, tname), cnt in quiet.items():
            rows.append("| %s | `%s` | %s%s | 0 |" % (r["name"], pname, code(tname),
                                                     " (%d threads)" % cnt if cnt > 1 else ""))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", help="a diskpulse binary (default: build a release one)")
    ap.add_argument("--sizes", default="2,100,1000")
    ap.add_argument("--scrape-intervals", default="15,60", help="seconds, comma-separated")
    ap.add_argument("--duration", type=float,
                    help="seconds measured (default: 20 intervals, at least 300)")
    ap.add_argument("--warmup", type=float, help="seconds before the measurement (default: 4 intervals)")
    ap.add_argument("--idle", type=float, default=180, help="seconds of idle measurement")
    ap.add_argument("--update-doc", metavar="FILE")
    a = ap.parse_args()

    if not os.path.exists("/proc/self/schedstat"):
        print("SKIP: /proc/PID/schedstat is missing (a kernel without CONFIG_SCHED_INFO)")
        return 77
    if "voluntary_ctxt_switches" not in open("/proc/self/status").read():
        print("SKIP: /proc/PID/status counts no context switches")
        return 77
    have_ne = shutil.which(bs.NODE_EXPORTER) is not None
    notes = []
    if not have_ne:
        log("%s is not installed: diskpulse alone" % bs.NODE_EXPORTER)
        notes.append("%s is not installed: diskpulse alone" % bs.NODE_EXPORTER)
    binary = os.path.abspath(a.binary) if a.binary else bs.release_binary()
    fixed = has_sampling(binary)
    if not fixed:
        notes.append("no \"fixed\" column: this diskpulse's `--help` has no `--diskstats.sampling` "
                     "(it samples every `--diskstats.interval`, as \"fixed\" would)")
    sizes = [int(s) for s in a.sizes.split(",")]
    intervals = [float(s) for s in a.scrape_intervals.split(",")]
    names = (["node_exporter"] if have_ne else []) + ["compare"] + (["fixed"] if fixed else []) + ["full"]

    load0 = os.getloadavg()
    t0 = time.time()
    tables, failed, full_notes = [], False, []
    for interval in intervals:
        warmup = a.warmup if a.warmup is not None else 4 * interval
        duration = a.duration if a.duration is not None else max(300.0, 20 * interval)
        trees, bumpers = [], []
        try:
            for n in sizes:
                root = fixture.tempdir("diskpulse-hostday-%d-" % n)
                trees.append((n, root))
                bumpers.append(bs.Churn(root, fixture.make_tree(root, n)))
            res, facts = run_interval(interval, warmup, duration, trees, binary, have_ne, fixed)
        finally:
            for b in bumpers:
                b.stop()
            for _, root in trees:
                shutil.rmtree(root, ignore_errors=True)
        failed = failed or any(r["failures"] for r in res.values())
        if facts and not full_notes:
            full_notes.append("diskpulse full's collectors on a tree: %s (biolatency traces this host's "
                              "own block I/O; the trees' disks have no device nodes for SMART; the "
                              "canary probes its state directory, on a disk)" % facts)
        tables.append(interval_table(interval, warmup, duration, res, sizes, names))
        log(tables[-1])
    idle = run_idle(binary, have_ne, a.idle)
    tables.append(idle_table(idle))
    load1 = os.getloadavg()

    argv = " ".join(["tests/bench/bench_hostday.py"] + [bs.shell_word(w) for w in sys.argv[1:]])
    lines = ["Run %s, %.0f minutes; load average %.2f %.2f %.2f before, %.2f %.2f %.2f after; "
             "every counter of the trees advancing every second." % (
                 time.strftime("%Y-%m-%d %H:%M", time.localtime(t0)), (time.time() - t0) / 60,
                 *load0, *load1)]
    lines += bs.machine(a, binary, wrk=False)
    lines += ["- " + n for n in notes + full_notes]
    lines += ["- command: `python3 %s`" % argv, ""]
    report = "\n".join(lines + [t + "\n" for t in tables])
    print(report)
    if failed:
        log("bench_hostday: an exporter failed scrapes (see the tables)")
        return 1
    if a.update_doc:
        doc = open(a.update_doc).read()
        if not bs.replace_marked(a.update_doc, doc, "<!-- hostday:begin -->", "<!-- hostday:end -->",
                                 report):
            return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        log("bench_hostday: %s" % e)
        sys.exit(1)
