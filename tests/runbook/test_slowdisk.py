#!/usr/bin/env python3
"""A slow disk on this host, and the runbook's sections of slow commits and slow devices where
their alerts fire. The disk (DEV) is a loop device in direct I/O mode over a file of a lower loop
device, whose writes from the test's blkio cgroup are throttled (blkio.throttle.write_iops_device,
cgroup v1, or io.max on cgroup v2): a request issued to DEV waits in its loop worker for the
throttled write below, so DEV's await, queue and block-layer device time grow as a slow drive's
do, and so does an fdatasync on its ext4. PEER is a loop device like it, unthrottled. In the
cgroup: the daemon (its canary on DEV's filesystem), a fio load of 16 random writes in flight on
DEV, and the runbook's commands (their ioping is a writer like any other). A live Prometheus with
the shipped rules shows DiskpulseSyncLatencyHigh, DiskpulseDiskSaturated, DiskpulseDiskLatencyHigh
and DiskpulseIoWriteTailLatencyHigh firing (their for: shortened); then each section's commands
show it: probes and ioping over 100 ms, aqu-sz over 4 and w_await over 250 ms in iostat, fio
named by pidstat, biolatency's tail beyond 32 ms for DEV, DEV's w_await well above PEER's.
DiskpulseDriveSlowerThanPeers is a fleet's central alert (fleet/backfill and fleet/live show it
firing); its host commands run here on DEV and PEER, with DEV's canary against a reference ten
times faster (a state-file record, DEV's serial from a udev database of the test's own).
Usage: test_slowdisk.py BINARY"""
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

import situation
from situation import check, dp
from runbook import Expect, has, run_section

RUNBOOK_SECTIONS = {
    "DiskpulseSyncLatencyHigh": "fdatasync on a loop disk whose writes below are throttled",
    "DiskpulseDiskSaturated": "16 random writes in flight on that disk",
    "DiskpulseDiskLatencyHigh": "the same: await over 250 ms",
    "DiskpulseIoWriteTailLatencyHigh": "the same: device time over 50 ms",
    "DiskpulseDriveSlowerThanPeers": "the host's commands on the slow disk and an unthrottled peer",
}
WIOPS = 40      # writes a second below DEV, for the test's cgroup
BEGAN = time.time()
SERIAL = "DPRB-SLOW-0001"


class Throttle:
    """A blkio cgroup of the test's own whose writes to the device majmin are limited to
    WIOPS a second; skips where this kernel has no blk-throttle."""

    def __init__(self, majmin):
        name = "diskpulse-rbslow-%d" % os.getpid()
        v1 = "/sys/fs/cgroup/blkio"
        if os.path.exists(os.path.join(v1, "blkio.throttle.write_iops_device")):
            self.path = os.path.join(v1, name)
            os.mkdir(self.path)
            with open(os.path.join(self.path, "blkio.throttle.write_iops_device"), "w") as f:
                f.write("%s %d\n" % (majmin, WIOPS))
        elif "io" in open("/sys/fs/cgroup/cgroup.controllers").read().split() if os.path.exists(
                "/sys/fs/cgroup/cgroup.controllers") else False:
            self.path = os.path.join("/sys/fs/cgroup", name)
            os.mkdir(self.path)
            with open(os.path.join(self.path, "io.max"), "w") as f:
                f.write("%s wiops=%d\n" % (majmin, WIOPS))
        else:
            dp.skip("no blk-throttle here (neither blkio.throttle.* nor io.max)")

    def add(self, pid):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write("%d\n" % pid)

    def runner(self, text, timeout):
        """runbook.run_local inside the cgroup."""
        import runbook
        return runbook.run_local('echo $$ > %s/cgroup.procs && %s' % (self.path, text), timeout)

    def close(self):
        """Ends what is left in the cgroup (fio's job processes outlive their parent's kill),
        then removes it."""
        for _ in range(100):
            try:
                pids = open(os.path.join(self.path, "cgroup.procs")).read().split()
                for pid in pids:
                    try:
                        os.kill(int(pid), 9)
                    except ProcessLookupError:
                        pass
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.2)
        print("note: could not remove %s" % self.path)


def iostat_reports(out, dev):
    """dev's lines of iostat -dx, each as {column: value}, in order."""
    header, rows = None, []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "Device":
            header = f
        elif f and f[0] == dev and header:
            rows.append(dict(zip(header[1:], (float(x) for x in f[1:]))))
    return rows


def ioping_median(out):
    v = [float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
         for m in re.finditer(r"request=\d+ time=([\d.]+) (us|ms|s)\b(?! \(warmup\))", out)]
    return statistics.median(v) if v else None


def tail_beyond(out, dev, ms):
    """Counts in biolatency's histogram of dev for buckets starting at ms or later."""
    n, mine = 0, False
    for line in out.splitlines():
        m = re.match(r"\s*disk = (\S+)", line)
        if m:
            mine = m.group(1) == dev
            continue
        m = re.match(r"\s*(\d+) -> (\d+)\s*:\s*(\d+)", line)
        if mine and m and int(m.group(1)) >= ms:
            n += int(m.group(3))
    return n


def main():
    # ctest's timeout sends SIGTERM: unwind, so that the devices, mounts and cgroup go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    binary = dp.loop_test_binary(__file__, "loop devices with ext4")
    situation.not_sanitized(binary)
    dp.need_loop_fs("fio", "iostat", "pidstat", "ioping", "biolatency", "curl")
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix="diskpulse-rbslow-")
    loops, mounts, procs, cg = [], [], [], None
    try:
        with dp.LoopFs(size_mb=400, prefix="diskpulse-rbslow-low-") as low:
            def disk(name):
                img = os.path.join(low.mnt, name + ".img")
                with open(img, "wb") as f:
                    f.truncate(128 << 20)
                dev = situation.run(["losetup", "-f", "--show", "--direct-io=on", img], check=True).stdout.strip()
                loops.append(dev)
                situation.run(["mkfs.ext4", "-q", dev], check=True)
                mnt = os.path.join(work, name)
                os.mkdir(mnt)
                situation.run(["mount", dev, mnt], check=True)
                mounts.append(mnt)
                return os.path.basename(dev), mnt
            dev, mnt = disk("slow")
            peer, peer_mnt = disk("peer")
            canary = os.path.join(mnt, "diskpulse-canary")
            os.mkdir(canary)
            cg = Throttle(open("/sys/block/%s/dev" % low.dev).read().strip())
            # DEV's identity, and a record of it ten times faster when new (the drift ratio).
            udev, state = os.path.join(work, "udev"), os.path.join(work, "state")
            os.mkdir(udev)
            os.mkdir(state)
            with open(os.path.join(udev, "b" + open("/sys/block/%s/dev" % dev).read().strip()), "w") as f:
                f.write("E:ID_SERIAL=%s\n" % SERIAL)
            now = int(time.time())
            with open(os.path.join(state, "canary-baselines"), "w") as f:
                f.write("diskpulse-canary-baselines 3\n")
                for regime in ("idle", "busy"):
                    f.write("disk=serial:%s mode=fdatasync path=%s regime=%s baseline=0.001 updates=900 "
                            "updated=%d warmup=- reference=0.001 refdays=final dayobs=- days=-\n"
                            % (SERIAL, canary, regime, now * 1000000))
            os.chmod(os.path.join(state, "canary-baselines"), 0o600)
            fio = ["fio", "--name=load", "--rw=randwrite", "--bs=4k", "--direct=1", "--ioengine=libaio",
                   "--size=32M", "--time_based", "--runtime=900", "--output=/dev/null"]
            # fio forks a process per job: each load in a session of its own, ended as a group,
            # its output not on ctest's pipe (which ctest waits on until every holder is gone)
            quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
            procs.append(subprocess.Popen(["sh", "-c", 'echo $$ > %s/cgroup.procs && exec "$@"' % cg.path, "sh"]
                                          + fio + ["--iodepth=16", "--filename=" + os.path.join(mnt, "fio.dat")],
                                          **quiet))
            # the peer writes too, at a rate it serves at once
            procs.append(subprocess.Popen(fio + ["--iodepth=1", "--rate_iops=20",
                                                 "--filename=" + os.path.join(peer_mnt, "fio.dat")], **quiet))
            with dp.Daemon(binary, "--canary.path=" + canary, "--canary.interval=1s", "--canary.burst=2",
                           "--canary.timeout=20s", "--no-collector.smart", "--path.udev.data=" + udev,
                           "--state.directory=" + state,
                           "--collector.diskstats.device-include=^(%s|%s)$" % (dev, peer)) as d:
                cg.add(d.proc.pid)
                with situation.Alerts(d.port, for_scale=600) as alerts:
                    sections(d, alerts, cg, dev, peer, canary)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        for m in mounts:
            situation.run(["umount", "-l", m])
        for l in loops:
            situation.run(["losetup", "-d", l])
        if cg:
            cg.close()
        shutil.rmtree(work, ignore_errors=True)
    print("took %.0f s" % (time.monotonic() - t0))
    dp.finish()


def sections(d, alerts, cg, dev, peer, canary):
    values = {"DIR": canary, "DEV": dev, "PEER": [peer], "localhost:9477": "127.0.0.1:%d" % d.port,
              "INSTANCE": "127.0.0.1:%d" % d.port}
    for name, labels in (("DiskpulseSyncLatencyHigh", dict(path=canary, regime="idle")),
                         ("DiskpulseDiskSaturated", dict(device=dev)),
                         ("DiskpulseDiskLatencyHigh", dict(device=dev)),
                         ("DiskpulseIoWriteTailLatencyHigh", dict(device=dev, op="write"))):
        alerts.wait_firing(name, 240, **labels)
    long = ["ioping -W -c 20 -s 4k -i 10 %s" % canary, "iostat -dxy 60 3 %s %s" % (dev, peer)]
    import host
    runner = host.prefetch(cg.runner, long)

    def last(col, op, bound, reports_of=dev):
        def chk(rc, out):
            rows = iostat_reports(out, reports_of)
            v = rows[-1].get(col) if rows else None
            ok = v is not None and (v > bound if op == ">" else v < bound)
            return ok, "%s of %s in the last report: %s (%s %s)" % (col, reports_of, v, op, bound)
        return chk

    def both(*checks):
        def chk(rc, out):
            res = [c(rc, out) for c in checks]
            return all(r[0] for r in res), "; ".join(r[1] for r in res)
        return chk

    def quiet_kernel(rc, out):
        """No error of DEV since the test made it (a loop device's number is used again: the
        kernel log keeps what earlier ones said)."""
        def since(line):
            m = re.match(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]", line)
            return not m or time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")) >= BEGAN - 5
        bad = [l for l in out.splitlines() if re.search(r"\b%s\b" % dev, l) and since(l)
               and re.search(r"error|reset|retry|timeout|abort", l, re.I)]
        return (not bad, "no error, reset, retry or timeout of %s in the kernel log (the slowness is "
                "below it, not a failing path)%s" % (dev, (": %s" % bad) if bad else ""))

    run_section("DiskpulseSyncLatencyHigh", values, [
        Expect(r"diskpulse_sync_\(recent_seconds\|last_seconds", lambda rc, out: (
            (situation.metric_lines(out, "diskpulse_sync_recent_seconds", path=canary, regime="idle",
                                    quantile="0.5") or [0])[0] > 0.1, "the idle median over 100 ms")),
        Expect(r"^ioping -W -c 20 -s 4k -i 10 DIR", lambda rc, out: (
            (ioping_median(out) or 0) > 0.1, "ioping's median %s s, over 100 ms" % ioping_median(out)), timeout=400),
        Expect(r"^iostat -dx 5 3 DEV$", last("w_await", ">", 100)),
        Expect(r"^dmesg -T \| grep -i -E 'timeout\|reset\|I/O error' \| tail -20$", quiet_kernel),
    ], check, runner=runner)

    def fio_named(rc, out):
        return (re.search(r"^Average:.*\bfio\b", out, re.M) is not None, "pidstat names fio among the writers")
    run_section("DiskpulseDiskSaturated", values, [
        Expect(r"^iostat -dx 5 3 DEV$", both(last("aqu-sz", ">", 4), last("w_await", ">", 50))),
        Expect(r"^pidstat -d 5 3$", fio_named),
        Expect(r"diskpulse_disk_\(queue_depth\|read_await_seconds", lambda rc, out: (
            (situation.metric_lines(out, "diskpulse_disk_queue_depth", device=dev) or [0])[0] > 4
            and (situation.metric_lines(out, "diskpulse_disk_write_await_seconds", device=dev) or [0])[0] > 0.05,
            "queue depth over 4, write await over 50 ms")),
        Expect(r"^cat /proc/mdstat$", lambda rc, out: (
            "Personalities" in out or "No such file" in out,
            "no resync running (no md driver here: no /proc/mdstat)" if "No such file" in out
            else "the md arrays, none resyncing"), rc=None),
    ], check, runner=runner)
    run_section("DiskpulseDiskLatencyHigh", values, [
        Expect(r"^iostat -dxy 10 3 DEV$", last("w_await", ">", 250), timeout=120),
        Expect(r"^dmesg -T \| grep -i -E 'DEV\|reset\|retry\|timeout'$", quiet_kernel, rc=None),
    ], check, runner=runner)

    def tail(rc, out):
        n = tail_beyond(out, dev, 32)
        return n > 0, "%d of %s's requests took 32 ms or more in biolatency's histogram" % (n, dev)
    def series(op_bound=None, what=""):
        """A check of a PromQL answer: DEV's series, the write one above op_bound."""
        def chk(rc, out):
            res = json.loads(out)
            w = [float(r["value"][1]) for r in res if r["metric"].get("op", "write") == "write"]
            ok = bool(res) and (op_bound is None or (w and w[0] > op_bound))
            return ok, "%s: %s" % (what, {r["metric"].get("op", "-"): round(float(r["value"][1]), 4) for r in res})
        return chk
    promql = lambda text, timeout: (0, json.dumps(alerts.query(text)))
    run_section("DiskpulseIoWriteTailLatencyHigh", values, [
        Expect(r"^device:diskpulse_io_device_latency_seconds:p99_5m\{", series(0.05, "device time p99 per op, writes over 50 ms")),
        Expect(r"^device:diskpulse_io_queue_latency_seconds:p99_5m\{", series(None, "queue time p99 per op")),
        Expect(r"^device:diskpulse_io_device_latency_seconds:p50_5m\{", series(None, "device time p50 per op")),
        Expect(r"^rate\(diskpulse_io_device_latency_seconds_count\{", series(1, "requests a second per op, over one write")),
    ], check, promql=promql, only=lambda c: c.kind == "promql")
    run_section("DiskpulseIoWriteTailLatencyHigh", values, [
        Expect(r"^iostat -dxy 10 3 DEV$", last("w_await", ">", 50), timeout=120),
        Expect(r"^biolatency -D -m 10 1$", tail, timeout=60),
        Expect(r"^biolatency -D -Q -m 10 1$", tail, timeout=60),
        Expect(r"^dmesg -T \| grep -i -E 'DEV\|reset\|retry\|timeout\|abort'$", quiet_kernel, rc=None),
        Expect(r"^cat /sys/block/DEV/queue/scheduler /sys/block/DEV/queue/nr_requests /sys/block/DEV/device/queue_depth$",
               has(r"^\S*\[\S+\]", r"^\d+$", r"device/queue_depth: No such file"), rc=1),
    ], check, runner=runner, only=lambda c: c.kind == "sh")

    def slower_than_peer(rc, out):
        a, b = iostat_reports(out, dev), iostat_reports(out, peer)
        if len(a) != 3 or len(b) != 3:
            return False, "three reports of %s and %s" % (dev, peer)
        wa, wb = a[-1]["w_await"], b[-1]["w_await"]
        return (b[-1]["w/s"] > 1 and wa > 1.2 * max(wb, 0.01),
                "%s's w_await %.1f ms against its peer %s's %.1f ms" % (dev, wa, peer, wb))
    run_section("DiskpulseDriveSlowerThanPeers", values, [
        Expect(r"^iostat -dxy 60 3 DEV PEER\.\.\.$", slower_than_peer, timeout=400),
        Expect(r"^dmesg -T \| grep -i -E 'DEV\|reset\|retry\|timeout'$", quiet_kernel, rc=None),
        Expect(r"grep -E 'diskpulse_sync_\(drift\|degradation\)_ratio'$", lambda rc, out: (
            (situation.metric_lines(out, "diskpulse_sync_drift_ratio", path=canary, regime="idle") or [0])[0] > 1.2,
            "the canary on the drive's filesystem is slower than when it was new")),
    ], check, runner=runner)


if __name__ == "__main__":
    main()
