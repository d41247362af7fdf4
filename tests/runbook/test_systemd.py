#!/usr/bin/env python3
"""The runbook's sections whose commands need the host as an operator has it (systemd, the
journal, the service user, /var/lib/diskpulse), run in the situation where each alert fires on
the .deb booted under systemd in a container (tests/runbook/host.py), the shipped alert shown
firing on the container's own Prometheus before the section's commands run:

- the sync canary's reference and baseline (DiskpulseSyncLatencyDegraded, -Drift, -Doubled,
  -Trend): the disk's records in the state file say it was ten times faster when new and that
  its daily medians climb 3 % a day (a loop device with a serial from a udev database of the
  test's own), so the ratios are those of a disk that slowed; then the runbook's reset recipe;
- a canary directory removed (DiskpulseSyncTargetDown, ENOENT) and a canary target on
  PostgreSQL's directory, read-only under the unit (DiskpulseSyncProbeErrors, EROFS), fixed by the
  section's own commands (the shipped tmpfiles.d snippet, the sed of the config, a restart);
- the state directory's filesystem remounted read-only under a new target (DiskpulseStateNotSaved);
- a reload with a bad value (DiskpulseConfigReloadFailed), fixed and reloaded;
- the zygote and the helper killed with a long grace (DiskpulseHelperDown, -ZygoteLost), then the
  zygote killed four times with a short one (DiskpulseRestarting);
- /proc hidden by a drop-in, ProcSubset=pid (DiskpulseCollectorFailing);
- bpf(2) taken away by a drop-in after the programs were attached (DiskpulseIoLatencyLost, "The
  biolatency collector is not attached");
- a bad value and a restart: the service fails (DiskpulseExporterDown), fixed and started again;
- the scrape job's file of targets gone (DiskpulseExporterAbsent).
Each group runs in a container of its own: `sync` (the canary's ratios, about 4 minutes: the
runbook's ioping of 20 spaced writes takes 3) and `exporter` (the rest), so that ctest can run
them side by side.
Usage: test_systemd.py BUILD_DIR sync|exporter"""
import os
import re
import signal
import statistics
import subprocess
import sys
import time

import host
import situation
from host import pkg, dp
from runbook import Expect, has, run_section

check = pkg.check

RUNBOOK_SECTIONS = {
    "DiskpulseSyncLatencyDegraded": "the disk's state-file baseline ten times below its latency",
    "DiskpulseSyncLatencyDrift": "the disk's state-file reference ten times below its latency, its daily "
                                 "medians climbing; the reset recipe under systemd",
    "DiskpulseSyncTargetDown": "the canary directory removed",
    "DiskpulseSyncProbeErrors": "a target in postgres' /var/lib/postgresql, read-only under the unit",
    "DiskpulseStateNotSaved": "the state directory's filesystem read-only under a new target",
    "DiskpulseConfigReloadFailed": "a reload with a bad value",
    "DiskpulseHelperDown": "the zygote and the helper killed, a grace of an hour",
    "DiskpulseZygoteLost": "the zygote killed, a grace of an hour",
    "DiskpulseRestarting": "the zygote killed four times, a grace of 2 s",
    "DiskpulseCollectorFailing": "ProcSubset=pid in a drop-in",
    "DiskpulseIoLatencyLost": "SystemCallFilter=~bpf in a drop-in after the programs were attached",
    "The biolatency collector is not attached": "SystemCallFilter=~bpf in a drop-in",
    "DiskpulseExporterDown": "a bad value and a restart",
    "DiskpulseExporterAbsent": "the scrape job's file_sd file gone",
}
DB = "/srv/db"
DIR = DB + "/diskpulse-canary"
SERIAL = "DPRB-DB-0001"
BEGAN = time.time()


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


def lines_with(out, *words):
    return [l for l in out.splitlines() if all(w in l for w in words)]


def conf_set(h, key, value=None):
    """Drops key's lines from diskpulse.conf and, with value, appends key = value."""
    h.sh("sed -i '/^%s = /d' %s" % (re.escape(key), host.CONF))
    if value is not None:
        h.sh("echo '%s = %s' >> %s" % (key, value, host.CONF))


def canary_errors(h, dev):
    """DiskpulseSyncTargetDown (the directory removed) and DiskpulseSyncProbeErrors (a target
    under postgres' own directory), each fixed as its section says."""
    h.sh("rm -r " + DIR)
    h.wait_firing("DiskpulseSyncProbeErrors", 60, path=DIR, errno="ENOENT")
    h.wait_firing("DiskpulseSyncTargetDown", 60, path=DIR)
    run_section("DiskpulseSyncTargetDown", {"DIR": DIR}, [
        Expect(r"diskpulse_sync_\(target_up\|errors_total\)'$", lambda rc, out: (
            value_of(out, "diskpulse_sync_target_up", path=DIR) == 0
            and (value_of(out, "diskpulse_sync_errors_total", path=DIR, errno="ENOENT") or 0) >= 1,
            "target_up 0, ENOENT counted")),
        Expect(r"^journalctl -u diskpulse \| grep -E 'canary \(probe failed\|directory is gone\|target healthy",
               lambda rc, out: (lines_with(out, "canary directory is gone", DIR), "the journal says the directory is gone")),
        Expect(r"^ls -ld DIR; findmnt -T DIR", has(r"No such file or directory"), rc=None),
    ], check, runner=h.runner)
    h.sh("install -d -o diskpulse -g diskpulse -m 0750 " + DIR)
    check(dp.wait_until(lambda: h.value("diskpulse_sync_target_up", path=DIR) == 1, 30, poll=1),
          "the directory back: the target is up again")
    check(lines_with(h.sh("journalctl -u diskpulse")[1], "canary target healthy again"),
          "the journal says 'canary target healthy again'")

    pg, mine = "/var/lib/postgresql", "/var/lib/postgresql/diskpulse-canary"
    rc, _, err = h.sh("groupadd --system postgres && useradd --system -g postgres -d %s -s /bin/sh postgres && "
                      "install -d -o postgres -g postgres -m 0755 %s" % (pg, pg))
    check(rc == 0, "a postgres user and %s, 0755, as PostgreSQL's package makes them %s" % (pg, err.strip()))
    conf_set(h, "canary.path", pg)
    h.sh("systemctl restart diskpulse")
    h.wait_firing("DiskpulseSyncProbeErrors", 60, path=pg, errno="EROFS")

    def unit_paths(rc, out):
        return ("ProtectSystem=strict" in out and "ReadWritePaths=-/var/lib/postgresql/diskpulse-canary" in out
                and not re.search(r"ReadWritePaths=-?/var/lib/postgresql\s*$", out, re.M),
                "the unit: ProtectSystem=strict, writable only the diskpulse-canary directory under %s" % pg)
    run_section("DiskpulseSyncProbeErrors", {"DIR": pg}, [
        Expect(r"diskpulse_sync_\(errors_total\|target_up\|probes_total\)", lambda rc, out: (
            (value_of(out, "diskpulse_sync_errors_total", path=pg, errno="EROFS") or 0) >= 1
            and value_of(out, "diskpulse_sync_target_up", path=pg) == 0, "EROFS counted on %s, down" % pg)),
        Expect(r"^journalctl -u diskpulse --since '1 hour ago' \| grep -E 'canary \(probe failed",
               lambda rc, out: (lines_with(out, "cannot open the canary file", pg, "EROFS"),
                                "the failed preparation of the work file, with EROFS")),
        Expect(r"^findmnt -T DIR -o TARGET,SOURCE,FSTYPE,OPTIONS$", has(r"^/\s+\S+\s+\S+\s+rw\b")),
        Expect(r"^df -h DIR; df -i DIR$", has(r"Use%", r"IUse%")),
        Expect(r"^dmesg -T \| grep -i -E 'I/O error", lambda rc, out: (
            not [l for l in situation.kernel_lines_since(out, BEGAN) if "EXT4-fs error" in l],
            "no filesystem error: the cause is elsewhere"), rc=None),
        Expect(r"^systemctl cat diskpulse \| grep -E 'ReadWritePaths\|ProtectSystem\|ProtectHome'$", unit_paths),
        Expect(r"^stat -c '%U:%G %a %n' DIR$", has(r"^postgres:postgres 755 %s$" % pg)),
        Expect(r"^setpriv --reuid=diskpulse", has(r"Permission denied"), rc=1),
        Expect(r"^ln -s /usr/share/diskpulse/tmpfiles.d/postgresql-canary.conf", has(r"\A\Z")),
        Expect(r"^systemd-tmpfiles --create /etc/tmpfiles.d/diskpulse-canary.conf$", has(r"\A\Z")),
        Expect(r"^sed -i 's\|\^canary.path = /var/lib/postgresql\$\|", has(r"\A\Z")),
        Expect(r"^systemctl restart diskpulse$", has(r"\A\Z")),
    ], check, runner=h.runner)
    owner = h.sh("stat -c '%%U:%%G %%a' %s" % mine)[1].strip()
    check(owner == "diskpulse:postgres 750", "the shipped snippet made %s: %s" % (mine, owner))
    if not check(dp.wait_until(lambda: h.value("diskpulse_sync_target_up", path=mine) == 1
                               and (h.value("diskpulse_sync_probes_total", path=mine) or 0) >= 2,
                               30, poll=1),
                 "after the section's commands the service probes %s, up" % mine):
        print(h.sh("grep canary.path %s; journalctl -u diskpulse | tail -15" % host.CONF)[1])
    conf_set(h, "canary.path", DIR)
    h.sh("systemctl restart diskpulse")


def state_not_saved(h, state_mnt):
    """The state directory's filesystem read-only under a target new to the file."""
    second = DB + "/second"
    h.sh("install -d -o diskpulse -g diskpulse -m 0750 " + second)
    r = subprocess.run(["mount", "-o", "remount,ro", state_mnt], capture_output=True, text=True)
    if not check(r.returncode == 0, "the state directory's filesystem remounted read-only %s" % r.stderr.strip()):
        return
    try:
        h.sh("echo 'canary.path = %s' >> %s && systemctl restart diskpulse" % (second, host.CONF))
        h.wait_firing("DiskpulseStateNotSaved", 90, file="canary-baselines")
        run_section("DiskpulseStateNotSaved", {}, [
            Expect(r"grep diskpulse_state_write_errors_total$", lambda rc, out: (
                (value_of(out, "diskpulse_state_write_errors_total", file="canary-baselines") or 0) >= 1,
                "failed saves counted")),
            Expect(r"^df -h /var/lib/diskpulse; touch /var/lib/diskpulse/.probe",
                   has(r"/var/lib/diskpulse$", r"Read-only file system"), rc=1),
            Expect(r"^journalctl -u diskpulse \| grep -E 'cannot save\|canary-baselines'$",
                   has(r"cannot save the canary baselines.*EROFS")),
        ], check, runner=h.runner)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", state_mnt])
        h.sh("sed -i '\\|^canary.path = %s$|d' %s && systemctl restart diskpulse" % (second, host.CONF))


def config_reload(h):
    conf_set(h, "diskstats.interval", "banana")  # a key given twice would be refused for that instead
    h.sh("systemctl reload diskpulse")
    h.wait_firing("DiskpulseConfigReloadFailed", 60)

    def success(v):
        return lambda rc, out: (value_of(out, "diskpulse_config_reload_success") == v
                                and value_of(out, "diskpulse_config_reload_success_timestamp_seconds"),
                                "diskpulse_config_reload_success %d, with the time of the running configuration" % v)
    check_cmd = r"^diskpulse --check-config --config.file=/etc/diskpulse/diskpulse.conf"
    run_section("DiskpulseConfigReloadFailed", {}, [
        Expect(r"^curl -s localhost:9477/metrics \| grep -E '\^diskpulse_config_reload_success'$", success(0)),
        Expect(r"^journalctl -u diskpulse \| grep 'reload failed'$", has(r"reload failed.*banana")),
        Expect(r"^systemctl cat diskpulse \| grep ExecStart$",
               has(r"^ExecStart=/usr/sbin/diskpulse --config.file=/etc/diskpulse/diskpulse.conf$")),
        Expect(check_cmd + "$", has(r"diskstats.interval", r"banana"), rc=2),
    ], check, runner=h.runner, only=lambda c: c.lineno < fix_line(h, "DiskpulseConfigReloadFailed"))
    before = value_of(h.metrics(), "diskpulse_config_reload_success_timestamp_seconds")
    conf_set(h, "diskstats.interval", "1s")  # the shipped file's value
    time.sleep(1)
    run_section("DiskpulseConfigReloadFailed", {}, [
        Expect(check_cmd + r" && systemctl reload diskpulse$", None),
        Expect(r"^curl -s localhost:9477/metrics \| grep -E '\^diskpulse_config_reload_success'$", lambda rc, out: (
            value_of(out, "diskpulse_config_reload_success") == 1
            and (value_of(out, "diskpulse_config_reload_success_timestamp_seconds") or 0) > (before or 0),
            "diskpulse_config_reload_success 1, the time moved to this reload")),
    ], check, runner=lambda t, to: (time.sleep(2), h.runner(t, to))[1],
        only=lambda c: c.lineno > fix_line(h, "DiskpulseConfigReloadFailed"))
    check(lines_with(h.sh("journalctl -u diskpulse")[1], "configuration reloaded"),
          "the journal says 'configuration reloaded'")
    h.wait_quiet("DiskpulseConfigReloadFailed", 30)


def fix_line(h, name):
    """The line of the runbook where section name's "What to do" begins."""
    import runbook
    with open(runbook.RUNBOOK) as f:
        text = f.read().splitlines()
    start = text.index("## " + name)
    return next(i + 1 for i in range(start, len(text)) if text[i].startswith("**What to do.**"))


def processes(h):
    return h.c.processes()


def helper_and_zygote(h):
    """DiskpulseHelperDown and -ZygoteLost: the zygote and the helper killed, a grace of an hour;
    then DiskpulseRestarting: the zygote killed four times with a grace of 2 s."""
    conf_set(h, "helper.zygote-grace", "1h")
    h.sh("systemctl reload diskpulse")
    time.sleep(1)
    main_pid = h.c.show("diskpulse.service", "MainPID").get("MainPID")
    procs = processes(h)
    zyg = [p for p, comm in procs.items() if comm == "diskpulse-zyg"]
    helpers = [p for p, comm in procs.items() if p != main_pid and comm != "diskpulse-zyg"]
    check(zyg and helpers, "a zygote %s and a helper %s beside diskpulse %s (%s)" % (zyg, helpers, main_pid, procs))
    h.sh("kill -KILL %s" % " ".join(zyg))
    time.sleep(0.5)
    h.sh("kill -KILL %s" % " ".join(helpers))
    h.wait_firing("DiskpulseHelperDown", 60)
    h.wait_firing("DiskpulseZygoteLost", 60)
    run_section("DiskpulseHelperDown", {}, [
        Expect(r"grep -E 'diskpulse_helper_\|diskpulse_smart_read_errors_total'$", lambda rc, out: (
            value_of(out, "diskpulse_helper_up") == 0 and value_of(out, "diskpulse_helper_zygote_up") == 0,
            "helper_up 0, zygote_up 0")),
        Expect(r"^systemctl status diskpulse$", lambda rc, out: (
            "active (running)" in out and not re.search(r"diskpulse-(zyg|hlp|helper)", out),
            "the service runs, its process tree without zygote or helper"), rc=None),
        Expect(r"^journalctl -u diskpulse \| grep -E 'privsep\|helper'$", has(r"zygote is gone")),
        Expect(r"^dmesg -T \| grep -i -E 'diskpulse\|oom\|segfault'$",
               lambda rc, out: (not [l for l in situation.kernel_lines_since(out, BEGAN)
                                     if "oom-kill" in l or "segfault" in l],
                                "no OOM kill or crash: something else killed them"), rc=None),
    ], check, runner=h.runner)
    run_section("DiskpulseZygoteLost", {}, [
        Expect(r"grep -E 'diskpulse_helper_\(zygote_\)\?up'$", lambda rc, out: (
            value_of(out, "diskpulse_helper_zygote_up") == 0, "zygote_up 0")),
        Expect(r"^journalctl -u diskpulse \| grep -E 'zygote\|exiting'$",
               has(r"zygote is gone", absent=(r"exiting",))),
        Expect(r"^systemctl show diskpulse -p Restart -p NRestarts -p ExecMainStatus$",
               has(r"^Restart=on-failure$", r"^NRestarts=0$")),
    ], check, runner=h.runner)
    h.sh("systemctl restart diskpulse")
    check(dp.wait_until(lambda: h.value("diskpulse_helper_zygote_up") == 1 and h.value("diskpulse_helper_up") == 1, 30, poll=1),
          "systemctl restart diskpulse: a zygote and a helper again")

    # four lost zygotes, each healed by a restart: a loop
    conf_set(h, "helper.zygote-grace", "2s")
    h.sh("systemctl restart diskpulse")
    for i in range(4):
        before = h.c.show("diskpulse.service", "MainPID").get("MainPID")
        dp.wait_until(lambda: [p for p, c in processes(h).items() if c == "diskpulse-zyg"], 20, poll=0.5)
        h.sh("pkill -KILL -x diskpulse-zyg")
        dp.wait_until(lambda: h.c.show("diskpulse.service", "MainPID").get("MainPID") not in ("0", before)
                      and h.metrics(), 30, poll=0.5)
        time.sleep(2)  # scraped, so that Prometheus sees each start
    h.wait_firing("DiskpulseRestarting", 60)
    run_section("DiskpulseRestarting", {}, [
        Expect(r"^systemctl show diskpulse -p NRestarts -p ExecMainStatus -p Result$",
               has(r"^NRestarts=[4-9]$", r"^Result=success$")),
        Expect(r"^journalctl -u diskpulse --since '1 hour ago' \| grep -E 'level=error\|exiting\|zygote'$",
               lambda rc, out: (len(lines_with(out, "exiting")) >= 4 and "status=75" in out,
                                "a lost zygote and an exit with status 75 each time (%d)" % len(lines_with(out, "exiting")))),
        Expect(r"^dmesg -T \| grep -i -E 'diskpulse\|oom\|segfault'$",
               lambda rc, out: (not [l for l in situation.kernel_lines_since(out, BEGAN) if "oom-kill" in l],
                                "no OOM kill"), rc=None),
    ], check, runner=h.runner)
    conf_set(h, "helper.zygote-grace")
    h.sh("systemctl reset-failed diskpulse; systemctl restart diskpulse")


def collector_failing(h):
    d = "/etc/systemd/system/diskpulse.service.d"
    h.sh("printf '[Service]\\nProcSubset=pid\\n' > %s/hide-proc.conf && systemctl daemon-reload && "
         "systemctl restart diskpulse" % d)
    h.wait_firing("DiskpulseCollectorFailing", 60, collector="diskstats")
    run_section("DiskpulseCollectorFailing", {}, [
        Expect(r"grep diskpulse_collector_success$", lambda rc, out: (
            value_of(out, "diskpulse_collector_success", collector="diskstats") == 0, "diskstats 0")),
        Expect(r"^journalctl -u diskpulse \| grep -i -E 'diskstats\|collector'$", has(r"diskstats")),
        Expect(r"^systemctl cat diskpulse \| grep -E 'ProcSubset\|ProtectProc\|procfs'$",
               has(r"^ProcSubset=pid$")),
    ], check, runner=h.runner)
    h.sh("rm %s/hide-proc.conf && systemctl daemon-reload && systemctl restart diskpulse" % d)
    check(dp.wait_until(lambda: h.value("diskpulse_collector_success", collector="diskstats") == 1, 30, poll=1),
          "the drop-in gone: diskstats collected again")


def biolatency(h):
    if not check(dp.wait_until(lambda: h.value("diskpulse_io_latency_up") == 1, 30, poll=1),
                 "the block I/O latency programs are attached under the unit"):
        return
    time.sleep(3)  # Prometheus has seen it attached
    d = "/etc/systemd/system/diskpulse.service.d"
    h.sh("printf '[Service]\\nSystemCallFilter=~bpf\\n' > %s/no-bpf.conf && systemctl daemon-reload && "
         "systemctl restart diskpulse" % d)
    h.wait_firing("DiskpulseIoLatencyLost", 60)
    common = [
        Expect(r"^ls -l /sys/kernel/btf/vmlinux", has(r"/sys/kernel/btf/vmlinux")),
        Expect(r"^grep -E 'CONFIG_DEBUG_INFO_BTF=\|CONFIG_BPF_SYSCALL=", has(r"^CONFIG_DEBUG_INFO_BTF=y$")),
        Expect(r"^cat /sys/kernel/security/lockdown 2>/dev/null$",
               lambda rc, out: ("[integrity]" not in out and "[confidentiality]" not in out, "no lockdown"), rc=None),
    ]
    run_section("DiskpulseIoLatencyLost", {}, common + [
        Expect(r"grep -E '\^diskpulse_io_latency_up'$", has(r"^diskpulse_io_latency_up 0$")),
        Expect(r"^journalctl -u diskpulse -b \| grep -E 'block I/O latency'$", has(r"no block I/O latency histograms.*reason=")),
        Expect(r"^uname -r; journalctl --list-boots", has(r"^\d+\.\d+", r"^\s*0 ")),
        Expect(r"^bpftool btf dump file /sys/kernel/btf/vmlinux", has(r"^2$")),
    ], check, runner=h.runner)
    run_section("The biolatency collector is not attached", {}, common + [
        Expect(r"grep -E '\^diskpulse_io_latency_\(up\|untracked_total\|unslotted_total\)'$",
               has(r"^diskpulse_io_latency_up 0$")),
        Expect(r"^journalctl -u diskpulse \| grep -i -E 'biolatency\|bpf\|btf'$", has(r"reason=")),
        Expect(r"^ldd \"\$\(command -v diskpulse\)\" \| grep libbpf", has(r"libbpf")),
        Expect(r"^systemctl cat diskpulse \| grep -E 'biolatency\|Capabilit\|SystemCallFilter'$",
               has(r"^SystemCallFilter=~bpf$")),
    ], check, runner=h.runner)
    h.sh("rm %s/no-bpf.conf && systemctl daemon-reload && systemctl restart diskpulse" % d)
    check(dp.wait_until(lambda: h.value("diskpulse_io_latency_up") == 1, 30, poll=1),
          "the drop-in gone: the programs attached again")


def exporter_down(h):
    conf_set(h, "diskstats.interval", "banana")
    h.sh("systemctl restart diskpulse")
    h.wait_firing("DiskpulseExporterDown", 90)
    fix = fix_line(h, "DiskpulseExporterDown")
    run_section("DiskpulseExporterDown", {}, [
        Expect(r"^systemctl status diskpulse$", has(r"status=2"), rc=None),
        Expect(r"^journalctl -u diskpulse --since '1 hour ago'$", has(r"banana")),
        Expect(r"^curl -s -m 5 -o /dev/null -w '%\{http_code\} %\{time_total\}s\\n' localhost:9477/-/healthy$",
               [has(r"^000 "), has(r"^200 ")], rc=None),
        Expect(r"^curl -s -m 5 localhost:9477/metrics \| head$", has(r"\A\Z"), rc=None),
        Expect(r"^ss -tanp 'sport = :9477'", lambda rc, out: (
            re.search(r"LISTEN.*users:\(\(\"systemd\",pid=1", out) is not None
            or ("LISTEN" not in out and h.sh("systemctl is-active diskpulse.socket")[1].strip() == "failed"),
            "the socket held by systemd while the service fails, or nothing listening once it gave up")),
        Expect(r"^diskpulse --check-config --config.file=/etc/diskpulse/diskpulse.conf", has(r"\A(?!.*banana)")),
        Expect(r"^systemctl reset-failed diskpulse; systemctl restart diskpulse.socket diskpulse$", has(r"\A\Z")),
    ], check, runner=h.runner, only=lambda c: c.lineno < fix)
    conf_set(h, "diskstats.interval", "1s")  # the shipped file's value
    run_section("DiskpulseExporterDown", {}, [
        Expect(r"^diskpulse --check-config --config.file=/etc/diskpulse/diskpulse.conf", has(r"diskstats.interval")),
        Expect(r"^systemctl reset-failed diskpulse; systemctl restart diskpulse.socket diskpulse$", has(r"\A\Z")),
        Expect(r"^curl -s -m 5 -o /dev/null -w '%\{http_code\} %\{time_total\}s\\n' localhost:9477/-/healthy$",
               has(r"^200 ")),
    ], check, runner=h.runner, only=lambda c: c.lineno > fix)
    h.wait_quiet("DiskpulseExporterDown", 60)


def exporter_absent(h):
    """The diskpulse job's targets come from a file (file_sd), and the file is gone."""
    def switch(conf):
        with open(os.path.join(h.root, "root", "prometheus.yml"), "w") as f:
            f.write(conf)
        h.sh("cp /root/prometheus.yml /etc/prometheus/prometheus.yml && systemctl reload prometheus")
    targets = "/etc/prometheus/targets/diskpulse.json"
    h.sh("mkdir -p /etc/prometheus/targets && echo '[{\"targets\": [\"localhost:9477\"]}]' > " + targets)
    switch(host.prometheus_files(os.path.join(h.root, "tmp-prom"), scrape_file_sd=targets))
    check(dp.wait_until(lambda: (h.prom("query", query='up{job="diskpulse"}') or {}).get("result"), 30, poll=1),
          "Prometheus scrapes diskpulse from the file's targets")
    h.sh("rm " + targets)
    h.wait_firing("DiskpulseExporterAbsent", 90)
    run_section("DiskpulseExporterAbsent", {}, [
        Expect(r"^curl -s localhost:9090/api/v1/query --data-urlencode 'query=count by \(job\) \(up\)'$",
               lambda rc, out: ('"status":"success"' in out and '"job":"diskpulse"' not in out,
                                "no target of job diskpulse")),
        Expect(r"^promtool check config /etc/prometheus/prometheus.yml$",
               has(r"SUCCESS", r"diskpulse.json.*does not exist")),
        Expect(r"^journalctl -u prometheus --since '1 hour ago' \| grep -i -E 'error\|discovery'$",
               lambda rc, out: ("diskpulse.json" not in out, "a deleted file of targets logs nothing"), rc=None),
    ], check, runner=h.runner)
    h.sh("echo '[{\"targets\": [\"localhost:9477\"]}]' > " + targets)
    h.wait_quiet("DiskpulseExporterAbsent", 60)


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("sync", "exporter"):
        sys.exit(__doc__)
    build, group, only = sys.argv[1], sys.argv[2], set(sys.argv[3:])  # only: scenarios, by hand
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
            if group == "sync":
                sync_family(h, db.dev)
            else:
                for fn, args in ((canary_errors, (h, db.dev)), (state_not_saved, (h, st.mnt)),
                                 (config_reload, (h,)), (collector_failing, (h,)), (biolatency, (h,)),
                                 (helper_and_zygote, (h,)), (exporter_down, (h,)), (exporter_absent, (h,))):
                    if not only or fn.__name__ in only:
                        t = time.monotonic()
                        fn(*args)
                        print("%s: %.0f s" % (fn.__name__, time.monotonic() - t))
    print("took %.0f s" % (time.monotonic() - t0))
    pkg.finish()


if __name__ == "__main__":
    main()
