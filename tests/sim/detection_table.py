#!/usr/bin/env python3
"""The detection table: how soon the shipped rules page on an aging disk, and that they stay
quiet on a healthy one.

For each case, detection_sim drives the canary's real statistics and state file code through
simulated days (noise, a daily load cycle, spikes, weekly maintenance, restarts: see
detection_sim.c) and prints the exporter's gauges every 10 minutes. This replays them through
the shipped rules with promtool (etc/prometheus/diskpulse.rules.yml, evaluated every 10 minutes)
and reads, from promtool's report, when each sync alert first fires.

  detection_table.py BUILD_DIR                 print the table
  detection_table.py BUILD_DIR --check         also hold the bounds below and the README's table
  detection_table.py BUILD_DIR --write-readme  put the table into README.md
  detection_table.py BUILD_DIR --only=CASE     one simulator case (flat, step:2:30, ...) alone

Exit 77 (skip) without promtool.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RULES = os.path.join(ROOT, "etc", "prometheus", "diskpulse.rules.yml")
README = os.path.join(ROOT, "README.md")
sys.path.insert(0, os.path.join(ROOT, "tests", "rules"))
from check_cadence import rle  # noqa: E402  promtool's expanding notation
from promtime import seconds  # noqa: E402
BEGIN = "<!-- detection table: python3 tests/sim/detection_table.py BUILD --write-readme -->"
END = "<!-- end of detection table -->"
STEP = 600
ALERTS = ["DiskpulseSyncLatencyDrift", "DiskpulseSyncLatencyDoubled", "DiskpulseSyncLatencyTrend",
          "DiskpulseSyncLatencyDegraded"]
LABELS = 'job="diskpulse",instance="db1:9477",path="/var/lib/pg",device="nvme0n1",mode="fdatasync",regime="idle"'

# name, simulator case, days simulated, change at (days), check every (s), unit of the table
CASES = [
    ("flat for a year", "flat", 365, 0, 6 * 3600, "d"),
    ("creep 0.25 %/day", "creep:0.25", 300, 0, 6 * 3600, "d"),
    ("creep 0.5 %/day", "creep:0.5", 150, 0, 6 * 3600, "d"),
    ("creep 1 %/day", "creep:1", 90, 0, 6 * 3600, "d"),
    ("creep 3 %/day", "creep:3", 40, 0, 6 * 3600, "d"),
    ("step 1.3x", "step:1.3:30", 60, 30, 1800, "h"),
    ("step 1.5x", "step:1.5:30", 60, 30, 1800, "h"),
    ("step 2x", "step:2:30", 60, 30, 1800, "h"),
    ("step 3x", "step:3:30", 60, 30, 1800, "h"),
    ("replaced by a 2x faster disk", "replace:2:30", 90, 30, 1800, "h"),
    ("2x for two hours", "spell:2:30:2", 45, 30, 1800, "h"),
]

# Bounds held by --check: (case name, alert or None for "any", most days/hours, or None: never)
BOUNDS = [
    ("flat for a year", None, None),
    ("replaced by a 2x faster disk", None, None),
    ("2x for two hours", None, None),
    ("creep 1 %/day", "DiskpulseSyncLatencyTrend", 45),
    ("creep 1 %/day", "DiskpulseSyncLatencyDrift", 60),
    ("creep 3 %/day", "DiskpulseSyncLatencyTrend", 25),
    ("creep 0.5 %/day", "DiskpulseSyncLatencyDrift", 120),
    ("step 2x", "DiskpulseSyncLatencyDrift", 24),
    ("step 3x", "DiskpulseSyncLatencyDoubled", 24),
]


def simulate(build, case, days):
    sim = os.path.join(build, "tests", "detection_sim")
    out = subprocess.run([sim, case, str(days), "1"], capture_output=True, text=True, check=True)
    cols = [[], [], [], []]
    for line in out.stdout.splitlines():
        f = line.split()
        for i in range(4):
            cols[i].append(f[i + 1])
    return cols


def sync_rules(tmp):
    """The shipped rules of the sync canary alone, as they are written, in one group evaluated
    every 10 minutes: the recording rules first, then the alerts. The other rules are left out
    (evaluating them over simulated months costs minutes and sees no data). One group, because
    promtool evaluates groups in no fixed order: an alert of another group would read a record
    written 10 minutes before, past Prometheus's 5-minute lookback, and see nothing."""
    doc = yaml.safe_load(open(RULES))
    rules = [r for g in doc["groups"] for r in g["rules"]
             if "sync" in (r.get("alert", "") + r.get("record", "")).lower()]
    rules.sort(key=lambda r: "alert" in r)
    path = os.path.join(tmp, "sync.rules.yml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "diskpulse.sync.replay", "interval": f"{STEP}s",
                                    "rules": rules}]}, f, sort_keys=False)
    return path


def first_firing(build, case, days, change, every, tmp):
    cols = simulate(build, case, days)
    names = ["diskpulse_sync_drift_ratio", "diskpulse_sync_trend_factor",
             "diskpulse_sync_trend_daily_medians", "diskpulse_sync_degradation_ratio"]
    lines = ["rule_files:", f"  - {sync_rules(tmp)}", f"evaluation_interval: {STEP}s", "tests:",
             f"  - interval: {STEP}s", "    input_series:"]
    for name, col in zip(names, cols):
        lines += [f"      - series: '{name}{{{LABELS}}}'", f"        values: '{rle(col)}'"]
    lines.append("    promql_expr_test:")
    end = days * 86400
    for t in range(every, end + 1, every):
        for a in ALERTS:
            lines += [f"      - expr: 'count(ALERTS{{alertname=\"{a}\",alertstate=\"firing\"}})'",
                      f"        eval_time: {t}s", "        exp_samples: []"]
    path = os.path.join(tmp, "detect.test.yml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    p = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True)
    text = p.stdout + p.stderr
    first = {}
    for m in re.finditer(r'expr: "count\(ALERTS\{alertname=\\"(\w+)\\".*?time: (\S+?),', text):
        a, t = m.group(1), seconds(m.group(2))
        first[a] = min(first.get(a, t), t)
    if p.returncode != 0 and not first:
        raise RuntimeError("promtool failed:\n" + text[-3000:])
    out = {a: (t - change * 86400) for a, t in first.items()}
    # the median drift ratio of the last day: about 1 after a replacement (a new reference)
    last = sorted(float(v) for v in cols[0][-144:] if v != "_")
    out["last day's drift"] = last[len(last) // 2] if last else None
    return out


def fmt(sec, unit):
    if sec is None:
        return "never"
    if sec < 0:
        return "before the change (%.1f h)" % (sec / 3600)
    if unit == "d":
        return f"day {sec / 86400:.1f}"
    return f"{sec / 3600:.1f} h"


def table(results):
    out = ["| case | " + " | ".join(a.replace("DiskpulseSyncLatency", "") for a in ALERTS) + " |",
           "|---|" + "---|" * len(ALERTS)]
    for name, _, _, _, _, unit in CASES:
        r = results[name]
        out.append(f"| {name} | " + " | ".join(fmt(r.get(a), unit) for a in ALERTS) + " |")
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build, opts = sys.argv[1], sys.argv[2:]
    if not shutil.which("promtool"):
        print("SKIP: promtool not installed (Debian package prometheus)")
        return 77
    only = [o.split("=", 1)[1] for o in opts if o.startswith("--only=")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, case, days, change, every, _ in CASES:
            if only and case not in only:
                continue
            results[name] = first_firing(build, case, days, change, every, tmp)
    if only:
        for name, r in results.items():
            print(name, {a: t for a, t in sorted(r.items(), key=str)})
        return 0
    tab = table(results)
    print(tab)
    if "--write-readme" in opts:
        text = open(README).read()
        i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
        open(README, "w").write(text[:i] + "\n" + tab + "\n" + text[j:])
        print("README.md updated")
    if "--check" not in opts:
        return 0
    failed = 0
    drift = results["replaced by a 2x faster disk"].get("last day's drift")
    ok = drift is not None and 0.8 <= drift <= 1.25
    print(f"{'ok' if ok else 'FAIL'}: a replaced disk gets a reference of its own: the drift ratio "
          f"ends at {drift} (about 1; against the old disk's reference it would be 0.5)")
    failed += not ok
    for name, alert, most in BOUNDS:
        unit = next(c[5] for c in CASES if c[0] == name)
        r = {a: t for a, t in results[name].items() if a in ALERTS}
        got = min(r.values()) if alert is None and r else r.get(alert)
        scale = 86400 if unit == "d" else 3600
        if most is None:
            ok = not r
            what = f"{name}: no alert"
        else:
            ok = got is not None and 0 <= got <= most * scale
            what = f"{name}: {alert} within {most} {'days' if unit == 'd' else 'hours'}"
        print(f"{'ok' if ok else 'FAIL'}: {what} (first: "
              f"{', '.join(f'{a} {fmt(t, unit)}' for a, t in sorted(r.items())) or 'none'})")
        failed += not ok
    text = open(README).read()
    if BEGIN in text and END in text:
        i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
        same = text[i:j].strip() == tab.strip()
        print(f"{'ok' if same else 'FAIL'}: the README's detection table is this one"
              + ("" if same else " (regenerate: detection_table.py BUILD --write-readme)"))
        failed += not same
    else:
        print("FAIL: README.md has no detection table markers")
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
