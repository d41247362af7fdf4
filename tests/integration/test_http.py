#!/usr/bin/env python3
"""HTTP behaviour of the real daemon: endpoints, methods, content types, Host, OPTIONS, request
bodies and sizes, keep-alive, the connection limits and allow-list, the deadlines, concurrent
scrapes, IPv6 and several listen addresses, socket activation, sd_notify, SIGTERM."""
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import dp
import flood

BIN = sys.argv[1]
GET = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def raw_request(port, data, family=socket.AF_INET, host="127.0.0.1", timeout=3):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((host, port))
    s.sendall(data)
    chunks = []
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            chunks.append(c)
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return b"".join(chunks)


def endpoints():
    with dp.Daemon(BIN) as d:
        st, h, body = dp.http_get(d.url + "/metrics")
        dp.check(st == 200, "GET /metrics is 200")
        dp.check(h.get("Content-Type") == "text/plain; version=0.0.4; charset=utf-8",
                 "content type %r" % h.get("Content-Type"))
        errors = dp.expocheck.check(body.decode())
        dp.check(not errors, "a live scrape passes the strict check %s" % errors[:3])
        m = dp.parse(body.decode())
        dp.check(dp.value(m, "diskpulse_build_info") == 1, "build_info present")
        dp.check(dp.value(m, "diskpulse_collector_success", collector="diskstats") == 1, "diskstats collector succeeded")
        for fam in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                    "process_open_fds", "process_max_fds", "process_start_time_seconds"):
            dp.check(dp.value(m, fam) is not None, "%s present" % fam)
        start = dp.value(m, "process_start_time_seconds")
        dp.check(start is not None and abs(start - time.time()) < 60, "process_start_time_seconds is now-ish")
        dp.check(dp.value(m, "diskpulse_collector_duration_seconds", collector="diskstats") >= 0, "collector duration")
        # Every derived gauge is finite and non-negative.
        bad = [(n, dict(ls), v) for (n, ls), v in m.items()
               if n.startswith("diskpulse_disk_") and not n.endswith("_total") and not n.endswith("_info")
               and not (v == v and 0 <= v < float("inf"))]
        dp.check(not bad, "derived gauges finite and >= 0: %s" % bad[:3])
        util = [v for (n, ls), v in m.items() if n == "diskpulse_disk_utilization_ratio"]
        dp.check(all(0 <= u <= 1 for u in util), "utilization within 0..1")

        st, h, body = dp.http_get(d.url + "/metrics", method="HEAD")
        dp.check(st == 200 and body == b"", "HEAD /metrics is 200 without a body")
        # / for a browser: HTML; for curl (*/*), text/plain or no Accept: plain text (issue 34)
        st, h, body = dp.http_get(d.url + "/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
        dp.check(st == 200 and b"diskpulse" in body and b'href="/metrics"' in body
                 and h["Content-Type"] == "text/html; charset=utf-8" and h.get("Vary") == "Accept",
                 "/ for a browser is an HTML page with a link to /metrics")
        devices = [dict(ls)["device"] for ls in dp.series(m, "diskpulse_disk_info")]
        dp.check(all(("<td>%s</td>" % dev).encode() in body for dev in devices), "/ (HTML) lists the devices %s" % devices)
        for accept in (None, "*/*", "text/plain", "text/html;q=0.5, text/plain"):
            st, h, body = dp.http_get(d.url + "/", headers={"Accept": accept} if accept else None)
            lines = body.decode().splitlines()
            dp.check(st == 200 and h["Content-Type"] == "text/plain; charset=utf-8" and b"<" not in body
                     and all(any(l.startswith(dev + " ") for l in lines) for dev in devices),
                     "/ with Accept %r is plain text listing the devices" % accept)
        st, _, body = dp.http_get(d.url + "/-/healthy")
        dp.check(st == 200, "/-/healthy is 200")
        for path in ("/nope", "/metrics/", "/metricsx", "/-/ready"):
            dp.check(dp.http_get(d.url + path)[0] == 404, "GET %s is 404" % path)
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            st, h, _ = dp.http_get(d.url + "/metrics", method=method)
            dp.check(st == 405 and "GET" in h.get("Allow", ""), "%s /metrics is 405 with Allow" % method)
        dp.check(dp.http_get(d.url + "/x", method="POST")[0] == 404, "POST /x is 404")
        # Malformed requests get an error, and the daemon keeps serving.
        for junk in (b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET /metrics HTTP/9.9\r\n\r\n",
                     b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 100000 + b"\r\n\r\n",
                     b"\x00\xff\xfe\r\n\r\n"):
            reply = raw_request(d.port, junk)
            dp.check(not reply.startswith(b"HTTP/1.1 200"), "junk %r... is refused (%r)" % (junk[:20], reply[:30]))
        dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "still serving after malformed requests")

        # Many concurrent scrapes all get a complete, valid page.
        results = []

        def scrape():
            try:
                s, _, b = dp.http_get(d.url + "/metrics")
                results.append(s == 200 and not dp.expocheck.check(b.decode()))
            except OSError:
                results.append(False)
        threads = [threading.Thread(target=scrape) for _ in range(32)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        dp.check(len(results) == 32 and all(results), "32 concurrent scrapes are all valid")

        # SIGTERM with an idle keep-alive connection open: exit 0 within 1 s.
        idle = socket.create_connection(("127.0.0.1", d.port))
        rc, took = d.stop()
        idle.close()
        dp.check(rc == 0 and took < 1.0, "SIGTERM: exit %d in %.3f s (< 1 s)" % (rc, took))


def gzip_encoding():
    # One snapshot for the whole test (no new round within the hour): pages are comparable.
    with dp.Daemon(BIN, "--diskstats.interval=1h", "--diskstats.window=1h", "--no-collector.smart") as d:
        st, h, plain = dp.http_get(d.url + "/metrics")
        dp.check(st == 200 and "Content-Encoding" not in h and h.get("Vary") == "Accept, Accept-Encoding",
                 "without Accept-Encoding: plain text, Vary: Accept-Encoding")
        for ae in ("gzip", "deflate, gzip;q=0.5", "*", "x-gzip"):
            st, h, body = dp.http_get(d.url + "/metrics", headers={"Accept-Encoding": ae})
            ok = st == 200 and h.get("Content-Encoding") == "gzip" and h.get("Vary") == "Accept, Accept-Encoding"
            try:
                text = gzip.decompress(body)
            except OSError:
                text = None
            dp.check(ok and text == plain and int(h.get("Content-Length", -1)) == len(body) < len(plain),
                     "Accept-Encoding %r: gzip, %d bytes for %d, the same page" % (ae, len(body), len(plain)))
        for ae in ("gzip;q=0", "identity", "br", "gzip;q=0, *", "gzip;q=2"):
            st, h, body = dp.http_get(d.url + "/metrics", headers={"Accept-Encoding": ae})
            dp.check(st == 200 and "Content-Encoding" not in h and body == plain,
                     "Accept-Encoding %r: plain text" % ae)
        st, h, body = dp.http_get(d.url + "/metrics", method="HEAD", headers={"Accept-Encoding": "gzip"})
        gz_len = len(dp.http_get(d.url + "/metrics", headers={"Accept-Encoding": "gzip"})[2])
        dp.check(st == 200 and body == b"" and h.get("Content-Encoding") == "gzip" and
                 int(h.get("Content-Length", -1)) == gz_len, "HEAD with gzip: the compressed length, no body")


PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                     "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
OM_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# The OpenMetrics parser of the Python client (Debian: python3-prometheus-client) is strict; it is
# run by the system's interpreter, which has the package, whichever interpreter runs this test.
OM_PARSE = """import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
n = 0
for f in text_string_to_metric_families(sys.stdin.read()):
    n += len(f.samples)
print(n)
"""


def openmetrics_compare(d, checks):
    """Fetches the page in the text format, OpenMetrics, gzip and under other Accept headers and
    appends (condition, what) to checks; returns (text page, OpenMetrics page)."""
    _, _, plain = dp.http_get(d.url + "/metrics")
    st, h, om = dp.http_get(d.url + "/metrics", headers={"Accept": PROMETHEUS_ACCEPT})
    checks.append((st == 200 and h.get("Content-Type") == OM_TYPE and om.endswith(b"\n# EOF\n"),
                   "Prometheus's Accept header gets OpenMetrics (%s), ending in # EOF" % h.get("Content-Type")))
    text_samples = dp.parse(plain.decode())
    om_samples = dp.parse(om.decode().replace("# EOF\n", ""))
    checks.append((om_samples == text_samples and len(om_samples) > 20,
                   "the same %d samples as the text format" % len(om_samples)))
    counters = [l.split()[2] for l in om.decode().splitlines() if l.startswith("# TYPE ") and l.endswith(" counter")]
    checks.append((counters and not [c for c in counters if c.endswith("_total")],
                   "counter families are named without _total (%d)" % len(counters)))
    for accept in ("text/plain", "*/*", "application/openmetrics-text;version=2.0.0",
                   "application/openmetrics-text;q=0.2,text/plain;q=0.5"):
        st, h, body = dp.http_get(d.url + "/metrics", headers={"Accept": accept})
        checks.append((h.get("Content-Type") == "text/plain; version=0.0.4; charset=utf-8" and body == plain,
                       "Accept %r: the text format" % accept))
    st, h, body = dp.http_get(d.url + "/metrics", headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
    checks.append((h.get("Content-Type") == OM_TYPE and h.get("Content-Encoding") == "gzip"
                   and gzip.decompress(body) == om, "OpenMetrics and gzip together"))
    return plain, om


def openmetrics():
    with dp.Daemon(BIN, "--diskstats.interval=1h", "--diskstats.window=1h", "--no-collector.smart") as d:
        # A device added or removed anywhere on the machine makes the daemon publish a new
        # snapshot at once: the formats are compared only over a stretch in which the page did
        # not change (the same text before and after), up to five tries.
        for attempt in range(5):
            checks = []
            plain, om = openmetrics_compare(d, checks)
            _, _, after = dp.http_get(d.url + "/metrics")
            if after == plain:
                break
            print("note   a new snapshot during try %d: compared again" % (attempt + 1))
        for cond, what in checks:
            dp.check(cond, what)
        py = "/usr/bin/python3"
        have = os.path.exists(py) and subprocess.run([py, "-c", "import prometheus_client"],
                                                     capture_output=True).returncode == 0
        if dp.check(have, "python3-prometheus-client is installed (scripts/deps.sh test)"):
            r = subprocess.run([py, "-c", OM_PARSE], input=om.decode(), capture_output=True, text=True)
            dp.check(r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout) > 20,
                     "the OpenMetrics parser of prometheus_client accepts the page (%s %s)" %
                     (r.stdout.strip(), r.stderr.strip()[-300:]))


def text_view_replacement():
    """A C0 control character in a canary path (ESC, starting a terminal's escape sequence, and
    SOH) shows on the text view of / as the character the README names: U+FFFD, which the path's
    label value carries (the metric model replaces it before the status summary reads the
    label), never as the byte itself."""
    base = tempfile.mkdtemp(prefix="diskpulse-ctl-")
    target = os.path.join(base, "wal\x1b[31m\x01x")
    os.mkdir(target)
    try:
        with dp.Daemon(BIN, "--canary.path=" + target, "--canary.interval=1s") as d:
            want = base + "/wal\ufffd[31m\ufffdx"
            text = ""

            def shown():
                nonlocal text
                text = dp.http_get(d.url + "/", headers={"Accept": "text/plain"})[2].decode()
                return want in text
            dp.wait_until(shown, 20, poll=0.2)
            rows = [line for line in text.splitlines() if base in line]
            dp.check(want in text and "\x1b" not in text and "\x01" not in text,
                     "the text view shows the path's ESC and SOH as U+FFFD: %r" % rows)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                               "README.md")).read()
    page = readme[readme.index("- `/`: the status page"):]
    page = page[:page.index("```")]
    dp.check("U+FFFD" in page, "the README's text view passage names U+FFFD for a control "
             "character in a path: %r" % " ".join(page[page.find("control"):][:200].split()))


def connect(port, src="127.0.0.1", timeout=5):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def wait_closed(s, timeout):
    """Reads until the server closes s (EOF or reset) or timeout passes; returns (seconds, bytes
    read, closed)."""
    t0 = time.monotonic()
    got = b""
    s.settimeout(0.05)
    while time.monotonic() - t0 < timeout:
        try:
            c = s.recv(65536)
            if not c:
                return time.monotonic() - t0, got, True
            got += c
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - t0, got, True
    return time.monotonic() - t0, got, False


def refused_at_once(port, src="127.0.0.1", what="connection"):
    """Opens a connection from src and sends a request; true when it is closed within half a
    second with nothing sent back."""
    try:
        s = connect(port, src)
    except ConnectionResetError:
        return dp.check(True, "%s from %s: reset at once" % (what, src))
    try:
        s.sendall(GET)
    except (ConnectionResetError, BrokenPipeError):
        s.close()
        return dp.check(True, "%s from %s: reset at once" % (what, src))
    took, got, closed = wait_closed(s, 2.0)
    s.close()
    return dp.check(closed and took < 0.5 and got == b"",
                    "%s from %s: closed after %.3f s with %d bytes sent" % (what, src, took, len(got)))


def counter(d, name, **labels):
    return dp.value(dp.parse(dp.http_get(d.url + "/metrics")[2].decode()), name, **labels)


def host_header():
    with dp.Daemon(BIN, "--no-collector.smart") as d:
        for req, want, what in (
                (b"GET /metrics HTTP/1.1\r\n\r\n", b"HTTP/1.1 400", "HTTP/1.1 without Host"),
                (b"GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"HTTP/1.1 400",
                 "HTTP/1.1 with two Host headers"),
                (b"GET /metrics HTTP/1.0\r\n\r\n", b"HTTP/1.1 200", "HTTP/1.0 without Host"),
                (b"GET /metrics HTTP/1.1\r\nhost: a\r\nConnection: close\r\n\r\n", b"HTTP/1.1 200",
                 "HTTP/1.1 with Host"),
                (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", b"", "a space in the target (closed unanswered)")):
            reply = raw_request(d.port, req)
            dp.check(reply.startswith(want) if want else reply == b"", "%s: %r (want %r)" % (what, reply[:30], want))


def options_method():
    with dp.Daemon(BIN, "--no-collector.smart") as d:
        reply = raw_request(d.port, b"OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        dp.check(reply.startswith(b"HTTP/1.1 200") and b"\r\nAllow: GET, HEAD, OPTIONS\r\n" in reply and
                 b"\r\nContent-Length: 0\r\n" in reply, "OPTIONS * is 200 with Allow: %r" % reply[:120])
        for path in ("/metrics", "/", "/-/healthy"):
            st, h, body = dp.http_get(d.url + path, method="OPTIONS")
            dp.check(st == 200 and h.get("Allow") == "GET, HEAD, OPTIONS" and body == b"",
                     "OPTIONS %s is 200 with Allow %r" % (path, h.get("Allow")))
        dp.check(dp.http_get(d.url + "/nope", method="OPTIONS")[0] == 404, "OPTIONS /nope is 404")
        st, h, _ = dp.http_get(d.url + "/metrics", method="DELETE")
        dp.check(st == 405 and h.get("Allow") == "GET, HEAD, OPTIONS", "405 names OPTIONS in Allow too")
        reply = raw_request(d.port, b"GET * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        dp.check(reply.startswith(b"HTTP/1.1 400"), "GET * is 400 (%r)" % reply[:20])


def request_bodies_and_sizes():
    with dp.Daemon(BIN, "--no-collector.smart") as d:
        for req, want, what in (
                (b"GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", b"HTTP/1.1 413",
                 "GET with a body"),
                (b"GET /metrics HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                 b"HTTP/1.1 413", "GET with a chunked body"),
                (b"GET /metrics HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 100000000\r\n\r\n",
                 b"HTTP/1.1 413", "GET announcing 100 MB with Expect: 100-continue"),
                (b"POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", b"HTTP/1.1 405",
                 "POST with a body"),
                (b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\nX-Big: " + b"a" * 16000 + b"\r\n\r\n",
                 b"HTTP/1.1 200", "16 KB of headers"),
                (b"GET /metrics HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", b"HTTP/1.1 431",
                 "40 KB of headers"),
                (b"GET /metrics HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(3000)) +
                 b"\r\n", b"HTTP/1.1 431", "3000 header lines"),
                (b"GET /metrics?" + b"a" * 40000 + b" HTTP/1.1\r\nHost: a\r\n\r\n", b"HTTP/1.1 414",
                 "a 40 KB target")):
            s = connect(d.port)
            s.sendall(req)
            took, got, closed = wait_closed(s, 3.0)
            s.close()
            keep = not req.startswith(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close")
            dp.check(got.startswith(want) and (closed or not keep),
                     "%s: %r, connection closed after it: %s" % (what, got[:40], closed))
        dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "still serving")


def keep_alive():
    """Every kind of response keeps the connection for the next request (Prometheus reconnected
    for each scrape while every response closed it)."""
    with dp.Daemon(BIN, "--no-collector.smart") as d:
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
        ports = set()
        for method, path, headers, status in (
                ("GET", "/metrics", {}, 200), ("GET", "/metrics", {"Accept-Encoding": "gzip"}, 200),
                ("GET", "/metrics", {"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"}, 200),
                ("HEAD", "/metrics", {}, 200), ("HEAD", "/metrics", {"Accept-Encoding": "gzip"}, 200),
                ("GET", "/", {}, 200), ("GET", "/-/healthy", {}, 200), ("OPTIONS", "/metrics", {}, 200),
                ("GET", "/nope", {}, 404), ("POST", "/metrics", {}, 405), ("GET", "/metrics", {}, 200)):
            c.request(method, path, headers=headers)
            r = c.getresponse()
            body = r.read()
            ports.add(c.sock.getsockname()[1] if c.sock else None)
            dp.check(r.status == status and r.getheader("Connection") != "close" and not r.will_close,
                     "%s %s %s: %d, kept alive (Connection: %s)" %
                     (method, path, headers, r.status, r.getheader("Connection")))
            if method == "HEAD":
                dp.check(body == b"" and int(r.getheader("Content-Length")) > 0, "HEAD: length, no body")
        dp.check(len(ports) == 1 and None not in ports, "all on one connection (local ports %s)" % ports)
        c.close()
        # Pipelined: two requests in one write, two responses in order.
        s = connect(d.port)
        s.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: a\r\n\r\nGET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        pending = bytearray()
        st1, _, b1 = flood.read_response(s, time.monotonic() + 5, pending)
        st2, _, b2 = flood.read_response(s, time.monotonic() + 5, pending)
        s.close()
        dp.check(st1 == 200 and b1 == b"OK\n" and st2 == 200 and b"diskpulse_build_info" in b2,
                 "two pipelined requests get their two responses")
        # HTTP/1.0 and Connection: close still close.
        for req in (b"GET /metrics HTTP/1.0\r\n\r\n", b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"):
            s = connect(d.port)
            s.sendall(req)
            took, got, closed = wait_closed(s, 3)
            s.close()
            dp.check(got.startswith(b"HTTP/1.1 200") and closed, "%r: answered, then closed" % req[:40])


# The threads that serve connections: libmicrohttpd's and the guard's.
CONNECTION_THREADS = ("MHD-single", "dp-connguard")


def context_switches(pid):
    """{thread name: times its threads slept to be woken}: their voluntary switches. Involuntary
    ones are preemptions of a thread already running, which a busy machine multiplies (a test run
    beside a build counted 8 for a wake-up or two), not wake-ups."""
    total = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                n = sum(int(l.split()[1]) for l in f if l.split()[0] == "voluntary_ctxt_switches:")
        except FileNotFoundError:
            continue
        total[name] = total.get(name, 0) + n
    return total


def idle_keep_alive():
    """A scraper's kept-alive connection between its scrapes costs no wake-ups: the guard sleeps
    until the idle deadline or the next request's first byte (it swept 4 times a second)."""
    with dp.Daemon(BIN, "--no-collector.smart", "--no-collector.canary", "--web.read-header-timeout=1s",
                   "--web.request-timeout=1s", "--web.idle-timeout=10s") as d:
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
        c.request("GET", "/metrics")
        dp.check(c.getresponse().read().startswith(b"#"), "a first scrape")
        time.sleep(1.0)
        before = context_switches(d.proc.pid)
        time.sleep(4.0)
        after = context_switches(d.proc.pid)
        woken = {n: after.get(n, 0) - before.get(n, 0) for n in after}
        # Only the threads that serve connections: the main thread wakes for each udev event
        # (a loop device that another test attaches is two), which is not the connection's cost.
        served = sum(woken.get(n, 0) for n in CONNECTION_THREADS)
        dp.check(set(CONNECTION_THREADS) <= set(after) and served <= 4,
                 "a kept-alive connection idle for 4 s: %d wake-ups of the threads that serve "
                 "connections (at most 4; every thread: %s)" % (served, woken))
        t0 = time.monotonic()
        c.request("GET", "/metrics")
        r = c.getresponse()
        dp.check(r.status == 200 and r.read().startswith(b"#") and time.monotonic() - t0 < 2.5,
                 "the next request on it answered in %.2f s" % (time.monotonic() - t0))
        c.close()
        # Requests sent whole, each after an idle time beyond the header and request deadlines:
        # each timed from its arrival, not from the last time the guard looked at the connection
        # (it sleeps between requests), whichever thread sees the request first.
        s = connect(d.port)
        answered = 0
        for k in range(6):
            try:
                s.sendall(GET)
                answered += flood.read_response(s, time.monotonic() + 5)[0] == 200
            except OSError:
                break
            time.sleep(1.5)
        s.close()
        dp.check(answered == 6, "requests 1.5 s apart on one connection (deadlines 1 s): %d of 6 answered" % answered)
        dp.check(counter(d, "diskpulse_http_connections_closed_total", reason="request_timeout") == 0 and
                 counter(d, "diskpulse_http_connections_closed_total", reason="header_timeout") == 0,
                 "none closed for a deadline")


def threads_share_a_cpu():
    """While at most 4 connections are open, libmicrohttpd's thread and the guard's are kept on
    one CPU (a scrape wakes both: one CPU woken instead of two); a fifth connection gives them
    every CPU again, and they share one again once the load is light."""
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        print("SKIP threads_share_a_cpu: this process may use one CPU only; nothing to share")
        return
    with dp.Daemon(BIN, "--no-collector.smart", "--no-collector.canary") as d:
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
        c.request("GET", "/metrics")
        dp.check(c.getresponse().read().startswith(b"#"), "a first scrape")
        pid = d.proc.pid
        pinned = dp.wait_until(lambda: [p for p in [dp.shared_cpu_threads(pid)] if len(p) == 2], 3)
        pinned = pinned[0] if pinned else dp.shared_cpu_threads(pid)
        names = [n for n, _ in pinned]
        dp.check(sorted(names) == ["MHD-single", "dp-connguard"] and len(set(c for _, c in pinned)) == 1,
                 "after a scrape, libmicrohttpd's thread and the guard's share one CPU: %s" % pinned)
        main = dp.thread_cpus(d.proc.pid).get(d.proc.pid)
        dp.check(main is not None and not main[1].isdigit(),
                 "the main thread keeps every CPU (%s)" % (main and main[1]))
        others = [connect(d.port) for _ in range(5)]
        for s in others:
            s.sendall(GET)
        for s in others:
            flood.read_response(s, time.monotonic() + 5)
        released = dp.wait_until(lambda: not dp.shared_cpu_threads(d.proc.pid), 3)
        dp.check(released, "with 6 connections open no thread is kept on one CPU: %s"
                 % dp.shared_cpu_threads(d.proc.pid))
        for s in others:
            s.close()
        dp.wait_until(lambda: (counter(d, "diskpulse_http_connections") or 0) <= 2, 5)
        c.request("GET", "/metrics")
        dp.check(c.getresponse().read().startswith(b"#"), "a scrape once they are closed")
        again = dp.wait_until(lambda: len(dp.shared_cpu_threads(d.proc.pid)) == 2, 3)
        dp.check(again, "then the two share one CPU again: %s" % dp.shared_cpu_threads(d.proc.pid))
        c.close()


def connection_limit():
    with dp.Daemon(BIN, "--web.max-connections=4", "--web.max-connections-per-address=3") as d:
        srcs = ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"]
        # Full, and 127.0.0.2 already holds as many as any address: nothing to replace, as long
        # as the held connections have waited less than the second after which any connection
        # may make room (a machine busy elsewhere can stretch the pause below: then again).
        for attempt in range(3):
            held = [connect(d.port, src) for src in srcs]
            t_held = time.monotonic()
            time.sleep(0.3)
            if time.monotonic() - t_held < 0.6 or attempt == 2:
                break
            for s in held:
                s.close()
            time.sleep(0.5)
        refused_at_once(d.port, "127.0.0.2", "a 5th connection beyond --web.max-connections=4")
        held[0].sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        held[0].settimeout(3)
        reply = held[0].recv(4096)
        dp.check(reply.startswith(b"HTTP/1.1 200"), "an existing connection keeps working at the limit")
        for s in held:
            s.close()
        time.sleep(0.3)
        dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "new connections are served again once below the limit")

        # Full again: a client from an address holding fewer gets in at once, and a connection of
        # the address holding most makes room: one whose request is arriving before an idle one,
        # the one waiting longest first; never one being answered.
        time.sleep(0.5)  # until the daemon has seen the scrape's connection close
        held = [connect(d.port, src) for src in srcs]
        for i in (0, 1):
            held[i].sendall(GET)
            flood.read_response(held[i], time.monotonic() + 5)
            time.sleep(0.1)
        held[2].sendall(b"GET /metrics HTTP/1.1\r\n")  # a request still arriving
        time.sleep(0.2)
        want = ([2], [0, 2], [0, 2, 3])
        for k, expect in enumerate(want):
            st = dp.http_get(d.url + "/-/healthy")[0]
            gone = [i for i, s in enumerate(held) if wait_closed(s, 0.3)[2]]
            dp.check(st == 200 and gone == expect,
                     "full: scrape %d from 127.0.0.1 is served; closed to make room so far: %s (want %s)" %
                     (k + 1, gone, expect))
            time.sleep(0.3)
            held.append(connect(d.port, "127.0.0.%d" % (4 + k)))  # full again
            time.sleep(0.1)
        for s in held:
            s.close()
        dp.check(dp.wait_until(lambda: counter(d, "diskpulse_http_connections_closed_total", reason="evicted") == 3, 5),
                 "diskpulse_http_connections_closed_total{reason=\"evicted\"} counts them")
        dp.check(counter(d, "diskpulse_http_connections_refused_total", reason="total_limit") == 1,
                 "diskpulse_http_connections_refused_total{reason=\"total_limit\"} counts the refused one")


def per_address_limit():
    with dp.Daemon(BIN, "--no-collector.smart", "--web.max-connections-per-address=3") as d:
        held = [connect(d.port, "127.0.0.2") for _ in range(3)]
        time.sleep(0.3)
        refused_at_once(d.port, "127.0.0.2", "a 4th connection over --web.max-connections-per-address=3")
        s = connect(d.port, "127.0.0.3")
        s.sendall(GET)
        st, _, _ = flood.read_response(s, time.monotonic() + 5)
        s.close()
        dp.check(st == 200, "another address is served")
        dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "127.0.0.1 is served")
        held[0].sendall(GET)
        st, _, _ = flood.read_response(held[0], time.monotonic() + 5)
        dp.check(st == 200, "the held connections keep working")
        # After a second of waiting, the address's own connection waiting longest makes room.
        time.sleep(1.2)
        s = connect(d.port, "127.0.0.2")
        s.sendall(GET)
        st = flood.read_response(s, time.monotonic() + 5)[0]
        gone = [i for i, h in enumerate(held) if wait_closed(h, 0.3)[2]]
        s.close()
        dp.check(st == 200 and gone == [1], "later, a 4th replaces the address's own connection waiting longest %s" % gone)
        for h in held:
            h.close()
        time.sleep(0.3)
        s = connect(d.port, "127.0.0.2")
        s.sendall(GET)
        dp.check(flood.read_response(s, time.monotonic() + 5)[0] == 200, "below the limit again: served")
        s.close()
        dp.check(dp.wait_until(lambda: counter(d, "diskpulse_http_connections_refused_total", reason="address_limit") == 1, 5),
                 "diskpulse_http_connections_refused_total{reason=\"address_limit\"} is 1")


def reconnect_at_limit(rounds=200):
    """A client at a limit that hangs up after its response and connects again at once (what a
    scraper does when it does not keep connections alive) is served every time: its old
    connection, gone on the client's side but not yet closed by the server, makes room without
    counting as a refusal or an eviction. Per address (1 each) and in total (1 in all)."""
    for flags, what in ((("--web.max-connections-per-address=1",), "per-address limit 1"),
                        (("--web.max-connections=1",), "total limit 1")):
        with dp.Daemon(BIN, "--no-collector.smart", "--no-collector.canary", *flags) as d:
            served = 0
            t0 = time.monotonic()
            for _ in range(rounds):
                s = connect(d.port, "127.0.0.2")
                try:
                    s.sendall(GET)
                    served += flood.read_response(s, time.monotonic() + 5)[0] == 200
                except OSError:
                    pass
                s.close()
            took = time.monotonic() - t0
            # pages are made ahead: wait for one that has seen every connection
            page = {}

            def fresh():
                page["m"] = dp.parse(dp.http_get(d.url + "/metrics")[2].decode())
                seen = dp.value(page["m"], "diskpulse_http_connections_accepted_total") or 0
                seen += sum(dp.value(page["m"], "diskpulse_http_connections_refused_total", reason=r) or 0
                            for r in ("address_limit", "total_limit"))
                return seen >= rounds

            dp.wait_until(fresh, 10)
            m = page["m"]
            refused = sum(dp.value(m, "diskpulse_http_connections_refused_total", reason=r) or 0
                          for r in ("address_limit", "total_limit"))
            evicted = dp.value(m, "diskpulse_http_connections_closed_total", reason="evicted") or 0
            print("reconnect at the %s: %d of %d served in %.1f s, refused %d, evicted %d" % (
                what, served, rounds, took, refused, evicted))
            dp.check(served == rounds, "reconnect at the %s: every connection served (%d of %d)" % (
                what, served, rounds))
            dp.check(refused == 0 and evicted == 0,
                     "reconnect at the %s: none refused (%d) or evicted (%d)" % (what, refused, evicted))


def listening(port):
    """Whether a socket listens on the IPv4 TCP port (/proc/net/tcp, state 0A)."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":
                return True
    return False


def slow_start(seconds=2.5):
    """A start slower than a second (the daemon stopped for 2.5 s once it listens, before it
    serves, as a loaded machine under the sanitizers can make it) leaves no connection of the
    harness's behind at --web.max-connections=1: dp.Daemon's health probe waits for the first
    page. (With a 1 s probe timeout, each probe given up left its request in the backlog; served
    first, those made the next probe refused at the limit, and reconnect_at_limit read "refused
    1" once under asan.)"""
    port = dp.free_port()
    stopped = []

    def stop_while_starting(proc):
        def run():
            deadline = time.monotonic() + 20
            while proc.poll() is None and not listening(port) and time.monotonic() < deadline:
                time.sleep(0.0005)
            if proc.poll() is None and listening(port):
                proc.send_signal(signal.SIGSTOP)
                stopped.append(time.monotonic())
                time.sleep(seconds)
                proc.send_signal(signal.SIGCONT)
        t = threading.Thread(target=run)
        t.start()
        stopped.append(t)

    with dp.Daemon(BIN, "--no-collector.smart", "--no-collector.canary", "--web.max-connections=1",
                   port=port, on_spawn=stop_while_starting) as d:
        stopped[0].join()
        dp.check(len(stopped) == 2, "the daemon was stopped %.1f s once it listened" % seconds)
        page = {}

        def seen():
            # pages are made ahead: one that has seen the probe and a scrape of this function
            page["m"] = d.scrape()
            return (dp.value(page["m"], "diskpulse_http_connections_accepted_total") or 0) >= 2

        dp.wait_until(seen, 10, poll=0.25)
        m = page["m"]
        accepted = dp.value(m, "diskpulse_http_connections_accepted_total") or 0
        refused = sum(dp.value(m, "diskpulse_http_connections_refused_total", reason=r) or 0
                      for r in ("address_limit", "total_limit"))
        dp.check(refused == 0 and accepted >= 2,
                 "a start of %.1f s at --web.max-connections=1: the harness's connections accepted "
                 "(%d), none refused (%d)" % (seconds, accepted, refused))


def allow_list():
    port = dp.free_port()
    conf = "/tmp/diskpulse-allow-%d.conf" % os.getpid()
    with open(conf, "w") as f:
        f.write("web.allow-from = 127.0.0.1\nweb.allow-from = 127.0.0.8/29\n")
    try:
        # ":PORT" is a dual-stack socket: IPv4 clients arrive as ::ffff:a.b.c.d and must match.
        with dp.Daemon(BIN, "--no-collector.smart", "--web.listen-address=:%d" % port, "--config.file=" + conf) as d:
            p = port
            for src in ("127.0.0.8", "127.0.0.15"):
                s = connect(p, src)
                s.sendall(GET)
                dp.check(flood.read_response(s, time.monotonic() + 5)[0] == 200, "%s (allowed) is served" % src)
                s.close()
            for src in ("127.0.0.2", "127.0.0.16"):
                refused_at_once(p, src, "a connection from a network not allowed")
            try:
                s6 = socket.create_connection(("::1", p), timeout=2)
                s6.sendall(GET)
                took, got, closed = wait_closed(s6, 2)
                s6.close()
                dp.check(closed and got == b"", "::1 (not allowed) is refused")
            except (ConnectionResetError, BrokenPipeError):
                dp.check(True, "::1 (not allowed) is reset at once")
            except OSError as e:
                print("note: no IPv6 loopback (%s); IPv6 refusal not tested" % e)
            kept = connect(p, "127.0.0.9")
            kept.sendall(GET)
            flood.read_response(kept, time.monotonic() + 5)
            # SIGHUP with a new list: the removed network's open connection is closed, and new
            # ones are refused; the added one is served.
            with open(conf, "w") as f:
                f.write("web.allow-from = 127.0.0.1\nweb.allow-from = 127.0.0.2\n")
            d.signal(1)
            took, got, closed = wait_closed(kept, 3)
            kept.close()
            dp.check(closed, "after SIGHUP an open connection from a removed network is closed (%.2f s)" % took)
            refused_at_once(p, "127.0.0.9", "after SIGHUP, a connection from a removed network")
            s = connect(p, "127.0.0.2")
            s.sendall(GET)
            dp.check(flood.read_response(s, time.monotonic() + 5)[0] == 200, "after SIGHUP the added address is served")
            s.close()
            refused = dp.wait_until(lambda: (counter(d, "diskpulse_http_connections_refused_total", reason="network") or 0) >= 4, 5)
            closed = counter(d, "diskpulse_http_connections_closed_total", reason="network")
            dp.check(refused and closed == 1, "refusals (%s) and the closed connection (%s) counted" %
                     (counter(d, "diskpulse_http_connections_refused_total", reason="network"), closed))
    finally:
        os.unlink(conf)


def deadlines():
    """Deadlines that activity does not extend (libmicrohttpd's timeout restarts on every byte)."""
    with dp.Daemon(BIN, "--no-collector.smart", "--web.read-header-timeout=1s", "--web.request-timeout=2s",
                   "--web.idle-timeout=1500ms") as d:
        # Silent, trickling headers, trickling bytes: closed about 1 s after accept.
        silent = connect(d.port)
        lines = connect(d.port)
        lines.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n")
        byte = connect(d.port)
        t0 = time.monotonic()
        closed_at = {}
        i = 0
        while time.monotonic() - t0 < 4 and len(closed_at) < 3:
            for name, s in (("silent", silent), ("header lines", lines), ("bytes", byte)):
                if name in closed_at:
                    continue
                try:
                    if name == "header lines":
                        s.sendall(b"X-%d: 1\r\n" % i)
                    elif name == "bytes":
                        s.sendall(GET[i % len(GET):][:1])
                    s.settimeout(0.001)
                    if s.recv(1) == b"":
                        closed_at[name] = time.monotonic() - t0
                except socket.timeout:
                    pass
                except OSError:
                    closed_at[name] = time.monotonic() - t0
            i += 1
            time.sleep(0.1)
        for name, s in (("silent", silent), ("header lines", lines), ("bytes", byte)):
            s.close()
            at = closed_at.get(name)
            dp.check(at is not None and 0.8 < at < 1.8,
                     "%s: closed %s s after connecting (--web.read-header-timeout=1s)" % (name, at and "%.2f" % at))
        # Kept alive: a second request in time is served; idle past 1.5 s, closed.
        s = connect(d.port)
        s.sendall(GET)
        flood.read_response(s, time.monotonic() + 5)
        time.sleep(1.0)
        s.sendall(GET)
        dp.check(flood.read_response(s, time.monotonic() + 5)[0] == 200, "a kept-alive connection used again after 1 s")
        took, got, closed = wait_closed(s, 3)
        s.close()
        dp.check(closed and 1.2 < took < 2.3, "then closed %.2f s after its last response (--web.idle-timeout=1500ms)" % took)
        # Kept alive, then the next request trickled a byte every 0.2 s: closed about 1 s after
        # its first byte, not when the idle time or the bytes run out.
        s = connect(d.port)
        s.sendall(GET)
        flood.read_response(s, time.monotonic() + 5)
        time.sleep(0.5)
        t0 = time.monotonic()
        at = None
        for k in range(25):
            try:
                s.sendall(GET[k:k + 1])
                s.settimeout(0.2)
                if s.recv(1) == b"":
                    at = time.monotonic() - t0
                    break
            except socket.timeout:
                pass
            except OSError:
                at = time.monotonic() - t0
                break
        s.close()
        dp.check(at is not None and 0.7 < at < 1.8,
                 "a trickled second request: closed %s s after its first byte" % (at and "%.2f" % at))
        dp.check(dp.wait_until(lambda: counter(d, "diskpulse_http_connections_closed_total", reason="header_timeout") == 4, 5),
                 "diskpulse_http_connections_closed_total{reason=\"header_timeout\"} is 4")
        dp.check(counter(d, "diskpulse_http_connections_closed_total", reason="idle_timeout") >= 1, "idle timeouts counted")
        dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "still serving")


def fd_limit():
    """The soft open-file limit is raised to the hard one; a connection limit beyond even that is
    lowered, with a warning."""
    prlimit = shutil.which("prlimit")
    if not prlimit:
        print("note: prlimit missing; the open-file limit not tested")
        return
    port = dp.free_port()
    state = tempfile.mkdtemp(prefix="diskpulse-state-")
    p = subprocess.Popen([prlimit, "--nofile=100:300", BIN, "--web.listen-address=127.0.0.1:%d" % port,
                          "--state.directory=" + state, "--no-collector.smart"],
                         stderr=subprocess.PIPE, text=True)
    try:
        ok = dp.wait_until(lambda: _healthy(port), 20)
        m = dp.parse(dp.http_get("http://127.0.0.1:%d/metrics" % port)[2].decode()) if ok else {}
        dp.check(dp.value(m, "process_max_fds") == 300, "the soft limit 100 is raised to the hard limit 300 (%s)" %
                 dp.value(m, "process_max_fds"))
    finally:
        p.terminate()
        err = p.communicate(timeout=10)[1]
        shutil.rmtree(state, ignore_errors=True)
    # (300 - 64) * 8 / 9: room for evicted connections that are still closing
    dp.check("the open-file limit allows fewer connections" in err and "using=209" in err and "value=512" in err,
             "--web.max-connections=512 lowered to what 300 descriptors allow: %r" % err.strip()[-300:])


def _healthy(port):
    try:
        return dp.http_get("http://127.0.0.1:%d/-/healthy" % port, timeout=1)[0] == 200
    except OSError:
        return False


def slow_reader():
    """A client that does not read its response is cut at --web.request-timeout."""
    tmp = tempfile.mkdtemp(prefix="diskpulse-big-")
    try:
        os.makedirs(os.path.join(tmp, "proc"))
        os.makedirs(os.path.join(tmp, "sys", "block"))
        with open(os.path.join(tmp, "proc", "diskstats"), "w") as f:
            for i in range(4000):
                f.write("%d %d disk%d 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n" % (240 + i // 256, i % 256, i))
        with open(os.path.join(tmp, "proc", "uptime"), "w") as f:
            f.write("100.00 100.00\n")
        with dp.Daemon(BIN, "--no-collector.smart", "--no-collector.canary", "--path.procfs=" + os.path.join(tmp, "proc"),
                       "--path.sysfs=" + os.path.join(tmp, "sys"), "--web.read-header-timeout=1s",
                       "--web.request-timeout=2s") as d:
            size = len(dp.http_get(d.url + "/metrics", timeout=20)[2])
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", d.port))
            s.sendall(GET)
            time.sleep(3.0)
            got = b""
            s.settimeout(2)
            try:
                while True:
                    c = s.recv(1 << 20)
                    if not c:
                        break
                    got += c
            except (socket.timeout, ConnectionResetError):
                pass
            s.close()
            dp.check(size > 2000000 and len(got) < size,
                     "a reader that stalls is cut at 2 s: %d of %d bytes" % (len(got), size))
            dp.check(dp.wait_until(lambda: counter(d, "diskpulse_http_connections_closed_total", reason="request_timeout") == 1, 5),
                     "diskpulse_http_connections_closed_total{reason=\"request_timeout\"} is 1")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ipv6_and_many_addresses():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        p6 = s.getsockname()[1]
        s.close()
    except OSError:
        print("note: no IPv6 loopback here; IPv6 listening not tested")
        return
    p4 = dp.free_port()
    with dp.Daemon(BIN, "--web.listen-address=[::1]:%d" % p6, port=p4) as d:
        dp.check(dp.http_get(d.url + "/-/healthy")[0] == 200, "IPv4 address serves")
        dp.check(dp.http_get("http://[::1]:%d/metrics" % p6)[0] == 200, "second, IPv6 address serves")
    port = dp.free_port()
    p = subprocess.Popen([BIN, "--web.listen-address=:%d" % port], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        ok4 = ok6 = False
        while time.monotonic() < deadline and not (ok4 and ok6):
            try:
                ok4 = ok4 or dp.http_get("http://127.0.0.1:%d/-/healthy" % port, timeout=1)[0] == 200
                ok6 = ok6 or dp.http_get("http://[::1]:%d/-/healthy" % port, timeout=1)[0] == 200
            except OSError:
                time.sleep(0.1)
        dp.check(ok4 and ok6, ":PORT serves both IPv4 and IPv6")
    finally:
        p.terminate()
        p.wait()


def address_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([BIN, "--web.listen-address=127.0.0.1:%d" % port], capture_output=True, text=True, timeout=20)
        dp.check(p.returncode != 0 and "127.0.0.1:%d" % port in p.stderr and "in use" in p.stderr,
                 "a busy port is refused with a message naming it: %r" % p.stderr.strip()[-160:])


def systemd_integration():
    """Socket activation and sd_notify, as systemd would do them."""
    activate = shutil.which("systemd-socket-activate")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = "/tmp/diskpulse-notify-%d" % os.getpid()
    notify.bind(path)
    notify.settimeout(10)
    port = dp.free_port()
    env = dict(os.environ, NOTIFY_SOCKET=path)
    if activate:
        cmd = [activate, "-l", "127.0.0.1:%d" % port, "-E", "NOTIFY_SOCKET=" + path, BIN, "--web.systemd-socket"]
    else:
        print("note: systemd-socket-activate missing; socket activation not tested")
        cmd = [BIN, "--web.listen-address=127.0.0.1:%d" % port]
    p = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    try:
        msgs = []
        # systemd-socket-activate starts the daemon at the first connection, as systemd would.
        st = None
        deadline = time.monotonic() + 10
        while activate and st is None and time.monotonic() < deadline:
            try:
                st = dp.http_get("http://127.0.0.1:%d/metrics" % port, timeout=10)[0]
            except OSError:
                time.sleep(0.05)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (any("READY=1" in m for m in msgs) and
                                                   any("STATUS=" in m for m in msgs)):
            try:
                msgs.append(notify.recv(4096).decode())
            except socket.timeout:
                break
        dp.check(any("READY=1" in m for m in msgs), "sd_notify READY=1 sent: %s" % msgs)
        dp.check(any("STATUS=Monitoring" in m for m in msgs), "sd_notify STATUS= sent")
        if not activate:
            st = dp.http_get("http://127.0.0.1:%d/metrics" % port)[0]
        dp.check(st == 200, "serves on %s" % ("the socket systemd passed" if activate else "its own socket"))
        p.send_signal(15)
        p.wait(5)
        notify.settimeout(0.5)
        try:
            while True:
                msgs.append(notify.recv(4096).decode())
        except socket.timeout:
            pass
        dp.check(any("STOPPING=1" in m for m in msgs), "sd_notify STOPPING=1 on SIGTERM")
    finally:
        if p.poll() is None:
            p.kill()
        notify.close()
        os.unlink(path)
    r = subprocess.run([BIN, "--web.systemd-socket"], capture_output=True, text=True, timeout=20,
                       env={k: v for k, v in os.environ.items() if not k.startswith("LISTEN_")})
    dp.check(r.returncode != 0 and "systemd" in r.stderr, "--web.systemd-socket without sockets fails clearly")


endpoints()
gzip_encoding()
openmetrics()
text_view_replacement()
host_header()
options_method()
request_bodies_and_sizes()
keep_alive()
idle_keep_alive()
threads_share_a_cpu()
connection_limit()
per_address_limit()
reconnect_at_limit()
slow_start()
allow_list()
deadlines()
fd_limit()
slow_reader()
ipv6_and_many_addresses()
address_in_use()
systemd_integration()
dp.finish()
