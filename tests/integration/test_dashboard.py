#!/usr/bin/env python3
"""The Grafana dashboard's structure (etc/grafana/diskpulse.json), without Grafana or Prometheus
(tests/integration/test_prometheus.py and test_native_histograms.py run its queries live).

- A heatmap never sums what differs: each sits in a row repeated per device (the block I/O
  ones) or repeats itself per canary target, and its query selects that variable; the block I/O
  heatmaps show one operation at a time (op=~"$op", a single-valued query variable).
- Each heatmap reads a histogram either way Prometheus stores it: the classic buckets
  `sum by (le) (F(NAME_bucket{S}[W]))`, else (`or on ()`, only when there are none) the native
  histogram `sum(F(NAME{S}[W]))`, with the same NAME, selector and window.
- Each query that reads a recording rule falls back on the rule's own expression from
  etc/prometheus/diskpulse.rules.yml (`rule{S} or (expression with S)`), so no panel stays empty
  where the rules are not loaded; its description says so and names the rule file.

Usage: test_dashboard.py [BINARY (unused)]
"""
import os
import re

import yaml

import dp
import grafana_queries as gq

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DASHBOARD = os.path.join(ROOT, "etc", "grafana", "diskpulse.json")
RULES = os.path.join(ROOT, "etc", "prometheus", "diskpulse.rules.yml")

HEATMAP = re.compile(r"sum by \(le\) \((\w+)\((\w+)_bucket(\{[^}]*\})\[([^]]+)\]\)\) "
                     r"or on \(\) sum\((\w+)\((\w+)(\{[^}]*\})\[([^]]+)\]\)\)")


def normal(expr):
    """expr without selectors, whitespace and redundant outer parentheses."""
    e = re.sub(r"\{[^}]*\}", "", "".join(expr.split()))
    while e.startswith("(") and e.endswith(")"):
        depth = 0
        for i, c in enumerate(e):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(e) - 1:
                return e
        e = e[1:-1]
    return e


def main():
    panels = gq.panels_of(DASHBOARD)
    variables = {v["name"]: v for v in gq.json.load(open(DASHBOARD))["templating"]["list"]}
    op = variables.get("op")
    dp.check(op is not None and op["type"] == "query" and not op.get("multi") and not op.get("includeAll"),
             "an op query variable, one operation at a time")

    # The runbook link leads to the page the selected exporter serves, as the alerts' links do.
    links = [l for l in gq.json.load(open(DASHBOARD)).get("links", []) if l.get("title") == "Runbook"]
    inst = variables.get("instance")
    dp.check(len(links) == 1 and links[0]["url"] == "http://${instance}/runbook"
             and inst is not None and not inst.get("multi") and not inst.get("includeAll"),
             "the Runbook link is the selected instance's /runbook (%s)" % [l.get("url") for l in links])

    heatmaps = [p for p in panels if p["type"] == "heatmap"]
    dp.check(len(heatmaps) >= 3, "%d heatmaps" % len(heatmaps))
    for p in heatmaps:
        title = p["title"]
        repeat = p.get("repeat") or (p["_row"] or {}).get("repeat")
        exprs = [t["expr"] for t in p.get("targets", [])]
        dp.check(repeat in ("device", "target") and exprs and all('=~"$%s"' % repeat in e for e in exprs),
                 "%s: repeated per %s, and its query selects it" % (title, repeat))
        for e in exprs:
            m = HEATMAP.fullmatch(e)
            ok = m is not None and m.group(1) == m.group(5) and m.group(2) == m.group(6) \
                and m.group(3) == m.group(7) and m.group(4) == m.group(8)
            dp.check(ok, "%s: classic buckets, else the native histogram, of the same series: %s" % (title, e))
            if m and m.group(2).startswith("diskpulse_io_"):
                dp.check('op=~"$op"' in m.group(3), "%s: one operation ($op), never all summed" % title)
        dp.check("native histogram" in p.get("description", ""), "%s: its description tells of native histograms" % title)

    rules = {}
    for g in yaml.safe_load(open(RULES))["groups"]:
        for r in g["rules"]:
            if "record" in r:
                rules[r["record"]] = r["expr"]
    queries = gq.rule_queries(DASHBOARD)
    dp.check(len(queries) >= 10, "%d queries read a recording rule" % len(queries))
    for p in panels:
        for t in p.get("targets") or []:
            names = gq.metric_names(t.get("expr", ""))
            used = sorted(n for n in names if ":" in n)
            if not used:
                continue
            parts = gq.split_or(t["expr"])
            rule = used[0]
            ok = parts is not None and len(used) == 1 and rule in rules \
                and re.fullmatch(re.escape(rule) + r"\{[^}]*\}", parts[0].strip()) is not None \
                and not any(":" in n for n in gq.metric_names(parts[1])) \
                and normal(parts[1]) == normal(rules[rule])
            dp.check(ok, "%s: %s, else the rule's own expression" % (p["title"], rule))
            if parts:
                sel = re.search(r"\{[^}]*\}", parts[0]).group(0)
                sels = set(re.findall(r"\{[^}]*\}", parts[1]))
                dp.check(sels == {sel}, "%s: the fallback selects what the rule query does (%s)" % (p["title"], sels))
            dp.check("diskpulse.rules.yml" in p.get("description", ""),
                     "%s: its description names the rule file" % p["title"])
    dp.finish()


main()
