#!/usr/bin/env python3
"""The fleet finds its slow drive: the shipped peer rules (etc/prometheus/diskpulse-fleet.rules.yml)
run over days of a simulated fleet's history on a real Prometheus, and their alert scored.

The fleet (fleetgen.py: by default 200 hosts, 1,040 drives of four models, 8 fail-slow drives
1.3x-3x slower, constant and intermittent, and one host slow as a whole) gives the edge tier's
two series per drive, drive:diskpulse_disk_write_{await_seconds,iops}:rate5m with their identity
labels, one sample every 5 minutes: what the central tier receives. They are written as
OpenMetrics and made blocks with promtool tsdb create-blocks-from openmetrics; a Prometheus
serves them; the central groups' recording rules, exactly as shipped, are evaluated over the
whole history with promtool tsdb create-blocks-from rules (in the order their inputs need: a
rule reads the series of earlier ones, so each stage's blocks join the data and Prometheus is
restarted before the next); then DiskpulseDriveSlowerThanPeers's expression is asked over the
history (query_range at its group's interval) and its `for` applied as the rule manager does.

Scored: a drive is named when the alert fires for it at any time. Precision, recall, the time
from each fault's onset to the alert firing. With --check the bounds below are held; exit 77
(skip) without prometheus or promtool.
Usage: fleet.py [--hosts N] [--days D] [--check] [--keep DIR]"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

import fleetgen
from promserver import Prometheus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "rules"))
from promtime import seconds as duration  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RULES = os.path.join(ROOT, "etc", "prometheus", "diskpulse-fleet.rules.yml")
ALERT = "DiskpulseDriveSlowerThanPeers"

# What the test holds (docs/fleet.md has the measured table): every injected drive named, no
# healthy drive (the slow host's included) ever named, each constant fault within 12 hours of
# its onset and each intermittent one within 30.
BOUNDS = {"recall": 1.0, "false_positives": 0, "constant_h": 12.0, "intermittent_h": 30.0}


def write_openmetrics(fleet, path, t0, t1):
    """The edge tier's series, as the central tier receives them (edge: the site's Prometheus)."""
    data = fleet.series(t0, t1)
    steps = range(len(next(iter(data.values()))[0]))
    with open(path, "w") as f:
        for k, name in enumerate(("drive:diskpulse_disk_write_await_seconds:rate5m",
                                  "drive:diskpulse_disk_write_iops:rate5m")):
            f.write("# TYPE %s gauge\n" % name)
            for d, values in data.items():
                inst, dev, model, serial, wwn, rev = d.labels
                lab = ('%s{job="diskpulse",edge="edge-%d",instance="%s",device="%s",model="%s",'
                       'serial="%s",wwn="%s",revision="%s"} ' % (name, d.host.site, inst, dev,
                                                                 model, serial, wwn, rev))
                f.write("".join("%s%.6g %d\n" % (lab, values[k][i], t0 + i * fleetgen.STEP)
                                for i in steps))
        f.write("# EOF\n")
    return len(data) * 2 * len(steps)


def stages(groups):
    """The central recording rules in the order their inputs need: stage n reads only the
    received series and the records of stages before it."""
    made = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    stage = {}
    pending = [(g, r) for g in groups for r in g["rules"] if "record" in r]
    while pending:
        ready = [(g, r) for g, r in pending
                 if all(n not in r["expr"] or n in stage for n in made if n != r["record"])]
        if not ready:
            raise RuntimeError("rules read each other in a circle")
        for g, r in ready:
            pending.remove((g, r))
        n = max([0] + [stage[m] for m in stage]) + 1
        for g, r in ready:
            stage.setdefault(r["record"], n)
        yield [(g, r) for g, r in ready]


def backfill_rules(prom, work, groups, t0, t1):
    for i, rules in enumerate(stages(groups), 1):
        doc = {"groups": []}
        for g, r in rules:
            if not doc["groups"] or doc["groups"][-1]["name"] != g["name"]:
                doc["groups"].append({"name": g["name"], "interval": g.get("interval", "1m"),
                                      "rules": []})
            doc["groups"][-1]["rules"].append(r)
        # Named relative to the work directory: a group's evaluation times are offset within
        # its interval by a hash of its name and its file's path as given, and a temporary
        # directory's random name in that path would move them from run to run (a 5-minute
        # rule against 5-minute samples then sees other samples at the edge of each window).
        name = "stage%d.rules.yml" % i
        with open(os.path.join(work, name), "w") as f:
            yaml.safe_dump(doc, f)
        out = os.path.join(work, "stage%d" % i)
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "rules", "--quiet",
                        "--url=" + prom.url, "--start=%d" % t0, "--end=%d" % t1,
                        "--output-dir=" + out, name], check=True, cwd=work)
        prom.stop()
        for b in os.listdir(out):
            shutil.move(os.path.join(out, b), os.path.join(prom.data, b))
        prom.start()
        print("stage %d: %s" % (i, ", ".join(sorted({r["record"] for _, r in rules}))))


def alert_firing(prom, rule, interval, t0, t1):
    """{(instance, device): (first firing time, labels, value)} for the alert over [t0, t1]:
    its expression at every evaluation, pending from its first and firing once `for` has
    passed without a gap."""
    hold = duration(rule.get("for", "0s"))
    first = {}
    for s in prom.query_range(rule["expr"], t0, t1, interval):
        active = None
        prev = None
        for ts, v in s["values"]:
            ts = float(ts)
            if prev is None or ts - prev > interval * 1.5:
                active = ts
            prev = ts
            if ts - active >= hold:
                key = (s["metric"]["instance"], s["metric"]["device"])
                first[key] = (ts, s["metric"], float(v))
                break
    return first


def score(fleet, fired):
    faulty = {(d.host.instance, d.device): d for d in fleet.faulty}
    rows, fp = [], sorted(k for k in fired if k not in faulty)
    for key, d in faulty.items():
        onset, factor, duty, spell, _ = d.fault
        hit = fired.get(key)
        rows.append({"model": fleetgen.MODELS[d.model][0], "factor": factor, "duty": duty,
                     "spell_h": spell / 3600, "drive": "%s %s" % key,
                     "ttd_h": (hit[0] - onset) / 3600 if hit else None,
                     "ratio": hit[2] if hit else None})
    tp = sum(1 for r in rows if r["ttd_h"] is not None)
    return rows, fp, tp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--days", type=float, default=3)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--keep", help="work in this directory and keep it")
    ap.add_argument("--end", type=int, help="the history's end, a midnight in epoch seconds")
    args = ap.parse_args()
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            print("SKIP: %s not installed (Debian package prometheus)" % tool)
            return 77
    began = time.monotonic()
    work = args.keep or tempfile.mkdtemp(prefix="fleet-")
    os.makedirs(work, exist_ok=True)
    # History ending at a midnight (UTC) an hour ago or more: every run puts the simulated days
    # at the same place in Prometheus' time, whose blocks (2 hours for the rules' backfill, a day
    # for the samples') are aligned to the epoch. --end names another midnight, to show that the
    # table does not depend on which day it is.
    t1 = args.end if args.end is not None else (int(time.time()) - 3600) // 86400 * 86400
    if t1 % 86400:
        print("--end %d is not a midnight (UTC)" % t1)
        return 2
    t0 = t1 - int(args.days * 86400)
    fleet = fleetgen.Fleet(args.hosts, args.seed, start=t0,
                           onset=(86400, max(86400, args.days * 86400 - 1.4 * 86400)))
    print(fleet.describe())
    groups = yaml.safe_load(open(RULES))["groups"]
    alerts = [(g, r) for g in groups for r in g["rules"] if r.get("alert") == ALERT]
    prom = Prometheus(work, "central", "global: {}\n")
    try:
        om = os.path.join(work, "edge.om")
        n = write_openmetrics(fleet, om, t0, t1)
        print("%d samples of %d series written (%.0f s)" % (n, 2 * len(fleet.drives),
                                                            time.monotonic() - began))
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                        "--max-block-duration=24h", om, prom.data], check=True)
        os.unlink(om)
        print("blocks made (%.0f s)" % (time.monotonic() - began))
        prom.start()
        backfill_rules(prom, work, groups, t0, t1)
        print("rules backfilled (%.0f s)" % (time.monotonic() - began))
        g, rule = alerts[0]
        fired = alert_firing(prom, rule, duration(g.get("interval", "1m")), t0, t1)
    finally:
        prom.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    rows, fp, tp = score(fleet, fired)
    elapsed = time.monotonic() - began
    print("\n| model | slowdown | when | time to alert | alert value |")
    print("|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["duty"] < 1, r["factor"])):
        when = "always" if r["duty"] >= 1 else "%d %% (%g h spells)" % (round(r["duty"] * 100),
                                                                       r["spell_h"])
        print("| %s | %.1fx | %s | %s | %s |" % (
            r["model"], r["factor"], when,
            "%.1f h" % r["ttd_h"] if r["ttd_h"] is not None else "missed",
            "%.2f" % r["ratio"] if r["ratio"] is not None else "-"))
    precision = tp / (tp + len(fp)) if tp + len(fp) else 1.0
    recall = tp / len(rows)
    print("\n%s; %d named: %d of %d fail-slow drives (recall %.2f), %d healthy (precision %.2f)%s"
          % (fleet.describe(), tp + len(fp), tp, len(rows), recall, len(fp), precision,
             ": " + ", ".join("%s %s" % k for k in fp[:10]) if fp else ""))
    print("%.0f s in all" % elapsed)
    if not args.check:
        return 0
    bad = []
    if recall < BOUNDS["recall"]:
        bad.append("recall %.2f < %.2f" % (recall, BOUNDS["recall"]))
    if len(fp) > BOUNDS["false_positives"]:
        bad.append("%d healthy drives named" % len(fp))
    for r in rows:
        lim = BOUNDS["constant_h" if r["duty"] >= 1 else "intermittent_h"]
        if r["ttd_h"] is not None and r["ttd_h"] > lim:
            bad.append("%s (%.1fx) named after %.1f h > %g h" % (r["drive"], r["factor"],
                                                                   r["ttd_h"], lim))
    if len(fleet.drives) < 1000 or len(fleet.hosts) < 200:
        bad.append("a fleet of %d hosts / %d drives is below 200 / 1,000" % (len(fleet.hosts),
                                                                             len(fleet.drives)))
    for b in bad:
        print("FAIL:", b)
    print("bounds held" if not bad else "%d bounds broken" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
