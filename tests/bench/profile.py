#!/usr/bin/env python3
"""Instruction counts of the hot paths under valgrind --tool=callgrind, which a busy machine does
not change: per sampling round (parse of /proc/diskstats, the sample with its ring and identity
bookkeeping, derivation and export into the metric model, rendering of the text and OpenMetrics
pages, gzip, freeing the snapshot) from bench_hotpaths, and per HTTP request of the real daemon
(a keep-alive client asking for the cached page, text and gzip), for trees of tests/bench/fixture.py.

Usage: profile.py BUILD_DIR [--sizes 2,100,1000] [--rounds 5] [--churn] [--requests 200]
BUILD_DIR holds diskpulse and tests/bench_hotpaths (cmake --preset ci, or any build with tests).
Prints a Markdown table; asserts nothing."""
import argparse
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture  # noqa: E402

STAGES = [
    ("stage_parse", "parse diskstats"),
    ("stage_sample", "sample: read, parse, ring"),
    ("stage_export", "derive + export the metric set"),
    ("stage_text", "render the text page"),
    ("stage_text_gzip", "gzip it"),
    ("stage_openmetrics", "render the OpenMetrics page"),
    ("stage_openmetrics_gzip", "gzip it"),
    ("stage_free", "free the snapshot"),
    ("stage_identity", "identity refresh of every device (once)"),
]


def callgrind(cmd, outdir):
    """Runs cmd under callgrind; returns the output file names (one per process)."""
    subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=no", "--compress-strings=no",
                    "--callgrind-out-file=" + os.path.join(outdir, "cg.%p")] + cmd,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return sorted(os.path.join(outdir, f) for f in os.listdir(outdir) if f.startswith("cg."))


def inclusive(path):
    """{function: inclusive Ir} and the program's total, from callgrind_annotate."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                         check=True, capture_output=True, text=True).stdout
    funcs, total = {}, 0
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+) \([^)]*\)\s+(.*?)(?: \[.*\])?$", line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        if m.group(2) == "PROGRAM TOTALS":
            total = ir
            continue
        name = m.group(2).rsplit(":", 1)[-1]
        funcs[name] = funcs.get(name, 0) + ir
    return funcs, total


def stage_counts(hot, root, rounds, churn):
    """{stage: instructions per call} from one bench_hotpaths run."""
    d = tempfile.mkdtemp(prefix="diskpulse-cg-")
    try:
        cmd = [hot, root, str(rounds)] + (["churn"] if churn else [])
        files = callgrind(cmd, d)
        funcs, _ = inclusive(files[0])
        return {name: funcs.get(name, 0) / (1 if name == "stage_identity" else rounds)
                for name, _ in STAGES}
    finally:
        shutil.rmtree(d)


def http_counts(binary, root, requests):
    """Instructions of the whole daemon per request (text, gzip), from two runs that differ only
    in the number of requests."""
    res = {}
    for form, headers in (("text", {}), ("gzip", {"Accept-Encoding": "gzip"})):
        totals = []
        for k in (10, 10 + requests):
            d = tempfile.mkdtemp(prefix="diskpulse-cg-")
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    port = s.getsockname()[1]
                args = [binary, "--web.listen-address=127.0.0.1:%d" % port,
                        "--path.procfs=" + root + "/proc", "--path.sysfs=" + root + "/sys",
                        "--path.udev.data=" + root + "/udev",
                        "--collector.diskstats.device-exclude=" + fixture.DEVICE_EXCLUDE,
                        "--no-collector.smart", "--no-collector.canary",
                        "--diskstats.interval=1h", "--diskstats.window=1h",
                        "--state.directory=" + d + "/state",
                        "--log.level=error"]
                p = subprocess.Popen(["valgrind", "--tool=callgrind", "--dump-instr=no",
                                      "--callgrind-out-file=" + os.path.join(d, "cg.%p")] + args,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                deadline = time.monotonic() + 120
                conn = None
                while True:
                    if p.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the daemon did not start: %s" % " ".join(args))
                    try:
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                        conn.request("GET", "/metrics", headers=headers)
                        r = conn.getresponse()
                        r.read()
                        if r.status == 200:
                            break
                    except OSError:
                        time.sleep(0.2)
                for _ in range(k - 1):
                    conn.request("GET", "/metrics", headers=headers)
                    conn.getresponse().read()
                conn.close()
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=120)
                mine = os.path.join(d, "cg.%d" % p.pid)
                totals.append(inclusive(mine)[1])
            finally:
                shutil.rmtree(d)
        res[form] = (totals[1] - totals[0]) / requests
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--sizes", default="2,100,1000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--churn", action="store_true", help="every counter changes every round")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--no-http", action="store_true")
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed")
        return 77
    hot = os.path.join(a.build, "tests", "bench_hotpaths")
    binary = os.path.join(a.build, "diskpulse")
    if b"__asan_init" in open(hot, "rb").read():
        print("SKIP: a sanitizer build; valgrind counts instructions of the plain build")
        return 77
    sizes = [int(s) for s in a.sizes.split(",")]
    rows = {}
    for n in sizes:
        root = fixture.tempdir("diskpulse-tree-")
        try:
            fixture.make_tree(root, n)
            rows[n] = stage_counts(hot, root, a.rounds, a.churn)
            if not a.no_http:
                h = http_counts(binary, root, a.requests)
                rows[n]["http text"] = h["text"]
                rows[n]["http gzip"] = h["gzip"]
        finally:
            shutil.rmtree(root)
    print("Instructions (callgrind Ir) per sampling round%s, per request for HTTP:\n"
          % (", every counter changing" if a.churn else ", counters unchanged"))
    print("| stage | " + " | ".join("%d devices" % n for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    labels = STAGES + [("http text", "HTTP request, text page (cached)"),
                       ("http gzip", "HTTP request, gzip page (cached)")]
    for key, label in labels:
        vals = ["-" if rows[n].get(key) is None else "{:,.0f}".format(rows[n][key]) for n in sizes]
        print("| %s | %s |" % (label, " | ".join(vals)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
