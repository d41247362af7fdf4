#!/usr/bin/env python3
"""Benchmark: the biolatency collector's accuracy and what it costs, on a loop device over tmpfs.

(a) Accuracy. fio 4 KiB random reads, direct I/O, at each queue depth of --iodepths, while three
tools watch the same I/O: diskpulse (its histograms scraped before and after; p50/p99 from the
bucket deltas, interpolated within a bucket as Prometheus' histogram_quantile does), the
independent `biolatency -D` (bcc's biolatency-bpfcc where it can compile, which needs the
running kernel's headers; otherwise the CO-RE one of Debian's libbpf-tools, same flags and
output: power-of-two buckets, so its quantiles are good to a factor of 2), once without and once
with -Q, and fio's own completion latency (clat) percentiles. What each measures:
  diskpulse device   issued to the driver -> completed (block_rq_issue -> block_rq_complete)
  diskpulse queue    request made -> issued (the time before the above)
  biolatency -D      issue -> completion, the same span as diskpulse's device time
  biolatency -D -Q   request inserted -> completion: queue time included
  fio clat           io_submit returned -> the completion fio reaps (with libaio on a fast
                     device much of the I/O can finish inside io_submit, in fio's slat)
  fio lat            io_submit called -> reaped (slat + clat): queue, device and syscall path
The I/O counts of each are printed too: every tool should see fio's I/Os and a few more.

(b) Overhead. fio 4 KiB random reads at the highest rate this machine reaches on the same loop
device (libaio, --overhead-iodepth 32, --numjobs 2), with the daemon running in both modes, all
its other collectors off: with the biolatency collector and with --no-collector.biolatency,
alternating which goes first, --runs pairs. Per pair: the IOPS lost (%) and the CPU time per I/O
(system-wide, /proc/stat's busy time over the run / I/Os done) difference; printed with their
means and a 95 % interval. Targets from issue 22: < 2 % IOPS lost, < 50 ns CPU per I/O.

When the binary has no biolatency collector (no --collector.biolatency in --help) the script
dry-runs: the diskpulse columns say so, and the overhead pairs run the same daemon twice (an A/A
comparison: the noise floor of the method). Needs root (loop device, BPF). Prints numbers;
asserts nothing.

Usage: bench_biolatency.py BINARY [--seconds 20] [--runs 3] [--iodepths 1,32]
                           [--overhead-iodepth 32] [--numjobs 2] [--size-mb 1024]
                           [--skip-accuracy] [--skip-overhead]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import dp  # noqa: E402

# Every collector but biolatency off, so that the two modes differ in it alone.
BASE_ARGS = ["--no-collector.diskstats", "--no-collector.smart", "--no-collector.canary"]


def daemon_args(loop, collector):
    """BASE_ARGS, and the loop device let through the device filter the collector shares with
    diskstats (whose default drops loop devices)."""
    return BASE_ARGS + (["--collector.diskstats.device-include=^%s$" % loop.name] if collector else [])
DEVICE_HIST = "diskpulse_io_device_latency_seconds"
QUEUE_HIST = "diskpulse_io_queue_latency_seconds"


def has_collector(binary):
    p = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return "collector.biolatency" in p.stdout + p.stderr


# --- quantiles ---------------------------------------------------------------------------------

def quantile(buckets, q):
    """The q-quantile of [(upper bound, count in the bucket)] (ascending, not cumulative; the
    first bucket starts at 0), interpolated linearly within its bucket as histogram_quantile
    does; None when empty. A quantile in the +Inf bucket is the last finite bound."""
    total = sum(c for _, c in buckets)
    if total <= 0:
        return None
    rank, seen, lo = q * total, 0.0, 0.0
    for hi, c in buckets:
        if c > 0 and seen + c >= rank:
            if hi == float("inf"):
                return lo
            return lo + (hi - lo) * (rank - seen) / c
        seen += c
        lo = hi if hi != float("inf") else lo
    return lo


def diskpulse_buckets(before, after, name, device, op="read"):
    """[(le in seconds, count)] of name's histogram for device and op between two scrapes (dp.parse
    dicts), not cumulative; and the number of I/Os (_count delta)."""
    def cumulative(m):
        out = {}
        for (n, ls), v in m.items():
            lab = dict(ls)
            if n == name + "_bucket" and lab.get("device") == device and lab.get("op") == op:
                out[float(lab["le"])] = v  # float("+Inf") is inf
        return out
    b, a = cumulative(before), cumulative(after)
    les = sorted(a)
    deltas, prev = [], 0.0
    for le in les:
        cum = a[le] - b.get(le, 0.0)
        deltas.append((le, max(cum - prev, 0.0)))
        prev = max(cum, prev)
    count = (dp.value(after, name + "_count", device=device, op=op) or 0) - \
        (dp.value(before, name + "_count", device=device, op=op) or 0)
    return deltas, count


# --- the independent tool: biolatency (bcc, or libbpf-tools) ----------------------------------

BIOLATENCY_CANDIDATES = ["biolatency-bpfcc", "/usr/sbin/biolatency"]


class Biolatency:
    """One biolatency -D [-Q] run in the background: started, waited for until it traces, then
    stopped with SIGINT, which makes it print its histograms."""

    def __init__(self, exe, queued):
        self.exe = exe
        self.out = tempfile.NamedTemporaryFile("w+", prefix="biolatency-", suffix=".txt")
        cmd = [exe, "-D"] + (["-Q"] if queued else [])
        # line-buffered, so that "Tracing..." shows when it does (C stdio; bcc is Python)
        self.proc = subprocess.Popen(["stdbuf", "-oL"] + cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        deadline = time.monotonic() + 60  # bcc compiles its program with clang first
        while time.monotonic() < deadline:
            if "Tracing" in self.text():
                return
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited: %s" % (" ".join(cmd), self.text()[-600:]))
            time.sleep(0.2)
        self.proc.kill()
        raise RuntimeError("%s did not start tracing in 60 s" % " ".join(cmd))

    def text(self):
        self.out.flush()
        with open(self.out.name) as f:
            return f.read()

    def stop(self):
        """The histogram of each disk: {disk: [(upper bound in seconds, count)]}."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return parse_biolatency(self.text())


def parse_biolatency(text):
    """bcc's / libbpf-tools' text output: "disk = NAME" then lines "LO -> HI : COUNT |***|" in
    usecs (or msecs with -m). A bucket LO -> HI holds latencies from LO to HI + 1."""
    out, disk, scale = {}, None, 1e-6
    for line in text.splitlines():
        m = re.match(r"\s*disk = (\S+)", line)
        if m:
            disk = m.group(1)
            out[disk] = []
            continue
        if re.match(r"\s*msecs\s*:", line):
            scale = 1e-3
        elif re.match(r"\s*usecs\s*:", line):
            scale = 1e-6
        m = re.match(r"\s*(\d+)\s*->\s*(\d+)\s*:\s*(\d+)", line)
        if m:
            if disk is None:
                disk = "all"
                out[disk] = []
            out[disk].append(((int(m.group(2)) + 1) * scale, int(m.group(3))))
    return out


def find_biolatency():
    """The first biolatency that traces here, or (None, why not)."""
    why = []
    for exe in BIOLATENCY_CANDIDATES:
        path = shutil.which(exe)
        if not path:
            why.append("%s: not installed" % exe)
            continue
        try:
            Biolatency(path, False).stop()
            return path, None
        except RuntimeError as e:
            why.append("%s: %s" % (exe, " ".join(str(e).split())[-200:]))
    return None, "; ".join(why)


# --- loop device over tmpfs, fio -----------------------------------------------------------------

class LoopOnTmpfs:
    def __init__(self, size_mb):
        self.path = os.path.join("/dev/shm", "bench-biolatency-%d.img" % os.getpid())
        subprocess.run(["dd", "if=/dev/zero", "of=" + self.path, "bs=1M", "count=%d" % size_mb],
                       check=True, capture_output=True)  # pages allocated, not holes
        self.dev = subprocess.run(["losetup", "--find", "--show", self.path], check=True,
                                  capture_output=True, text=True).stdout.strip()
        self.name = os.path.basename(self.dev)

    def close(self):
        subprocess.run(["losetup", "-d", self.dev], capture_output=True)
        os.unlink(self.path)


def fio(dev, seconds, iodepth, numjobs=1):
    out = subprocess.run(
        ["fio", "--name=bench", "--filename=" + dev, "--rw=randread", "--bs=4k", "--direct=1",
         "--ioengine=libaio", "--iodepth=%d" % iodepth, "--numjobs=%d" % numjobs, "--group_reporting",
         "--time_based", "--runtime=%d" % seconds, "--lat_percentiles=1", "--output-format=json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["read"]


def bpf_progs():
    """{id: program} of the BPF programs loaded now (bpftool prog show)."""
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True).stdout
    return {p["id"]: p for p in json.loads(out or "[]")}


def bpf_cost(binary, loop, seconds, depth, numjobs):
    """One more run with the collector and kernel.bpf_stats_enabled=1 (which costs a little
    itself, hence not during the pairs): the run time of the programs the daemon attached, per
    I/O fio did, and their runs per I/O. None without bpftool."""
    if not shutil.which("bpftool"):
        return None
    before = set(bpf_progs())
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    try:
        with dp.Daemon(binary, *daemon_args(loop, True)) as d:
            dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_io_latency_up") == 1, 20)
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write("1")
            ours = {i: p for i, p in bpf_progs().items() if i not in before and p.get("type") == "tracing"}
            r = fio(loop.dev, seconds, depth, numjobs)
            now = bpf_progs()
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    ns = sum(now[i].get("run_time_ns", 0) - p.get("run_time_ns", 0) for i, p in ours.items() if i in now)
    runs = sum(now[i].get("run_cnt", 0) - p.get("run_cnt", 0) for i, p in ours.items() if i in now)
    names = ", ".join(sorted(p.get("name", "?") for p in ours.values()))
    return ns / max(r["total_ios"], 1), runs / max(r["total_ios"], 1), names


def cpu_busy_ns():
    """System-wide CPU time not idle (all CPUs, /proc/stat's cpu line less idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # user..steal, less idle and iowait
    return busy * 1e9 / os.sysconf("SC_CLK_TCK")


# --- the two parts ---------------------------------------------------------------------------------

def fmt_s(v):
    if v is None:
        return "n/a"
    return "%.1f us" % (v * 1e6) if v < 1e-3 else "%.3f ms" % (v * 1e3)


def accuracy(binary, loop, seconds, iodepths, collector):
    tool, why = find_biolatency()
    print("\n## Accuracy: fio randread 4 KiB direct on %s (loop over tmpfs), %d s per queue depth" %
          (loop.dev, seconds))
    print("independent tool: %s" % (tool or "none (%s)" % why))
    for depth in iodepths:
        with dp.Daemon(binary, *daemon_args(loop, collector)) as d:
            up = dp.value(d.scrape(), "diskpulse_io_latency_up")
            if collector:
                dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_io_latency_up") == 1, 20)
                up = dp.value(d.scrape(), "diskpulse_io_latency_up")
            tools = []
            if tool:
                tools = [("biolatency -D", Biolatency(tool, False)), ("biolatency -D -Q", Biolatency(tool, True))]
            before = d.scrape()
            r = fio(loop.dev, seconds, depth)
            time.sleep(2)  # let the collector read its maps
            after = d.scrape()
            hists = [(name, t.stop()) for name, t in tools]
        rows = []
        for label, hist, what in (("diskpulse device", DEVICE_HIST, "issue -> complete"),
                                  ("diskpulse queue", QUEUE_HIST, "made -> issue")):
            if collector and up == 1:
                b, n = diskpulse_buckets(before, after, hist, loop.name)
                rows.append((label, what, quantile(b, 0.5), quantile(b, 0.99), "%d" % n))
            else:
                rows.append((label, what, None, None,
                             "no collector (dry run)" if not collector else "up=%s" % up))
        for name, h in hists:
            b = h.get(loop.name, [])
            what = "insert -> complete" if "-Q" in name else "issue -> complete"
            rows.append((name, what + ", 2x buckets", quantile(b, 0.5), quantile(b, 0.99),
                         "%d" % sum(c for _, c in b)))
        for key, label, what in (("clat_ns", "fio clat", "io_submit returned -> reaped"),
                                 ("lat_ns", "fio lat", "io_submit called -> reaped")):
            pct = r.get(key, {}).get("percentile", {})
            rows.append((label, what, pct.get("50.000000", 0) / 1e9 or None,
                         pct.get("99.000000", 0) / 1e9 or None, "%d" % r["total_ios"]))
        print("\niodepth %d: %.0f IOPS (kernel %s)" % (depth, r["iops"], os.uname().release))
        print("| source | measures | p50 | p99 | I/Os |")
        print("|---|---|---|---|---|")
        for label, what, p50, p99, n in rows:
            print("| %s | %s | %s | %s | %s |" % (label, what, fmt_s(p50), fmt_s(p99), n))


def overhead(binary, loop, seconds, runs, depth, numjobs, collector):
    on_args = daemon_args(loop, collector)
    off_args = on_args + (["--no-collector.biolatency"] if collector else [])
    print("\n## Overhead: fio randread 4 KiB direct, libaio iodepth %d x %d jobs on %s, %d s runs, "
          "%d pairs%s" % (depth, numjobs, loop.dev, seconds, runs,
                          "" if collector else " (DRY RUN: no biolatency collector, both modes "
                          "identical: the method's noise floor)"))
    per = {True: [], False: []}
    lost, cpu_diff = [], []
    for i in range(runs):
        pair = {}
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            with dp.Daemon(binary, *(on_args if on else off_args)) as d:
                if on and collector:
                    dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_io_latency_up") == 1, 20)
                time.sleep(1)
                c0 = cpu_busy_ns()
                r = fio(loop.dev, seconds, depth, numjobs)
                c1 = cpu_busy_ns()
            pair[on] = (r["iops"], (c1 - c0) / max(r["total_ios"], 1))
            per[on].append(pair[on])
        lost.append((pair[False][0] - pair[True][0]) / pair[False][0] * 100)
        cpu_diff.append(pair[True][1] - pair[False][1])

    def ci(xs):
        return 1.96 * statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")
    print("| mode | IOPS (runs) | CPU ns per I/O (runs) |")
    print("|---|---|---|")
    for on, name in ((False, "--no-collector.biolatency" if collector else "A"),
                     (True, "biolatency on" if collector else "A again")):
        print("| %s | %s | %s |" % (name, " ".join("%.0f" % x for x, _ in per[on]),
                                    " ".join("%.0f" % y for _, y in per[on])))
    print("\nIOPS lost with the collector: %+.2f %% +- %.2f %% (95 %%, %d pairs; target < 2 %%)" %
          (statistics.mean(lost), ci(lost), runs))
    print("CPU per I/O added by the collector: %+.1f ns +- %.1f ns (95 %%; target < 50 ns)" %
          (statistics.mean(cpu_diff), ci(cpu_diff)))
    if collector:
        cost = bpf_cost(binary, loop, seconds, depth, numjobs)
        if cost:
            print("BPF programs (%s), kernel.bpf_stats_enabled: %.1f ns per I/O in %.2f runs per I/O" %
                  (cost[2] or "none found", cost[0], cost[1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--seconds", type=int, default=20, help="each fio run (default 20)")
    ap.add_argument("--runs", type=int, default=3, help="overhead pairs (default 3)")
    ap.add_argument("--iodepths", default="1,32", help="accuracy queue depths (default 1,32)")
    ap.add_argument("--overhead-iodepth", type=int, default=32)
    ap.add_argument("--numjobs", type=int, default=2)
    ap.add_argument("--size-mb", type=int, default=1024, help="the loop device (default 1024)")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (loop device, BPF)")
        return 1
    if not shutil.which("fio"):
        print("needs fio (Debian package fio)")
        return 1
    collector = has_collector(a.binary)
    print("# bench_biolatency: %s, %s, kernel %s, %d CPUs" %
          (a.binary, "biolatency collector" if collector else "NO biolatency collector (dry run)",
           os.uname().release, os.cpu_count()))
    loop = LoopOnTmpfs(a.size_mb)
    try:
        if not a.skip_accuracy:
            accuracy(a.binary, loop, a.seconds, [int(x) for x in a.iodepths.split(",")], collector)
        if not a.skip_overhead:
            overhead(a.binary, loop, a.seconds, a.runs, a.overhead_iodepth, a.numjobs, collector)
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
