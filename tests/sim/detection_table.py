#!/usr/bin/env python3
"""The detection table: how soon the shipped rules flag an aging disk (every alert of it is a warning), and that they stay
quiet on a healthy one, with the spread a disk's noise gives.

For each case, detection_sim drives the canary's real statistics and state file code through
simulated days (noise, a daily load cycle, spikes, weekly maintenance, restarts: see
detection_sim.c) and prints the exporter's gauges every 10 minutes: once without noise and once
for each of the seeds 1 to SEEDS. This replays all of them through the shipped rules with
promtool (etc/prometheus/diskpulse.rules.yml, evaluated every 10 minutes) and reads when each
sync alert first fired in each run. A row gives, per alert, the noise-free figure and the
median and range of the seeds' figures.

promtool is what costs (the simulations take seconds), and its cost is in evaluating the rules
at every 10-minute step: about 50 s of CPU for the steps themselves over the longest case's year,
and about 60 s for each run's series over all the cases. So every run of every case goes into one
`promtool test rules` as series of their own (labels case= and seed=): the steps are evaluated
once for all of them, not once per case and seed.

  detection_table.py BUILD_DIR                 print the table
  detection_table.py BUILD_DIR --check         also hold the bounds below and the README's table
  detection_table.py BUILD_DIR --write-readme  put the table into README.md
  detection_table.py BUILD_DIR --only=CASE     one simulator case (flat, step:2:30, ...) alone,
                                               every run's figures
  detection_table.py BUILD_DIR --seeds=N       N seeds instead of SEEDS (to measure; the
                                               README's table is of SEEDS)

A sanitizer build's simulator runs every case and seed under the sanitizers and is held to the
checks that need no promtool; the replay, whose input is the same, runs on the plain build.
Exit 77 (skip) without promtool.
"""
import concurrent.futures
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RULES = os.path.join(ROOT, "etc", "prometheus", "diskpulse.rules.yml")
README = os.path.join(ROOT, "README.md")
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")
sys.path.insert(0, os.path.join(ROOT, "tests", "rules"))
from check_cadence import rle  # noqa: E402  promtool's expanding notation
BEGIN = "<!-- detection table: python3 tests/sim/detection_table.py BUILD --write-readme -->"
END = "<!-- end of detection table -->"
STEP = 600
ALERTS = ["DiskpulseSyncLatencyDrift", "DiskpulseSyncLatencyDoubled", "DiskpulseSyncLatencyTrend",
          "DiskpulseSyncLatencyDegraded"]
GAUGES = ["diskpulse_sync_drift_ratio", "diskpulse_sync_trend_factor",
          "diskpulse_sync_trend_daily_medians", "diskpulse_sync_degradation_ratio"]
LABELS = 'job="diskpulse",instance="db1:9477",path="/var/lib/pg",device="nvme0n1",mode="fdatasync",regime="idle"'
# The seeds of the README's table: 1 to SEEDS. Each adds about 60 s of promtool's CPU time to
# the 50 s of its steps and the noise-free run's 60 s: nine give a median and a range worth the
# name for about the CPU time the table cost before on the plain and sanitizer builds together.
SEEDS = 9
NOISE_FREE = "noise-free"
# promtool's edge query is checked every CHECK seconds over the last CHECK (the subquery holds
# CHECK / STEP + 1 steps of every firing series; promtool allows 10,000 samples a query).
CHECK = 3600

# name, simulator case, days simulated, change at (days), unit of the table
CASES = [
    ("flat for a year", "flat", 365, 0, "d"),
    ("creep 0.25 %/day", "creep:0.25", 300, 0, "d"),
    ("creep 0.5 %/day", "creep:0.5", 150, 0, "d"),
    ("creep 1 %/day", "creep:1", 90, 0, "d"),
    ("creep 3 %/day", "creep:3", 40, 0, "d"),
    ("step 1.3x", "step:1.3:30", 60, 30, "h"),
    ("step 1.5x", "step:1.5:30", 60, 30, "h"),
    ("step 2x", "step:2:30", 60, 30, "h"),
    ("step 3x", "step:3:30", 60, 30, "h"),
    ("replaced by a 2x faster disk", "replace:2:30", 90, 30, "h"),
    ("2x for two hours", "spell:2:30:2", 45, 30, "h"),
]

# Bounds held by --check, on the noise-free run and on every seed: (case name, alert or None
# for "any", most days/hours, or None: never). A healthy disk (flat, a faster replacement, a
# spell of two hours) fires nothing, Degraded included; the lasting steps fire Degraded within
# hours.
BOUNDS = [
    ("flat for a year", None, None),
    ("replaced by a 2x faster disk", None, None),
    ("2x for two hours", None, None),
    ("creep 1 %/day", "DiskpulseSyncLatencyTrend", 45),
    ("creep 1 %/day", "DiskpulseSyncLatencyDrift", 60),
    ("creep 3 %/day", "DiskpulseSyncLatencyTrend", 25),
    ("creep 0.5 %/day", "DiskpulseSyncLatencyDrift", 120),
    ("step 1.5x", "DiskpulseSyncLatencyDegraded", 24),
    ("step 2x", "DiskpulseSyncLatencyDegraded", 12),
    ("step 2x", "DiskpulseSyncLatencyDrift", 24),
    ("step 3x", "DiskpulseSyncLatencyDegraded", 6),
    ("step 3x", "DiskpulseSyncLatencyDoubled", 24),
]
# And on a creep, Degraded only where the disk itself got slower than its daily load cycle's
# swing (the simulation's +-20 %): never before it is CREEP_DEGRADED times as slow as new. Its
# baseline follows a creep (a 3 %/day one with a lag of about 1.35 in the end) and compares an
# afternoon with a whole day's level; earlier it would be the cycle and the noise firing it, as
# it was with a baseline of the first 6 hours (day 6.6 of the slow creeps, 1.7 to 7 % slower than
# new; day 3.6 of the 3 %/day creep without noise).
CREEP_DEGRADED = 1.2

# What the runbook and the README say of these figures, held by --check: (text, case name,
# alert, run, near), run being "noise-free", a seed, or the seeds' "median", "earliest" or
# "latest". With near None the text holds the figure as the table prints it ("{}" in the text);
# otherwise it gives the figure in round words, and the figure must be within 20 % of near (in
# the case's unit).
RUNBOOK_FIGURES = [
    ("a creep of 1 % a day after about 6 weeks", "creep 1 %/day", "DiskpulseSyncLatencyDrift",
     "median", 42),
    ("0.5 % after about 11 weeks", "creep 0.5 %/day", "DiskpulseSyncLatencyDrift", "median", 77),
    ("0.25 % after about 5 months", "creep 0.25 %/day", "DiskpulseSyncLatencyDrift", "median",
     150),
    ("a lasting 1.5x step after about a day", "step 1.5x", "DiskpulseSyncLatencyDrift", "median",
     24),
    ("2x after about 15 hours", "step 2x", "DiskpulseSyncLatencyDrift", "median", 15),
    ("A creep of 1 % a day (1.35 a month) fires it after about two weeks", "creep 1 %/day",
     "DiskpulseSyncLatencyTrend", "median", 14),
]
DRIFT1, TREND1, DEG = "DiskpulseSyncLatencyDrift", "DiskpulseSyncLatencyTrend", \
    "DiskpulseSyncLatencyDegraded"
README_FIGURES = [
    ("at 1 %/day the noise-free day's median of the drift ratio crosses 1.5 on day {}",
     "creep 1 %/day", DRIFT1, NOISE_FREE, None),
    ("moves it: day {} for the seeds' median", "creep 1 %/day", DRIFT1, "median", None),
    ("median, day {} to", "creep 1 %/day", DRIFT1, "earliest", None),
    ("to {} for their range", "creep 1 %/day", DRIFT1, "latest", None),
    ("(Trend day {} to", "creep 1 %/day", TREND1, "earliest", None),
    ("to {}, Drift day", "creep 1 %/day", TREND1, "latest", None),
    ("Drift day {} to", "creep 1 %/day", DRIFT1, "earliest", None),
    ("to {}).", "creep 1 %/day", DRIFT1, "latest", None),
    ("the 3 %/day creep on day {} without noise", "creep 3 %/day", DEG, NOISE_FREE, None),
    ("and on days {} to", "creep 3 %/day", DEG, "earliest", None),
    ("to {} for the seeds (seed", "creep 3 %/day", DEG, "latest", None),
    ("the earliest, on day {}, when", "creep 3 %/day", DEG, "1", None),
    ("on one seed only, on day {} (seed 3)", "creep 1 %/day", DEG, "3", None),
]


def sim_path(build):
    return os.path.join(build, "tests", "detection_sim")


def simulate(build, case, days, run):
    """The gauges' columns of one run ("noise-free" or a seed), and the times of its lines."""
    out = subprocess.run([sim_path(build), case, str(days), run], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"detection_sim {case} {days} {run}: exit {out.returncode}\n"
                           + out.stderr[-3000:])
    times, cols = [], [[], [], [], []]
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) != 5:
            raise RuntimeError(f"detection_sim {case} {days} {run}: bad line {line!r}")
        times.append(int(f[0]))
        for i in range(4):
            cols[i].append(f[i + 1])
    if times != list(range(0, days * 86400 + 1, STEP)):
        raise RuntimeError(f"detection_sim {case} {days} {run}: lines not every {STEP} s "
                           f"from 0 to day {days}")
    return cols


def simulate_all(build, cases, runs):
    """{(case, run): columns}, the simulations run side by side."""
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for _, case, days, _, _ in cases:
            for run in runs:
                jobs[(case, run)] = pool.submit(simulate, build, case, days, run)
        return {k: f.result() for k, f in jobs.items()}


def sync_rules(tmp):
    """The shipped rules the four alerts of the table need, as they are written, in one group
    evaluated every 10 minutes: the recording rules first, then the alerts. The other rules are
    left out: they read series the simulation does not make (the histogram, errors, probes in
    flight), so they would cost promtool their evaluation at every step and could never fire
    here. One group, because promtool evaluates groups in no fixed order: an alert of another
    group would read a record written 10 minutes before, past Prometheus's 5-minute lookback,
    and see nothing."""
    doc = yaml.safe_load(open(RULES))
    every = [r for g in doc["groups"] for r in g["rules"]]
    records = {r["record"]: r for r in every if "record" in r}
    alerts = [r for r in every if r.get("alert") in ALERTS]
    if sorted(a["alert"] for a in alerts) != sorted(ALERTS):
        raise RuntimeError(f"{RULES} lacks one of {ALERTS}")
    needed, todo = {}, [a["expr"] for a in alerts]
    while todo:  # the recording rules the alerts read, and those these read
        expr = todo.pop()
        for name, r in records.items():
            if name not in needed and re.search(r"(?<![\w:])" + re.escape(name) + r"(?![\w:])",
                                                expr):
                needed[name] = r
                todo.append(r["expr"])
    rules = [r for r in every if r.get("record") in needed] + alerts
    path = os.path.join(tmp, "sync.rules.yml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "diskpulse.sync.replay", "interval": f"{STEP}s",
                                    "rules": rules}]}, f, sort_keys=False)
    return path


def first_firings(cases, runs, sims, tmp):
    """{(case, run): {alert: seconds from the start}}: when each alert first fired in each
    run, read from promtool. The time is that of the first evaluation at which the alert was
    firing (every 10 minutes): each hour an expression asks for the evaluations of that hour at
    which an alert was firing and had not been 10 minutes before."""
    lines = ["rule_files:", f"  - {sync_rules(tmp)}", f"evaluation_interval: {STEP}s", "tests:",
             f"  - interval: {STEP}s", "    input_series:"]
    for _, case, _, _, _ in cases:
        for run in runs:
            for name, col in zip(GAUGES, sims[(case, run)]):
                lines += [f"      - series: '{name}{{{LABELS},case=\"{case}\",seed=\"{run}\"}}'",
                          f"        values: '{rle(col)}'"]
    lines.append("    promql_expr_test:")
    firing = 'ALERTS{alertstate="firing"}'
    edge = (f"min by (case, seed, alertname) (min_over_time(timestamp({firing} unless {firing} "
            f"offset {STEP}s)[{CHECK}s:{STEP}s]))")
    end = max(c[2] for c in cases) * 86400
    for t in range(CHECK, end + CHECK, CHECK):
        lines += [f"      - expr: '{edge}'", f"        eval_time: {t}s", "        exp_samples: []"]
    path = os.path.join(tmp, "detect.test.yml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    p = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True)
    text = p.stdout + p.stderr
    if "err:" in text or (p.returncode != 0 and "got:" not in text):
        raise RuntimeError("promtool failed:\n" + text[-3000:])
    ends = {case: days * 86400 for _, case, days, _, _ in cases}
    first = {(case, run): {} for _, case, _, _, _ in cases for run in runs}
    for got in re.findall(r"^\s*got: (.*)$", text, re.M):
        for labels, value in re.findall(r"\{([^}]*)\} (\S+?)(?:,|$)", got):
            lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            t = round(float(value))
            key = (lab["case"], lab["seed"])
            if key not in first or t > ends[lab["case"]]:  # past its case's last day
                continue
            first[key][lab["alertname"]] = min(first[key].get(lab["alertname"], t), t)
    return first


def results_of(cases, runs, sims, first):
    """{name: {run: {alert: seconds from the change, "last day's drift": median}}}."""
    out = {}
    for name, case, _, change, _ in cases:
        out[name] = {}
        for run in runs:
            r = {a: t - change * 86400 for a, t in first[(case, run)].items()}
            # the median drift ratio of the last day: about 1 after a replacement (a new
            # reference)
            last = sorted(float(v) for v in sims[(case, run)][0][-144:] if v != "_")
            r["last day's drift"] = last[len(last) // 2] if last else None
            out[name][run] = r
    return out


def fmt(sec, unit):
    """A figure: days with a decimal for creeps, hours for the rest; "never"."""
    if sec is None:
        return "never"
    if sec < 0:
        return "before the change (%.1f h)" % (sec / 3600)
    return f"{sec / (86400 if unit == 'd' else 3600):.1f}"


def spread(times):
    """The seeds' figures (None: never fired): their median, counting "never" as later than any
    figure, and the first and last of those that fired, and how many fired."""
    fired = sorted(t for t in times if t is not None)
    n = len(times)
    key = fired + [None] * (n - len(fired))
    med = key[n // 2] if n % 2 else (
        None if key[n // 2] is None else statistics.median([key[n // 2 - 1], key[n // 2]]))
    return med, (fired[0] if fired else None), (fired[-1] if fired else None), len(fired)


def cell(r, runs, alert, unit):
    """One alert of one row: the noise-free figure / the seeds' median (their range; how many
    fired, when not all)."""
    seeds = [x for x in runs if x != NOISE_FREE]
    med, lo, hi, fired = spread([r[s].get(alert) for s in seeds])
    out = f"{fmt(r[NOISE_FREE].get(alert), unit)} / {fmt(med, unit)}"
    if fired == 0:
        return out
    rng = fmt(lo, unit) if lo == hi else f"{fmt(lo, unit)}–{fmt(hi, unit)}"
    return out + (f" ({rng})" if fired == len(seeds) else f" ({fired} of {len(seeds)}: {rng})")


def table(results, runs):
    seeds = len([x for x in runs if x != NOISE_FREE])
    out = ["| case | in | " + " | ".join(a.replace("DiskpulseSyncLatency", "") for a in ALERTS)
           + " |", "|---|---|" + "---|" * len(ALERTS)]
    for name, _, _, _, unit in CASES:
        r = results[name]
        out.append(f"| {name} | {'days' if unit == 'd' else 'hours'} | "
                   + " | ".join(cell(r, runs, a, unit) for a in ALERTS) + " |")
    out.append("")
    out.append(f"Each cell: the first firing without noise / the median of {seeds} seeds (the "
               "earliest and latest of them; how many fired, when not all). Creeps in days from "
               "the first probe, the other cases in hours from the change on day 30.")
    return "\n".join(out)


def check_sim_only(results, runs):
    """The checks that need no promtool. Returns the failures."""
    failed = 0
    for run in runs:
        drift = results["replaced by a 2x faster disk"][run].get("last day's drift")
        ok = drift is not None and 0.8 <= drift <= 1.25
        print(f"{'ok' if ok else 'FAIL'}: {run}: a replaced disk gets a reference of its own: the "
              f"drift ratio ends at {drift} (about 1; against the old disk's reference it would "
              "be 0.5)")
        failed += not ok
    return failed


def check(results, runs, tab):
    failed = check_sim_only(results, runs)
    for name, alert, most in BOUNDS:
        unit = next(c[4] for c in CASES if c[0] == name)
        scale = 86400 if unit == "d" else 3600
        for run in runs:
            r = {a: t for a, t in results[name][run].items() if a in ALERTS}
            got = min(r.values()) if alert is None and r else r.get(alert)
            if most is None and alert is None:
                ok = not r
                what = f"{name}: no alert"
            elif most is None:
                ok = got is None
                what = f"{name}: no {alert}"
            else:
                ok = got is not None and 0 <= got <= most * scale
                what = f"{name}: {alert} within {most} {'days' if unit == 'd' else 'hours'}"
            print(f"{'ok' if ok else 'FAIL'}: {run}: {what} (first: "
                  f"{', '.join(f'{a} {fmt(t, unit)}' for a, t in sorted(r.items())) or 'none'})")
            failed += not ok
    for name, case, _, _, _ in CASES:
        if not case.startswith("creep:"):
            continue
        per_day = 1 + float(case.split(":")[1]) / 100
        for run in runs:
            t = results[name][run].get(DEG)
            slower = None if t is None else per_day ** (t / 86400)
            ok = slower is None or slower >= CREEP_DEGRADED
            print(f"{'ok' if ok else 'FAIL'}: {run}: {name}: {DEG} not before the disk is "
                  f"{CREEP_DEGRADED}x as slow as new (day {math.log(CREEP_DEGRADED) / math.log(per_day):.1f}; "
                  + ("it never fired)" if t is None else f"it fired on day {fmt(t, 'd')}, {slower:.2f}x)"))
            failed += not ok
    seeds = [x for x in runs if x != NOISE_FREE]
    runbook, readme = open(RUNBOOK).read(), open(README).read()
    for where, doc, figures in (("runbook", runbook, RUNBOOK_FIGURES),
                                ("README", readme, README_FIGURES)):
        flat = " ".join(doc.split())
        for text, name, alert, run, near in figures:
            unit = next(c[4] for c in CASES if c[0] == name)
            r = results[name]
            which = ("median", "earliest", "latest")
            t = spread([r[s].get(alert) for s in seeds])[which.index(run)] if run in which \
                else r[run].get(alert)
            got = None if t is None else t / (86400 if unit == "d" else 3600)
            if near is None:  # the text gives the figure itself, as the table prints it
                text = text.format(fmt(t, unit))
                ok = text in flat
            else:  # the text gives it in round words: within 20 % of near
                ok = text in flat and got is not None and abs(got - near) <= 0.2 * got
            print(f"{'ok' if ok else 'FAIL'}: the {where}'s \"{text}\" "
                  + (f"(not in the {where}) " if text not in flat else "")
                  + f"against {name}'s {alert}, {run}: {fmt(t, unit)}")
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
    return failed


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build, opts = sys.argv[1], sys.argv[2:]
    only = [o.split("=", 1)[1] for o in opts if o.startswith("--only=")]
    nseeds = [int(o.split("=", 1)[1]) for o in opts if o.startswith("--seeds=")]
    if nseeds and ("--check" in opts or "--write-readme" in opts):
        print("--seeds: the README's table and its check are of "
              f"{SEEDS} seeds", file=sys.stderr)
        return 2
    runs = [NOISE_FREE] + [str(s) for s in range(1, (nseeds or [SEEDS])[0] + 1)]
    cases = [c for c in CASES if not only or c[1] in only]
    if not cases:
        print(f"--only: no case {only}; the cases are {[c[1] for c in CASES]}", file=sys.stderr)
        return 2
    sanitized = b"__asan_init" in open(sim_path(build), "rb").read()
    if not sanitized and not shutil.which("promtool"):
        print("SKIP: promtool not installed (Debian package prometheus)")
        return 77
    sims = simulate_all(build, cases, runs)
    if sanitized:
        print(f"ran {len(sims)} simulations ({len(cases)} cases, noise-free and {len(runs) - 1} "
              "seeds) under the sanitizers")
        print("skip: the promtool replay (a sanitizer build: the plain build replays the same "
              "simulations)")
        results = results_of(cases, runs, sims, {k: {} for k in sims})
        return 1 if "--check" in opts and check_sim_only(results, runs) else 0
    with tempfile.TemporaryDirectory() as tmp:
        first = first_firings(cases, runs, sims, tmp)
    results = results_of(cases, runs, sims, first)
    if only:
        for name, _, _, _, unit in cases:
            for run in runs:
                r = results[name][run]
                print(f"{name}, {run}: " + ", ".join(
                    f"{a.replace('DiskpulseSyncLatency', '')} {fmt(r.get(a), unit)}"
                    for a in ALERTS) + "; last day's drift %s" % r["last day's drift"])
        return 0
    tab = table(results, runs)
    print(tab)
    if "--write-readme" in opts:
        text = open(README).read()
        i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
        open(README, "w").write(text[:i] + "\n" + tab + "\n" + text[j:])
        print("README.md updated")
    if "--check" not in opts:
        return 0
    return 1 if check(results, runs, tab) else 0


if __name__ == "__main__":
    sys.exit(main())
