#!/usr/bin/env python3
"""Benchmark: memory, CPU per sampling round and per scrape, and scrape latency of the real daemon
on synthetic fixture trees of 10 to 10,000 devices, for the text format, gzip and OpenMetrics (each
scrape after a new sample renders, and compresses, anew). Prints numbers; asserts nothing.
Usage: bench_scrape.py BINARY [DEVICES ...]"""
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import dp  # noqa: E402


def make_tree(root, n):
    os.makedirs(os.path.join(root, "proc"))
    with open(os.path.join(root, "proc", "uptime"), "w") as f:
        f.write("100000.00 190000.00\n")
    with open(os.path.join(root, "proc", "diskstats"), "w") as f:
        for i in range(n):
            name = "sd%s" % "".join(chr(97 + (i // 26 ** k) % 26) for k in range(3))
            f.write("%4d %7d %s %s\n" % (8 + i // 256, i % 256, name,
                                         " ".join(str(i * 1000 + j * 7) for j in range(17))))
            q = os.path.join(root, "sys", "block", name, "queue")
            os.makedirs(q)
            with open(os.path.join(q, "rotational"), "w") as g:
                g.write("0\n")
    os.makedirs(os.path.join(root, "udev"))


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    """CPU time of all the process's threads, in nanoseconds precision (schedstat)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            total += int(open("/proc/%d/task/%s/schedstat" % (pid, tid)).read().split()[0])
        except OSError:
            pass
    return total / 1e9


FORMS = (("text", {}), ("gzip", {"Accept-Encoding": "gzip"}),
         ("openmetrics", {"Accept": "application/openmetrics-text"}))


def measure(d, pid, idle, scrapes, headers):
    """CPU per scrape beyond the sampling (seconds), latencies (sorted) and the page size."""
    lat = []
    size = 0
    c0, t0 = cpu_seconds(pid), time.monotonic()
    for _ in range(scrapes):
        s = time.perf_counter()
        size = len(dp.http_get(d.url + "/metrics", timeout=30, headers=headers)[2])
        lat.append(time.perf_counter() - s)
    wall = time.monotonic() - t0
    lat.sort()
    return max(0.0, (cpu_seconds(pid) - c0) - idle * wall) / scrapes, lat, size


def bench(binary, n):
    root = tempfile.mkdtemp(prefix="diskpulse-bench-")
    try:
        make_tree(root, n)
        args = ["--path.procfs=" + root + "/proc", "--path.sysfs=" + root + "/sys",
                "--path.udev.data=" + root + "/udev", "--collector.diskstats.device-include=.",
                "--no-collector.canary"]
        with dp.Daemon(binary, *args) as d:
            pid = d.proc.pid
            time.sleep(2)
            c0, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(5)
            idle = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
            scrapes = 200 if n <= 1000 else 30
            for i, (form, headers) in enumerate(FORMS):
                per_scrape, lat, size = measure(d, pid, idle, scrapes, headers)
                head = ("%6d devices: RSS %6d KiB, sampling %.2f%% of a core, " % (n, rss_kib(pid), idle * 100)
                        if i == 0 else " " * 63)
                print("%s%-11s %.2f ms CPU/scrape, latency p50 %.2f ms p99 %.2f ms, page %d KiB"
                      % (head, form, per_scrape * 1000, statistics.median(lat) * 1000,
                         lat[int(len(lat) * 0.99) - 1] * 1000, size // 1024))
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    for count in [int(a) for a in sys.argv[2:]] or [10, 100, 1000, 10000]:
        bench(sys.argv[1], count)
