#!/usr/bin/env python3
"""Benchmark: the canary's impact at its defaults (one fdatasync target, 4 KiB every 10 s) on an
ext4 filesystem on a loop device: bytes written and flushes per probe and per hour, measured from
the device's diskstats against an idle window of the same length (with the default mount options
and with lazytime), and the IOPS that concurrent fio jobs lose while the canary runs: pairs of
runs without and with the daemon, in alternating order, reported as the mean of the per-pair
differences with a 95 % interval. Needs root. Prints numbers; asserts nothing.
Usage: bench_canary.py BINARY [SECONDS_PER_WINDOW (180)] [FIO_SECONDS (10)] [PAIRS (8)]"""
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import dp  # noqa: E402

SECTOR = 512
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


def window(fs, seconds, daemon_args=None):
    """(sectors written, writes, flushes, busy ms, probes) on fs.dev during seconds, with or
    without the daemon running daemon_args."""
    d = dp.Daemon(BIN, *daemon_args) if daemon_args is not None else None
    try:
        if d:  # start counting at the first probe (the file is prepared before it)
            dp.wait_until(lambda: (dp.value(d.scrape(), "diskpulse_sync_probes_total") or 0) >= 1, 30)
        p0 = dp.value(d.scrape(), "diskpulse_sync_probes_total") if d else 0
        c0 = counters(fs.dev)
        time.sleep(seconds)
        c1 = counters(fs.dev)
        p1 = dp.value(d.scrape(), "diskpulse_sync_probes_total") if d else 0
    finally:
        if d:
            d.stop()
            d.__exit__()
    return [b - a for a, b in zip(c0, c1)] + [p1 - p0]


def fio_iops(path, args, seconds):
    out = subprocess.run(["fio", "--name=bench", "--filename=" + path, "--size=128M", "--time_based",
                          "--runtime=%d" % seconds, "--output-format=json"] + args,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["jobs"][0]["write"]["iops"]


def main():
    if os.geteuid() != 0:
        print("needs root (loop device, mount)")
        return 1
    secs = int(sys.argv[2]) if len(sys.argv) > 2 else 180
    fio_secs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    with dp.LoopFs(size_mb=512, mkfs_args=["-E", "lazy_itable_init=0,lazy_journal_init=0"]) as fs:
        state = os.path.join(fs.mnt, "state")
        os.mkdir(state)
        args = ["--no-collector.smart", "--state.directory=" + state]  # defaults otherwise
        for opts in ("defaults", "lazytime"):
            if opts == "lazytime":
                subprocess.run(["mount", "-o", "remount,lazytime", fs.mnt], check=True)
            time.sleep(6)  # let the last journal commit pass
            idle = window(fs, secs)
            busy = window(fs, secs, args)
            probes = busy[4]
            print("canary at defaults (interval 10s, size 4096, fdatasync) on ext4/%s mounted with %s, "
                  "%d s windows:" % (fs.dev, opts, secs))
            print("  idle:   %d sectors, %d writes, %d flushes, busy %d ms" % tuple(idle[:4]))
            print("  canary: %d sectors, %d writes, %d flushes, busy %d ms, %d probes" % tuple(busy))
            if probes:
                per = [(b - i) / probes for b, i in zip(busy[:4], idle[:4])]
                print("  per probe: %.0f bytes written in %.1f writes, %.2f flushes, device busy %.2f ms" %
                      (per[0] * SECTOR, per[1], per[2], per[3]))
                print("  per hour at 10 s: %.2f MiB written, %d flushes, device busy %.3f %% of the time" %
                      (per[0] * SECTOR * 360 / 2 ** 20, round(per[2] * 360), per[3] * 360 / 3600e3 * 100))
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
