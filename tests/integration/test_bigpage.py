#!/usr/bin/env python3
"""The real binary on a host tree of 3,000 devices (tests/bench/fixture.py), whose text page is past
what a snapshot keeps whole: the page is rendered into the response as it is sent (chunked, no
Content-Length), its gzip form is kept; both, OpenMetrics, HTTP/1.0 and HEAD give the same page,
every device and counter of the tree is on it with its value, and the exposition is valid. Then a
tree of 100 devices, whose page is kept whole, for the same checks."""
import gzip
import http.client
import os
import shutil
import sys

import dp

sys.path.insert(0, os.path.join(dp.HERE, "..", "bench"))
import fixture  # noqa: E402

BIN = sys.argv[1]


def request(port, headers=None, method="GET", version11=True):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    if not version11:
        c._http_vsn, c._http_vsn_str = 10, "HTTP/1.0"
    try:
        c.request(method, "/metrics", headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def check_tree(n, streamed):
    root = fixture.tempdir("diskpulse-bigpage-")
    try:
        devs = fixture.make_tree(root, n)
        args = ["--path.procfs=" + root + "/proc", "--path.sysfs=" + root + "/sys",
                "--path.udev.data=" + root + "/udev",
                "--collector.diskstats.device-exclude=" + fixture.DEVICE_EXCLUDE,
                "--no-collector.smart", "--no-collector.canary",
                # one round only: every request reads the same snapshot
                "--diskstats.interval=1h", "--diskstats.window=1h"]
        with dp.Daemon(BIN, *args) as d:
            st, h, text = request(d.port)
            dp.check(st == 200, "%d devices: text 200" % n)
            if streamed:
                dp.check(h.get("transfer-encoding") == "chunked" and "content-length" not in h,
                         "%d devices: text page sent as it is rendered (chunked)" % n)
            else:
                dp.check(h.get("content-length") == str(len(text)),
                         "%d devices: text page kept whole (Content-Length)" % n)
            dp.check(len(text) > (4 << 20) if streamed else len(text) < (4 << 20),
                     "%d devices: page of %d bytes" % (n, len(text)))
            st, h, z = request(d.port, {"Accept-Encoding": "gzip"})
            dp.check(st == 200 and h.get("content-encoding") == "gzip" and
                     h.get("content-length") == str(len(z)), "%d devices: gzip kept whole" % n)
            dp.check(gzip.decompress(z) == text, "%d devices: gzip page is the text page" % n)
            st, h, om = request(d.port, {"Accept": "application/openmetrics-text"})
            dp.check(st == 200 and om.endswith(b"# EOF\n"), "%d devices: OpenMetrics" % n)
            dp.check([l for l in om.splitlines() if not l.startswith(b"#")] ==
                     [l for l in text.splitlines() if not l.startswith(b"#")],
                     "%d devices: OpenMetrics has the same samples" % n)
            st, h, z = request(d.port, {"Accept": "application/openmetrics-text",
                                        "Accept-Encoding": "gzip"})
            dp.check(gzip.decompress(z) == om, "%d devices: OpenMetrics gzip" % n)
            st, h, old = request(d.port, version11=False)
            dp.check(st == 200 and old == text, "%d devices: HTTP/1.0 gets the same page" % n)
            st, h, head = request(d.port, method="HEAD")
            dp.check(st == 200 and head == b"", "%d devices: HEAD has no body" % n)
            m = dp.parse(text.decode())
            got = sorted(dict(ls)["device"] for ls in dp.series(m, "diskpulse_disk_info"))
            want = sorted(name for name, _, _, kind, _ in devs if kind != "part")
            dp.check(got == want, "%d devices: every device once" % n)
            counters = {name: c for (name, *_), c in zip(devs, (fixture._counters(i, 0)
                                                                for i in range(len(devs))))}
            def val(metric, name):
                return m.get((metric, frozenset({("device", name)})))

            bad = [name for name in want
                   if val("diskpulse_disk_reads_completed_total", name) != counters[name][0] or
                   val("diskpulse_disk_written_bytes_total", name) != counters[name][6] * 512 or
                   abs(val("diskpulse_disk_io_time_weighted_seconds_total", name) -
                       counters[name][10] / 1000) > 1e-9]
            dp.check(not bad, "%d devices: counters as in the tree (%s)" % (n, bad[:3]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


check_tree(3000, True)
check_tree(100, False)
dp.finish()
