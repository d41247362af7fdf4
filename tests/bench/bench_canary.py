#!/usr/bin/env python3
"""Benchmark: the canary's impact at its defaults (one fdatasync target; every 3 minutes a spaced
4 KiB probe and a burst of 16 back-to-back ones) on an ext4 filesystem (4 KiB blocks) on a loop
device: bytes written and flushes per cycle and per hour, measured from the device's diskstats
against an idle window of the same length (with the default mount options and with lazytime),
and the IOPS that concurrent fio jobs lose while the canary runs: pairs of runs without and with
the daemon, in alternating order, reported as the mean of the per-pair differences with a 95 %
interval (each run starts the daemon, so it holds the file's preparation and one cycle: a
harsher load than the defaults' one cycle every 3 minutes). Needs root. Prints numbers; asserts nothing.
Usage: bench_canary.py BINARY [SECONDS_PER_WINDOW (600)] [FIO_SECONDS (10)] [PAIRS (8)]
                       [DAEMON_FLAG ...]   (e.g. --canary.interval=10s --canary.burst=0;
                       a cycle costs the same at 1m as at 3m: --canary.interval=1m measures it sooner)"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import dp  # noqa: E402

SECTOR = 512
DEFAULT_INTERVAL = "3m"  # the daemon's --canary.interval and --canary.burst
DEFAULT_BURST = "16"
FIO_JOBS = {
    "randwrite 4k direct qd16": ["--rw=randwrite", "--bs=4k", "--direct=1", "--ioengine=libaio",
                                  "--iodepth=16"],
    "randwrite 4k + fdatasync each (a commit loop)": ["--rw=randwrite", "--bs=4k", "--ioengine=psync",
                                                       "--fdatasync=1"],
}


def counters(dev):
    """sectors written, writes, flushes, ms the device was busy (io_ticks)."""
    return (dp.diskstats_field(dev, 6), dp.diskstats_field(dev, 4), dp.diskstats_field(dev, 15),
            dp.diskstats_field(dev, 9))


def cycles(d):
    """Cycles the daemon d has completed: its idle regime's sample count."""
    return dp.value(d.scrape(), "diskpulse_sync_latency_seconds_count", regime="idle") or 0


def window(fs, seconds, daemon_args=None):
    """(sectors written, writes, flushes, busy ms, cycles, probes) on fs.dev during seconds,
    with or without the daemon running daemon_args."""
    d = dp.Daemon(BIN, *daemon_args) if daemon_args is not None else None
    try:
        if d:  # start counting after the first cycle (the file is prepared before it)
            dp.wait_until(lambda: cycles(d) >= 1, 30)
            time.sleep(1)
        n0, p0 = (cycles(d), dp.value(d.scrape(), "diskpulse_sync_probes_total")) if d else (0, 0)
        c0 = counters(fs.dev)
        time.sleep(seconds)
        c1 = counters(fs.dev)
        n1, p1 = (cycles(d), dp.value(d.scrape(), "diskpulse_sync_probes_total")) if d else (0, 0)
    finally:
        if d:
            d.stop()
            d.__exit__()
    return [b - a for a, b in zip(c0, c1)] + [n1 - n0, p1 - p0]


def seconds_of(text):
    """A duration as the daemon's flags take it (500ms, 10s, 1m30s, 1h) in seconds."""
    total, rest = 0.0, text
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text):
        total += float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600}[m.group(2)]
        rest = rest.replace(m.group(0), "", 1)
    if rest or not text:
        raise ValueError("not a duration: %r" % text)
    return total


def flag(args, name, default):
    for a in args:
        if a.startswith("--%s=" % name):
            return a.split("=", 1)[1]
    return default


def fio_iops(path, args, seconds):
    out = subprocess.run(["fio", "--name=bench", "--filename=" + path, "--size=128M", "--time_based",
                          "--runtime=%d" % seconds, "--output-format=json"] + args,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["jobs"][0]["write"]["iops"]


def main():
    if os.geteuid() != 0:
        print("needs root (loop device, mount)")
        return 1
    pos = [a for a in sys.argv[2:] if not a.startswith("--")]
    extra = [a for a in sys.argv[2:] if a.startswith("--")]
    secs = int(pos[0]) if len(pos) > 0 else 600
    fio_secs = int(pos[1]) if len(pos) > 1 else 10
    pairs = int(pos[2]) if len(pos) > 2 else 8
    interval = seconds_of(flag(extra, "canary.interval", DEFAULT_INTERVAL))
    burst = int(flag(extra, "canary.burst", DEFAULT_BURST))
    with dp.LoopFs(size_mb=512, mkfs_args=["-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0"]) as fs:
        state = os.path.join(fs.mnt, "state")
        os.mkdir(state)
        args = ["--no-collector.smart", "--state.directory=" + state] + extra  # defaults otherwise
        for opts in ("defaults", "lazytime"):
            if opts == "lazytime":
                subprocess.run(["mount", "-o", "remount,lazytime", fs.mnt], check=True)
            time.sleep(6)  # let the last journal commit pass
            idle = window(fs, secs)
            busy = window(fs, secs, args)
            n = busy[4]
            print("canary (interval %gs, burst %d, size 4096, fdatasync%s) on ext4/%s (kernel %s) mounted with "
                  "%s, %d s windows:" % (interval, burst, " " + " ".join(extra) if extra else "", fs.dev,
                                         os.uname().release, opts, secs))
            print("  idle:   %d sectors, %d writes, %d flushes, busy %d ms" % tuple(idle[:4]))
            print("  canary: %d sectors, %d writes, %d flushes, busy %d ms, %d cycles, %d probes" % tuple(busy))
            if n:
                per = [(b - i) / n for b, i in zip(busy[:4], idle[:4])]
                print("  per cycle (%d probes): %.0f bytes written in %.1f writes, %.2f flushes, device busy %.2f ms" %
                      (1 + burst, per[0] * SECTOR, per[1], per[2], per[3]))
                # A cycle costs the same at any interval longer than ext4's writeback of the
                # inode (about 30 s), so a shorter one measures the default's cycle sooner.
                dflt = seconds_of(DEFAULT_INTERVAL)
                for at in [interval] + ([dflt] if interval >= 30 and dflt != interval else []):
                    print("  per hour at %gs: %.2f MiB written, %d flushes, device busy %.3f %% of the time" %
                          (at, per[0] * SECTOR * 3600 / at / 2 ** 20, round(per[2] * 3600 / at),
                           per[3] * (3600 / at) / 3600e3 * 100))
        subprocess.run(["mount", "-o", "remount,nolazytime", fs.mnt], check=True)
        f = os.path.join(fs.mnt, "fio.dat")
        subprocess.run(["fio", "--name=prep", "--filename=" + f, "--size=128M", "--rw=write", "--bs=1M",
                        "--direct=1"], check=True, capture_output=True)
        for name, fargs in FIO_JOBS.items() if pairs > 0 else ():
            without, with_, diffs = [], [], []
            for i in range(pairs):
                pair = {}
                for canary in ((False, True) if i % 2 == 0 else (True, False)):
                    d = dp.Daemon(BIN, *args) if canary else None
                    try:
                        pair[canary] = fio_iops(f, fargs, fio_secs)
                    finally:
                        if d:
                            d.stop()
                            d.__exit__()
                without.append(pair[False])
                with_.append(pair[True])
                diffs.append((pair[True] - pair[False]) / pair[False] * 100)
            mean = statistics.mean(diffs)
            ci = 1.96 * statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
            print("fio %s, %d pairs of %d s: without %.0f IOPS, with the canary %.0f IOPS (means); "
                  "per-pair change %+.2f %% +- %.2f %% (95 %%)" %
                  (name, pairs, fio_secs, statistics.mean(without), statistics.mean(with_), mean, ci))
            print("    without: %s" % " ".join("%.0f" % x for x in without))
            print("    with:    %s" % " ".join("%.0f" % x for x in with_))
    return 0


if __name__ == "__main__":
    BIN = sys.argv[1]
    sys.exit(main())
