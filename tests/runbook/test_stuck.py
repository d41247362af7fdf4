#!/usr/bin/env python3
"""DiskpulseSyncProbeStuck where it fires: ext4 on a loop device frozen with fsfreeze -f under a
live canary (--canary.timeout=2s) and under a multi-threaded "database" whose writer thread
commits (write + fdatasync) while its main thread waits elsewhere, as a database's do. The
shipped alert fires on a live Prometheus (its for: shortened); every command of the section shows
what the runbook says: the probe stuck, the writer thread and diskpulse's prober in state D
(`ps -eL`; the runbook's old `ps -eo ... | awk '$2 ~ /D/'` lists neither, checked here as the bug
it was), the device idle with nothing in flight and no completion over 10 s (a frozen
filesystem, not a dead device); then the first step, fsfreeze -u, thaws it, nothing is blocked
any more and the alert goes quiet.
Usage: test_stuck.py BINARY"""
import os
import signal
import re
import subprocess
import sys
import time

import situation
from situation import check, dp
from runbook import Expect, has, run_section

RUNBOOK_SECTIONS = {
    "DiskpulseSyncProbeStuck": "fsfreeze -f on a loop ext4 under a live canary and a multi-threaded "
                               "writer",
}
NAME = "DiskpulseSyncProbeStuck"

# A database in miniature: a writer thread commits in a loop; the main thread waits on a queue.
DATABASE = r"""
import os, sys, threading, time
path = sys.argv[1]
def writer():
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    while True:
        os.pwrite(fd, b"x" * 4096, 0)
        os.fdatasync(fd)
        time.sleep(0.05)
threading.Thread(target=writer, daemon=True).start()
threading.Event().wait()
"""


def d_threads(out):
    """{(pid, tid)} of the lines of a `ps -eLo pid,tid,stat,...` listing."""
    return {(int(f[0]), int(f[1])) for f in (l.split() for l in out.splitlines()) if len(f) >= 3
            and f[0].isdigit() and f[1].isdigit()}


def iostat_last(out, dev):
    """{column: value} of dev's line in the last report of iostat -dx."""
    header, last = None, None
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "Device":
            header = f
        elif f and f[0] == dev and header:
            last = dict(zip(header[1:], (float(x) for x in f[1:])))
    return last or {}


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: unwind, clean up
    binary = dp.loop_test_binary(__file__, "a loop device with ext4")
    situation.not_sanitized(binary)
    dp.need_loop_fs("fsfreeze", "iostat", "ps", "curl")
    t0, began = time.monotonic(), time.time()
    with dp.LoopFs(size_mb=64, prefix="diskpulse-rbstuck-") as fs:
        canary = os.path.join(fs.mnt, "diskpulse-canary")
        os.mkdir(canary)
        dev = fs.dev
        db = None
        try:
            with dp.Daemon(binary, "--canary.path=" + canary, "--canary.interval=1s", "--canary.timeout=2s",
                           "--no-collector.smart", "--collector.diskstats.device-include=^%s$" % dev) as d, \
                    situation.Alerts(d.port) as alerts:
                values = {"DIR": canary, "DEV": dev, "localhost:9477": "127.0.0.1:%d" % d.port}
                dp.check(dp.wait_until(lambda: (dp.value(d.scrape(), "diskpulse_sync_probes_total", path=canary)
                                                or 0) >= 3, 30), "the canary probes %s" % canary)
                db = subprocess.Popen([sys.executable, "-c", DATABASE, os.path.join(fs.mnt, "wal")])
                time.sleep(0.5)
                situation.run(["fsfreeze", "-f", fs.mnt], check=True)
                frozen = time.monotonic()
                alerts.wait_firing(NAME, 120, path=canary, device=dev)
                print("the alert fired %.0f s after the freeze" % (time.monotonic() - frozen))

                # The old step: each process's main thread only; both writers are other threads.
                old = situation.run(["bash", "-c", "ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/'"]).stdout
                pids = {int(l.split()[0]) for l in old.splitlines() if l.split() and l.split()[0].isdigit()}
                check(db.pid not in pids and d.proc.pid not in pids,
                      "the old `ps -eo pid,stat,... | awk '$2 ~ /D/'` lists neither the database (%d) nor "
                      "diskpulse (%d): %r" % (db.pid, d.proc.pid, old.strip()))

                def blocked(rc, out):
                    t = d_threads(out)
                    writer = [tid for pid, tid in t if pid == db.pid and tid != db.pid]
                    prober = [tid for pid, tid in t if pid == d.proc.pid and tid != d.proc.pid]
                    return (writer and prober, "the database's writer thread %s and diskpulse's prober thread "
                            "%s in state D" % (writer, prober))

                def samples(rc, out):
                    lines = [l.split() for l in out.splitlines() if l.split()[2:3] == [dev]]
                    if len(lines) != 2:
                        return False, "two lines of %s" % dev
                    a, b = [list(map(int, l[3:])) for l in lines]
                    return (a[8] == 0 and b[8] == 0 and a[0] == b[0] and a[4] == b[4],
                            "nothing in flight (9th field: %d, %d) and no read or write completed in 10 s "
                            "(%d/%d, %d/%d): an idle device, a frozen filesystem" % (a[8], b[8], a[0], b[0], a[4], b[4]))

                def idle(rc, out):
                    last = iostat_last(out, dev)
                    return (last.get("w/s") == 0 and last.get("aqu-sz") == 0,
                            "the last report: w/s %s, aqu-sz %s (idle)" % (last.get("w/s"), last.get("aqu-sz")))

                def quiet_kernel(rc, out):
                    # 120 s of hung-task timeout have not passed; a freeze sends no I/O error.
                    mine = [l for l in situation.kernel_lines_since(out, began) if dev in l]
                    return (not mine, "no kernel line about %s yet (a freeze is no I/O error; "
                            "'blocked for more than' comes after 120 s)%s" % (dev, mine or ""))

                run_section(NAME, values, [
                    Expect(r"diskpulse_sync_\(stuck\|stuck_probes_total\|inflight_seconds\)", lambda rc, out: (
                        situation.metric_lines(out, "diskpulse_sync_stuck", path=canary) == [1.0]
                        and (situation.metric_lines(out, "diskpulse_sync_inflight_seconds", path=canary) or [0])[0] > 2
                        and (situation.metric_lines(out, "diskpulse_sync_stuck_probes_total", path=canary) or [0])[0] >= 1,
                        "stuck 1, in flight over --canary.timeout, counted as stuck")),
                    Expect(r"^ps -eLo pid,tid,stat,wchan:32,cmd \| awk '\$3 ~ /D/'$", blocked),
                    Expect(r"^dmesg -T \| grep -i -E 'blocked for more than", quiet_kernel, rc=None),
                    Expect(r"^iostat -dx 5 3 DEV$", idle, timeout=60),
                    Expect(r"^grep -w DEV /proc/diskstats; sleep 10; grep -w DEV /proc/diskstats$", samples, timeout=60),
                ], check, only=lambda c: "nothing left" not in c.note and not c.text.startswith("fsfreeze"))
                stuck_for = time.monotonic() - frozen

                # The first step: thaw it; then nothing is blocked, the probe returns.
                def none_left(rc, out):
                    t = d_threads(out)
                    mine = [x for x in t if x[0] in (db.pid, d.proc.pid)]
                    return not mine, "neither the database nor diskpulse has a thread in state D (%s)" % mine
                run_section(NAME, values, [
                    Expect(r"^fsfreeze -u DIR$", has(r"\A\Z")),
                    Expect(r"^ps -eLo pid,tid,stat,wchan:32,cmd \| awk '\$3 ~ /D/'$", none_left),
                ], check, only=lambda c: c.text.startswith("fsfreeze") or "nothing left" in c.note)
                check(dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_sync_stuck", path=canary) == 0, 30),
                      "diskpulse_sync_stuck of %s is 0 again" % canary)
                alerts.wait_quiet(NAME, 60, path=canary)
                print("frozen for %.0f s" % stuck_for)
        finally:
            situation.run(["fsfreeze", "-u", fs.mnt])
            if db:
                db.kill()
                db.wait()
    print("took %.0f s" % (time.monotonic() - t0))
    dp.finish()


if __name__ == "__main__":
    main()
