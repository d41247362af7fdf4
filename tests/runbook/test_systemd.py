#!/usr/bin/env python3
"""The runbook's sections whose commands need the host as an operator has it (systemd, the
journal, the service user, /var/lib/diskpulse), run in the situation where each alert fires on
the .deb booted under systemd in a container (tests/runbook/host.py), the shipped alert shown
firing on the container's own Prometheus before the section's commands run:

- the sync canary's reference and baseline (DiskpulseSyncLatencyDegraded, -Drift, -Doubled,
  -Trend): the disk's records in the state file say it was ten times faster when new and that
  its daily medians climb 3 % a day (a loop device with a serial from a udev database of the
  test's own), so the ratios are those of a disk that slowed; then the runbook's reset recipe;
Usage: test_systemd.py BUILD_DIR"""
import os
import re
import signal
import statistics
import sys
import time

import host
from host import pkg, dp
from runbook import Expect, has, run_section

check = pkg.check

RUNBOOK_SECTIONS = {
    "DiskpulseSyncLatencyDegraded": "the disk's state-file baseline ten times below its latency",
    "DiskpulseSyncLatencyDrift": "the disk's state-file reference ten times below its latency, its daily "
                                 "medians climbing; the reset recipe under systemd",
}
DB = "/srv/db"
DIR = DB + "/diskpulse-canary"
SERIAL = "DPRB-DB-0001"


def ioping_median(out):
    """The median of ioping's per-request times (the warm-up left out), in seconds."""
    v = [float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
         for m in re.finditer(r"request=\d+ time=([\d.]+) (us|ms|s)\b(?! \(warmup\))", out)]
    return statistics.median(v) if v else None


def value_of(out, name, **labels):
    return host.metric(out, name, **labels)


def craft(line, baseline, now):
    """A record as the daemon wrote it, made that of a disk ten times faster when new whose daily
    medians climbed 3 % a day for 30 days (up to yesterday)."""
    days = ",".join("%d:%.9f" % (now - (30 - i) * 86400, baseline * 1.03 ** i) for i in range(30))
    for k, v in (("baseline", "%.9f" % baseline), ("updates", "900"), ("warmup", "-"),
                 ("reference", "%.9f" % baseline), ("refdays", "final"), ("dayobs", "-"), ("days", days)):
        line = re.sub(r"\b%s=\S+" % k, "%s=%s" % (k, v), line)
    return line


def sync_family(h, dev):
    """DiskpulseSyncLatencyDegraded, -Drift, -Doubled, -Trend, and the reset recipe."""
    state = "/var/lib/diskpulse/canary-baselines"
    h.sh("systemctl stop diskpulse.socket diskpulse")
    now = int(time.time())
    want = {"idle": 0.0001, "busy": 0.00005}
    text = "diskpulse-canary-baselines 3\n" + "".join(
        craft("disk=serial:%s mode=fdatasync path=%s regime=%s baseline=0 updates=0 updated=%d warmup=- "
              "reference=0 refdays=- dayobs=- days=-" % (SERIAL, DIR, regime, now * 1000000), base, now) + "\n"
        for regime, base in sorted(want.items()))
    with open(os.path.join(h.root, "root", "canary-baselines"), "w") as f:
        f.write(text)
    rc, _, err = h.sh("install -o diskpulse -g diskpulse -m 600 /root/canary-baselines %s && "
                      "systemctl start diskpulse.socket diskpulse" % state)
    check(rc == 0, "the disk's records in place (ten times faster when new, a 3 %%/day climb), diskpulse "
          "started again %s" % err.strip())
    ok = dp.wait_until(lambda: (h.value("diskpulse_sync_drift_ratio", path=DIR, regime="idle") or 0) > 2
                       and (h.value("diskpulse_sync_trend_factor", path=DIR, regime="idle") or 0) > 1.26, 60, poll=1)
    check(ok, "drift ratio %s, trend factor %s" % (h.value("diskpulse_sync_drift_ratio", path=DIR, regime="idle"),
                                                  h.value("diskpulse_sync_trend_factor", path=DIR, regime="idle")))
    ioping_idle = "ioping -W -c 20 -s 4k -i 10 %s" % DIR
    runner = host.prefetch(h.runner, [ioping_idle])
    t0 = time.monotonic()
    labels = dict(path=DIR, device=dev, regime="idle")
    for alert in ("DiskpulseSyncLatencyDegraded", "DiskpulseSyncLatencyDrift", "DiskpulseSyncLatencyDoubled",
                  "DiskpulseSyncLatencyTrend"):
        h.wait_firing(alert, 90, **labels)
    values = {"DIR": DIR, "DEV": dev}

    def slower(regime, factor):
        def chk(rc, out):
            med = ioping_median(out)
            base = want[regime]
            return (med is not None and med > factor * base,
                    "ioping's median %s s is over %.1f times the %s baseline %s s" % (med, factor, regime, base))
        return chk

    def iostat_dev(rc, out):
        return (re.search(r"^%s\s" % dev, out, re.M) is not None and "f_await" in out,
                "iostat reports %s with f_await" % dev)

    def writers(rc, out):
        return (re.search(r"^Average:.*\bdiskpulse\b", out, re.M) is not None,
                "pidstat names diskpulse among the writers")

    run_section("DiskpulseSyncLatencyDegraded", values, [
        Expect(r"diskpulse_sync_\(degradation_ratio\|baseline_seconds", lambda rc, out: (
            (value_of(out, "diskpulse_sync_degradation_ratio", path=DIR, regime="idle") or 0) > 1.5
            and value_of(out, "diskpulse_sync_baseline_seconds", path=DIR, regime="idle") is not None
            and value_of(out, "diskpulse_sync_recent_seconds", path=DIR, regime="idle", quantile="0.5") is not None,
            "degradation ratio over 1.5, the baseline and the recent median of the idle regime")),
        Expect(r"^ioping -W -c 20 -s 4k -i 10 DIR", slower("idle", 1.5), timeout=400),
        Expect(r"^ioping -W -c 200 -s 4k -i 0 DIR", slower("busy", 1.5)),
        Expect(r"^iostat -dx 5 3 DEV$", iostat_dev),
        Expect(r"^cat /sys/block/DEV/queue/write_cache$", has(r"^write back$")),
        Expect(r"^pidstat -d 5 3", writers),
    ], check, runner=runner)

    def records(rc, out):
        lines = out.splitlines()
        days = [len(re.search(r" days=(\S+)", l).group(1).split(",")) for l in lines if " days=" in l]
        return (len(lines) == 2 and all(d >= 14 for d in days) and "reference=0.000100000" in out,
                "the target's two records, their days= (%s daily medians) and the idle reference" % days)

    reset_out = []

    def reset(rc, out):
        reset_out.append(out)
        return ("kept: the previous file as canary-baselines.reset-" in out,
                "the reset names the copy of the previous file")
    run_section("DiskpulseSyncLatencyDrift", values, [
        Expect(r"diskpulse_sync_\(reference_seconds\|drift_ratio", lambda rc, out: (
            value_of(out, "diskpulse_sync_reference_seconds", path=DIR, regime="idle") == 0.0001
            and (value_of(out, "diskpulse_sync_drift_ratio", path=DIR, regime="idle") or 0) > 2
            and (value_of(out, "diskpulse_sync_trend_factor", path=DIR, regime="idle") or 0) > 1.26
            and (value_of(out, "diskpulse_sync_trend_daily_medians", path=DIR, regime="idle") or 0) >= 14,
            "reference 0.0001, drift over 2, trend over 1.26 a month on 14 daily medians or more")),
        Expect(r"^ioping -W -c 20 -s 4k -i 10 DIR", slower("idle", 2), timeout=400),
        Expect(r"^grep -F 'path=DIR' /var/lib/diskpulse/canary-baselines$", records),
        Expect(r"^df -h DIR$", has(r"\s%s$" % DB)),
        Expect(r"^systemctl stop diskpulse.socket diskpulse$", has(r"\A\Z")),
        Expect(r"^runuser -u diskpulse -- diskpulse --state.directory=/var/lib/diskpulse "
               r"--canary.reset-reference=DIR$", reset),
        Expect(r"^systemctl start diskpulse.socket diskpulse$", has(r"\A\Z")),
    ], check, runner=runner)
    print("the sync sections took %.0f s" % (time.monotonic() - t0))
    base = float(re.search(r"regime=idle baseline=(\S+)", h.sh("grep -F 'path=%s' %s" % (DIR, state))[1]).group(1))
    ref = dp.wait_until(lambda: h.value("diskpulse_sync_reference_seconds", path=DIR, regime="idle"), 30, poll=1)
    check(ref is not None and abs(ref - base) <= 0.05 * base,
          "after the reset the reference is the baseline of the moment (%s against %s)" % (ref, base))
    check(h.sh("ls /var/lib/diskpulse | grep -c '^canary-baselines.reset-'")[1].strip() == "1",
          "one copy of the previous file beside it")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    dp.need_loop_fs()
    t0 = time.monotonic()
    with dp.LoopFs(size_mb=64, prefix="diskpulse-rbsys-db-") as db, \
            dp.LoopFs(size_mb=16, mkfs_args=["-m", "0"], prefix="diskpulse-rbsys-state-") as st:
        majmin = open("/sys/block/%s/dev" % db.dev).read().strip()
        config = ["canary.path = " + DIR, "canary.interval = 1s", "canary.timeout = 5s",
                  "collector.diskstats.device-include = ^(%s|%s)$" % (db.dev, st.dev)]
        os.mkdir(os.path.join(db.mnt, "diskpulse-canary"))
        with host.Host(build, {DB: db.mnt, "/var/lib/diskpulse": st.mnt}, config,
                       dropin="[Service]\nReadWritePaths=-%s\n" % DB,
                       udev={majmin: "E:ID_SERIAL=%s\n" % SERIAL}) as h:
            os.chown(os.path.join(db.mnt, "diskpulse-canary"), h.uid, h.gid)
            h.sh("systemctl restart diskpulse")
            sync_family(h, db.dev)
    print("took %.0f s" % (time.monotonic() - t0))
    pkg.finish()


if __name__ == "__main__":
    main()
