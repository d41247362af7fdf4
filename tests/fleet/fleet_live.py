#!/usr/bin/env python3
"""The fleet live, on two tiers: synthetic exporters of the simulated fleet (fleetgen.py: 200
hosts, 1,040 drives, one Python process serving every host's page at /HOST/metrics), scraped
by two edge Prometheus servers (one a site, configured from etc/prometheus/fleet-edge.yml with
the host rules and the fleet's edge rules, remote write left out), federated by a central one
(etc/prometheus/fleet-central-federate.yml) that runs diskpulse-fleet.rules.yml on what it
receives. Scrapes, federation and the peer rules every 5 s instead of 15 s to 5 min (the rules'
own windows are untouched but for the alert's day and hour, which a live run cannot wait for;
tests/fleet/fleet.py scores the alert as shipped).

Checked on the central tier: it holds each drive's two series and nothing of the hosts' own
(no diskpulse_* or device:* series), with the identity joined at the edge; it computes a peer
ratio for the drives that write, near each fail-slow drive's slowdown and near 1 for the
others; the slow host's drives are slow against the fleet but not against each other. The
series each tier holds per drive and per host are printed. The edges' runbook address
(diskpulse:runbook:info, its url set as the README says for hardened hosts: a wiki) reaches the
central tier, and the link of DiskpulseDriveSlowerThanPeers made there (its runbook_url as
shipped, on a copy of the alert that fires on a ratio at once) is that wiki's section, not the
default http://{instance}/runbook of a host a browser cannot reach.
Exit 77 (skip) without prometheus. Usage: fleet_live.py [--hosts N] [--timeout S]"""
import argparse
import http.server
import os
import shutil
import sys
import tempfile
import threading
import time

import yaml

import fleetgen
from promserver import Prometheus

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ETC = os.path.join(ROOT, "etc", "prometheus")
sys.path.insert(0, os.path.join(ROOT, "tests", "rules"))
import promtime  # noqa: E402

SPEEDUP = 60  # 5m rule groups every 5 s
# The edges' diskpulse:runbook:info url: a wiki, as the README gives it for hardened hosts.
RUNBOOK_URL = "https://wiki.example.net/diskpulse/runbook"


def pages(fleet, began):
    """Each host's page at the wall-clock time of the request: counters that grew at its drives'
    rates (those of the fleet's second day, each fail-slow drive slow) since began."""
    t = fleet.start + 2 * 86400
    data = fleet.series(t, t + fleetgen.STEP)
    rates = {}
    for d, (aw, io) in data.items():
        slow = d.fault[1] / d.slowdown(t) if d.fault else 1.0
        rates[d] = (aw[0] * slow, io[0])

    def render(host):
        el = time.time() - began
        out = ["# TYPE diskpulse_disk_writes_completed_total counter",
               "# TYPE diskpulse_disk_write_time_seconds_total counter",
               "# TYPE diskpulse_disk_info gauge"]
        for i, d in enumerate(host.drives):
            aw, io = rates[d]
            inst, dev, model, serial, wwn, rev = d.labels
            out.append('diskpulse_disk_writes_completed_total{device="%s"} %.3f' % (dev, io * el))
            out.append('diskpulse_disk_write_time_seconds_total{device="%s"} %.6f'
                       % (dev, io * aw * el))
            out.append('diskpulse_disk_info{device="%s",major="259",minor="%d",model="%s",'
                       'serial="%s",wwn="%s",path="pci-0000:%02x:00.0",revision="%s",'
                       'rotational="%d"} 1' % (dev, i, model, serial, wwn, i, rev,
                                                model.startswith("ST")))
        return ("\n".join(out) + "\n").encode()
    return rates, render


def serve(fleet, render):
    hosts = {"/%s/metrics" % h.instance.split(".")[0]: h for h in fleet.hosts}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            h = hosts.get(self.path)
            body = render(h) if h else b"not found\n"
            self.send_response(200 if h else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def host_rules(work):
    """diskpulse.rules.yml as shipped but for the runbook url (RUNBOOK_URL)."""
    rules = yaml.safe_load(open(os.path.join(ETC, "diskpulse.rules.yml")))
    for g in rules["groups"]:
        for r in g["rules"]:
            if r.get("record") == "diskpulse:runbook:info":
                r["labels"]["url"] = RUNBOOK_URL
    path = os.path.join(work, "diskpulse.rules.yml")
    with open(path, "w") as f:
        yaml.safe_dump(rules, f)
    return path


def edge_config(site, hosts, port, work):
    conf = yaml.safe_load(open(os.path.join(ETC, "fleet-edge.yml")))
    conf["global"].update(scrape_interval="5s", evaluation_interval="5s",
                          external_labels={"edge": "site-%d" % site})
    conf["rule_files"] = [host_rules(work) if f == "diskpulse.rules.yml" else os.path.join(ETC, f)
                          for f in conf["rule_files"]]
    del conf["remote_write"]  # the federation variant
    job = conf["scrape_configs"][0]
    job.update(scrape_interval="5s", scrape_timeout="4s")
    job["static_configs"] = [{"targets": ["127.0.0.1:%d" % port],
                              "labels": {"__metrics_path__": "/%s/metrics"
                                         % h.instance.split(".")[0], "instance": h.instance}}
                             for h in hosts]
    return yaml.safe_dump(conf)


def central_config(work, edges):
    conf = yaml.safe_load(open(os.path.join(ETC, "fleet-central-federate.yml")))
    conf["global"]["evaluation_interval"] = "5s"
    rules = yaml.safe_load(open(os.path.join(ETC, conf["rule_files"][0])))
    link = None
    for g in rules["groups"]:
        g["interval"] = promtime.scale_durations(g.get("interval", "1m"), SPEEDUP)
        for r in g["rules"]:
            if "alert" in r:
                link = dict(r, alert=r["alert"] + "Link", annotations=dict(r["annotations"]))
                r["expr"] = promtime.scale_durations(r["expr"], SPEEDUP)
                r["for"] = promtime.scale_durations(r["for"], SPEEDUP)
    # The shipped alert's runbook_url on an alert that fires at once for a drive whose ratio is
    # high: the link a person gets from the central tier, made of what it received.
    link["expr"] = "drive:diskpulse_disk_write_await_seconds:peer_ratio > 1.5"
    link.pop("for", None)
    rules["groups"].append({"name": "runbook-link", "interval": "5s", "rules": [link]})
    path = os.path.join(work, "fleet-central.rules.yml")
    with open(path, "w") as f:
        yaml.safe_dump(rules, f)
    conf["rule_files"] = [path]
    job = conf["scrape_configs"][0]
    job.update(scrape_interval="5s", scrape_timeout="4s")
    job["static_configs"] = [{"targets": ["127.0.0.1:%d" % e.port for e in edges]}]
    return yaml.safe_dump(conf)


def value(prom, expr):
    r = prom.query(expr)
    return float(r[0]["value"][1]) if r else None


def num_series(prom):
    return prom.api("status/tsdb")["headStats"]["numSeries"]


def check_links(central, failures):
    """The edges' runbook address reached the central tier, and its alert links there; the
    remote-write variant (fleet-edge.yml's write_relabel_configs, not run live here) keeps it
    too."""
    import re
    edge = yaml.safe_load(open(os.path.join(ETC, "fleet-edge.yml")))
    keep = [c["regex"] for w in edge["remote_write"] for c in w["write_relabel_configs"]
            if c.get("action") == "keep"]
    for name in ("diskpulse:runbook:info", "drive:diskpulse_disk_write_await_seconds:rate5m",
                 "drive:diskpulse_disk_write_iops:rate5m"):
        if not keep or not re.fullmatch(keep[0], name):
            failures.append("fleet-edge.yml's remote_write does not keep %s (%s)" % (name, keep))
    info = central.query("diskpulse:runbook:info")
    urls = sorted({(r["metric"].get("edge"), r["metric"].get("url")) for r in info})
    print("central tier: diskpulse:runbook:info %s" % urls)
    if urls != [("site-0", RUNBOOK_URL), ("site-1", RUNBOOK_URL)]:
        failures.append("the central tier has diskpulse:runbook:info %s, not each edge's %s"
                        % (urls, RUNBOOK_URL))
    want = RUNBOOK_URL + "#diskpulsedriveslowerthanpeers"
    deadline = time.monotonic() + 60
    while True:
        alerts = [a for a in central.api("alerts")["alerts"]
                  if a["labels"]["alertname"] == "DiskpulseDriveSlowerThanPeersLink"]
        if alerts or time.monotonic() > deadline:
            break
        time.sleep(2)
    links = sorted({a["annotations"].get("runbook_url") for a in alerts})
    print("central tier: DiskpulseDriveSlowerThanPeers' runbook_url for %d drives: %s"
          % (len(alerts), links))
    if not alerts or links != [want]:
        failures.append("the central alert links to %s, not %s" % (links, want))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    if not shutil.which("prometheus"):
        print("SKIP: prometheus not installed (Debian package prometheus)")
        return 77
    fleet = fleetgen.Fleet(args.hosts)
    print(fleet.describe())
    began = time.time()
    rates, render = pages(fleet, began - 600)
    srv = serve(fleet, render)
    work = tempfile.mkdtemp(prefix="fleet-live-")
    proms, failures = [], []
    try:
        edges = []
        for site in (0, 1):
            hosts = [h for h in fleet.hosts if h.site == site]
            edges.append(Prometheus(work, "edge%d" % site,
                                    edge_config(site, hosts, srv.server_address[1], work)))
        central = Prometheus(work, "central", central_config(work, edges))
        proms = edges + [central]
        for p in proms:
            p.start()
        n = len(fleet.drives)
        want = {
            "count(drive:diskpulse_disk_write_await_seconds:rate5m)": n,
            "count(drive:diskpulse_disk_write_iops:rate5m{model!='',serial!='',wwn!=''})": n,
        }
        deadline = time.monotonic() + args.timeout
        while True:
            got = {e: value(central, e) for e in want}
            ratios = central.query("drive:diskpulse_disk_write_await_seconds:peer_ratio")
            if (all(got[e] == want[e] for e in want) and len(ratios) >= 0.95 * n) \
                    or time.monotonic() > deadline:
                break
            time.sleep(5)
        # Every drive's series in: three more rounds of the peer rules, so that no median is
        # one of a round that saw only part of the fleet.
        time.sleep(20)
        ratios = central.query("drive:diskpulse_disk_write_await_seconds:peer_ratio")
        print("central tier after %.0f s: %s, %d peer ratios" % (time.time() - began, got,
                                                                  len(ratios)))
        for e in want:
            if got[e] != want[e]:
                failures.append("%s is %s, not %d" % (e, got[e], want[e]))
        own = value(central, "count({__name__=~'diskpulse_.+|device:.+'})")
        if own:
            failures.append("the central tier holds %d series of the hosts' own" % own)
        by = {(r["metric"]["instance"], r["metric"]["device"]): float(r["value"][1])
              for r in ratios}
        if len(by) < 0.95 * n:
            failures.append("%d peer ratios for %d drives" % (len(by), n))
        for d in fleet.faulty:
            got_r, factor = by.get((d.host.instance, d.device)), d.fault[1]
            print("  %s %s (%s) %.1fx slower: peer ratio %s" % (
                d.host.instance, d.device, fleetgen.MODELS[d.model][0], factor,
                "%.2f" % got_r if got_r else "none"))
            if got_r is None or not 0.8 * factor <= got_r <= 1.25 * factor or got_r < 1.1:
                failures.append("%s %s: peer ratio %s for a %.1fx slowdown"
                                % (d.host.instance, d.device, got_r, factor))
        check_links(central, failures)
        slow_host = {(h.instance, d.device) for h in [fleet.slow_host] for d in h.drives}
        faulty = {(d.host.instance, d.device) for d in fleet.faulty}
        healthy = sorted(v for k, v in by.items() if k not in faulty and k not in slow_host)
        if healthy:
            p50, p95 = healthy[len(healthy) // 2], healthy[int(0.95 * len(healthy))]
            print("  healthy drives: median peer ratio %.2f, 95th percentile %.2f" % (p50, p95))
            if not (0.9 <= p50 <= 1.1 and p95 < 1.2):
                failures.append("healthy drives' peer ratios: median %.2f, p95 %.2f" % (p50, p95))
        for inst, dev in sorted(slow_host):
            pr = by.get((inst, dev))
            hr = value(central, "drive:diskpulse_disk_write_await_seconds:host_ratio"
                       "{instance='%s',device='%s'}" % (inst, dev))
            print("  slow host %s %s: peer ratio %s, host ratio %s" % (inst, dev, pr, hr))
            if pr is None or pr < 1.3 or hr is None or not 0.75 <= hr <= 1.25:
                failures.append("slow host %s %s: peer ratio %s, host ratio %s" % (inst, dev, pr, hr))
        # What each tier holds.
        for i, e in enumerate(edges):
            hosts = sum(1 for h in fleet.hosts if h.site == i)
            drives = sum(len(h.drives) for h in fleet.hosts if h.site == i)
            fleet_series = value(e, "count({__name__=~'drive:.+'})")
            print("edge %d: %d hosts, %d drives, %d series (%.1f a drive; the fleet's own: %d, %.1f"
                  " a drive)" % (i, hosts, drives, num_series(e), num_series(e) / drives,
                                 fleet_series, fleet_series / drives))
        # Active series; the head also keeps for a while those of drives that changed band.
        cs = value(central, "count({__name__=~'.+'})")
        print("central: %d series for %d drives on %d hosts: %.2f a drive (%d in its head)" % (
            cs, n, len(fleet.hosts), cs / n, num_series(central)))
        if cs > 5 * n + 25 * len(fleetgen.MODELS) + 10:
            failures.append("the central tier holds %d series, over 5 a drive" % cs)
    finally:
        for p in proms:
            p.stop()
        srv.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print("%d failed" % len(failures) if failures else "the central tier holds and compares "
          "what it should")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
