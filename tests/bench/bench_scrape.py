#!/usr/bin/env python3
"""Side-by-side benchmark: diskpulse against node_exporter (Debian's prometheus-node-exporter,
diskstats collector only) on the same synthetic host trees (tests/bench/fixture.py) of 2, 100,
1,000 and 10,000 devices, with the same --path.* roots and the same device filter, measured in
the same run, alternating. For each size and exporter:

- scrapes/s under concurrent keep-alive load (wrk -t1 -c8), text and gzip, with p50/p99 latency;
- p50/p99 latency for one keep-alive scraper back to back (wrk -t1 -c1), text and gzip;
- "cold" scrapes, as Prometheus makes them: one scraper at a steady interval (3.1 s), each request
  the first on its snapshot (node_exporter collects on every scrape anyway), text and
  OpenMetrics+gzip as Prometheus asks: latency, and CPU per scrape over the whole interval;
- CPU seconds per 1,000 scrapes under load (the exporter's threads, idle cost subtracted);
- proportional set size and resident size (/proc/PID/smaps_rollup; diskpulse's privileged helper
  process included), peak resident size (VmHWM);
- page bytes (text, gzip) and samples per device;
- start-up time (exec to the first complete page), idle CPU over --idle seconds;
- and the ratios, against the issue's targets.

Prints Markdown (machine, command, one table per size); --update-doc FILE replaces the part of
FILE between the "bench:begin" and "bench:end" markers with it. Asserts nothing about speed; exits
non-zero only when an exporter fails to serve or the two disagree on the devices.

Usage: bench_scrape.py [--binary PATH] [--sizes 2,100,1000,10000] [--rounds 3] [--duration 10]
                       [--idle 60] [--cold 6] [--churn] [--no-node-exporter] [--update-doc FILE]
Without --binary it builds a release binary (cmake -DCMAKE_BUILD_TYPE=Release) in build-bench/."""
import argparse
import http.client
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import fixture  # noqa: E402

NODE_EXPORTER = "prometheus-node-exporter"
PROM_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
               "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
FORMS = {"text": {}, "gzip": {"Accept-Encoding": "gzip"}}
COLD_FORMS = {"text": {}, "prometheus": {"Accept": PROM_ACCEPT, "Accept-Encoding": "gzip"}}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --- processes ---------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open("/proc/%s/stat" % e) as f:
                    st = f.read()
                if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                    out.append(int(e))
            except (OSError, ValueError):
                pass
    return out


def cpu_ns(pids):
    """Time on CPU of every thread of the processes (schedstat, nanoseconds)."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total


def memory(pids):
    """(PSS of all, RSS of the first process, its peak RSS, PSS of the first) in bytes."""
    pss = rss = hwm = first = 0
    for i, pid in enumerate(pids):
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    k, v = line.split(":", 1) if ":" in line else (line, "")
                    if k == "Pss":
                        pss += int(v.split()[0]) * 1024
                        if i == 0:
                            first = int(v.split()[0]) * 1024
                    elif k == "Rss" and i == 0:
                        rss = int(v.split()[0]) * 1024
            if i == 0:
                with open("/proc/%d/status" % pid) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            hwm = int(line.split()[1]) * 1024
        except OSError:
            pass
    return pss, rss, hwm, first


def tree_roots(root):
    """The --path.* flags of both exporters for a tree."""
    return ["--path.procfs=" + root + "/proc", "--path.sysfs=" + root + "/sys",
            "--path.udev.data=" + root + "/udev"]


def diskpulse_argv(binary, port, roots, state, off=("smart", "canary")):
    """diskpulse on a tree as measured here: the collectors off named (--no-collector.NAME)."""
    return ([binary, "--web.listen-address=127.0.0.1:%d" % port] + roots +
            ["--collector.diskstats.device-exclude=" + fixture.DEVICE_EXCLUDE] +
            ["--no-collector." + c for c in off] +
            ["--state.directory=" + state, "--log.level=warn"])


def node_exporter_argv(port, roots, exclude=fixture.DEVICE_EXCLUDE):
    """node_exporter with its diskstats collector alone; exclude None: its own device filter."""
    return ([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port] + roots +
            ["--collector.disable-defaults", "--collector.diskstats"] +
            (["--collector.diskstats.device-exclude=" + exclude] if exclude else []) +
            ["--log.level=warn"])


class Exporter:
    """One exporter process on a loopback port, serving a tree."""

    def __init__(self, name, argv, port):
        self.name, self.argv, self.port = name, argv, port
        self.proc = None
        self.pids = []
        self.logf = None

    def start(self, timeout):
        """Starts it; returns the seconds from exec to the first complete page, or None."""
        self.logf = tempfile.TemporaryFile()
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=subprocess.STDOUT)
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                self.logf.seek(0)
                raise RuntimeError("%s exited: %s" % (self.name, self.logf.read().decode()[-2000:]))
            try:
                st, body = get(self.port, {}, timeout=timeout)
                if st == 200 and complete(body):
                    dt = time.monotonic() - t0
                    time.sleep(0.2)
                    self.pids = [self.proc.pid] + children(self.proc.pid)
                    return dt
            except OSError:
                pass
            time.sleep(0.002)
        self.pids = [self.proc.pid] + children(self.proc.pid)
        return None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.logf:
            self.logf.close()

    def cpu(self):
        return cpu_ns(self.pids) / 1e9

    def memory(self):
        return memory(self.pids)


def complete(body):
    return b"_disk_reads_completed_total{" in body


def get(port, headers, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/metrics", headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


# The series diskpulse has per device and node_exporter has not: iostat's derived gauges and the
# write cache mode (the SPEC's interface; see docs/BENCHMARKS.md for why each earns its place).
EXTRA = ("_await_seconds", "_utilization_ratio", "_queue_depth", "_iops", "_bytes_per_second",
         "_write_cache_info")


def composition(body, ndev):
    """{family: bytes per device} of the sample lines that carry a device label."""
    out = {}
    for line in body.decode().splitlines(keepends=True):
        if line.startswith("#") or 'device="' not in line:
            continue
        name = line.split("{", 1)[0]
        out[name] = out.get(name, 0) + len(line)
    return {k: v / max(1, ndev) for k, v in out.items()}


def page_facts(body, prefix):
    """(devices, samples per device) of a text page; per-device samples are those with a device
    label."""
    text = body.decode()
    devs, per = set(), 0
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.search(r'[{,]device="([^"]*)"', line)
        if m:
            per += 1
            if line.startswith(prefix + "disk_reads_completed_total"):
                devs.add(m.group(1))
    return devs, per / max(1, len(devs))


# --- load --------------------------------------------------------------------------------------

def parse_duration(s):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", s)
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)]


def wrk(port, conns, seconds, headers, timeout):
    """Runs wrk; returns {rate, p50, p99, requests, errors}."""
    cmd = ["wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds, "--timeout", "%ds" % timeout,
           "--latency"]
    for k, v in headers.items():
        cmd += ["-H", "%s: %s" % (k, v)]
    cmd.append("http://127.0.0.1:%d/metrics" % port)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + timeout + 30).stdout
    res = {"requests": 0, "errors": 0, "rate": 0.0, "p50": None, "p99": None}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    if m:
        res["requests"] = int(m.group(1))
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if m:
        res["rate"] = float(m.group(1))
    for q in ("50", "99"):
        m = re.search(r"^\s+%s%%\s+(\S+)" % q, out, re.M)
        if m:
            res["p" + q] = parse_duration(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        res["errors"] += sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        res["errors"] += int(m.group(1))
    if res["requests"] == 0 and res["rate"] == 0.0:
        res["errors"] += 1
    return res


def loaded(ex, idle_rate, conns, seconds, headers, timeout):
    """wrk against ex, with the exporter's CPU per scrape (idle cost subtracted)."""
    c0, t0 = ex.cpu(), time.monotonic()
    r = wrk(ex.port, conns, seconds, headers, timeout)
    wall = time.monotonic() - t0
    busy = max(0.0, ex.cpu() - c0 - idle_rate * wall)
    r["cpu_per_scrape"] = busy / r["requests"] if r["requests"] else None
    return r


def single(ex, idle_rate, headers, timeout):
    """One scrape on its own connection: latency and CPU."""
    c0, t0 = ex.cpu(), time.monotonic()
    st, body = get(ex.port, headers, timeout=timeout)
    dt = time.monotonic() - t0
    if st != 200:
        raise RuntimeError("%s answered %d" % (ex.name, st))
    return dt, max(0.0, ex.cpu() - c0 - idle_rate * dt), body


def cold(ex, idle_rate, n, headers, timeout, every):
    """n scrapes every seconds apart over one keep-alive connection, as Prometheus makes them:
    latencies, and the CPU each cost over the whole time since the one before (a page made
    ahead of the request counts), idle cost subtracted."""
    lat, cpu = [], []
    c = http.client.HTTPConnection("127.0.0.1", ex.port, timeout=timeout)
    try:
        c0, g0 = ex.cpu(), time.monotonic()
        for _ in range(n):
            time.sleep(max(0.0, every - (time.monotonic() - g0)))
            t0 = time.perf_counter()
            c.request("GET", "/metrics", headers=headers)
            r = c.getresponse()
            r.read()
            lat.append(time.perf_counter() - t0)
            c1, g1 = ex.cpu(), time.monotonic()
            cpu.append(max(0.0, c1 - c0 - idle_rate * (g1 - g0)))
            c0, g0 = c1, g1
            if r.status != 200:
                raise RuntimeError("%s answered %d" % (ex.name, r.status))
    finally:
        c.close()
    return lat, cpu


class Churn:
    """Rewrites the tree's diskstats every second with every counter advanced (a busy host)."""

    def __init__(self, root, devs):
        self.root, self.devs = root, devs
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        rnd = 0
        while not self.stop_ev.wait(1.0):
            rnd += 1
            fixture.bump(self.root, self.devs, rnd)

    def stop(self):
        self.stop_ev.set()
        self.t.join()


# --- one size ----------------------------------------------------------------------------------

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


HOST = 0  # the size that is this host itself


def size_name(n):
    return "this host, defaults" if n == HOST else "%d devices" % n


def bench_size(n, a, binary, have_ne):
    """One size: n devices of a synthetic tree, or HOST (0): this host itself, diskpulse with every
    collector at its defaults (its own state directory) beside node_exporter's diskstats
    collector, each with its own default device filter."""
    root = fixture.tempdir("diskpulse-bench-%d-" % n)
    res = {}
    exporters = []
    churn = None
    try:
        dp_port = free_port()
        if n == HOST:
            devs, roots = [], []
            argv = [binary, "--web.listen-address=127.0.0.1:%d" % dp_port,
                    "--state.directory=" + root + "/state", "--log.level=warn"]
        else:
            devs = fixture.make_tree(root, n)
            roots = tree_roots(root)
            argv = diskpulse_argv(binary, dp_port, roots, root + "/state")
        dp = Exporter("diskpulse", argv, dp_port)
        exporters.append(dp)
        if have_ne:
            ne_port = free_port()
            exporters.append(Exporter("node_exporter", node_exporter_argv(
                ne_port, roots, None if n == HOST else fixture.DEVICE_EXCLUDE), ne_port))
        for ex in exporters:
            r = res[ex.name] = {"startup": ex.start(a.timeout)}
            if r["startup"] is None:
                log("%s did not serve a complete page within %d s" % (ex.name, a.timeout))
        if a.churn:
            churn = Churn(root, devs)
        time.sleep(a.settle)
        log("%s: idle %d s" % (size_name(n), a.idle))
        c0 = {ex.name: ex.cpu() for ex in exporters}
        t0 = time.monotonic()
        time.sleep(a.idle)
        wall = time.monotonic() - t0
        for ex in exporters:
            res[ex.name]["idle"] = (ex.cpu() - c0[ex.name]) / wall
        # Page facts and a probe scrape: an exporter slower than --slow seconds per scrape gets
        # single scrapes instead of wrk.
        facts = {}
        for ex in exporters:
            r = res[ex.name]
            dt, cpu, body = single(ex, r["idle"], {}, a.timeout)
            _, _, gz = single(ex, r["idle"], FORMS["gzip"], a.timeout)
            if gz[:2] == b"\x1f\x8b":
                gz_len = len(gz)
            else:
                gz_len = None
            prefix = "diskpulse_" if ex is dp else "node_"
            devices, per = page_facts(body, prefix)
            facts[ex.name] = devices
            r.update(page=len(body), page_gz=gz_len, per_device=per, devices=len(devices),
                     probe=dt, probe_cpu=cpu, composition=composition(body, len(devices)))
        if have_ne and facts["diskpulse"] != facts["node_exporter"]:
            only = sorted(facts["diskpulse"] ^ facts["node_exporter"])[:10]
            if n != HOST:
                raise RuntimeError("the exporters disagree on the devices: %s" % only)
            log("this host: the default device filters differ on %s" % only)
        for ex in exporters:
            res[ex.name]["loads"] = {}
        for rnd in range(a.rounds):
            order = exporters if rnd % 2 == 0 else exporters[::-1]
            for form, headers in FORMS.items():
                for conns in (a.connections, 1):
                    for ex in order:
                        r = res[ex.name]
                        key = "%s c%d" % (form, conns)
                        if r["probe"] > a.slow:
                            # one scrape on its own is all it can do in reasonable time
                            dt, cpu, _ = single(ex, r["idle"], headers, a.timeout)
                            w = {"rate": 1.0 / dt, "p50": dt, "p99": dt, "requests": 1,
                                 "errors": 0, "cpu_per_scrape": cpu, "single": True}
                        else:
                            # a slow exporter gets long enough for each connection to finish
                            # a few scrapes
                            secs = max(a.duration, min(120, int(3 * r["probe"] * conns) + 1))
                            log("%s: %s %s round %d (%d s)" % (size_name(n), ex.name, key, rnd + 1,
                                                               secs))
                            w = loaded(ex, r["idle"], conns, secs, headers, a.timeout)
                        if w["errors"]:
                            log("%s: %d errors under %s" % (ex.name, w["errors"], key))
                        r["loads"].setdefault(key, []).append(w)
            for ex in order:
                res[ex.name].setdefault("mem", []).append(ex.memory())
        for ex in exporters:
            r = res[ex.name]
            r["cold"] = {}
            for form, headers in COLD_FORMS.items():
                if r["probe"] > a.slow:
                    dt, cpu, _ = single(ex, r["idle"], headers, a.timeout)
                    r["cold"][form] = ([dt], [cpu])
                else:
                    log("%s: %s cold %s" % (size_name(n), ex.name, form))
                    r["cold"][form] = cold(ex, r["idle"], a.cold, headers, a.timeout,
                                           a.cold_every)
            r["mem"].append(ex.memory())
        return res
    finally:
        if churn:
            churn.stop()
        for ex in exporters:
            ex.stop()
        shutil.rmtree(root, ignore_errors=True)


# --- report ------------------------------------------------------------------------------------

def fmt_ms(s):
    if s is None or s == 0:
        return "-"
    return "%.3g ms" % (s * 1000) if s < 1 else "%.3g s" % s


def fmt_num(x, unit=""):
    if x is None:
        return "-"
    if x >= 100:
        return "{:,.0f}{}".format(x, unit)
    return "{:.3g}{}".format(x, unit)


def fmt_mb(b):
    return "-" if b is None else "%.1f MB" % (b / 1e6)


def ratio(a, b, higher_better=True):
    if a is None or b is None or a == 0 or b == 0:
        return "-"
    r = a / b if higher_better else b / a
    return "%.1f×" % r if r < 100 else "{:,.0f}×".format(r)


def summarize(r):
    """Medians over the rounds."""
    s = {k: r.get(k) for k in ("startup", "idle", "page", "page_gz", "per_device", "devices")}
    for key, ws in r["loads"].items():
        s[key] = {k: median([w[k] for w in ws]) for k in ("rate", "p50", "p99", "cpu_per_scrape")}
        s[key]["single"] = any(w.get("single") for w in ws)
    mem = r["mem"]
    s["pss"] = median([m[0] for m in mem])
    s["pss_main"] = median([m[3] for m in mem])
    s["rss"] = median([m[1] for m in mem])
    s["hwm"] = max(m[2] for m in mem)
    s["cold"] = {f: (median(l), max(l), median(c)) for f, (l, c) in r["cold"].items()}
    return s


def table(n, res, a, first_size):
    dp = summarize(res["diskpulse"])
    ne = summarize(res["node_exporter"]) if "node_exporter" in res else None
    c = a.connections
    rows = []

    def row(label, dv, nv, rt, note=""):
        rows.append("| %s | %s | %s | %s | %s |" % (label, dv, nv if ne else "-", rt if ne else "-", note))

    def g(s, key, field):
        return s[key][field] if s and key in s else None

    host = n == first_size
    for form in FORMS:
        key = "%s c%d" % (form, c)
        note = ""
        if form == "text" and host:
            note = "target ≥ 20×"
        if form == "text" and n == 1000:
            note = "target ≥ 100×"
        single_note = " (single scrapes)" if ne and g(ne, key, "single") else ""
        row("scrapes/s, %s, %d connections" % (form, c), fmt_num(g(dp, key, "rate")),
            fmt_num(g(ne, key, "rate")) + single_note,
            ratio(g(dp, key, "rate"), g(ne, key, "rate")), note)
        row("p50 / p99, %s, %d connections" % (form, c),
            "%s / %s" % (fmt_ms(g(dp, key, "p50")), fmt_ms(g(dp, key, "p99"))),
            "%s / %s" % (fmt_ms(g(ne, key, "p50")), fmt_ms(g(ne, key, "p99"))),
            ratio(g(dp, key, "p99"), g(ne, key, "p99"), False))
    for form in FORMS:
        key = "%s c1" % form
        note = ""
        if n == 1000:
            note = "target p99 ≤ %s" % ("5 ms" if form == "text" else "2 ms")
        row("p50 / p99, %s, one scraper back to back" % form,
            "%s / %s" % (fmt_ms(g(dp, key, "p50")), fmt_ms(g(dp, key, "p99"))),
            "%s / %s" % (fmt_ms(g(ne, key, "p50")), fmt_ms(g(ne, key, "p99"))),
            ratio(g(dp, key, "p99"), g(ne, key, "p99"), False), note)
    for form, label in (("text", "text"), ("prometheus", "OpenMetrics + gzip")):
        dc = dp["cold"].get(form)
        nc = ne["cold"].get(form) if ne else None
        row("scrape as Prometheus scrapes (every %.3g s), %s: median / max" % (a.cold_every, label),
            "%s / %s" % (fmt_ms(dc[0]), fmt_ms(dc[1])),
            "%s / %s" % (fmt_ms(nc[0]), fmt_ms(nc[1])) if nc else "-",
            ratio(dc[0], nc[0] if nc else None, False))
        row("CPU per such scrape, %s" % label, fmt_ms(dc[2]), fmt_ms(nc[2]) if nc else "-",
            ratio(dc[2], nc[2] if nc else None, False), "target ≥ 20×" if form == "prometheus" else "")
    key = "text c%d" % c
    dcpu = g(dp, key, "cpu_per_scrape")
    ncpu = g(ne, key, "cpu_per_scrape")
    row("CPU-s per 1,000 scrapes, text, under load", fmt_num(dcpu and dcpu * 1000),
        fmt_num(ncpu and ncpu * 1000), ratio(dcpu, ncpu, False), "target ≥ 20×")
    key = "gzip c%d" % c
    row("CPU-s per 1,000 scrapes, gzip, under load",
        fmt_num(g(dp, key, "cpu_per_scrape") and g(dp, key, "cpu_per_scrape") * 1000),
        fmt_num(g(ne, key, "cpu_per_scrape") and g(ne, key, "cpu_per_scrape") * 1000),
        ratio(g(dp, key, "cpu_per_scrape"), g(ne, key, "cpu_per_scrape"), False))
    row("proportional set size (diskpulse: with its SMART helper processes)", fmt_mb(dp["pss"]),
        fmt_mb(ne and ne["pss"]), ratio(dp["pss"], ne and ne["pss"], False), "target ≥ 10×")
    row("proportional set size, main process alone", fmt_mb(dp["pss_main"]),
        fmt_mb(ne and ne["pss"]), ratio(dp["pss_main"], ne and ne["pss"], False))
    row("resident size (peak)", "%s (%s)" % (fmt_mb(dp["rss"]), fmt_mb(dp["hwm"])),
        "%s (%s)" % (fmt_mb(ne and ne["rss"]), fmt_mb(ne and ne["hwm"])),
        ratio(dp["rss"], ne and ne["rss"], False), "target ≤ 16 MB" if n == 10000 else "")
    row("page bytes, text / gzip", "%s / %s" % (fmt_num(dp["page"]), fmt_num(dp["page_gz"])),
        "%s / %s" % (fmt_num(ne and ne["page"]), fmt_num(ne and ne["page_gz"])),
        ratio(dp["page"], ne and ne["page"], False))
    row("samples per device", "%.0f" % dp["per_device"], "%.0f" % ne["per_device"] if ne else "-", "")
    row("start-up (exec to first complete page)", fmt_ms(dp["startup"]),
        fmt_ms(ne and ne["startup"]) if ne and ne["startup"] is not None else "> %d s" % a.timeout,
        ratio(dp["startup"], ne and ne["startup"], False))
    idle_note = ("target ≤ 0.1%" if host else "target ≤ 0.05%" if n == 1000 else "")
    row("idle CPU over %d s (%% of a core)" % a.idle, "%.3f%%" % (dp["idle"] * 100),
        "%.3f%%" % (ne["idle"] * 100) if ne else "-", "", idle_note)
    head = ["| %s | diskpulse | node_exporter | ratio | |" % size_name(n), "|---|---:|---:|---:|---|"]
    return "\n".join(head + rows)


def composition_table(n, res):
    """Page bytes per device, family by family, at one size."""
    dp = res["diskpulse"]["composition"]
    ne = res.get("node_exporter", {}).get("composition", {})
    rows = ["| %s: bytes per device | diskpulse | node_exporter |" % size_name(n), "|---|---:|---:|"]
    extra = sum(v for k, v in dp.items() if k.endswith(EXTRA))
    for k in sorted(dp, key=lambda k: -dp[k]):
        base = k[len("diskpulse_disk_"):] if k.startswith("diskpulse_disk_") else k
        twin = [v for j, v in ne.items() if j == "node_disk_" + base]
        rows.append("| `%s`%s | %.0f | %s |" % (k, " (no counterpart)" if k.endswith(EXTRA) else "",
                                              dp[k], "%.0f" % twin[0] if twin else "-"))
    for j in sorted(ne):
        if "diskpulse_disk_" + j[len("node_disk_"):] not in dp:
            rows.append("| `%s` | - | %.0f |" % (j, ne[j]))
    rows.append("| **all series** | **%.0f** | **%s** |" % (sum(dp.values()),
                                                         "%.0f" % sum(ne.values()) if ne else "-"))
    rows.append("| **without the gauges and write cache mode** | **%.0f** | |" %
                (sum(dp.values()) - extra))
    return "\n".join(rows)


def machine(a, binary, wrk=True):
    def first(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "?"
    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = open("/proc/meminfo").readline().split()[1]
    osr = dict(l.rstrip().split("=", 1) for l in open("/etc/os-release") if "=" in l)
    rev = first(["git", "-C", SRC, "rev-parse", "--short=12", "HEAD"])
    tools = [first([NODE_EXPORTER, "--version"])]
    if wrk:
        tools.append(first(["wrk", "--version"]).split(" Copyright")[0])
    return ["- CPU: %s, %d cores; memory %.1f GB; %s, kernel %s" % (
                cpu, os.cpu_count(), int(mem) / 1e6, osr.get("PRETTY_NAME", "?").strip('"'),
                platform.release()),
            "- diskpulse %s (%s); %s" % (first([binary, "--version"]), rev, "; ".join(tools))]


def shell_word(w):
    """An argument as the command line in the docs shows it: paths relative to the source tree
    where they are inside it, basenames of build directories elsewhere, quoted for a shell."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    key, eq, val = w.partition("=") if w.startswith("--") and "=" in w else ("", "", w)
    if os.path.isabs(val):
        rel = os.path.relpath(val, top)
        val = rel if not rel.startswith("..") else os.path.join(os.path.basename(os.path.dirname(val)),
                                                                 os.path.basename(val))
    return key + eq + shlex.quote(val) if eq else shlex.quote(val)


def release_binary():
    """Builds a release binary in build-bench/; returns its path."""
    build = os.path.join(SRC, "build-bench")
    subprocess.run(["cmake", "-S", SRC, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                    "-DDISKPULSE_TESTS=OFF"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "-j2", "--target", "diskpulse"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(build, "diskpulse")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", help="a diskpulse binary (default: build a release one)")
    ap.add_argument("--sizes", default="2,100,1000,10000",
                    help="device counts of synthetic trees; \"host\": this host, every collector "
                         "of diskpulse at its defaults")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per size")
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--idle", type=int, default=60, help="seconds of idle measurement")
    ap.add_argument("--cold", type=int, default=6, help="cold scrapes per form")
    ap.add_argument("--cold-every", type=float, default=3.1,
                    help="seconds between cold scrapes (a scrape interval; several snapshots)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds between start and idle")
    ap.add_argument("--slow", type=float, default=10.0,
                    help="an exporter slower than this per scrape gets single scrapes, not wrk")
    ap.add_argument("--timeout", type=int, default=300, help="seconds a scrape may take")
    ap.add_argument("--churn", action="store_true",
                    help="every counter advances every second (a busy host)")
    ap.add_argument("--no-node-exporter", action="store_true")
    ap.add_argument("--update-doc", metavar="FILE")
    ap.add_argument("--note", action="append", default=[], help="a line for the report")
    a = ap.parse_args()

    if not shutil.which("wrk"):
        print("SKIP: wrk is not installed (apt-get install wrk)")
        return 77
    have_ne = not a.no_node_exporter and shutil.which(NODE_EXPORTER) is not None
    if not have_ne and not a.no_node_exporter:
        log("%s is not installed: diskpulse alone" % NODE_EXPORTER)
    binary = a.binary or release_binary()
    sizes = [HOST if s == "host" else int(s) for s in a.sizes.split(",")]
    load0 = os.getloadavg()
    t0 = time.time()
    tables = []
    comp = None
    for n in sizes:
        res = bench_size(n, a, binary, have_ne)
        tables.append(table(n, res, a, sizes[0]))
        print(tables[-1] + "\n", flush=True)
        if n <= 1000 or comp is None:
            comp = composition_table(n, res)
    load1 = os.getloadavg()
    argv = " ".join(["tests/bench/bench_scrape.py"] + [shell_word(w) for w in sys.argv[1:]])
    lines = ["Run %s, %.0f minutes; load average %.2f %.2f %.2f before, %.2f %.2f %.2f after%s." % (
                 time.strftime("%Y-%m-%d %H:%M", time.localtime(t0)), (time.time() - t0) / 60,
                 *load0, *load1, "; every counter advancing every second" if a.churn else "")]
    lines += machine(a, binary)
    lines += ["- " + n for n in a.note]
    lines += ["- command: `python3 %s`" % argv, ""]
    report = "\n".join(lines + [t + "\n" for t in tables] + [comp + "\n"])
    print(report)
    if a.update_doc:
        doc = open(a.update_doc).read()
        tag = "churn" if a.churn else "static"
        if not replace_marked(a.update_doc, doc, "<!-- bench:begin %s -->" % tag,
                              "<!-- bench:end %s -->" % tag, report):
            return 1
    return 0


def replace_marked(path, doc, begin, end, report):
    """Writes doc (the text of path) with report between the begin and end markers; False (and a
    message) when they are missing."""
    if begin not in doc or end not in doc:
        log("%s has no %s ... %s markers" % (path, begin, end))
        return False
    doc = doc[:doc.index(begin) + len(begin)] + "\n" + report + "\n" + doc[doc.index(end):]
    with open(path, "w") as f:
        f.write(doc)
    return True


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        log("bench_scrape: %s" % e)
        sys.exit(1)
