"""The daemon's derived disk gauges agree within 5% with sysstat's iostat -x over the same 10 s window."""
import errno
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dp

LOOP_CONTROL = "/dev/loop-control"
LOOP_CTL_ADD = 0x4C80
LOOP_CTL_REMOVE = 0x4C81
BACKING_MB = 64
RAMP = 3.0      # seconds of load before the compared window starts
WINDOW = 10     # iostat's interval and the daemon's --diskstats.window, seconds
REL = 0.05      # the bound: 5% relative ...
ROUND = 0.005   # ... or the rounding of iostat's "%.2f", in iostat's unit

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

# Steady loads on the loop device, each compared over its own iostat window. fio's arguments
# without --filename and --runtime. Each must make the listed iostat keys non-zero, so the
# comparison of those is not 0 against 0.
LOADS = [
    ("randwrite", ["--rw=randwrite", "--bs=4k", "--rate_iops=300", "--ioengine=psync"],
     ["w/s", "wkB/s", "w_await", "util", "aqu-sz"]),
    ("mixed", ["--rw=randrw", "--rwmixread=50", "--bs=16k", "--rate_iops=150,150",
               "--ioengine=psync", "--fsync=8"],
     ["r/s", "w/s", "rkB/s", "wkB/s", "r_await", "w_await", "f_await", "util", "aqu-sz"]),
]


def loop_add(ctl):
    nums = [n for n in range(300, 400) if not os.path.exists("/sys/block/loop%d" % n)]
    random.shuffle(nums)
    for n in nums:
        try:
            return fcntl.ioctl(ctl, LOOP_CTL_ADD, n)
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise
    raise RuntimeError("no free loop device number in 300..399")


def loop_remove(ctl, n, timeout=5.0):
    end = time.monotonic() + timeout
    while True:
        try:
            fcntl.ioctl(ctl, LOOP_CTL_REMOVE, n)
            return
        except OSError as e:
            if e.errno in (errno.ENODEV, errno.ENXIO):
                return
            if e.errno != errno.EBUSY or time.monotonic() > end:
                raise
            time.sleep(0.05)


def iostat_report(name):
    """Runs iostat for one WINDOW-second report of name; returns its disk dict."""
    p = subprocess.run(["iostat", "-dx", "-y", "-o", "JSON", str(WINDOW), "1", name],
                       capture_output=True, text=True, timeout=WINDOW + 10)
    if p.returncode != 0:
        raise RuntimeError("iostat failed (%d): %s" % (p.returncode, p.stderr))
    doc = json.loads(p.stdout)
    disks = doc["sysstat"]["hosts"][0]["statistics"][-1]["disk"]
    found = [x for x in disks if x["disk_device"] == name]
    if len(found) != 1:
        raise RuntimeError("iostat reported no %s: %s" % (name, p.stdout))
    return found[0]


def compare(label, io, m, name, nonzero, worst):
    for key, gauge, factor in PAIRS:
        if key not in io:
            dp.check(False, "%s: iostat printed %s" % (label, key))
            continue
        want = io[key] * factor
        got = dp.value(m, gauge, device=name)
        if got is None:
            dp.check(False, "%s: %s{device=%s} on the page" % (label, gauge, name))
            continue
        tol = max(REL * abs(want), ROUND * factor)
        diff = got - want
        rel = abs(diff) / abs(want) if want else (0.0 if got == 0 else float("inf"))
        worst[key] = max(worst.get(key, 0.0), rel)
        dp.check(abs(diff) <= tol,
                 "%s: %-7s %10.2f -> %-12.6g %s = %-12.6g diff %+.3g (%.2f%%, bound %.3g)" % (
                     label, key, io[key], want, gauge, got, diff, 100 * rel, tol))
        if key in nonzero:
            dp.check(io[key] > 0, "%s: the load made iostat's %s non-zero (%.2f)" % (label, key, io[key]))


def main():
    if len(sys.argv) != 2:
        print("usage: test_iostat.py DISKPULSE_BINARY")
        sys.exit(2)
    binary = sys.argv[1]
    if os.geteuid() != 0:
        dp.skip("needs root (creates a loop device)")
    if not os.path.exists(LOOP_CONTROL):
        dp.skip(LOOP_CONTROL + " is missing (no loop driver)")
    for tool, pkg in (("iostat", "sysstat"), ("fio", "fio"), ("losetup", "util-linux")):
        if shutil.which(tool) is None:
            dp.skip("%s is missing (install the %s package)" % (tool, pkg))

    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="dp-iostat-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    ctl = os.open(LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
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
        n = loop_add(ctl)
        name = "loop%d" % n
        dev = "/dev/" + name
        r = subprocess.run(["losetup", "--direct-io=on", dev, backing], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("losetup --direct-io=on %s: %s" % (dev, r.stderr.strip()))
        bound = True
        with open("/sys/block/%s/loop/dio" % name) as f:
            print("%s over %s, direct I/O %s" % (dev, backing, f.read().strip()))

        with dp.Daemon(binary, "--diskstats.interval=100ms", "--diskstats.window=%ds" % WINDOW,
                       "--collector.diskstats.device-include=^%s$" % name) as d:
            for label, fio_args, nonzero in LOADS:
                runtime = int(RAMP + WINDOW + 5)
                fio = subprocess.Popen(
                    ["fio", "--name=" + label, "--filename=" + dev, "--direct=1", "--time_based",
                     "--runtime=%d" % runtime, "--output-format=terse"] + fio_args,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                try:
                    time.sleep(RAMP)
                    if fio.poll() is not None:
                        raise RuntimeError("fio exited early: %s" % fio.stderr.read())
                    t0 = time.monotonic()
                    io = iostat_report(name)
                    t1 = time.monotonic()
                    m = d.scrape()
                    t2 = time.monotonic()
                    dp.check(fio.poll() is None, "%s: fio still running when the window closed" % label)
                finally:
                    if fio.poll() is None:
                        fio.send_signal(signal.SIGINT)
                    try:
                        fio.wait(10)
                    except subprocess.TimeoutExpired:
                        fio.kill()
                        fio.wait()
                print("%s: iostat ran %.3f s; scrape %.3f s after it returned" % (label, t1 - t0, t2 - t1))
                compare(label, io, m, name, nonzero, worst)
            dp.check(d.proc.poll() is None, "daemon still running at the end")
    finally:
        if bound:
            subprocess.run(["losetup", "-d", "/dev/loop%d" % n], capture_output=True)
        if n is not None:
            try:
                loop_remove(ctl, n)
            except OSError as e:
                print("cleanup: cannot remove loop%d: %s" % (n, e))
        os.close(ctl)
        shutil.rmtree(tmp, ignore_errors=True)

    print("worst relative differences: " + ", ".join(
        "%s %.2f%%" % (k, 100 * v) for k, v in worst.items()))
    print("runtime %.1f s" % (time.monotonic() - t_start))
    dp.finish()


if __name__ == "__main__":
    main()
