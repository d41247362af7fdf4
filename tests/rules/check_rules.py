#!/usr/bin/env python3
"""Checks the shipped Prometheus rules, scrape config and Alertmanager routing.

promtool check rules on every etc/prometheus/*.rules.yml, promtool check config, promtool test
rules on every tests/rules/*.test.yml, and the contract around them: every alert has a
severity, a summary, a description and a runbook_url in the one shape below, whose anchor is a heading's id in the page docs/runbook_html.py makes
of docs/runbook.md (the page the daemon serves at /runbook); every critical alert's description
begins with the first thing to do (an imperative from FIRST_VERBS) and its runbook section with
"**First:**" and one of those verbs; the diskpulse:runbook:info url works as the one knob (a
copy of the rules with it set to https://{instance}/runbook and to a wiki gives those links);
every alert is shown firing and shown quiet by some test; every recording rule is checked by value; amtool accepts the routing and sends critical to
the pager and warning to the ticket queue. Exit 77 (skip) when promtool is not installed.
"""
import glob
import importlib.util
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
# Every shipped rules file: the host's (RULES) and the fleet's (diskpulse-fleet.rules.yml).
RULE_FILES = sorted(glob.glob(os.path.join(ROOT, "etc", "prometheus", "*.rules.yml")))
PROMCONF = os.path.join(ROOT, "etc", "prometheus", "prometheus.yml")
AMCONF = os.path.join(ROOT, "etc", "alertmanager", "diskpulse-route.yml")
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")
CONVERTER = os.path.join(ROOT, "docs", "runbook_html.py")
# Every runbook_url: the base from the diskpulse:runbook:info rule's url label (DEFAULT_URL
# while that series is missing), {instance} in it replaced by the alert's instance, then '#'
# and the section. The two exporter alerts cannot link to the exporter that is down: they put in
# the instance of another diskpulse that is up (Down; else its own instance), or whose last scrape
# in the past day succeeded (Absent; else the default listen address).
DEFAULT_URL = "http://{instance}/runbook"
BASE = ('{{ $url := "%s" }}{{ with query "last_over_time(diskpulse:runbook:info[1h])" }}'
        '{{ with (. | first).Labels.url }}{{ $url = . }}{{ end }}{{ end }}' % DEFAULT_URL)
PUT = "{{ reReplaceAll `\\{instance\\}` %s $url }}#"
PEER = ('{{ with query `%s` }}'
        '{{ $at = (. | sortByLabel "instance" | first).Labels.instance }}{{ end }}')
RUNBOOK_URLS = {
    "DiskpulseExporterDown": BASE + "{{ $at := $labels.instance }}"
    + PEER % 'up{job="diskpulse"} == 1' + PUT % "$at",
    "DiskpulseExporterAbsent": BASE + '{{ $at := "localhost:9477" }}'
    + PEER % 'last_over_time(up{job="diskpulse"}[1d]) == 1' + PUT % "$at",
}
RUNBOOK_URL = BASE + PUT % "$labels.instance"
# A critical alert pages someone: its description begins with what to do first, one of these
# imperatives, and so does its runbook section, after "**First:** ". Each is something to do now,
# at night: "Plan" (a replacement this week) is not, and an alert whose first step it is is a
# warning (the README's severity policy). A warning's section has no "**First:**": a ticket has
# no first step before the rest.
FIRST_VERBS = ("Check", "Copy", "Fail", "Move", "Remount", "Replace", "Restore", "Stop", "Thaw")
README = os.path.join(ROOT, "README.md")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


KNOB_TEST = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'diskpulse_sync_stuck{job="diskpulse",instance="db1:9477",path="/srv",device="sda",mode="fdatasync"}'
        values: '1x10'
      - series: 'up{job="diskpulse",instance="db1:9477"}'
        values: '1x10'
      - series: 'up{job="diskpulse",instance="db2:9477"}'
        values: '0x10'
    alert_rule_test:
      - eval_time: 5m
        alertname: DiskpulseSyncProbeStuck
        exp_alerts:
          - exp_labels: {severity: critical, job: diskpulse, instance: "db1:9477", path: /srv, device: sda, mode: fdatasync}
            exp_annotations: {ANNOTATIONS_STUCK}
      - eval_time: 9m
        alertname: DiskpulseExporterDown
        exp_alerts:
          - exp_labels: {severity: critical, job: diskpulse, instance: "db2:9477"}
            exp_annotations: {ANNOTATIONS_DOWN}
"""


def documented_urls():
    """The url: lines the README, the runbook and the rules' comments give as the one setting
    for a reachable runbook (a wiki, a reverse proxy)."""
    found = []
    for path in (README, RUNBOOK, RULES):
        text = open(path).read()
        found += re.findall(r"`url: (\S+?)`", text) + re.findall(r"^\s*#\s+url: (\S+)$", text, re.M)
    return sorted(set(found))


def check_url_knob(rules):
    """A copy of the rules with diskpulse:runbook:info's url changed gives every link from it:
    the scheme of an exporter that serves TLS, a wiki's address (no {instance}), and each url
    line the documentation gives."""
    import copy
    urls = ["https://{instance}/runbook", "https://wiki.example.org/diskpulse/runbook"]
    documented = documented_urls()
    if len(documented) < 2:
        fail(f"the documentation gives {documented} as reachable runbook urls (a wiki, a proxy)")
    for url, stuck, down in [(u, u.replace("{instance}", "db1:9477") + "#diskpulsesyncprobestuck",
                              u.replace("{instance}", "db1:9477") + "#diskpulseexporterdown")
                             for u in urls + documented]:
        doc = copy.deepcopy(rules)
        by_name = {}
        for g in doc["groups"]:
            for r in g["rules"]:
                if r.get("record") == "diskpulse:runbook:info":
                    r["labels"]["url"] = url
                by_name[r.get("alert") or r.get("record")] = r
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "rules.yml"), "w") as f:
                yaml.safe_dump(doc, f)
            test = KNOB_TEST
            # The expected annotations are the rules' own but for the link (only it is at test).
            for name, want, key in (("DiskpulseSyncProbeStuck", stuck, "{ANNOTATIONS_STUCK}"),
                                    ("DiskpulseExporterDown", down, "{ANNOTATIONS_DOWN}")):
                r = by_name[name]
                ann = {"runbook_url": want}
                for k in ("summary", "description"):
                    v = r["annotations"][k]
                    for lab, val in (("path", "/srv"), ("device", "sda"),
                                     ("instance", "db2:9477" if "Down" in name else "db1:9477")):
                        # {{ with $labels.X }}A{{ . }}B{{ else }}C{{ end }}: X is set here
                        v = re.sub(r"\{\{ with \$labels\.%s \}\}(.*?)\{\{ else \}\}.*?\{\{ end \}\}" % lab,
                                   lambda m, val=val: m.group(1).replace("{{ . }}", val), v)
                        v = v.replace("{{ $labels.%s }}" % lab, val)
                    ann[k] = v
                test = test.replace(key, yaml.safe_dump(ann, default_flow_style=True, width=10**6).strip())
            with open(os.path.join(tmp, "knob.test.yml"), "w") as f:
                f.write(test)
            rc, out = run(["promtool", "test", "rules", os.path.join(tmp, "knob.test.yml")])
            if rc != 0 or "SUCCESS" not in out:
                fail(f"with diskpulse:runbook:info url={url!r} the links are not {stuck!r}, "
                     f"{down!r}:\n{out}")
            else:
                print(f"url={url}: {stuck}, {down}")


def check_readme_severities(alerts):
    """The README's alert table gives each alert the rules' severity, and its severity policy
    names exactly the critical ones (as `SyncProbeStuck` for DiskpulseSyncProbeStuck)."""
    text = open(README).read()
    table = dict(re.findall(r"^\| `(Diskpulse\w+)` \| (\w+) \|", text, re.M))
    for name, r in sorted(alerts.items()):
        sev = r.get("labels", {}).get("severity")
        if table.get(name) != sev:
            fail(f"{name}: the README's alert table says {table.get(name)!r}, the rules {sev!r}")
    m = re.search(r"\*\*Severity policy\.\*\*(.*?)Everything else is `warning`", text, re.S)
    named = {"Diskpulse" + n for n in re.findall(r"`([A-Z]\w+)`", m.group(1))} if m else set()
    critical = {n for n, r in alerts.items() if r.get("labels", {}).get("severity") == "critical"}
    if named != critical:
        fail(f"the README's severity policy names {sorted(named)} as paging, the rules' critical "
             f"alerts are {sorted(critical)}")


def main():
    if not shutil.which("promtool"):
        print("SKIP: promtool not installed (Debian package prometheus)")
        return 77

    for path in RULE_FILES:
        rc, out = run(["promtool", "check", "rules", path])
        if rc != 0 or "SUCCESS" not in out or "WARNING" in out.upper():
            fail("promtool check rules:\n" + out)
    # prometheus.yml and the fleet's edge and central examples.
    for conf in [PROMCONF] + sorted(glob.glob(os.path.join(ROOT, "etc", "prometheus", "fleet-*.yml"))):
        rc, out = run(["promtool", "check", "config", conf])
        if rc != 0:
            fail("promtool check config:\n" + out)

    rules = yaml.safe_load(open(RULES))
    alerts, records = {}, {}
    groups = [g for path in RULE_FILES for g in yaml.safe_load(open(path))["groups"]]
    for g in groups:
        for r in g["rules"]:
            if "alert" in r:
                if r["alert"] in alerts:
                    fail(f"alert {r['alert']} defined twice")
                alerts[r["alert"]] = r
            else:
                records[r["record"]] = r
    if not alerts or not records:
        fail("no alerts or no recording rules found")

    # Annotations, severities and the runbook, as the page made of it has them.
    text = open(RUNBOOK).read() if os.path.exists(RUNBOOK) else ""
    headings = set(re.findall(r"^## (\S+)\s*$", text, re.M))
    spec = importlib.util.spec_from_file_location("runbook_html", CONVERTER)
    conv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conv)
    try:
        _, ids = conv.page(text)
    except conv.MarkdownError as e:
        fail("docs/runbook.md cannot be made HTML: %s" % e)
        ids = []
    sections = {}
    for m in re.finditer(r"^## (\S+)\s*\n\n(.*?)(?=^## |\Z)", text, re.M | re.S):
        sections[m.group(1)] = m.group(2)
    info = records.get("diskpulse:runbook:info", {}).get("labels", {}).get("url")
    if info != DEFAULT_URL:
        fail(f"diskpulse:runbook:info's url {info!r} is not the alerts' fallback {DEFAULT_URL!r}")
    for name, r in alerts.items():
        sev = r.get("labels", {}).get("severity")
        if sev not in ("warning", "critical"):
            fail(f"{name}: severity {sev!r}")
        ann = r.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            if not ann.get(key, "").strip():
                fail(f"{name}: no {key}")
        url = ann.get("runbook_url", "")
        want = RUNBOOK_URLS.get(name, RUNBOOK_URL) + name.lower()
        if url != want:
            fail(f"{name}: runbook_url {url!r} is not {want!r}")
        if name not in headings:
            fail(f"{name}: docs/runbook.md has no '## {name}' section")
        if name.lower() not in ids:
            fail(f"{name}: the runbook page has no id {name.lower()!r}")
        if sev == "critical":
            first = ann.get("description", "").split(" ", 1)[0]
            if first not in FIRST_VERBS:
                fail(f"{name}: a critical alert's description begins with {first!r}, not with "
                     f"the first thing to do (one of {', '.join(FIRST_VERBS)})")
            m = re.match(r"\*\*First:\*\* (\w+)", sections.get(name, ""))
            if not m or m.group(1) not in FIRST_VERBS:
                fail(f"{name}: its runbook section does not begin with '**First:** ' and one of "
                     f"{', '.join(FIRST_VERBS)}")
        elif "**First:**" in sections.get(name, ""):
            fail(f"{name}: a {sev} alert, yet its runbook section has a '**First:**' step (only "
                 "a page has one)")
    for h in sorted(headings - set(alerts)):
        if h.startswith("Diskpulse"):
            fail(f"docs/runbook.md has a section for {h}, which is no alert")

    check_readme_severities(alerts)
    check_url_knob(rules)

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
