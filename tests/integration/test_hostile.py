#!/usr/bin/env python3
"""Hostile input, handled: files that are not regular files where the daemon reads one (a FIFO, a
directory, a device) refused at once with what they are, at start, by --check-config and on
SIGHUP (the running configuration stays, the daemon keeps serving and stops on SIGTERM); a key
given twice in the config file refused with both lines; --no-SWITCH=BOOL as the file's no- form,
and no "no-" form for a command; Accept and Accept-Encoding sent on several lines, with quoted
parameters, or longer than 4 KiB, for both pages; If-None-Match and the 304's Content-Length; a
NUL in the path; with basic auth, 401 before any 404, 405 or 413."""
import base64
import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import dp

BIN = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="diskpulse-hostile-")
# A start or a --check-config that waits on a FIFO never ends by itself: this long is "hung".
# The refusals measured here take about 10 ms (150 ms under the sanitizers).
HUNG = 20


def path(name):
    return os.path.join(TMP, name)


def write(name, text):
    with open(path(name), "w") as f:
        f.write(text)
    return path(name)


def fifo(name):
    p = path(name)
    if os.path.lexists(p):
        os.unlink(p)
    os.mkfifo(p)
    return p


def run(*args):
    """The binary with args and its own state directory; (exit status, stderr), or (None, "hung")
    when it did not end within HUNG seconds."""
    args = list(args) + ["--state.directory=" + path("state"), "--no-collector.smart", "--no-collector.canary"]
    try:
        r = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=HUNG)
    except subprocess.TimeoutExpired:
        return None, "hung (still running after %d s)" % HUNG
    return r.returncode, r.stderr.strip()


def refused(args, what):
    """args refused with exit status 2 and a message containing what, both as --check-config and
    as a start on a free port."""
    for mode in (["--check-config"], ["--web.listen-address=127.0.0.1:%d" % dp.free_port()]):
        t = time.monotonic()
        rc, err = run(*(args + mode))
        took = time.monotonic() - t
        dp.check(rc == 2 and what in err,
                 "%s %s: exit %s in %.2f s, %r" % (" ".join(args), mode[0].split("=")[0], rc, took, err[-300:]))


def make_cert():
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", path("server.key"), "-out", path("server.crt"), "-days", "2", "-subj",
                    "/CN=localhost"], check=True, capture_output=True)


def not_regular_at_start():
    cfg = fifo("fifo.conf")
    refused(["--config.file=" + cfg], "cannot read config file %s: a FIFO, not a regular file" % cfg)
    os.mkdir(path("dir.conf"))
    refused(["--config.file=" + path("dir.conf")],
            "cannot read config file %s: a directory, not a regular file" % path("dir.conf"))
    refused(["--config.file=/dev/null"], "cannot read config file /dev/null: a character device, not a regular file")
    with open(path("big.conf"), "w") as f:
        f.write("# padding\n" * (110 * 1024))  # 1.1 MB
    refused(["--config.file=" + path("big.conf")], "cannot read config file %s: larger than 1 MiB" % path("big.conf"))

    web = fifo("fifo.yml")
    refused(["--web.config.file=" + web], "cannot read web config file %s: a FIFO, not a regular file" % web)
    make_cert()
    key = fifo("fifo.key")
    tls = write("tls-fifo-key.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: fifo.key\n")
    refused(["--web.config.file=" + tls], "key_file: cannot read %s: a FIFO, not a regular file" % key)
    fifo("fifo.crt")
    tls = write("tls-fifo-crt.yml", "tls_server_config:\n  cert_file: fifo.crt\n  key_file: server.key\n")
    refused(["--web.config.file=" + tls], "cert_file: cannot read %s: a FIFO, not a regular file" % path("fifo.crt"))
    fifo("fifo-ca.crt")
    tls = write("tls-fifo-ca.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: fifo-ca.crt\n")
    refused(["--web.config.file=" + tls],
            "client_ca_file: cannot read %s: a FIFO, not a regular file" % path("fifo-ca.crt"))


def once(*args):
    """--once with args: (exit status, stdout, stderr), or (None, "", "hung") past HUNG seconds."""
    try:
        r = subprocess.run([BIN, "--once", "--state.directory=" + path("state"), "--no-collector.smart",
                            "--no-collector.canary"] + list(args), capture_output=True, text=True, timeout=HUNG)
    except subprocess.TimeoutExpired:
        return None, "", "hung (still running after %d s)" % HUNG
    return r.returncode, r.stdout, r.stderr


def not_regular_in_roots():
    """A --path.procfs or --path.udev.data tree with FIFOs where files are read: refused, never
    waited on (the main loop would stall at its first round)."""
    proc = path("procfs")
    os.mkdir(proc)
    os.mkfifo(os.path.join(proc, "diskstats"))
    with open("/proc/uptime") as src, open(os.path.join(proc, "uptime"), "w") as dst:
        dst.write(src.read())
    t = time.monotonic()
    rc, out, err = once("--path.procfs=" + proc)
    m = dp.parse(out) if rc == 0 else {}
    dp.check(rc == 0 and dp.value(m, "diskpulse_collector_success", collector="diskstats") == 0 and
             "cannot read diskstats: not a regular file" in err,
             "--path.procfs with a FIFO for diskstats: --once exits %s in %.2f s, the collector failed: %r" % (
                 rc, time.monotonic() - t, err.strip()[-200:]))
    udev = path("udev")
    os.mkdir(udev)
    with open("/proc/diskstats") as f:
        for line in f:
            major, minor = line.split()[:2]
            p = os.path.join(udev, "b%s:%s" % (major, minor))
            if not os.path.exists(p):
                os.mkfifo(p)
    t = time.monotonic()
    rc, out, err = once("--path.udev.data=" + udev, "--collector.diskstats.device-include=.")
    m = dp.parse(out) if rc == 0 else {}
    dp.check(rc == 0 and dp.series(m, "diskpulse_disk_info"),
             "--path.udev.data with FIFOs for every device's record: --once exits %s in %.2f s with %d devices" % (
                 rc, time.monotonic() - t, len(dp.series(m, "diskpulse_disk_info"))))


def stops_cleanly(d, what):
    """SIGTERM: exit 0, and no sanitizer report in the log."""
    rc, took = d.stop(timeout=HUNG)
    out = d.output()
    dp.check(rc == 0 and "Sanitizer" not in out and "runtime error" not in out,
             "%s: the daemon exits cleanly (%s in %.2f s)%s" % (what, rc, took, "" if rc == 0 else out[-1500:]))


def healthy_while(get, seconds):
    """Whether get("/-/healthy") answers 200 every time for seconds (the main loop's staleness bound
    is two sampling intervals plus ten seconds: a blocked loop fails within that)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if get("/-/healthy")[0] != 200:
                return False
        except OSError:
            return False
        time.sleep(0.2)
    return True


def reload_refused(d, get, swap, what, still):
    """swap() puts a FIFO in place of a file; SIGHUP must fail the reload with what in the log,
    keep the running configuration (still() true), keep serving, and leave SIGTERM working."""
    n = d.output().count("reload failed")
    swap()
    d.signal(signal.SIGHUP)
    logged = dp.wait_until(lambda: d.output().count("reload failed") > n, 10)
    dp.check(logged and what in d.output(), "SIGHUP with %s: the reload fails, logged with %r" % (what, what))
    # the log line comes before the round that publishes the outcome: a page read at once may
    # be the one before
    dp.check(dp.wait_until(lambda: dp.value(dp.parse(get("/metrics")[2].decode()),
                                            "diskpulse_config_reload_success") == 0, 10),
             "... diskpulse_config_reload_success 0")
    dp.check(still(), "... the running configuration stays")
    # 2 intervals + 10 s after the blocked reload /-/healthy would be 503: watch past that bound
    dp.check(healthy_while(get, 13), "... /-/healthy stays 200 for 13 s")
    rc, took = d.stop(timeout=HUNG)
    out = d.output()
    dp.check(rc == 0 and took < 2 and "Sanitizer" not in out and "runtime error" not in out,
             "... SIGTERM ends it: exit %s in %.2f s" % (rc, took))


def reload_config_fifo():
    cfg = write("reload.conf", "collector.diskstats.device-include = ^no-such-device$\n")
    with dp.Daemon(BIN, "--config.file=" + cfg, "--no-collector.smart", "--no-collector.canary",
                   "--diskstats.interval=1s", "--diskstats.sampling=fixed") as d:
        get = lambda p: dp.http_get(d.url + p)  # noqa: E731
        dp.check(dp.value(d.scrape(), "diskpulse_disk_devices") == 0, "config file in force: no device included")
        reload_refused(d, get, lambda: os.rename(fifo("swap.fifo"), cfg),
                       "cannot read config file %s: a FIFO, not a regular file" % cfg,
                       lambda: dp.value(d.scrape(), "diskpulse_disk_devices") == 0)


def reload_webconfig_fifo():
    web = write("reload.yml", "http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
    with dp.Daemon(BIN, "--web.config.file=" + web, "--no-collector.smart", "--no-collector.canary",
                   "--diskstats.interval=1s", "--diskstats.sampling=fixed") as d:
        get = lambda p: dp.http_get(d.url + p)  # noqa: E731
        dp.check(get("/")[1].get("X-Frame-Options") == "deny", "web config in force: X-Frame-Options deny")
        reload_refused(d, get, lambda: os.rename(fifo("swap.fifo"), web),
                       "cannot read web config file %s: a FIFO, not a regular file" % web,
                       lambda: get("/")[1].get("X-Frame-Options") == "deny")


class TlsDaemon(dp.Daemon):
    """dp.Daemon serving HTTPS (a self-signed certificate, not verified by the client)."""

    def __init__(self, *args):
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE
        self.port = dp.free_port()
        self.url = None
        args, self.state_dir = dp.with_state_dir(args)
        self.log = open(path("tls-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen([BIN, "--web.listen-address=127.0.0.1:%d" % self.port] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT)
        if not dp.wait_until(lambda: self.proc.poll() is not None or self.ok(), 20) or self.proc.poll() is not None:
            raise RuntimeError("daemon did not start:\n" + self.output())

    def ok(self):
        try:
            return self.get("/-/healthy")[0] == 200
        except OSError:
            return False

    def get(self, p):
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=5)
        try:
            c.request("GET", p)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def subject(self):
        import socket
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as raw:
            with self.ctx.wrap_socket(raw) as s:
                return s.getpeercert(binary_form=True)


def reload_key_fifo():
    make_cert()
    web = write("tls.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    with TlsDaemon("--web.config.file=" + web, "--no-collector.smart", "--no-collector.canary",
                   "--diskstats.interval=1s", "--diskstats.sampling=fixed") as d:
        cert = d.subject()
        dp.check(cert and d.get("/-/healthy")[0] == 200, "TLS with key_file in force")
        reload_refused(d, d.get, lambda: os.rename(fifo("swap.fifo"), path("server.key")),
                       "key_file: cannot read %s: a FIFO, not a regular file" % path("server.key"),
                       lambda: d.subject() == cert)


def check_config(*args):
    """--check-config with args: (exit status, stdout, stderr), or (None, "", "hung") when it did
    not end within HUNG seconds (--no-check-config taken as a setting starts the daemon)."""
    try:
        r = subprocess.run([BIN, "--check-config", "--state.directory=" + path("state")] + list(args),
                           capture_output=True, text=True, timeout=HUNG)
    except subprocess.TimeoutExpired:
        return None, "", "hung (still running after %d s)" % HUNG
    return r.returncode, r.stdout, r.stderr.strip()


def config_keys():
    cfg = write("dup.conf", "diskstats.interval = 2s\nlog.level = info\ndiskstats.interval = 5s\n")
    rc, out, err = check_config("--config.file=" + cfg)
    dp.check(rc == 2 and out == "" and "%s:3: diskstats.interval is given twice, on lines 1 and 3" % cfg in err,
             "a key given twice is refused with both lines: %r" % err)
    cfg = write("dup.conf", "collector.smart = false\n# the same switch\nno-collector.smart = true\n")
    rc, out, err = check_config("--config.file=" + cfg)
    dp.check(rc == 2 and "%s:3: collector.smart is given twice, on lines 1 and 3" % cfg in err,
             "NAME and no-NAME are one key: %r" % err)
    cfg = write("dup.conf", "canary.path = %s\ncanary.path = %s:append\n" % (TMP, TMP))
    rc, out, err = check_config("--config.file=" + cfg)
    dp.check(rc == 0 and "canary.path = %s:fdatasync\ncanary.path = %s:append\n" % (TMP, TMP) in out,
             "a repeatable option takes several lines: %r" % (err or out[-200:]))
    for flag, want in (("--no-collector.smart=true", "false"), ("--no-collector.smart=false", "true"),
                       ("--no-collector.smart=no", "true"), ("--no-collector.smart", "false")):
        rc, out, err = check_config(flag)
        dp.check(rc == 0 and "collector.smart = %s\n" % want in out,
                 "%s: collector.smart = %s (%s)" % (flag, want, err or "ok"))
    rc, out, err = check_config("--no-collector.smart=maybe")
    dp.check(rc == 2 and "no-collector.smart" in err and "maybe" in err, "--no-collector.smart=maybe: %r" % err)
    for flag in ("--no-once", "--no-check-config", "--no-version"):
        rc, out, err = check_config(flag)
        dp.check(rc == 2 and out == "" and "%s: only on/off flags can be negated (this one is a command)" % flag
                 in err, "%s is refused: %r" % (flag, err))

    # on SIGHUP: refused, logged with both lines, the running configuration stays
    cfg = write("reload-dup.conf", "collector.diskstats.device-include = ^no-such-device$\n")
    with dp.Daemon(BIN, "--config.file=" + cfg, "--no-collector.smart", "--no-collector.canary") as d:
        write("reload-dup.conf", "collector.diskstats.device-include = .\n"
              "collector.diskstats.device-include = ^no-such-device$\n")
        d.signal(signal.SIGHUP)
        dp.check(dp.wait_until(lambda: "is given twice, on lines 1 and 2" in d.output(), 10),
                 "SIGHUP with a key given twice: the reload fails with both lines")
        dp.check(dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_config_reload_success") == 0, 10) and
                 dp.value(d.scrape(), "diskpulse_disk_devices") == 0,
                 "... diskpulse_config_reload_success 0, and the running filter stays")
        stops_cleanly(d, "a key given twice on SIGHUP")


PROTOBUF = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"


def exchange(port, requests, timeout=10):
    """Sends requests (bytes, several pipelined) on one connection and reads until the server
    closes it or stays silent for a second; returns [(status, {name: value}, body)] of every
    response, bodies framed by Content-Length (none for 304 and HEAD)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(requests)
    data = b""
    s.settimeout(1)
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            c = s.recv(65536)
            if not c:
                break
            data += c
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    out, heads = [], requests.count(b"HEAD ")
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            h.setdefault(k.strip().lower(), []).append(v.strip())
        n = 0 if status == 304 or (heads and not out) else int(h.get("content-length", ["0"])[0])
        out.append((status, {k: ", ".join(v) for k, v in h.items()}, rest[:n]))
        data = rest[n:]
    return out


def request(target, *headers, method="GET", last=True):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: localhost"] + list(headers)
    if last:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def one(port, target, *headers, method="GET"):
    r = exchange(port, request(target, *headers, method=method))
    return r[0] if r else (None, {}, b"")


def accept_lists(port):
    # the status page: text or HTML, from every Accept line
    for headers, want in ((["Accept: text/plain;q=0.1", "Accept: text/html"], "text/html"),
                          (["Accept: text/html", "Accept: text/plain;q=0.1"], "text/html"),
                          (["Accept: text/html;q=0.1", "Accept: text/plain"], "text/plain"),
                          (['Accept: text/html;foo="a;b"'], "text/html"),
                          (['Accept: text/html;foo="a,b", text/plain;q=0.1'], "text/html"),
                          (['Accept: text/html;q=1;q=0.1, text/plain;q=0.5'], "text/plain")):
        st, h, _ = one(port, "/", *headers)
        dp.check(st == 200 and h.get("content-type", "").startswith(want),
                 "/ with %s: %s" % (" + ".join(headers), h.get("content-type")))
    # a value past 4 KiB, where a cut after "q=0." would read text/plain's 0.75 as 0
    pad = " " * (4096 - len("text/html;q=0.5, text/plain;q=0."))
    for plain, want in (("0.75", "text/plain"), ("0.25", "text/html")):
        value = pad + "text/html;q=0.5, text/plain;q=" + plain
        st, h, _ = one(port, "/", "Accept: " + value)
        dp.check(st == 200 and h.get("content-type", "").startswith(want),
                 "/ with a %d-byte Accept, text/plain;q=%s at its end, read whole: %s" % (
                     len(value), plain, h.get("content-type")))
    # /metrics: the protobuf type on a second line beside text
    st, h, _ = one(port, "/metrics", "Accept: text/plain;version=0.0.4;q=0.5", "Accept: " + PROTOBUF)
    dp.check(st == 200 and h.get("content-type", "").startswith("application/vnd.google.protobuf"),
             "/metrics with text on one Accept line and protobuf on the next: %s" % h.get("content-type"))
    st, h, _ = one(port, "/metrics", "Accept: text/plain;q=0.5",
                   'Accept: application/openmetrics-text;version="1.0.0";q=0.6')
    dp.check(st == 200 and h.get("content-type", "").startswith("application/openmetrics-text"),
             "/metrics with OpenMetrics on a second line, quoted version: %s" % h.get("content-type"))
    # Accept-Encoding
    for headers, gz in ((["Accept-Encoding: gzip;q=0.5, identity;q=1"], False),
                        (["Accept-Encoding: gzip;q=0.5", "Accept-Encoding: identity;q=1"], False),
                        (["Accept-Encoding: br", "Accept-Encoding: gzip"], True),
                        (["Accept-Encoding: gzip", "Accept-Encoding: gzip;q=0"], False),
                        (["Accept-Encoding: gzip;q=0.5, identity;q=0.5"], True)):
        st, h, body = one(port, "/metrics", *headers)
        dp.check(st == 200 and (h.get("content-encoding") == "gzip") == gz and (body[:2] == b"\x1f\x8b") == gz,
                 "/metrics with %s: %s" % (" + ".join(headers), h.get("content-encoding", "identity")))


def http_details(port):
    st, h, page = one(port, "/runbook")
    etag, length = h.get("etag"), h.get("content-length")
    dp.check(st == 200 and etag and int(length) == len(page) > 0, "/runbook: 200, ETag %s, %s bytes" % (etag, length))
    for inm, want in (("*x", 200), ("*", 304), (etag, 304), ("W/" + etag, 304), ('"x", ' + etag, 304),
                      ("*, " + etag, 200), (etag[1:-1], 200), ('"x"', 200)):
        st, h, body = one(port, "/runbook", "If-None-Match: " + inm)
        dp.check(st == want and (want == 200 or (h.get("content-length") == length and body == b"")),
                 "If-None-Match: %s gets %s (want %d), Content-Length %s" % (inm, st, want, h.get("content-length")))
    st, h, _ = one(port, "/runbook", 'If-None-Match: "x"', "If-None-Match: " + etag)
    dp.check(st == 304, "If-None-Match on two lines, the page's tag on the second: %s" % st)
    # a 304 keeps the connection: the next request on it is answered
    r = exchange(port, request("/runbook", "If-None-Match: " + etag, last=False) + request("/-/healthy"))
    dp.check([x[0] for x in r] == [304, 200] and r[1][2] == b"OK\n",
             "a 304 then a request on the same connection: %s" % [x[0] for x in r])
    r = exchange(port, request("/runbook", "If-None-Match: " + etag, method="HEAD", last=False) +
                 request("/-/healthy"))
    dp.check([x[0] for x in r] == [304, 200] and r[0][1].get("content-length") == length,
             "HEAD with If-None-Match: 304, Content-Length %s" % (r[0][1].get("content-length") if r else None))
    for target, want in (("/runbook%00", 404), ("/metrics%00x", 404), ("/%00", 404), ("/-/healthy%00", 404),
                         ("/run%62ook", 200), ("/metrics?x=%00", 200)):
        st, _, _ = one(port, target)
        dp.check(st == want, "GET %s: %s (want %d)" % (target, st, want))


def plain_http():
    with dp.Daemon(BIN, "--no-collector.smart", "--no-collector.canary") as d:
        accept_lists(d.port)
        http_details(d.port)
        stops_cleanly(d, "Accept, If-None-Match, %00")


class AuthDaemon(dp.Daemon):
    """dp.Daemon with a web config that asks for credentials (its start awaited in its log)."""

    def __init__(self, web):
        self.port = dp.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        args, self.state_dir = dp.with_state_dir(["--web.config.file=" + web, "--no-collector.smart",
                                                  "--no-collector.canary"])
        self.log = open(path("auth-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen([BIN, "--web.listen-address=127.0.0.1:%d" % self.port] + args,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        if not dp.wait_until(lambda: self.proc.poll() is not None or "diskpulse started" in self.output(), 20) \
                or self.proc.poll() is not None:
            raise RuntimeError("daemon did not start:\n" + self.output())


def auth_first():
    hashed = subprocess.run(["htpasswd", "-nbBC", "10", "", "secret"], check=True, capture_output=True,
                            text=True).stdout.strip().lstrip(":")
    web = write("auth.yml", "basic_auth_users:\n  alice: '%s'\n" % hashed)
    good = "Authorization: Basic " + base64.b64encode(b"alice:secret").decode()
    bad = "Authorization: Basic " + base64.b64encode(b"alice:wrong").decode()
    body = ["Content-Length: 5"]
    with AuthDaemon(web) as d:
        for method, target, extra, want in (("GET", "/x", [], 404), ("DELETE", "/x", [], 404),
                                            ("DELETE", "/metrics", [], 405), ("PUT", "/metrics", [], 405),
                                            ("POST", "/metrics", body, 405), ("POST", "/x", body, 404),
                                            ("GET", "/metrics", body, 413), ("GET", "/runbook%00", [], 404),
                                            ("OPTIONS", "/metrics", [], 200), ("GET", "/-/healthy", [], 200),
                                            ("GET", "/metrics", [], 200)):
            got = []
            for cred in ([], [bad], [good]):
                r = exchange(d.port, request(target, *(extra + cred), method=method) + (b"hello" if extra else b""))
                got.append(r[0][0] if r else None)
            dp.check(got == [401, 401, want],
                     "basic auth: %s %s%s without, with wrong, with good credentials: %s (want 401, 401, %d)" % (
                         method, target, " with a body" if extra else "", got, want))
        stops_cleanly(d, "basic auth")


not_regular_at_start()
not_regular_in_roots()
config_keys()
plain_http()
auth_first()
reload_config_fifo()
reload_webconfig_fifo()
reload_key_fifo()
dp.finish()
