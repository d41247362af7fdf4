#!/usr/bin/env python3
"""One incident, one alert, with the device named: Debian's prometheus scrapes a running diskpulse
(every interval 1 s) with the shipped rules, the sync alert group's durations divided by 20 (its
10 minutes are 30 s), so that the daemon has a history as long as the rule's window before the
incident. The canary's directory (on a disk: /var/tmp) is moved away for a few seconds and moved
back. While it is away the status page's verdict of its disk says the target is down and every
canary series keeps the disk's name; across the whole incident and the rule's window after it,
Prometheus holds exactly one diskpulse_sync_errors_total series for the target and the shipped
DiskpulseSyncProbeErrors fires as one alert, whose labels and description name the device.
Exit 77 (skip) when prometheus is not installed.
Usage: test_probe_errors_alert.py BINARY"""
import os
import shutil
import sys
import tempfile
import time

import dp
import test_prometheus

ALERT = "DiskpulseSyncProbeErrors"
SCALE = 20             # the sync group's 10m window becomes 30 s
WINDOW = 600 / SCALE   # seconds
AWAY = 4               # seconds the directory is away


def verdict(daemon, disk):
    st, _, body = dp.http_get(daemon.url + "/")
    text = body.decode("utf-8", "replace")
    lines = text.split("\nVerdicts\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:] \
        if "\nVerdicts\n" in text else []
    for line in lines:
        if line.split(" ", 1)[0] == disk:
            return line.split(None, 1)[1].strip() if " " in line else ""
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if not shutil.which("prometheus"):
        dp.skip("prometheus is not installed (Debian package prometheus)")
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="diskpulse-erralert-")
    ondisk = tempfile.mkdtemp(prefix="diskpulse-erralert-", dir="/var/tmp")
    victim = os.path.join(ondisk, "canary")
    away = os.path.join(ondisk, "canary.away")
    os.mkdir(victim)
    prom = None
    try:
        with dp.Daemon(binary, "--canary.path=" + victim, "--canary.interval=500ms",
                       "--canary.burst=0", "--no-collector.smart") as daemon:
            def target_disk():
                for (name, labels), _ in daemon.scrape().items():
                    if name == "diskpulse_sync_target_up" and dict(labels).get("path") == victim:
                        return dict(labels).get("device")
                return None
            disk = dp.wait_until(target_disk, 20, poll=0.2)
            if not dp.check(disk, "the canary target %s is on a disk (%r)" % (victim, disk)):
                dp.finish()
            config = test_prometheus.write_config(tmp, daemon.port, time_scale=SCALE,
                                                  scaled_groups=["diskpulse.alerts.sync"])
            prom = test_prometheus.Prometheus(config, tmp)
            up = dp.wait_until(lambda: test_prometheus.query(
                prom.url, 'diskpulse_sync_target_up{path="%s"} == 1' % victim), 60, poll=0.5)
            dp.check(up, "Prometheus scrapes the canary target")
            # a history as long as the rule's window, as on a server that ran before
            time.sleep(WINDOW + 5)
            os.rename(victim, away)
            t0 = time.monotonic()
            down = dp.wait_until(lambda: verdict(daemon, disk) not in (None, "ok"), 10, poll=0.2)
            v = verdict(daemon, disk)
            dp.check(down and v and "canary target down" in v,
                     "while the directory is away, %s's verdict says so: %r" % (disk, v))
            text = daemon.scrape_text()
            labels = [l for l in text.splitlines() if ('path="%s"' % victim) in l]
            dp.check(labels and all(('device="%s"' % disk) in l for l in labels),
                     "every canary series of the target keeps device=%r while it is away (%d)"
                     % (disk, len(labels)))
            time.sleep(max(0.0, AWAY - (time.monotonic() - t0)))
            os.rename(away, victim)
            dp.check(dp.wait_until(lambda: test_prometheus.query(
                prom.url, 'diskpulse_sync_target_up{path="%s"} == 1' % victim), 30, poll=0.5),
                "the target is up again once the directory is back")
            # every alert seen until the window after the incident has passed
            seen = {}
            end = time.monotonic() + WINDOW + 10
            while time.monotonic() < end:
                for a in test_prometheus.api(prom.url, "alerts")["alerts"]:
                    if a["labels"].get("alertname") == ALERT and a["labels"].get("path") == victim:
                        key = tuple(sorted(a["labels"].items()))
                        seen.setdefault(key, a)
                time.sleep(0.5)
            series = test_prometheus.query(
                prom.url, 'count by (device, errno) (last_over_time(diskpulse_sync_errors_total'
                '{path="%s"}[5m]))' % victim)
            dp.check(len(series) == 1 and series[0]["metric"].get("device") == disk,
                     "Prometheus holds one errors series for the incident, device=%r: %s"
                     % (disk, [s["metric"] for s in series]))
            fired = test_prometheus.query(
                prom.url, 'count by (device) (last_over_time(ALERTS{alertname="%s",path="%s",'
                'alertstate="firing"}[5m]))' % (ALERT, victim))
            dp.check(len(seen) == 1 and len(fired) == 1,
                     "%s fired as one alert (%d seen, %d in ALERTS: %s)" % (
                         ALERT, len(seen), len(fired), [dict(k) for k in seen]))
            for a in seen.values():
                desc = a["annotations"].get("description", "")
                dp.check(a["labels"].get("device") == disk and
                         ("device %s, mode" % disk) in " ".join(desc.split()),
                         "its device label and description name %s: %r" % (disk, desc[:160]))
    finally:
        if prom:
            prom.finish()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(ondisk, ignore_errors=True)
    dp.finish()


if __name__ == "__main__":
    main()
