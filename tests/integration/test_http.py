#!/usr/bin/env python3
"""HTTP behaviour of the real daemon: endpoints, methods, content types, the connection limit,
concurrent scrapes, IPv6 and several listen addresses, socket activation, sd_notify, SIGTERM."""
import gzip
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import dp

BIN = sys.argv[1]


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
        st, h, body = dp.http_get(d.url + "/")
        dp.check(st == 200 and b"diskpulse" in body and b"/metrics" in body and h["Content-Type"].startswith("text/html"),
                 "/ is an HTML page with a link to /metrics")
        devices = [dict(ls)["device"] for ls in dp.series(m, "diskpulse_disk_info")]
        dp.check(all(dev.encode() in body for dev in devices), "/ lists the devices %s" % devices)
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


def openmetrics():
    with dp.Daemon(BIN, "--diskstats.interval=1h", "--diskstats.window=1h", "--no-collector.smart") as d:
        _, _, plain = dp.http_get(d.url + "/metrics")
        st, h, om = dp.http_get(d.url + "/metrics", headers={"Accept": PROMETHEUS_ACCEPT})
        dp.check(st == 200 and h.get("Content-Type") == OM_TYPE and om.endswith(b"\n# EOF\n"),
                 "Prometheus's Accept header gets OpenMetrics (%s), ending in # EOF" % h.get("Content-Type"))
        text_samples = dp.parse(plain.decode())
        om_samples = dp.parse(om.decode().replace("# EOF\n", ""))
        dp.check(om_samples == text_samples and len(om_samples) > 20,
                 "the same %d samples as the text format" % len(om_samples))
        counters = [l.split()[2] for l in om.decode().splitlines() if l.startswith("# TYPE ") and l.endswith(" counter")]
        dp.check(counters and not [c for c in counters if c.endswith("_total")],
                 "counter families are named without _total (%d)" % len(counters))
        for accept in ("text/plain", "*/*", "application/openmetrics-text;version=2.0.0",
                       "application/openmetrics-text;q=0.2,text/plain;q=0.5"):
            st, h, body = dp.http_get(d.url + "/metrics", headers={"Accept": accept})
            dp.check(h.get("Content-Type") == "text/plain; version=0.0.4; charset=utf-8" and body == plain,
                     "Accept %r: the text format" % accept)
        st, h, body = dp.http_get(d.url + "/metrics", headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
        dp.check(h.get("Content-Type") == OM_TYPE and h.get("Content-Encoding") == "gzip" and gzip.decompress(body) == om,
                 "OpenMetrics and gzip together")
        py = "/usr/bin/python3"
        have = os.path.exists(py) and subprocess.run([py, "-c", "import prometheus_client"],
                                                     capture_output=True).returncode == 0
        if dp.check(have, "python3-prometheus-client is installed (scripts/deps.sh test)"):
            r = subprocess.run([py, "-c", OM_PARSE], input=om.decode(), capture_output=True, text=True)
            dp.check(r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout) > 20,
                     "the OpenMetrics parser of prometheus_client accepts the page (%s %s)" %
                     (r.stdout.strip(), r.stderr.strip()[-300:]))


def connection_limit():
    with dp.Daemon(BIN, "--web.max-connections=4") as d:
        held = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(4)]
        time.sleep(0.3)
        refused = raw_request(d.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", timeout=2)
        dp.check(not refused.startswith(b"HTTP/1.1 200"), "a 5th connection beyond --web.max-connections=4 is refused")
        held[0].sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        held[0].settimeout(3)
        reply = held[0].recv(4096)
        dp.check(reply.startswith(b"HTTP/1.1 200"), "an existing connection keeps working at the limit")
        for s in held:
            s.close()
        time.sleep(0.3)
        dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "new connections are served again once below the limit")


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
connection_limit()
ipv6_and_many_addresses()
address_in_use()
systemd_integration()
dp.finish()
