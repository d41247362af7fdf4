#!/usr/bin/env python3
"""A real Prometheus scrapes a running diskpulse with the shipped config, rules and dashboard.

Starts Debian's prometheus on loopback (temp storage) with etc/prometheus/prometheus.yml and
diskpulse.rules.yml, the scrape and evaluation intervals set to 1 s and the target set to a
diskpulse with two canary targets probed every second (each cycle a spaced probe and a burst of
16); lets it scrape for a minute; then checks through Prometheus' HTTP API that the target is up
and was scraped as OpenMetrics, that every family is stored with its type and every series of
the page is stored, that every rule evaluates without error and the recording rules hold sane
numbers (the canary's per regime), that nothing fires on this healthy
host, that every PromQL expression of etc/grafana/diskpulse.json is accepted and returns data
where its metrics exist, and finally that removing one canary directory makes
DiskpulseSyncProbeErrors fire for that target, with errno ENOENT.

Usage: test_prometheus.py BINARY
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

import yaml

import dp
import grafana_queries

sys.path.insert(0, os.path.join(dp.HERE, "..", "rules"))
from promtime import scale_durations  # noqa: E402

ROOT = os.path.join(dp.HERE, "..", "..")
PROMDIR = os.path.join(ROOT, "etc", "prometheus")
DASHBOARD = os.path.join(ROOT, "etc", "grafana", "diskpulse.json")
SCRAPE_FOR = 60  # seconds of scraping before the checks

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def api(base, path, **params):
    """GET base/api/v1/path; returns the decoded 'data', or raises with Prometheus' error."""
    url = base + "/api/v1/" + path
    if params:
        url += "?" + urllib.parse.urlencode(params)
    status, _, body = dp.http_get(url, timeout=10)
    doc = json.loads(body)
    if status != 200 or doc.get("status") != "success":
        raise RuntimeError("%s: %s %s" % (path, status, doc.get("error", body[:200])))
    return doc["data"]


def query(base, expr):
    return api(base, "query", query=expr)["result"]


def families(text):
    """{family name: type} of an exposition's # TYPE lines."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            out[name] = typ
    return out


def sample_names(text):
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines()
            if line and not line.startswith("#")}


def write_config(tmp, port, time_scale=1, scaled_groups=(), alertmanager=None):
    """The shipped example config, aimed at the daemon on 127.0.0.1:port, every interval 1 s.
    With time_scale, the durations of the rules of scaled_groups are divided by it (the daemon's
    --canary.baseline-period=1s makes an hour of its baselines one second: time_scale 3600 makes
    a rule's day 24 s for those rules); the other rules keep wall-clock time. With alertmanager
    (a port on 127.0.0.1), alerts are sent there."""
    conf = yaml.safe_load(open(os.path.join(PROMDIR, "prometheus.yml")))
    conf["global"]["scrape_interval"] = "1s"
    conf["global"]["evaluation_interval"] = "1s"
    jobs = [j for j in conf["scrape_configs"] if j["job_name"] == "diskpulse"]
    dp.check(len(jobs) == 1, "the example config has one job named diskpulse")
    jobs[0]["scrape_interval"] = "1s"
    jobs[0]["scrape_timeout"] = "1s"
    jobs[0]["static_configs"] = [{"targets": ["127.0.0.1:%d" % port]}]
    if alertmanager:
        conf["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": ["127.0.0.1:%d" % alertmanager]}]}]}
    # The rules as shipped, but every group at the 1 s global interval: a group of slow rules
    # (interval: 10m) would not be evaluated within the test's minute.
    rules = yaml.safe_load(open(os.path.join(PROMDIR, "diskpulse.rules.yml")))
    missing = set(scaled_groups) - {g["name"] for g in rules["groups"]}
    if missing:
        raise RuntimeError("no rule group %s to scale" % sorted(missing))
    for g in rules["groups"]:
        g.pop("interval", None)
        if g["name"] in scaled_groups:
            for r in g["rules"]:
                r["expr"] = scale_durations(r["expr"], time_scale)
                if "for" in r:
                    r["for"] = scale_durations(r["for"], time_scale)
    with open(os.path.join(tmp, "diskpulse.rules.yml"), "w") as f:
        yaml.safe_dump(rules, f)
    path = os.path.join(tmp, "prometheus.yml")
    with open(path, "w") as f:
        yaml.safe_dump(conf, f)
    return path


class Prometheus:
    def __init__(self, config, tmp, extra_args=()):
        self.port = dp.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(tmp, "prometheus.log"), "w+")
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=" + config,
             "--storage.tsdb.path=" + os.path.join(tmp, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"]
            + list(extra_args),
            stdout=self.log, stderr=subprocess.STDOUT)
        ready = dp.wait_until(self._ready, 60, poll=0.2)
        if not ready:
            raise RuntimeError("prometheus did not become ready:\n" + self.output())

    def _ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError("prometheus exited:\n" + self.output())
        try:
            return dp.http_get(self.url + "/-/ready", timeout=1)[0] == 200
        except OSError:
            return False

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def finish(self):
        """Stops it, printing the end of its log when a check failed."""
        if dp._failures:
            print(self.output()[-3000:])
        self.stop()

    def stop(self):
        if self.proc.poll() is None:
            dp.end_process(self.proc, timeout=20)
        self.log.close()


def check_target(prom):
    active = api(prom.url, "targets")["activeTargets"]
    mine = [t for t in active if t["labels"].get("job") == "diskpulse"]
    dp.check(len(mine) == 1, "one diskpulse target (%d)" % len(mine))
    if mine:
        dp.check(mine[0]["health"] == "up" and not mine[0]["lastError"],
                 "the target is up (%s %r)" % (mine[0]["health"], mine[0]["lastError"]))


def check_keepalive(prom, daemon):
    """Prometheus keeps its connection from one scrape to the next (every response used to
    close it, so each scrape reconnected)."""
    m = daemon.scrape()
    accepted = dp.value(m, "diskpulse_http_connections_accepted_total")
    scrapes = query(prom.url, 'count_over_time(up{job="diskpulse"}[%ds])' % SCRAPE_FOR)
    n = int(scrapes[0]["value"][1]) if scrapes else 0
    # The test's own requests (the start-up probe, this scrape) add a few connections.
    dp.check(n >= SCRAPE_FOR // 2 and accepted is not None and accepted <= 5,
             "%d scrapes over %s connections" % (n, accepted))


def check_storage(prom, daemon):
    """OpenMetrics negotiated, every family stored with its type, every series name stored."""
    _, _, om = dp.http_get(daemon.url + "/metrics", headers={"Accept": OPENMETRICS})
    om = om.decode()
    text = daemon.scrape_text()
    meta = api(prom.url, "metadata")
    om_fams, text_fams = families(om), families(text)
    # In OpenMetrics a counter family has no _total; Prometheus keys its metadata by the family
    # name of the format it parsed, so the names tell which format was negotiated.
    counters = sorted(n for n, t in om_fams.items() if t == "counter" and n.startswith("diskpulse_"))
    dp.check(counters, "the OpenMetrics page has counter families")
    as_om = [n for n in counters if n in meta]
    as_text = [n + "_total" for n in counters if n + "_total" in meta]
    dp.check(len(as_om) == len(counters) and not as_text,
             "Prometheus stored the counters' metadata under their OpenMetrics names (%d of %d; "
             "%d under text-format names): it negotiated OpenMetrics"
             % (len(as_om), len(counters), len(as_text)))
    wrong = []
    for name, typ in om_fams.items():
        got = [m["type"] for m in meta.get(name, [])]
        if got != [typ]:
            wrong.append("%s: %s, want %s" % (name, got, typ))
    dp.check(not wrong, "every family of the page is stored with its type (%d families)%s"
             % (len(om_fams), "; " + "; ".join(wrong[:5]) if wrong else ""))
    all_counters = {n for n, t in om_fams.items() if t == "counter"}
    dp.check(set(text_fams) == (set(om_fams) - all_counters) | {n + "_total" for n in all_counters},
             "the text and OpenMetrics pages name the same families")
    stored = {r["metric"]["__name__"] for r in query(prom.url, 'count by (__name__) ({job="diskpulse"})')}
    missing = sorted(sample_names(text) - stored)
    dp.check(not missing, "every series name of the page is stored (%d names)%s"
             % (len(sample_names(text)), ": missing " + ", ".join(missing[:8]) if missing else ""))


def check_rules(prom):
    rules_file = yaml.safe_load(open(os.path.join(PROMDIR, "diskpulse.rules.yml")))
    want = sum(len(g["rules"]) for g in rules_file["groups"])
    groups = api(prom.url, "rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    dp.check(len(rules) == want, "Prometheus loaded all %d rules (%d)" % (want, len(rules)))
    bad = ["%s: %s %s" % (r.get("name"), r.get("health"), r.get("lastError", ""))
           for r in rules if r.get("health") != "ok" or r.get("lastError")]
    dp.check(not bad, "every rule evaluates without error%s" % ("; " + "; ".join(bad[:5]) if bad else ""))

    def one(expr):
        res = query(prom.url, expr)
        return [float(r["value"][1]) for r in res]

    # Records with data on any host: the disk's rates and the canary's quantiles; the md
    # members' where there are md arrays.
    for rec in [r["name"] for r in rules if r["type"] == "recording"]:
        res = query(prom.url, rec)
        if rec == "target:diskpulse_sync_degradation_ratio:avg15m":
            # the degradation ratio appears after the baseline's warm-up, a day of probing
            dp.check(query(prom.url, "diskpulse_sync_degradation_ratio") or not res,
                     "%s: empty while the baseline warms up" % rec)
            continue
        if rec == "set:diskpulse_disk_write_await_seconds:rate5m":
            # one series per member of an md array: as many as diskpulse_disk_set_info has
            # (none on a host without md arrays)
            sets = query(prom.url, "diskpulse_disk_set_info")
            dp.check(len(res) == len(sets) and all(float(r["value"][1]) >= 0 for r in res),
                     "%s: %d series, one per md member (%d)" % (rec, len(res), len(sets)))
            continue
        if rec.startswith("device:diskpulse_io_"):
            # the biolatency collector's quantiles: one series per device and operation that did
            # I/O in the window; none where the collector is not attached (diskpulse_io_latency_up
            # 0: no BTF, no privilege, built without BPF)
            active = query(prom.url, "rate(%s_count[5m]) > 0" % rec.split(":")[1])
            vals = [float(r["value"][1]) for r in res]
            dp.check(len(vals) == len(active) and all(v == v and v > 0 for v in vals),
                     "%s: %d series, one per device and op with I/O (%d)" % (rec, len(vals), len(active)))
            continue
        vals = [float(r["value"][1]) for r in res]
        dp.check(vals and all(v == v and v >= 0 for v in vals),
                 "%s: %d series, none negative or NaN" % (rec, len(vals)))
    # The histogram median agrees with the exporter's exact recent median of the same regime
    # to a bucket (bounds at most 2.5x apart): the rules keep the regimes apart.
    p50 = query(prom.url, "target:diskpulse_sync_latency_seconds:p50_1h")
    dp.check(sorted(r["metric"].get("regime", "") for r in p50) == ["busy", "busy", "idle", "idle"],
             "a median for each of the 2 canary targets in each regime (%d series)" % len(p50))
    for r in p50:
        m = r["metric"]
        sel = '{path="%s",mode="%s",regime="%s",quantile="0.5"}' % (m["path"], m["mode"], m.get("regime"))
        exact = one("diskpulse_sync_recent_seconds" + sel)
        hist = float(r["value"][1])
        dp.check(exact and exact[0] / 2.5 <= hist <= exact[0] * 2.5,
                 "p50 from the histogram %.6f s is within a bucket of the exact median %s on %s, %s regime"
                 % (hist, exact, m["path"], m.get("regime")))
    # The 5-minute rates agree with the counters' own increase over the scraped minute.
    for r in query(prom.url, "device:diskpulse_disk_written_bytes:rate5m"):
        dev = r["metric"]["device"]
        direct = one('rate(diskpulse_disk_written_bytes_total{device="%s"}[5m])' % dev)
        dp.check(direct and abs(direct[0] - float(r["value"][1])) <= 0.5 * max(direct[0], 4096),
                 "written bytes/s of %s: recorded %s, from the counter %s"
                 % (dev, r["value"][1], direct))


def alerts(prom):
    return api(prom.url, "alerts")["alerts"]


def slow_probes(daemon):
    """{(path, regime): (samples slower than 100 ms, all samples)} from the daemon's own
    histogram."""
    out = {}
    for (name, ls), v in daemon.scrape().items():
        labels = dict(ls)
        if name == "diskpulse_sync_latency_seconds_bucket" and labels["le"] in ("0.1", "+Inf"):
            key = (labels["path"], labels.get("regime"))
            slow, total = out.get(key, (0, 0))
            out[key] = (slow - v, total) if labels["le"] == "0.1" else (slow + v, v)
    return out


def unexplained(daemon, active):
    """The alerts of active that this host's own numbers do not explain.

    The host is healthy but shared: on a very busy machine fdatasync calls can take over 100 ms
    for a while, so DiskpulseSyncLatencyHigh may be pending (never firing: it needs 10 minutes
    of a quarter of the last hour's probes slow). It is explained when the daemon's own
    histogram, read here without Prometheus, holds more than a fifth of the target's probes
    above the 0.1 bucket; every other alert is unexplained."""
    slow = slow_probes(daemon)
    out = []
    for a in active:
        labels = a["labels"]
        n_slow, n = slow.get((labels.get("path"), labels.get("regime")), (0, 0))
        if (labels["alertname"] == "DiskpulseSyncLatencyHigh" and a["state"] == "pending"
                and n and n_slow > 0.2 * n):
            print("note   %s pending on %s (%s): %d of %d samples took over 100 ms on this host"
                  % (labels["alertname"], labels["path"], labels.get("regime"), n_slow, n))
            continue
        out.append(a)
    return out


def check_dashboard(prom):
    queries = grafana_queries.dashboard_queries(DASHBOARD, rate_interval="1m")
    dp.check(len(queries) >= 15, "the dashboard has %d queries" % len(queries))
    exists = {}
    errors, empty, nonempty = [], [], 0
    for title, expr in queries:
        try:
            res = query(prom.url, expr)
        except RuntimeError as e:
            errors.append("%s: %s" % (title, e))
            continue
        names = grafana_queries.metric_names(expr)
        for n in names:
            if n not in exists:
                exists[n] = bool(query(prom.url, 'count({__name__="%s"})' % n))
        if res:
            nonempty += 1
        elif names and all(exists[n] for n in names):
            empty.append("%s: %s" % (title, expr))
    dp.check(not errors, "Prometheus accepts every dashboard query%s"
             % ("; " + "; ".join(errors[:5]) if errors else ""))
    dp.check(not empty, "every dashboard query whose metrics exist returns data (%d did)%s"
             % (nonempty, "; empty: " + "; ".join(empty[:5]) if empty else ""))


def setup(doc, prefix):
    """The binary of the command line (or usage) and a fresh temp directory; skips without
    Prometheus."""
    if len(sys.argv) != 2:
        sys.exit(doc)
    if not shutil.which("prometheus"):
        dp.skip("prometheus is not installed (Debian package prometheus)")
    return sys.argv[1], tempfile.mkdtemp(prefix=prefix)


def main():
    binary, tmp = setup(__doc__, "diskpulse-prom-")
    victim = os.path.join(tmp, "canary-victim")
    steady = os.path.join(tmp, "canary-steady")
    os.mkdir(victim)
    os.mkdir(steady)
    prom = None
    try:
        with dp.Daemon(binary, "--canary.path=" + victim, "--canary.path=" + steady,
                       "--canary.interval=1s", "--diskstats.interval=1s") as daemon:
            config = write_config(tmp, daemon.port)
            prom = Prometheus(config, tmp)
            print("scraping for %d s" % SCRAPE_FOR)
            time.sleep(SCRAPE_FOR)
            check_target(prom)
            check_keepalive(prom, daemon)
            check_storage(prom, daemon)
            check_rules(prom)
            active = [(a["labels"]["alertname"], a["state"], a["labels"].get("path"))
                      for a in unexplained(daemon, alerts(prom))]
            dp.check(not active, "no alert is pending or firing on the healthy host, but for what "
                     "its own slow probes explain %s" % active)
            check_dashboard(prom)

            # A real fault: the canary directory disappears.
            shutil.rmtree(victim)

            def fired():
                return [a for a in alerts(prom)
                        if a["labels"]["alertname"] == "DiskpulseSyncProbeErrors"
                        and a["state"] == "firing" and a["labels"].get("path") == victim]
            t0 = time.monotonic()
            got = dp.wait_until(fired, 30, poll=0.5)
            dp.check(got, "DiskpulseSyncProbeErrors fires %.1f s after the canary directory was "
                     "removed" % (time.monotonic() - t0))
            if got:
                a = got[0]
                dp.check(a["labels"].get("errno") == "ENOENT" and a["labels"].get("severity") == "warning"
                         and a["labels"].get("job") == "diskpulse" and a["labels"].get("mode") == "fdatasync",
                         "its labels: %s" % a["labels"])
                dp.check("ENOENT" in a["annotations"].get("summary", "")
                         and a["annotations"].get("runbook_url", "")
                         == "http://127.0.0.1:%d/runbook#diskpulsesyncprobeerrors" % daemon.port,
                         "its summary %r and runbook link %r (from diskpulse:runbook:info: its "
                         "own exporter's /runbook)"
                         % (a["annotations"].get("summary"), a["annotations"].get("runbook_url")))
            others = [a["labels"] for a in unexplained(daemon, alerts(prom))
                      if a["labels"].get("path") != victim]
            dp.check(not others, "no alert for anything else, but for what its own slow probes "
                     "explain %s" % others)
            up = query(prom.url, 'diskpulse_sync_target_up{path="%s"}' % steady)
            dp.check(up and up[0]["value"][1] == "1", "the other canary target stays up")
    finally:
        if prom:
            prom.finish()
        shutil.rmtree(tmp, ignore_errors=True)
    dp.finish()


if __name__ == "__main__":
    main()
