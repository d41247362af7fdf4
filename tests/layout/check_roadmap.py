#!/usr/bin/env python3
"""The README's Roadmap names only what does not ship yet.

A roadmap that names something which ships sends a reader looking for a feature they already
have, or tells them it is missing (the Roadmap once announced the terminal view of `/` and the
fleet comparison after both had shipped). So the Roadmap is a list, and each item names, in
backticks, the test that will show it shipped (`package/arm64`): that test must not exist yet
(`ctest -N` of the build), so an item fails this check the day its test lands and is moved out
of the Roadmap into the README's description. And no item names a part of what ships: an
endpoint the daemon serves (the README's HTTP section), a flag of `diskpulse --help`, an alert of
the shipped rules or a metric family of the man page.

Usage: check_roadmap.py SOURCE_DIR BUILD_DIR
       check_roadmap.py --self-test SOURCE_DIR BUILD_DIR"""
import glob
import os
import re
import subprocess
import sys

import yaml

TEST_NAME = re.compile(r"^[a-z]+/[a-z0-9_.-]+$")


def section(text, title):
    """The body of the README's '## title' section, or None."""
    m = re.search(r"^## %s\n(.*?)(?=^## |\Z)" % re.escape(title), text, re.M | re.S)
    return m.group(1) if m else None


def shipped(root, build):
    """{kind: set of names} of what ships: endpoints, flags, alerts, metric families, tests."""
    readme = open(os.path.join(root, "README.md")).read()
    http = section(readme, "HTTP") or ""
    endpoints = set()
    for head in re.findall(r"^- `([^`]*)`", http, re.M):  # "- `GET|HEAD /metrics`: ..."
        endpoints.update(w for w in head.split() if w.startswith("/"))
    helptext = subprocess.run([os.path.join(build, "diskpulse"), "--help"], capture_output=True,
                              text=True, check=True).stdout
    flags = set(re.findall(r"^\s+(--[a-z0-9.-]+)", helptext, re.M))
    flags |= {"--no-" + f[2:] for f in flags}
    alerts = set()
    for path in glob.glob(os.path.join(root, "etc", "prometheus", "*.rules.yml")):
        for g in yaml.safe_load(open(path))["groups"]:
            alerts |= {r["alert"] for r in g["rules"] if "alert" in r}
    man = open(os.path.join(root, "docs", "diskpulse.8.scd")).read()
    metrics = set(re.findall(r"\*((?:diskpulse|process)_[a-z0-9_]+)\*", man))
    tests = set()
    out = subprocess.run(["ctest", "-N", "--test-dir", build], capture_output=True, text=True,
                         check=True).stdout
    tests = set(re.findall(r"^\s*Test\s+#\d+: (\S+)", out, re.M))
    if not (endpoints and flags and alerts and metrics and tests):
        raise RuntimeError("found nothing of: %s" % [k for k, v in (
            ("endpoints", endpoints), ("flags", flags), ("alerts", alerts), ("metrics", metrics),
            ("tests", tests)) if not v])
    return {"endpoint": endpoints, "flag": flags, "alert": alerts, "metric family": metrics,
            "test": tests}


def check(readme_text, ships):
    errors = []
    body = section(readme_text, "Roadmap")
    if body is None:
        return ["README.md has no '## Roadmap' section"]
    items, prose = [], []
    for para in re.split(r"\n(?=- )|\n\n", body.strip()):
        (items if para.startswith("- ") else prose).append(" ".join(para.split()))
    if not items:
        errors.append("the Roadmap is no list of items (%r...)" % body.strip()[:80])
    for text in prose + items:
        words = set(re.findall(r"--[a-z0-9.-]+|\w+", text))
        for kind in ("flag", "alert", "metric family"):
            for name in sorted(words & ships[kind]):
                errors.append("the Roadmap names the %s %s, which ships: %r" % (kind, name, text[:80]))
        for tok in re.findall(r"`([^`]*)`", text):
            if tok in ships["endpoint"]:
                errors.append("the Roadmap names the endpoint %s, which ships: %r" % (tok, text[:80]))
    for text in items:
        named = [t for t in re.findall(r"`([^`]*)`", text) if TEST_NAME.match(t)]
        if len(named) != 1:
            errors.append("a Roadmap item names %s test (one, in backticks, is the rule): %r"
                          % ("no" if not named else "more than one", text[:80]))
        for t in named:
            if t in ships["test"]:
                errors.append("a Roadmap item's test %s exists: it ships, so the item belongs in "
                              "the README's description, not the Roadmap: %r" % (t, text[:80]))
    return errors


def self_test(root, build):
    """The Roadmap as it stood when it named two shipped features, and items that name a test
    that exists, a flag, an alert, a metric and no test: each is refused; the README's own is
    accepted."""
    ships = shipped(root, build)
    readme = open(os.path.join(root, "README.md")).read()
    head = readme[:readme.index("## Roadmap")] + "## Roadmap\n\n"
    cases = [
        ("the Roadmap before issue 41",
         "TLS and basic auth ship (see \"TLS and basic authentication\" above), and the runbook "
         "served by the\ndaemon itself, one click from an alert. Next: a plain-text view of `/` "
         "for a terminal; and comparing each\ndrive with its peers across a fleet, in "
         "Prometheus.\n", "the endpoint /, which ships"),
        ("an item whose test exists", "- Drives compared across a fleet (`fleet/backfill`).\n",
         "fleet/backfill exists"),
        ("an item naming a flag", "- Sampling tuned by `--diskstats.window` (`unit/nothing-yet`).\n",
         "flag --diskstats.window"),
        ("an item naming an alert", "- DiskpulseSyncLatencyDrift made smarter (`sim/nothing-yet`).\n",
         "alert DiskpulseSyncLatencyDrift"),
        ("an item naming a metric", "- diskpulse_sync_drift_ratio per hour (`sim/nothing-yet`).\n",
         "metric family diskpulse_sync_drift_ratio"),
        ("an item without its test", "- Something new, one day.\n", "names no test"),
    ]
    fails = 0
    own = check(readme, ships)
    print("%s: the README's own Roadmap is accepted%s" % ("ok" if not own else "FAIL",
                                                          ": " + "; ".join(own) if own else ""))
    fails += bool(own)
    for what, roadmap, expect in cases:
        errors = check(head + roadmap, ships)
        ok = any(expect in e for e in errors)
        print("%s: %s -> %s" % ("ok" if ok else "FAIL", what, "; ".join(errors) or "accepted"))
        fails += not ok
    return 1 if fails else 0


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--self-test":
        return self_test(args[1], args[2])
    if len(args) != 2:
        print(__doc__)
        return 2
    root, build = args
    errors = check(open(os.path.join(root, "README.md")).read(), shipped(root, build))
    for e in errors:
        print("FAIL: " + e)
    if not errors:
        print("ok: the Roadmap names only what does not ship yet, each item with its test to come")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
