"""Block devices created and removed while the daemon runs gain and lose their series within 2 s."""
import errno
import fcntl
import mmap
import os
import random
import shutil
import subprocess
import tempfile
import time

import dp

INCLUDE = "^loop2[0-9][0-9]$"
DEADLINE = 2.0  # seconds a device may take to appear in / vanish from the page
POLL = 0.02


def proc_diskstats(name):
    """The fields of name's line in /proc/diskstats (ints after major, minor, name), or None."""
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if len(p) >= 14 and p[2] == name:
                return [int(x) for x in p[3:]]
    return None


def sys_dev(name):
    with open("/sys/block/%s/dev" % name) as f:
        major, minor = f.read().strip().split(":")
    return major, minor


def device_series(metrics, name):
    return sorted(n for (n, ls), _ in metrics.items() if ("device", name) in ls)


def healthy(d):
    try:
        return d.proc.poll() is None and dp.http_get(d.url + "/-/healthy", timeout=2)[0] == 200
    except OSError:
        return False


def wait_for(d, cond, t0, timeout):
    """Scrapes until cond(metrics) holds; returns (seconds since t0, metrics) or (None, last)."""
    m = None
    while True:
        m = d.scrape()
        if cond(m):
            return time.monotonic() - t0, m
        if time.monotonic() - t0 > timeout:
            return None, m
        time.sleep(POLL)


def appear_and_vanish(d, ctl, label, prepare=None):
    """Adds a loop device, checks it shows up, optionally runs prepare(n), removes it, checks
    its series vanish. Returns (appear latency, vanish latency)."""
    before = d.scrape()
    devices0 = dp.value(before, "diskpulse_disk_devices")
    dp.check(devices0 is not None, "%s: diskpulse_disk_devices present before (%s)" % (label, devices0))
    n = None
    added = False
    lat_add = lat_rm = None
    try:
        t_add = time.monotonic()
        n = dp.loop_add(ctl, 200, 299)
        print("%s: LOOP_CTL_ADD took %.3f s" % (label, time.monotonic() - t_add))
        added = True
        name = "loop%d" % n
        dp.check(device_series(before, name) == [],
                 "%s: no %s series before it exists (%s)" % (label, name, device_series(before, name)))
        dp.check(os.path.exists("/sys/block/" + name), "%s: /sys/block/%s exists after LOOP_CTL_ADD" % (label, name))
        major, minor = sys_dev(name)

        def present(m):
            return (dp.value(m, "diskpulse_disk_info", device=name) is not None
                    and dp.value(m, "diskpulse_disk_reads_completed_total", device=name) is not None)

        lat, m = wait_for(d, present, t_add, DEADLINE + 1)
        lat_add = lat
        dp.check(lat is not None and lat <= DEADLINE,
                 "%s: %s appeared on the page within %.1f s (took %s)" % (
                     label, name, DEADLINE, "%.3f s" % lat if lat is not None else "forever"))
        info = [ls for (nm, ls), _ in m.items() if nm == "diskpulse_disk_info" and ("device", name) in ls]
        got = dict(info[0]) if len(info) == 1 else {}
        dp.check((got.get("major"), got.get("minor")) == (major, minor),
                 "%s: diskpulse_disk_info{device=%s} major:minor %s:%s == /sys/block/%s/dev %s:%s" % (
                     label, name, got.get("major"), got.get("minor"), name, major, minor))
        devices1 = dp.value(m, "diskpulse_disk_devices")
        dp.check(devices0 is not None and devices1 == devices0 + 1,
                 "%s: diskpulse_disk_devices grew by one (%s -> %s)" % (label, devices0, devices1))
        dp.check(healthy(d), "%s: daemon healthy after the device appeared" % label)

        # Latencies are counted from the start of the ioctl: the kernel announces the
        # device (uevent) while the call is still running.
        if prepare:
            prepare(n, name)

        m = d.scrape()
        dp.check(present(m), "%s: %s series still on the page right before LOOP_CTL_REMOVE" % (label, name))
        t_rm = time.monotonic()
        dp.loop_remove(ctl, n)
        print("%s: LOOP_CTL_REMOVE took %.3f s" % (label, time.monotonic() - t_rm))
        added = False
        lat, m = wait_for(d, lambda m: device_series(m, name) == [], t_rm, DEADLINE + 1)
        lat_rm = lat
        dp.check(lat is not None and lat <= DEADLINE,
                 "%s: every %s series vanished within %.1f s (took %s; left: %s)" % (
                     label, name, DEADLINE, "%.3f s" % lat if lat is not None else "forever",
                     device_series(m, name)[:5]))
        devices2 = dp.value(m, "diskpulse_disk_devices")
        dp.check(devices2 == devices0,
                 "%s: diskpulse_disk_devices back to %s (is %s)" % (label, devices0, devices2))
        dp.check(healthy(d), "%s: daemon healthy after the device vanished" % label)
    finally:
        if added and n is not None:
            subprocess.run(["losetup", "-d", "/dev/loop%d" % n], capture_output=True)
            try:
                dp.loop_remove(ctl, n)
            except OSError as e:
                print("cleanup: cannot remove loop%d: %s" % (n, e))
    return lat_add, lat_rm


def main():
    binary = dp.loop_test_binary("test_hotplug.py", "loop devices")
    if shutil.which("losetup") is None:
        dp.skip("losetup (util-linux) is missing")

    t_start = time.monotonic()
    ctl = os.open(dp.LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
    tmp = tempfile.mkdtemp(prefix="dp-hotplug-")
    latencies = {}
    try:
        with dp.Daemon(binary, "--collector.diskstats.device-include=" + INCLUDE) as d:
            dp.check(healthy(d), "daemon healthy with --collector.diskstats.device-include=%s" % INCLUDE)

            latencies["bare"] = appear_and_vanish(d, ctl, "bare")

            backing = os.path.join(tmp, "backing.img")
            with open(backing, "wb") as f:
                f.truncate(8 << 20)

            def bind_and_write(n, name):
                dev = "/dev/" + name
                r = subprocess.run(["losetup", dev, backing], capture_output=True, text=True)
                if not dp.check(r.returncode == 0, "losetup %s %s (%s)" % (dev, backing, r.stderr.strip())):
                    return
                try:
                    write_and_compare(d, dev, name)
                finally:
                    r = subprocess.run(["losetup", "-d", dev], capture_output=True, text=True)
                    dp.check(r.returncode == 0, "losetup -d %s (%s)" % (dev, r.stderr.strip()))

            latencies["backed"] = appear_and_vanish(d, ctl, "backed", bind_and_write)
            dp.check(d.proc.poll() is None, "daemon still running at the end")
    finally:
        os.close(ctl)
        shutil.rmtree(tmp, ignore_errors=True)

    for k, (a, r) in latencies.items():
        print("latency %-6s appear %s  vanish %s" % (
            k, "%.3f s" % a if a is not None else "-", "%.3f s" % r if r is not None else "-"))
    print("runtime %.1f s" % (time.monotonic() - t_start))
    dp.finish()


def write_and_compare(d, dev, name):
    """Writes and reads with O_DIRECT, then checks the daemon's counters against /proc/diskstats."""
    nwrites, bs = 64, 4096
    buf = mmap.mmap(-1, bs)  # page aligned, as O_DIRECT wants
    buf.write(b"diskpulse" * (bs // 9) + b"\0" * (bs % 9))
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT | os.O_CLOEXEC)
    try:
        written = sum(os.pwrite(fd, buf, i * bs) for i in range(nwrites))
        dp.check(written == nwrites * bs, "%d O_DIRECT writes of %d bytes to %s (%d bytes)" % (
            nwrites, bs, dev, written))
        for i in range(8):
            os.preadv(fd, [buf], i * bs)
        os.fsync(fd)
    finally:
        os.close(fd)
    before = proc_diskstats(name)
    dp.check(before is not None and before[4] >= nwrites,
             "%s: /proc/diskstats counts our %d writes (%s)" % (name, nwrites, before and before[4]))
    # The daemon samples each second: a scrape one interval and a bit later reflects
    # a sample taken after 'before'; 'after' is read right after the scrape.
    time.sleep(1.2)
    m = d.scrape()
    after = proc_diskstats(name)
    w = dp.value(m, "diskpulse_disk_writes_completed_total", device=name)
    wb = dp.value(m, "diskpulse_disk_written_bytes_total", device=name)
    r = dp.value(m, "diskpulse_disk_reads_completed_total", device=name)
    print("%s: /proc/diskstats before %s after %s; daemon writes=%s written_bytes=%s reads=%s" % (
        name, before[:8], after[:8], w, wb, r))
    dp.check(w is not None and w > 0, "%s: diskpulse_disk_writes_completed_total non-zero (%s)" % (name, w))
    dp.check(w is not None and before[4] <= w <= after[4],
             "%s: diskpulse_disk_writes_completed_total %s equals /proc/diskstats %s (allowing only "
             "increases after the sample: %s..%s)" % (name, w, after[4], before[4], after[4]))
    dp.check(wb is not None and before[6] * 512 <= wb <= after[6] * 512,
             "%s: diskpulse_disk_written_bytes_total %s equals /proc/diskstats sectors*512 %s" % (
                 name, wb, after[6] * 512))
    dp.check(r is not None and before[0] <= r <= after[0] and r >= 8,
             "%s: diskpulse_disk_reads_completed_total %s equals /proc/diskstats %s" % (name, r, after[0]))


if __name__ == "__main__":
    main()
