#!/usr/bin/env python3
"""Checks the shipped Prometheus rules, scrape config and Alertmanager routing.

promtool check rules/config, promtool test rules on every tests/rules/*.test.yml, and the
contract around them: every alert has a severity, a summary, a description and a runbook_url
whose anchor is a section of docs/runbook.md; every alert is shown firing and shown quiet by some
test; every recording rule is checked by value; amtool accepts the routing and sends critical to
the pager and warning to the ticket queue. Exit 77 (skip) when promtool is not installed.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RULES = os.path.join(ROOT, "etc", "prometheus", "diskpulse.rules.yml")
PROMCONF = os.path.join(ROOT, "etc", "prometheus", "prometheus.yml")
AMCONF = os.path.join(ROOT, "etc", "alertmanager", "diskpulse-route.yml")
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")
# Every runbook_url: the base from the diskpulse:runbook:info rule's url label, then the section.
RUNBOOK_URL = '{{ with query "last_over_time(diskpulse:runbook:info[1h])" }}{{ (. | first).Labels.url }}{{ end }}#'

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    if not shutil.which("promtool"):
        print("SKIP: promtool not installed (Debian package prometheus)")
        return 77

    rc, out = run(["promtool", "check", "rules", RULES])
    if rc != 0 or "SUCCESS" not in out or "WARNING" in out.upper():
        fail("promtool check rules:\n" + out)
    rc, out = run(["promtool", "check", "config", PROMCONF])
    if rc != 0:
        fail("promtool check config:\n" + out)

    rules = yaml.safe_load(open(RULES))
    alerts, records = {}, {}
    for g in rules["groups"]:
        for r in g["rules"]:
            if "alert" in r:
                if r["alert"] in alerts:
                    fail(f"alert {r['alert']} defined twice")
                alerts[r["alert"]] = r
            else:
                records[r["record"]] = r
    if not alerts or not records:
        fail("no alerts or no recording rules found")

    # Annotations, severities and the runbook.
    text = open(RUNBOOK).read() if os.path.exists(RUNBOOK) else ""
    headings = set(re.findall(r"^## (\S+)\s*$", text, re.M))
    for name, r in alerts.items():
        sev = r.get("labels", {}).get("severity")
        if sev not in ("warning", "critical"):
            fail(f"{name}: severity {sev!r}")
        ann = r.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            if not ann.get(key, "").strip():
                fail(f"{name}: no {key}")
        url = ann.get("runbook_url", "")
        if url != RUNBOOK_URL + name.lower():
            fail(f"{name}: runbook_url {url!r} is not {RUNBOOK_URL + name.lower()!r}")
        if name not in headings:
            fail(f"{name}: docs/runbook.md has no '## {name}' section")
    for h in sorted(headings - set(alerts)):
        if h.startswith("Diskpulse"):
            fail(f"docs/runbook.md has a section for {h}, which is no alert")

    # promtool test rules, and which alerts and records the tests exercise.
    tests = sorted(glob.glob(os.path.join(HERE, "*.test.yml")))
    if not tests:
        fail("no tests/rules/*.test.yml")
    fired, quiet, checked = set(), set(), set()
    for t in tests:
        rc, out = run(["promtool", "test", "rules", t])
        if rc != 0 or "SUCCESS" not in out:
            fail(f"promtool test rules {os.path.basename(t)}:\n{out}")
        doc = yaml.safe_load(open(t))
        for group in doc["tests"]:
            for case in group.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
            for case in group.get("promql_expr_test", []):
                checked.update(re.findall(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", case["expr"]))
    for name in sorted(alerts):
        if name not in fired:
            fail(f"{name}: no test makes it fire")
        if name not in quiet:
            fail(f"{name}: no test shows it quiet")
    for name in sorted(set(fired | quiet) - set(alerts)):
        fail(f"a test names {name}, which is no alert")
    for name in sorted(records):
        if name not in checked:
            fail(f"recording rule {name}: no promql_expr_test checks its value")

    # Alertmanager routing: valid, and each severity reaches its receiver.
    if shutil.which("amtool"):
        rc, out = run(["amtool", "check-config", AMCONF])
        if rc != 0:
            fail("amtool check-config:\n" + out)
        for labels, want in (
            (["alertname=DiskpulseSyncProbeStuck", "severity=critical"], "diskpulse-page"),
            (["alertname=DiskpulseWearForecast", "severity=warning"], "diskpulse-ticket"),
            (["alertname=NodeFilesystemAlmostFull", "severity=critical"], "default"),
        ):
            p = subprocess.run(
                ["amtool", "config", "routes", "test", "--config.file=" + AMCONF] + labels,
                capture_output=True, text=True)
            got = p.stdout.strip()
            if got != want:
                fail(f"route for {labels}: {got!r}, want {want!r}")
        for alert in alerts:
            if not alert.startswith("Diskpulse"):
                fail(f"{alert}: the route matches alertname=~Diskpulse.*")
    else:
        print("note: amtool not installed (prometheus-alertmanager): routing not checked")

    print(f"{len(alerts)} alerts, {len(records)} recording rules, {len(tests)} test files")
    print(f"{len(failures)} failed" if failures else "all rule checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
