#!/usr/bin/env python3
"""DiskpulseFlushesNotReachingDisk where it fires: ext4 mounted nobarrier on a loop device (whose
write cache is "write back"), the canary probing a directory of its own inside it (the layout the
README recommends), a live Prometheus with the shipped rules. The alert fires; every command of
the section shows what the runbook says (nobarrier in the options, the write-back cache, the
flush counter standing still over 20 ioping writes, a flush ratio of 0); the old first step,
`mount -o remount,barrier=1 DIR` on that directory, fails with status 32 (kept here as the bug it
was); the section's remount on the mount point succeeds, the flushes arrive again (at least 20
for 20 writes, the ratio above 0) and the alert goes quiet.
Usage: test_flush.py BINARY"""
import os
import sys
import signal
import time

import situation
from situation import check, dp
from runbook import Expect, has, run_section

RUNBOOK_SECTIONS = {
    "DiskpulseFlushesNotReachingDisk": "ext4 mounted nobarrier on a loop device (write back), the "
                                       "canary in a directory inside it",
}
NAME = "DiskpulseFlushesNotReachingDisk"


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: unwind, clean up
    binary = dp.loop_test_binary(__file__, "a loop device with ext4")
    situation.not_sanitized(binary)
    dp.need_loop_fs("findmnt", "ioping", "curl")
    t0 = time.monotonic()
    with dp.LoopFs(size_mb=64, mount_opts="nobarrier", prefix="diskpulse-rbflush-") as fs:
        canary = os.path.join(fs.mnt, "diskpulse-canary")
        os.mkdir(canary)
        dev = fs.dev
        with dp.Daemon(binary, "--canary.path=" + canary, "--canary.interval=1s", "--canary.burst=2",
                       "--no-collector.smart", "--collector.diskstats.device-include=^%s$" % dev) as d, \
                situation.Alerts(d.port) as alerts:
            values = {"DIR": canary, "DEV": dev, "DISK": dev, "localhost:9477": "127.0.0.1:%d" % d.port}
            alerts.wait_firing(NAME, 120, path=canary, device=dev)
            before = situation.diskstats_line(dev)

            def flushes_rose(at_least, at_most=None):
                """Checks the second grep of the section: its 19th column against the first's."""
                def chk(rc, out):
                    got = situation.column(out, dev, 19)
                    if not got or not seen:
                        return False, "no flush column of %s (%s)" % (dev, out.strip())
                    delta = got[0] - seen[0]
                    ok = delta >= at_least and (at_most is None or delta <= at_most)
                    return ok, "the flush count of %s rose by %d over the ioping writes (%s)" % (
                        dev, delta, "at least %d" % at_least if at_most is None else "at most %d" % at_most)
                return chk
            seen = []

            def first_grep(rc, out):
                seen[:] = situation.column(out, dev, 19)
                return bool(seen), "the line of %s with its flush count (%s)" % (dev, seen)

            confirm = [
                Expect(r"^findmnt -T DIR -o TARGET,SOURCE,FSTYPE,OPTIONS$",
                       has(r"^%s\s+/dev/%s\s+ext4\s+\S*nobarrier" % (fs.mnt, dev))),
                Expect(r"queue/write_cache /sys/block/DEV/queue/fua$", has(r"^write back\n0$")),
                Expect(r"^ls /sys/block/DEV/slaves/$",
                       lambda rc, out: (out.strip() == "", "no device below a loop device")),
                # The first grep reads the flush count, the second (after ioping) compares.
                Expect(r"^grep -w DISK /proc/diskstats$", [first_grep, flushes_rose(0, 3)]),
                Expect(r"^ioping -W -c 20 -s 4k DIR$", has(r"generated 20 requests")),
                Expect(r"diskpulse_sync_\(flush_ratio\|backing_disk_info\)", lambda rc, out: (
                    situation.metric_lines(out, "diskpulse_sync_flush_ratio", path=canary) == [0.0]
                    and situation.metric_lines(out, "diskpulse_sync_backing_disk_info", path=canary, disk=dev) == [1.0]
                    and situation.metric_lines(out, "diskpulse_disk_write_cache_info", device=dev,
                                               mode="write back") == [1.0],
                    "flush ratio 0 on %s, backed by %s, whose cache is write back" % (canary, dev))),
            ]
            confirming = r"^(?!mount -o remount|findmnt -T DIR -o TARGET,OPTIONS$)"
            run_section(NAME, values, confirm, check, only=confirming)
            after = situation.diskstats_line(dev)
            print("flushes of %s while nobarrier: %d over the confirming commands" % (dev, after[14] - before[14]))

            # The first step as it was: mount refuses the canary directory (not a mount point).
            p = situation.run(["mount", "-o", "remount,barrier=1", canary])
            check(p.returncode == 32, "the old first step, mount -o remount,barrier=1 DIR on the canary "
                  "directory, fails: status %d %s" % (p.returncode, p.stderr.strip()))

            # The first step as the runbook gives it now, and the check after it.
            run_section(NAME, values, [
                Expect(r"^mount -o remount,barrier=1 \"\$\(findmnt -no TARGET -T DIR\)\"$", has(r"\A\Z")),
                Expect(r"^findmnt -T DIR -o TARGET,OPTIONS$",
                       has(r"^%s\s" % fs.mnt, absent=(r"nobarrier", r"barrier=0"))),
            ], check, only=r"^mount -o remount|^findmnt -T DIR -o TARGET,OPTIONS$")
            # The confirming commands again: the flushes arrive now.
            confirm[0] = Expect(r"^findmnt -T DIR -o TARGET,SOURCE,FSTYPE,OPTIONS$",
                                has(r"^%s\s+/dev/%s\s+ext4" % (fs.mnt, dev), absent=(r"nobarrier",)))
            confirm[3] = Expect(r"^grep -w DISK /proc/diskstats$", [first_grep, flushes_rose(20)])
            confirm[5] = Expect(r"diskpulse_sync_\(flush_ratio\|backing_disk_info\)",
                                has(r"diskpulse_disk_write_cache_info\{device=\"%s\",mode=\"write back\"\} 1" % dev))
            run_section(NAME, values, confirm, check, only=confirming)
            ratio = dp.wait_until(lambda: (dp.value(d.scrape(), "diskpulse_sync_flush_ratio", path=canary) or 0) > 0, 30)
            check(ratio, "diskpulse_sync_flush_ratio of %s is above 0 after the remount (%s)"
                  % (canary, dp.value(d.scrape(), "diskpulse_sync_flush_ratio", path=canary)))
            alerts.wait_quiet(NAME, 60, path=canary)
    print("took %.0f s" % (time.monotonic() - t0))
    dp.finish()


if __name__ == "__main__":
    main()
