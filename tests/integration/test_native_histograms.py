#!/usr/bin/env python3
"""Prometheus 2.42 with native histograms scrapes diskpulse over the protobuf exposition.

Runs the daemon with a canary target probed every second, and two Prometheus on loopback
scraping it every second: one with --enable-feature=native-histograms (its Accept header puts
application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited
first), one without (it must keep getting OpenMetrics). First checks the negotiation by hand
(Prometheus' exact headers, gzip) and reads the protobuf page with a small wire-format reader:
the same families, types and help as the text page, and native parts in exactly the histograms
the README names. After scraping for a while it checks that
every family of the text page is in the native Prometheus, that each stored its counters'
metadata under the name of the format it negotiated (protobuf keeps _total, OpenMetrics drops
it), that diskpulse_sync_latency_seconds is a native histogram there, and that
histogram_quantile(0.5) of the native histogram agrees with that of the classic buckets (from
the Prometheus without the feature) within the classic bucket that holds the classic median.
Both load the shipped recording rules: the canary's median, mean and share of slow probes come
out the same from native histograms as from classic buckets (the rules read either), and where
the block-latency programs are attached (root, kernel BTF) the device-time histograms are native
and the rule's median of each agrees with the classic one within the classic bucket.
A fourth, with native histograms and the rules, scrapes a small exporter of two native histograms,
one whose probes all lie in the native bucket that holds 100 ms (88.4 to 105.1 ms) and one whose
probes all lie in the bucket above it: the shipped share of slow probes is an exact count there,
0 and 1 (histogram_fraction read up to the bucket's edge at 105.1 ms, where nothing is
interpolated: up to 0.1 it read 0.31 for the first, over the alert's 0.25), as the README and the
runbook say. A third Prometheus stores native histograms and loads no rules: the Grafana dashboard's queries
run on it and on the native one with rules (each heatmap gives one native histogram there and
the classic buckets on the classic one; each panel that reads a recording rule gives, without
the rules, the series the rule gives).

Usage: test_native_histograms.py BINARY
"""
import gzip
import http.server
import os
import re
import shutil
import struct
import threading
import time

import yaml

import dp
import grafana_queries
from test_prometheus import DASHBOARD, Prometheus, api, check_dashboard, families, query, setup

SCRAPE_FOR = 40  # seconds

PROM_NATIVE_ACCEPT = ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                      "encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,"
                      "application/openmetrics-text;version=0.0.1;q=0.75,"
                      "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
PROM_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
               "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
PROTOBUF_TYPE = ("application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
                 "encoding=delimited")
# io.prometheus.client.MetricType
PB_TYPES = {0: "counter", 1: "gauge", 2: "summary", 3: "untyped", 4: "histogram"}
# classic bounds of diskpulse_sync_latency_seconds
CLASSIC = [m * 10.0 ** e for e in range(-5, 1) for m in (1, 2.5, 5)] + [10.0]


def varint(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def fields(buf):
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes for
    length-delimited fields, bytes for fixed64."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = varint(buf, pos)
        elif wt == 1:
            v, pos = buf[pos:pos + 8], pos + 8
        elif wt == 2:
            n, pos = varint(buf, pos)
            v, pos = buf[pos:pos + n], pos + n
        elif wt == 5:
            v, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def read_page(body):
    """{family name: (type, help, [metric messages])} of a length-delimited page."""
    out, pos, twice = {}, 0, []
    while pos < len(body):
        n, pos = varint(body, pos)
        msg = body[pos:pos + n]
        pos += n
        name = help_ = None
        typ, metrics = 0, []
        for num, _, v in fields(msg):
            if num == 1:
                name = v.decode()
            elif num == 2:
                help_ = v.decode()
            elif num == 3:
                typ = v
            elif num == 4:
                metrics.append(v)
        if name in out:
            twice.append(name)
        out[name] = (PB_TYPES.get(typ, "?%d" % typ), help_, metrics)
    dp.check(not twice, "every family is one message (%d)%s"
             % (len(out), ": twice " + ", ".join(twice) if twice else ""))
    return out


def helps(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            _, _, name, h = line.split(" ", 3)
            out[name] = h.replace("\\n", "\n").replace("\\\\", "\\")
    return out


def check_negotiation(daemon):
    text = daemon.scrape_text()
    st, hdrs, body = dp.http_get(daemon.url + "/metrics", headers={"Accept": PROM_NATIVE_ACCEPT})
    ctype = {k.lower(): v for k, v in hdrs.items()}.get("content-type")
    dp.check(st == 200 and ctype == PROTOBUF_TYPE,
             "Prometheus' native-histogram Accept header gets protobuf (%s %s)" % (st, ctype))
    page = read_page(body)
    fams, hs = families(text), helps(text)
    wrong = [n for n, t in fams.items() if n not in page or page[n][0] != t or page[n][1] != hs[n]]
    dp.check(not wrong and set(page) == set(fams),
             "the protobuf page has the text page's %d families with their types and help%s"
             % (len(fams), ": differ " + ", ".join(wrong[:5]) if wrong else ""))
    st, hdrs, zbody = dp.http_get(daemon.url + "/metrics", headers={
        "Accept": PROM_NATIVE_ACCEPT, "Accept-Encoding": "gzip"})
    h = {k.lower(): v for k, v in hdrs.items()}
    dp.check(h.get("content-encoding") == "gzip" and set(read_page(gzip.decompress(zbody))) == set(page),
             "gzip works for the protobuf page (%d bytes, %d plain)" % (len(zbody), len(body)))
    st, hdrs, om = dp.http_get(daemon.url + "/metrics", headers={"Accept": PROM_ACCEPT})
    ctype = {k.lower(): v for k, v in hdrs.items()}.get("content-type", "")
    dp.check(ctype.startswith("application/openmetrics-text") and om.endswith(b"# EOF\n"),
             "Prometheus' header without the feature still gets OpenMetrics (%s)" % ctype)
    # a native part in the canary's histogram: schema (field 5 of Histogram, field 7 of Metric)
    lat = page.get("diskpulse_sync_latency_seconds")
    schemas = []
    for m in lat[2] if lat else []:
        for num, _, v in fields(m):
            if num == 7:
                schemas += [s for n2, _, s in fields(v) if n2 == 5]
    dp.check(schemas and all(s == 4 for s in schemas),  # zigzag of 2
             "diskpulse_sync_latency_seconds carries schema 2 in every series (%s)" % schemas)
    check_readme_natives(page)


README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
# Histogram message fields of a native part: schema, zero_threshold, zero_count, positive_span,
# positive_delta (io.prometheus.client.Histogram)
NATIVE_FIELDS = {5, 6, 7, 12, 13}


def check_readme_natives(page):
    """The histograms that carry a native part on the protobuf page are those the README's HTTP
    section says do (it once named only the canary's): every one it names that is on the page
    has one in every series, and no other family has one. The block-latency families are on the
    page only where their programs are attached (root, kernel BTF) and saw I/O."""
    text = open(README).read()
    m = re.search(r"a histogram sends its classic buckets.*?and, for (.*?), a native histogram too",
                  text, re.S)
    named = set(re.findall(r"`(\w+)`", m.group(1))) if m else set()
    dp.check(named, "the README names the histograms that carry a native part (%s)" % sorted(named))
    native = set()
    for name, (typ, _, metrics) in page.items():
        if typ != "histogram":
            continue
        parts = [any(n2 in NATIVE_FIELDS for n2, _, _ in fields(v))
                 for mm in metrics for num, _, v in fields(mm) if num == 7]
        if parts and all(parts):
            native.add(name)
        dp.check(all(parts) or not any(parts), "%s: a native part in every series or in none" % name)
    for name in sorted(named - set(page)):
        print("skip: %s is not on this page (its collector is not attached here, or saw no I/O): "
              "its native part is not checked" % name)
    dp.check(native == named & set(page), "the protobuf page's native histograms are the README's: "
             "%s on the page, %s named" % (sorted(native), sorted(named)))


RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "etc", "prometheus",
                     "diskpulse.rules.yml")


def write_config(path, port, rules=True):
    conf = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "rule_files": [os.path.abspath(RULES)] if rules else [],
            "scrape_configs": [{"job_name": "diskpulse",
                                "static_configs": [{"targets": ["127.0.0.1:%d" % port]}]}]}
    with open(path, "w") as f:
        yaml.safe_dump(conf, f)


def classic_bucket(v, bounds=CLASSIC):
    """The classic bucket (lo, hi] of bounds that holds v."""
    lo = 0.0
    for b in bounds:
        if v <= b:
            return lo, b
        lo = b
    return lo, float("inf")


def by_labels(res):
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(r["value"][1])
            for r in res}


def check_rules(native, classic):
    """The shipped recording rules give the same answers from native histograms as from classic
    buckets: the canary's median within the classic bucket, its share of slow probes alike."""
    for rule, near in (("target:diskpulse_sync_latency_seconds:p50_1h", "bucket"),
                       ("target:diskpulse_sync_latency_seconds:mean_1h", 0.25),
                       ("target:diskpulse_sync_slow_ratio:rate1h", 0.05)):
        rn, rc = by_labels(query(native.url, rule)), by_labels(query(classic.url, rule))
        if not dp.check(rn and set(rn) == set(rc), "%s: recorded from native histograms as from classic "
                        "buckets, for the same %d series (%d)" % (rule, len(rc), len(rn))):
            continue
        for k, vc in rc.items():
            vn = rn[k]
            if near == "bucket":
                lo, hi = classic_bucket(vc)
                ok = lo / 1.19 <= vn <= hi * 1.19
            else:
                ok = abs(vn - vc) <= near * max(vc, 1e-9) if near < 1 and vc > 0 else abs(vn - vc) <= near
            dp.check(ok, "%s %s: %.6g from native histograms, %.6g from classic buckets"
                     % (rule, dict(k).get("regime", ""), vn, vc))


# the biolatency collector's default classic bounds (--biolatency.buckets)
BIOLAT_CLASSIC = [5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]


def check_biolatency(native, classic):
    """Where the block-latency programs are attached (root, a kernel with BTF): the device-time
    histograms are native in one Prometheus and classic in the other, and the recording rule's
    median of each agrees within the classic bucket."""
    up = query(native.url, "diskpulse_io_latency_up")
    if not up or up[0]["value"][1] != "1":
        print("skip: the block-latency programs are not attached here (not root, or no BTF): "
              "their native histograms are not checked")
        return
    res = query(native.url, "diskpulse_io_device_latency_seconds")
    dp.check(res and all("histogram" in r for r in res),
             "diskpulse_io_device_latency_seconds is a native histogram (%d series)" % len(res))
    rule = "device:diskpulse_io_device_latency_seconds:p50_5m"
    rn, rc = by_labels(query(native.url, rule)), by_labels(query(classic.url, rule))
    common = set(rn) & set(rc)
    dp.check(common, "%s: recorded from both (%d native, %d classic series)" % (rule, len(rn), len(rc)))
    for k in sorted(common):
        lo, hi = classic_bucket(rc[k], BIOLAT_CLASSIC)
        dp.check(lo / 1.19 <= rn[k] <= hi * 1.19,
                 "%s %s: the native median %.6g s within the classic bucket (%g, %g] of %.6g s"
                 % (rule, dict(k), rn[k], lo, hi, rc[k]))


def labelsets(res):
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")) for r in res}


def check_dashboard_live(native, classic, norules):
    """The dashboard's queries on the Prometheus that stores native histograms, with the shipped
    rules and without them: all accepted and answered where their series exist (test_prometheus'
    check); each heatmap answers with the classic buckets (le series) where those are stored and
    with one native histogram where they are not, never both; each query reading a recording rule
    gives, without the rules, the series the rule gives with them."""
    for prom in (native, norules):
        print("the dashboard on %s (%s)" % (prom.url, "rules" if prom is native else "no rules"))
        check_dashboard(prom)
    attached = (query(native.url, "diskpulse_io_latency_up") or [{"value": [0, "0"]}])[0]["value"][1] == "1"
    for title, expr in grafana_queries.heatmap_queries(DASHBOARD):
        histogram = re.search(r"\((\w+)_bucket\{", expr).group(1)
        if histogram.startswith("diskpulse_io_") and not (
                attached and query(classic.url, "count(%s_bucket)" % histogram)):
            print("skip: %s: no %s here (block-latency programs not attached, or no such operation)"
                  % (title, histogram))
            continue
        rc = query(classic.url, expr)
        dp.check(rc and all("le" in r["metric"] and "value" in r for r in rc),
                 "heatmap %s, classic Prometheus: %d le series" % (title, len(rc)))
        for name, prom in (("native", native), ("no rules, native", norules)):
            rn = query(prom.url, expr)
            dp.check(len(rn) == 1 and "histogram" in rn[0] and "le" not in rn[0]["metric"],
                     "heatmap %s, %s Prometheus: one native histogram (%s)"
                     % (title, name, [sorted(r["metric"]) + sorted(k for k in r if k != "metric") for r in rn]))
    for title, expr in grafana_queries.rule_queries(DASHBOARD):
        rule = grafana_queries.split_or(expr)[0]
        with_rules, without = labelsets(query(native.url, rule)), labelsets(query(norules.url, expr))
        dp.check(without == with_rules, "%s without the rules: the series the rule gives (%d, %d): %s"
                 % (title, len(without), len(with_rules), rule.split("{")[0]))


# A native bucket of schema 2 holds (2^((i-1)/4), 2^(i/4)] seconds: 100 ms lies in bucket -13,
# (88.39 ms, 105.11 ms], and is no bound of any.
SLOW_BUCKET = -13
SLOW_LO, SLOW_HI = 2 ** ((SLOW_BUCKET - 1) / 4), 2 ** (SLOW_BUCKET / 4)


def pb_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_field(num, wt, payload):
    """One protobuf field: payload is an int (varint) or bytes (length-delimited or fixed64)."""
    key = pb_varint(num << 3 | wt)
    if wt == 0:
        return key + pb_varint(payload)
    if wt == 1:
        return key + payload
    return key + pb_varint(len(payload)) + payload


def zigzag(v):
    return (v << 1) ^ (v >> 63)


# The targets of the small exporter: (path, native bucket index every probe lies in, a latency
# inside it). /srv/edge: the bucket that holds 100 ms, probes of about 95 ms; /srv/slow: the
# bucket above it (105.1 to 125 ms), probes of about 115 ms.
SLOW_SHARE_TARGETS = (("/srv/edge", SLOW_BUCKET, 0.095), ("/srv/slow", SLOW_BUCKET + 1, 0.115))


def slow_share_page(count):
    """A protobuf page with one native diskpulse_sync_latency_seconds of count probes per target
    of SLOW_SHARE_TARGETS, every probe of a target in its one native bucket."""
    metrics = b""
    for path, bucket, latency in SLOW_SHARE_TARGETS:
        labels = b"".join(pb_field(1, 2, pb_field(1, 2, k.encode()) + pb_field(2, 2, v.encode()))
                          for k, v in (("device", "sdz"), ("mode", "fdatasync"),
                                       ("path", path), ("regime", "idle")))
        hist = (pb_field(1, 0, count) + pb_field(2, 1, struct.pack("<d", count * latency))
                + pb_field(5, 0, zigzag(2)) + pb_field(6, 1, struct.pack("<d", 1e-128))
                + pb_field(7, 0, 0)
                + pb_field(12, 2, pb_field(1, 0, zigzag(bucket)) + pb_field(2, 0, 1))
                + pb_field(13, 2, pb_varint(zigzag(count))))
        metrics += pb_field(4, 2, labels + pb_field(7, 2, hist))
    fam = (pb_field(1, 2, b"diskpulse_sync_latency_seconds") + pb_field(2, 2, b"probe latency")
           + pb_field(3, 0, 4) + metrics)
    return pb_varint(len(fam)) + fam


class SlowShareExporter(http.server.BaseHTTPRequestHandler):
    """Serves slow_share_page(), 10 more probes at every scrape."""
    scrapes = 0

    def do_GET(self):
        type(self).scrapes += 1
        body = slow_share_page(10 * type(self).scrapes)
        self.send_response(200)
        self.send_header("Content-Type", PROTOBUF_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def check_slow_share(prom):
    """On a Prometheus that stores native histograms, the shipped slow-probe share is an exact
    count: probes all inside the native bucket that holds 100 ms (88.4 to 105.1 ms) give 0, probes
    all in the bucket above it give 1 (histogram_fraction read up to 105.1 ms, a bucket's edge;
    up to 0.1 it interpolated, and the first read 0.31). The README and the runbook say so where
    they describe the share."""
    for path, want in (("/srv/edge", 0.0), ("/srv/slow", 1.0)):
        res = query(prom.url, 'target:diskpulse_sync_slow_ratio:rate1h{path="%s"}' % path)
        got = float(res[0]["value"][1]) if res else None
        dp.check(got is not None and abs(got - want) < 1e-9,
                 "the slow share of probes all in (%.1f, %.1f] ms, from a native histogram: %s "
                 "(exactly %g)" % (SLOW_LO * 1000 * (2 ** 0.25 if want else 1),
                                   SLOW_HI * 1000 * (2 ** 0.25 if want else 1), got, want))
    rules = yaml.safe_load(open(RULES))
    expr = next(r["expr"] for g in rules["groups"] for r in g["rules"]
                if r.get("record") == "target:diskpulse_sync_slow_ratio:rate1h")
    dp.check("histogram_fraction" in expr, "the shipped slow share reads native histograms with "
             "histogram_fraction")
    readme = open(README).read()
    row = next((line for line in readme.splitlines()
                if line.startswith("| `target:diskpulse_sync_slow_ratio:rate1h`")), "")
    runbook = open(os.path.join(os.path.dirname(README), "docs", "runbook.md")).read()
    para = next((p for p in runbook.split("\n\n") if "target:diskpulse_sync_slow_ratio:rate1h" in p
                 and p.startswith("**What it means.**")), "")
    for where, text in (("README's recording rules table", row), ("runbook", para)):
        flat = " ".join(text.split())
        dp.check("histogram_fraction" in flat and "105.1 ms" in flat and "exact" in flat,
                 "the %s says the native share is histogram_fraction up to the bucket edge at "
                 "105.1 ms, an exact count: %r" % (where, flat[:300]))


def main():
    binary, tmp = setup(__doc__, "diskpulse-native-")
    canary = os.path.join(tmp, "canary")
    os.mkdir(canary)
    proms = []
    try:
        with dp.Daemon(binary, "--canary.path=" + canary, "--canary.interval=1s",
                       "--diskstats.interval=1s") as daemon:
            # a few probes first, so that the histogram has buckets
            dp.wait_until(lambda: (dp.value(daemon.scrape(), "diskpulse_sync_latency_seconds_count")
                                   or 0) >= 5, 30, poll=0.5)
            check_negotiation(daemon)
            for name, extra in (("native", ["--enable-feature=native-histograms"]), ("classic", []),
                                ("norules", ["--enable-feature=native-histograms"])):
                d = os.path.join(tmp, name)
                os.mkdir(d)
                write_config(os.path.join(d, "prometheus.yml"), daemon.port, rules=name != "norules")
                proms.append(Prometheus(os.path.join(d, "prometheus.yml"), d, extra))
            native, classic, norules = proms
            exporter = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowShareExporter)
            threading.Thread(target=exporter.serve_forever, daemon=True).start()
            d = os.path.join(tmp, "slowshare")
            os.mkdir(d)
            write_config(os.path.join(d, "prometheus.yml"), exporter.server_address[1])
            proms.append(Prometheus(os.path.join(d, "prometheus.yml"), d,
                                    ["--enable-feature=native-histograms"]))
            slowshare = proms[-1]
            print("scraping for %d s" % SCRAPE_FOR)
            time.sleep(SCRAPE_FOR)
            for p in proms:
                up = query(p.url, 'up{job="diskpulse"}')
                dp.check(up and up[0]["value"][1] == "1", "the target is up for %s" % p.url)

            text = daemon.scrape_text()
            fams = families(text)
            stored = {r["metric"]["__name__"]
                      for r in query(native.url, 'count by (__name__) ({job="diskpulse"})')}
            suffixes = {"histogram": ("", "_bucket", "_count", "_sum"),
                        "summary": ("", "_count", "_sum")}
            missing = [n for n, t in fams.items()
                       if not any(n + s in stored for s in suffixes.get(t, ("",)))]
            dp.check(not missing, "every family of the text page is in the native Prometheus "
                     "(%d families)%s" % (len(fams), ": missing " + ", ".join(missing[:8]) if missing else ""))
            counters = sorted(n for n, t in fams.items() if t == "counter" and n.endswith("_total"))
            meta_n, meta_c = api(native.url, "metadata"), api(classic.url, "metadata")
            dp.check(counters and all(n in meta_n for n in counters),
                     "the native Prometheus keyed counter metadata by the full names: protobuf")
            dp.check(all(n[:-6] in meta_c and n not in meta_c for n in counters),
                     "the other keyed it without _total: OpenMetrics")
            res = query(native.url, "diskpulse_sync_latency_seconds")
            dp.check(res and all("histogram" in r for r in res),
                     "diskpulse_sync_latency_seconds is a native histogram (%d series)" % len(res))

            qn = {tuple(sorted((k, v) for k, v in r["metric"].items())): float(r["value"][1])
                  for r in query(native.url, "histogram_quantile(0.5, diskpulse_sync_latency_seconds)")}
            qc = {tuple(sorted((k, v) for k, v in r["metric"].items())): float(r["value"][1])
                  for r in query(classic.url, "histogram_quantile(0.5, diskpulse_sync_latency_seconds_bucket)")}
            dp.check(qn and set(qn) == set(qc), "both give a median per series (%s, %s)"
                     % (sorted(qn), sorted(qc)))
            for k in qn:
                if k not in qc:
                    continue
                lo, hi = classic_bucket(qc[k])
                # the native median's own bucket is 19 % wide: it may cross the bound by that
                dp.check(lo / 1.19 <= qn[k] <= hi * 1.19,
                         "%s: the native median %.6g s agrees with the classic %.6g s within its "
                         "bucket (%g, %g]" % (dict(k), qn[k], qc[k], lo, hi))
            check_rules(native, classic)
            check_biolatency(native, classic)
            check_dashboard_live(native, classic, norules)
            check_slow_share(slowshare)
            exporter.shutdown()
    finally:
        for p in proms:
            p.finish()
        shutil.rmtree(tmp, ignore_errors=True)
    dp.finish()


if __name__ == "__main__":
    main()
