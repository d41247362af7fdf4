#!/usr/bin/env python3
"""--web.config.file end to end: TLS with and without client certificates (a throwaway CA made
here with openssl), basic auth with bcrypt hashes from htpasswd, response headers, TLS versions,
plain HTTP to the TLS port, SIGHUP swapping the certificate and the client-auth policy, a bad
file on SIGHUP, --check-config, and keys read without capabilities."""
import http.client
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import dp

BIN = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="diskpulse-webconfig-")
PASSWORD = "correct horse"


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, **kw)


def path(name):
    return os.path.join(TMP, name)


def make_ca(name):
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", path(name + ".key"), "-out", path(name + ".crt"), "-days", "2", "-subj", "/CN=" + name,
       "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=keyCertSign,cRLSign")


def make_cert(name, ca, cn, ext, rsa=False):
    key = ["-newkey", "rsa:2048"] if rsa else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    sh("openssl", "req", *key, "-nodes", "-keyout", path(name + ".key"), "-out", path(name + ".csr"),
       "-subj", "/CN=" + cn)
    with open(path(name + ".ext"), "w") as f:
        f.write(ext)
    sh("openssl", "x509", "-req", "-in", path(name + ".csr"), "-CA", path(ca + ".crt"), "-CAkey",
       path(ca + ".key"), "-CAcreateserial", "-out", path(name + ".crt"), "-days", "2", "-extfile",
       path(name + ".ext"))


def bcrypt_hash(password):
    """A bcrypt hash as the README says to make one: htpasswd -nBC 10 (apache2-utils)."""
    out = sh("htpasswd", "-nbBC", "10", "", password).stdout
    return out.strip().lstrip(":")


def bcrypt_hash_mkpasswd(password):
    """The README's other way: mkpasswd -m bcrypt -R 10 (whois)."""
    return sh("mkpasswd", "-m", "bcrypt", "-R", "10", "-s", input=password).stdout.strip()


def write_config(name, text):
    with open(path(name), "w") as f:
        f.write(text)
    return path(name)


def tls_config(cert="server", auth="RequireAndVerifyClientCert", extra="", users=True):
    text = "tls_server_config:\n  cert_file: %s.crt\n  key_file: %s.key\n" % (cert, cert)
    if auth:
        text += "  client_auth_type: %s\n" % auth
        if "Verify" in auth:
            text += "  client_ca_file: ca.crt\n"
    text += extra
    text += ("http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
             "    X-Content-Type-Options: nosniff\n"
             "    Strict-Transport-Security: max-age=31536000\n")
    if users:
        text += "basic_auth_users:\n  alice: %s\n  bob: '%s'\n" % (HASH, HASH_BOB)
    return text


def context(client=None, maximum=None, minimum=None, alpn=None):
    ctx = ssl.create_default_context(cafile=path("ca.crt"))
    if client:
        ctx.load_cert_chain(path(client + ".crt"), path(client + ".key"))
    if maximum:
        ctx.maximum_version = maximum
    if minimum:
        ctx.minimum_version = minimum
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def basic(user, password):
    import base64
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


class Daemon:
    """The real binary serving HTTPS on a loopback port."""

    def __init__(self, config, *extra):
        self.port = dp.free_port()
        self.state = tempfile.mkdtemp(prefix="diskpulse-state-", dir=TMP)
        self.log = open(path("daemon-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen(
            [BIN, "--web.listen-address=127.0.0.1:%d" % self.port, "--web.config.file=" + config,
             "--state.directory=" + self.state, "--no-collector.smart", "--no-collector.canary"] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("daemon exited with %s:\n%s" % (self.proc.returncode, self.output()))
            if "diskpulse started" in self.output():
                return
            time.sleep(0.05)
        raise RuntimeError("daemon did not start:\n" + self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def get(self, ctx, url="/metrics", headers=None, host="localhost", source=None):
        """(status, headers, body) of one HTTPS request, from the loopback address source if
        given; raises on a refused handshake."""
        c = http.client.HTTPSConnection(host, self.port, context=ctx, timeout=10,
                                        source_address=(source, 0) if source else None)
        try:
            c.request("GET", url, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def refused(self, ctx, headers=None):
        """Returns the error text when the TLS connection yields no HTTP response, else None."""
        try:
            st, _, _ = self.get(ctx, headers=headers)
            return None if st else "no status"
        except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError) as e:
            return "%s: %s" % (type(e).__name__, e)

    def hup(self, expect):
        n = self.output().count(expect)
        self.proc.send_signal(signal.SIGHUP)
        ok = dp.wait_until(lambda: self.output().count(expect) > n, 10)
        return ok

    def stop(self):
        return self.stop_timed()[0]

    def stop_timed(self):
        """SIGTERM; (exit status, seconds to the exit)."""
        return dp.signal_exit_time(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        rc = self.stop() if self.proc.poll() is None else self.proc.returncode
        out = self.output()
        dp.check(rc == 0 and "Sanitizer" not in out, "the daemon on port %d exits cleanly (%s)%s" % (
            self.port, rc, "" if rc == 0 else ":\n" + out[-2000:]))
        self.log.close()


def served_subject(port, ctx):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return dict(x[0] for x in s.getpeercert()["subject"]).get("commonName")


def client_certificates():
    cfg = write_config("web.yml", tls_config())
    with Daemon(cfg) as d:
        good = context("client")
        st, h, body = d.get(good, headers=basic("alice", PASSWORD))
        dp.check(st == 200 and b"diskpulse_build_info" in body,
                 "client certificate and password: /metrics 200 (%s)" % st)
        dp.check(h.get("x-frame-options") == "deny" and h.get("x-content-type-options") == "nosniff" and
                 h.get("strict-transport-security") == "max-age=31536000",
                 "configured headers on the metrics page: %s" % {k: v for k, v in h.items() if k.startswith(("x-", "s"))})
        e = d.refused(context())
        dp.check(e is not None, "no client certificate: no page (%s)" % e)
        e = d.refused(context("client_other"), headers=basic("alice", PASSWORD))
        dp.check(e is not None, "a client certificate of another CA: no page (%s)" % e)
        dp.check(e is not None and "BAD_CERTIFICATE" in e.upper().replace(" ", "_"),
                 "... refused with a bad_certificate alert")
        e = d.refused(context("client_expired"), headers=basic("alice", PASSWORD))
        dp.check(e is not None, "an expired client certificate: no page (%s)" % e)
        n = dp.value(metrics(d, None, "client"), "diskpulse_http_tls_client_cert_refused_total")
        dp.check(n == 2, "diskpulse_http_tls_client_cert_refused_total counts the two refused (%s)" % n)
        st, _, _ = d.get(context("client", maximum=ssl.TLSVersion.TLSv1_2), headers=basic("alice", PASSWORD))
        dp.check(st == 200, "TLS 1.2 with the default min_version: 200")
        # HTTP/2 is never negotiated: libmicrohttpd speaks HTTP/1.1
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as raw:
            with context("client", alpn=["h2", "http/1.1"]).wrap_socket(raw, server_hostname="localhost") as s:
                dp.check(s.selected_alpn_protocol() == "http/1.1",
                         "ALPN offering h2 and http/1.1 selects %s" % s.selected_alpn_protocol())
        # no session resumption: every connection shows its certificate again
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = context("client", maximum=version, minimum=version)
            with socket.create_connection(("127.0.0.1", d.port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    s.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    s.recv(100)
                    session = s.session
            with socket.create_connection(("127.0.0.1", d.port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
                    dp.check(not s.session_reused, "%s: a session is never resumed" % version.name)
        # curl, as an operator would
        if shutil.which("curl"):
            base = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", path("ca.crt")]
            url = "https://localhost:%d/metrics" % d.port
            cert = ["--cert", path("client.crt"), "--key", path("client.key")]
            r = subprocess.run(base + cert + ["-u", "alice:" + PASSWORD, url], capture_output=True, text=True)
            dp.check(r.stdout == "200", "curl with certificate and password: %s" % r.stdout)
            r = subprocess.run(base + cert + [url], capture_output=True, text=True)
            dp.check(r.stdout == "401", "curl with certificate, without password: %s" % r.stdout)
            r = subprocess.run(base + ["-u", "alice:" + PASSWORD, url], capture_output=True, text=True)
            dp.check(r.returncode != 0 and r.stdout == "000",
                     "curl without certificate: no page (exit %d)" % r.returncode)
        plain_to_tls(d.port)


def plain_to_tls(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    data = b""
    try:
        while True:
            c = s.recv(4096)
            if not c:
                break
            data += c
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    dp.check(b"HTTP/" not in data and b"diskpulse" not in data,
             "plain HTTP to the TLS port gets no page (%d bytes: %r)" % (len(data), data[:16]))


def mapped(pid, soname):
    """Whether the process maps the library soname (its file name, "libcrypt.so.1")."""
    with open("/proc/%d/maps" % pid) as f:
        return any(line.split()[-1].rsplit("/", 1)[-1].startswith(soname.split(".so")[0] + ".so")
                   for line in f if "/" in line)


def optional_libraries():
    """The web config's libraries are loaded only when configured (lib/dynlib.h): libyaml with a
    web config file, libcrypt when it names users."""
    with dp.Daemon(BIN, "--no-collector.smart", "--no-collector.canary") as d:
        dp.check(not mapped(d.proc.pid, "libyaml-0.so.2") and not mapped(d.proc.pid, "libcrypt.so.1"),
                 "without a web config neither libyaml nor libcrypt is mapped")
    for name, text in (("empty.yml", ""), ("nousers.yml", tls_config(users=False))):
        with Daemon(write_config(name, text)) as d:
            dp.check(mapped(d.proc.pid, "libyaml-0.so.2") and not mapped(d.proc.pid, "libcrypt.so.1"),
                     "%s: libyaml is mapped, libcrypt is not without users" % ("an empty web config" if not text
                                                                               else "TLS"))


def basic_auth():
    cfg = write_config("web.yml", tls_config(auth=None))
    with Daemon(cfg) as d:
        dp.check(mapped(d.proc.pid, "libcrypt.so.1"), "with users the daemon maps libcrypt")
        ctx = context()
        for url in ("/metrics", "/", "/-/healthy", "/runbook", "/nothing"):
            st, h, _ = d.get(ctx, url)
            dp.check(st == 401 and h.get("www-authenticate") == 'Basic realm="diskpulse", charset="UTF-8"',
                     "%s without credentials: 401 with WWW-Authenticate (%s %s)" % (url, st, h.get("www-authenticate")))
        st, h, _ = d.get(ctx, headers=basic("alice", "wrong"))
        dp.check(st == 401 and "www-authenticate" in h, "wrong password: 401")
        dp.check(h.get("x-frame-options") == "deny", "configured headers on a 401 too")
        st, _, _ = d.get(ctx, headers=basic("mallory", PASSWORD))
        dp.check(st == 401, "unknown user: 401")
        st, _, _ = d.get(ctx, headers={"Authorization": "Bearer abc"})
        dp.check(st == 401, "another scheme: 401")
        st, _, _ = d.get(ctx, headers={"Authorization": "Basic !!!"})
        dp.check(st == 401, "broken base64: 401")
        for url in ("/metrics", "/", "/-/healthy", "/runbook"):
            st, h, _ = d.get(ctx, url, headers=basic("alice", PASSWORD))
            dp.check(st == 200, "%s with alice's password: 200 (%s)" % (url, st))
        st, h, _ = d.get(ctx, "/nothing", headers=basic("bob", "bob's " + PASSWORD))
        dp.check(st == 404 and h.get("x-frame-options") == "deny",
                 "bob (a mkpasswd hash) passes; a 404 has the headers too (%s)" % st)
        # The password checks' thread is started from libmicrohttpd's, which is kept on one CPU
        # with the guard's while few connections are open; the checks are not.
        if len(os.sched_getaffinity(0)) > 1:
            one = dp.shared_cpu_threads(d.proc.pid)
            dp.check(len(one) <= 2 and all(n in ("MHD-single", "dp-connguard") for n, _ in one) and
                     len(dp.thread_cpus(d.proc.pid)) >= 5,
                     "only libmicrohttpd's thread and the guard's are kept on one CPU, not the password "
                     "checks' (%s of %d threads)" % (one, len(dp.thread_cpus(d.proc.pid))))
        counters(d, ctx)
        timing(d, ctx)
        no_starvation(d, ctx)


def metrics(d, ctx, client=None):
    time.sleep(1.2)  # the page is the snapshot of the last round, one a second
    st, _, body = d.get(context(client) if client else ctx, headers=basic("alice", PASSWORD))
    assert st == 200, st
    return dp.parse(body.decode())


def counters(d, ctx):
    """A scrape every second costs no bcrypt once its check is cached: the daemon's own count."""
    m = metrics(d, ctx)
    b0 = dp.value(m, "diskpulse_http_bcrypt_checks_total")
    ok0 = dp.value(m, "diskpulse_http_basic_auth_total", result="ok")
    ref0 = dp.value(m, "diskpulse_http_basic_auth_total", result="refused")
    dp.check(b0 is not None and b0 >= 3 and ok0 is not None and ref0 is not None,
             "bcrypt and basic-auth counters are exported (%s checks, %s ok, %s refused)" % (b0, ok0, ref0))
    for _ in range(20):
        d.get(ctx, headers=basic("alice", PASSWORD))
    m = metrics(d, ctx)
    dp.check(dp.value(m, "diskpulse_http_bcrypt_checks_total") == b0,
             "20 more scrapes with the same credentials ran no bcrypt (%s)"
             % dp.value(m, "diskpulse_http_bcrypt_checks_total"))
    dp.check(dp.value(m, "diskpulse_http_basic_auth_total", result="ok") >= ok0 + 21, "... and counted as ok")
    d.get(ctx, headers=basic("alice", "one more wrong"))
    d.get(ctx, headers=basic("alice", "one more wrong"))
    m = metrics(d, ctx)
    dp.check(dp.value(m, "diskpulse_http_bcrypt_checks_total") == b0 + 1,
             "a new wrong password costs one bcrypt, its repetition none")
    dp.check(dp.value(m, "diskpulse_http_basic_auth_total", result="refused") == ref0 + 2,
             "... and both are counted as refused")


def median_time(fn, n):
    ts = []
    for i in range(n):
        t = time.monotonic()
        fn(i)
        ts.append(time.monotonic() - t)
    return statistics.median(ts)


def timing(d, ctx):
    """An uncached check costs a bcrypt whether or not the user exists (the daemon's count);
    the times are printed, not judged."""
    b0 = dp.value(metrics(d, ctx), "diskpulse_http_bcrypt_checks_total")
    wrong = median_time(lambda i: d.get(ctx, headers=basic("alice", "wrong %d" % i)), 7)
    b1 = dp.value(metrics(d, ctx), "diskpulse_http_bcrypt_checks_total")
    unknown = median_time(lambda i: d.get(ctx, headers=basic("nobody%d" % i, "x")), 7)
    b2 = dp.value(metrics(d, ctx), "diskpulse_http_bcrypt_checks_total")
    dp.check(b1 - b0 == 7 and b2 - b1 == 7,
             "7 wrong passwords ran 7 bcrypts, 7 unknown users 7 too (%s, %s)" % (b1 - b0, b2 - b1))
    cached = median_time(lambda i: d.get(ctx, headers=basic("alice", PASSWORD)), 15)
    repeated_wrong = median_time(lambda i: d.get(ctx, headers=basic("alice", "wrong 0")), 15)
    print("timing: wrong password %.1f ms, unknown user %.1f ms, cached good %.1f ms, cached wrong %.1f ms "
          "(medians; each includes a TLS handshake)" % (wrong * 1e3, unknown * 1e3, cached * 1e3,
                                                         repeated_wrong * 1e3))


def no_starvation(d, ctx):
    """While clients flood the server with new wrong passwords (each a bcrypt for the worker), a
    scraper whose check is cached is still answered at once. The attackers come from 127.0.0.2
    to .9, two each: from the scraper's own address, 16 of them would fill
    --web.max-connections-per-address, which is another defence."""
    stop = threading.Event()
    codes = {}

    def attacker(k):
        i = 0
        while not stop.is_set():
            try:
                st, _, _ = d.get(ctx, headers=basic("alice", "guess %d %d" % (k, i)),
                                 source="127.0.0.%d" % (2 + k % 8))
                codes[st] = codes.get(st, 0) + 1
            except OSError:
                codes["error"] = codes.get("error", 0) + 1
            i += 1

    threads = [threading.Thread(target=attacker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    lat, ok = [], 0
    try:
        time.sleep(0.5)
        for _ in range(20):
            t = time.monotonic()
            try:
                st, _, _ = d.get(ctx, headers=basic("alice", PASSWORD), source="127.0.0.1")
            except OSError as e:
                print("scrape failed: %s" % e)
                st = None
            lat.append(time.monotonic() - t)
            ok += st == 200
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    print("under a password flood: attackers got %s; scraper max %.1f ms, median %.1f ms"
          % (codes, max(lat) * 1e3, statistics.median(lat) * 1e3))
    dp.check(ok == 20, "a cached scraper gets all 20 pages during a flood of wrong passwords (%d)" % ok)
    dp.check(codes.get(401, 0) > 0 and not codes.get(200), "the attackers get 401 (or 503), never a page")


def stopped_under(d, stop, attacker, n, before_stop):
    """Starts n attacker threads (attacker(k) loops until stop is set), runs before_stop(), then
    sets stop and stops d, timed; returns (exit status, seconds) once the threads are done."""
    threads = [threading.Thread(target=attacker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    before_stop()
    with d:
        stop.set()
        rc, took = d.stop_timed()
    for t in threads:
        t.join()
    return rc, took


def stop_during_checks():
    """SIGTERM while requests wait for their bcrypt check: they are let go, the daemon exits at
    once and cleanly (libmicrohttpd refuses to stop with suspended connections). The attackers
    make no new request once the signal is sent (the ones sent wait on): their loop against a
    closed port would only take the CPU from the daemon's exit, and the exit is timed through a
    pidfd (dp.signal_exit_time)."""
    cfg = write_config("web-stop.yml", tls_config(auth=None))
    d = Daemon(cfg)
    ctx = context()
    stop = threading.Event()

    def attacker(k):
        i = 0
        while not stop.is_set():
            try:
                d.get(ctx, headers=basic("alice", "guess %d %d" % (k, i)))
            except (OSError, http.client.HTTPException):
                pass
            i += 1

    rc, took = stopped_under(d, stop, attacker, 12, lambda: time.sleep(1.0))
    dp.check(rc == 0 and took < 1.0, "SIGTERM with bcrypt checks waiting: exit %s in %.2f s" % (rc, took))


def stop_during_dear_check():
    """SIGTERM while a bcrypt of cost 15 runs (1.6 s alone here, longer under load): the stop
    does not wait for the hash (the README's bound is 1 s whatever the configured cost), and the
    requests waiting are closed unanswered, as the README says. The
    signal comes 0.2 s after the first request was sent, so the hash has more than a second to
    go."""
    dear = sh("htpasswd", "-nbBC", "15", "", PASSWORD).stdout.strip().lstrip(":")
    cfg = write_config("web-stop-dear.yml", tls_config(auth=None, users=False)
                       + "basic_auth_users:\n  alice: %s\n" % dear)
    d = Daemon(cfg)
    ctx = context()
    stop = threading.Event()
    sent = threading.Event()
    codes = {}

    def attacker(k):
        i = 0
        while not stop.is_set():
            c = http.client.HTTPSConnection("localhost", d.port, context=ctx, timeout=10)
            try:
                c.request("GET", "/metrics", headers=basic("alice", "guess %d %d" % (k, i)))
                sent.set()
                st = c.getresponse().status
            except (OSError, http.client.HTTPException):
                st = "error"
            finally:
                c.close()
            codes[st] = codes.get(st, 0) + 1
            i += 1

    rc, took = stopped_under(d, stop, attacker, 4, lambda: (
        dp.check(sent.wait(20), "a request with a wrong password was sent"), time.sleep(0.2)))
    dp.check(rc == 0 and took < 1.0, "SIGTERM while a bcrypt of cost 15 runs: exit %s in %.2f s" % (rc, took))
    dp.check(set(codes) == {"error"},
             "the requests waiting for the check are closed unanswered (%s)" % codes)


def closed_after(sock, limit=5.0):
    """Seconds until the peer closes sock (EOF or reset), reading whatever it sends; None if it
    stays open for limit seconds."""
    t0 = time.monotonic()
    sock.settimeout(0.05)
    while time.monotonic() - t0 < limit:
        try:
            if not sock.recv(4096):
                return time.monotonic() - t0
        except socket.timeout:
            continue
        except (ConnectionError, ssl.SSLError, OSError):
            return time.monotonic() - t0
    return None


def trickle(sock, data, every, limit):
    """Sends data a byte every `every` seconds until the peer closes the connection; returns the
    seconds that took (None if all of it was sent, or limit passed, with the connection open)."""
    t0 = time.monotonic()
    for b in data:
        if time.monotonic() - t0 > limit:
            return None
        try:
            sock.send(bytes([b]))
        except (ConnectionError, OSError):
            return time.monotonic() - t0
        if closed_after(sock, every) is not None:
            return time.monotonic() - t0
    return None


def client_hello(ctx):
    """The bytes of a real TLS ClientHello from ctx (through memory BIOs)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def deadlines():
    """The connection guard's deadlines hold on a TLS port: a silent connection, a ClientHello
    trickled a byte at a time, a request trickled after the handshake and an idle kept-alive
    connection are closed on time, and a scraper is served meanwhile."""
    cfg = write_config("web-deadlines.yml", tls_config(auth=None))
    with Daemon(cfg, "--web.read-header-timeout=1s", "--web.idle-timeout=1500ms") as d:
        ctx = context()
        with socket.create_connection(("127.0.0.1", d.port)) as raw:
            took = closed_after(raw)
        dp.check(took is not None and 0.9 <= took <= 2.0,
                 "TLS port: a connection that sends nothing is closed after %s s (header deadline 1 s)"
                 % (took and round(took, 2)))
        hello = client_hello(ctx)
        with socket.create_connection(("127.0.0.1", d.port)) as raw:
            took = trickle(raw, hello, 0.1, 5.0)
        dp.check(took is not None and 0.9 <= took <= 2.0,
                 "a ClientHello of %d bytes trickled a byte every 0.1 s is cut after %s s"
                 % (len(hello), took and round(took, 2)))
        with socket.create_connection(("127.0.0.1", d.port)) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                took = trickle(tls, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n", 0.1, 5.0)
        dp.check(took is not None and took <= 2.0,
                 "a request trickled after the handshake is cut %s s into it (1 s from the accept)"
                 % (took and round(took, 2)))
        c = http.client.HTTPSConnection("localhost", d.port, context=ctx, timeout=10)
        try:
            c.request("GET", "/metrics", headers=basic("alice", PASSWORD))
            r = c.getresponse()
            r.read()
            kept = r.getheader("Connection", "").lower() != "close"
            took = closed_after(c.sock)
        finally:
            c.close()
        dp.check(r.status == 200 and kept and took is not None and 1.3 <= took <= 2.5,
                 "a kept-alive TLS connection (%s, %s) is closed after %s s idle (idle deadline 1.5 s)"
                 % (r.status, "kept" if kept else "closed", took and round(took, 2)))
        st, _, _ = d.get(ctx, headers=basic("alice", PASSWORD))
        dp.check(st == 200, "and a scrape is served (%s)" % st)


def min_version():
    cfg = write_config("web13.yml", tls_config(auth=None, users=False, extra="  min_version: TLS13\n"))
    with Daemon(cfg) as d:
        e = d.refused(context(maximum=ssl.TLSVersion.TLSv1_2))
        dp.check(e is not None, "min_version TLS13: a TLS 1.2 client is refused (%s)" % e)
        st, _, _ = d.get(context(minimum=ssl.TLSVersion.TLSv1_3))
        dp.check(st == 200, "min_version TLS13: a TLS 1.3 client gets 200")
        # versions are fixed at start: a reload says so and keeps them
        write_config("web13.yml", tls_config(auth=None, users=False))
        dp.check(d.hup("change only on restart"), "a reload that changes min_version says it needs a restart")
        e = d.refused(context(maximum=ssl.TLSVersion.TLSv1_2))
        dp.check(e is not None, "... and TLS 1.2 stays refused")
    cfg = write_config("web12.yml", tls_config(auth=None, users=False, extra="  max_version: TLS12\n"))
    with Daemon(cfg) as d:
        c = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        with context().wrap_socket(c, server_hostname="localhost") as s:
            dp.check(s.version() == "TLSv1.2", "max_version TLS12: %s negotiated" % s.version())


def reload():
    cfg = write_config("web.yml", tls_config(auth=None, users=False))
    with Daemon(cfg) as d:
        ctx = context()
        dp.check(served_subject(d.port, ctx) == "first", "the first certificate is served")
        # a connection made before the reload is answered after it
        early = http.client.HTTPSConnection("localhost", d.port, context=ctx, timeout=10)
        early.connect()
        write_config("web.yml", tls_config(cert="server2", auth=None, users=False))
        dp.check(d.hup("configuration reloaded"), "SIGHUP reloads")
        dp.check(served_subject(d.port, ctx) == "second", "after SIGHUP the new certificate is served")
        early.request("GET", "/metrics")
        r = early.getresponse()
        dp.check(r.status == 200, "a connection opened before the reload still gets its page (%d)" % r.status)
        r.read()
        early.close()
        # a bad file keeps everything as it was
        for bad, what in (("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  bogus: 1\n",
                           "web.yml:4: unknown key"),
                          ("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
                           "web.yml:2: cert_file: cannot read"),
                          ("tls_server_config:\n  cert_file: server.crt\n  key_file: server2.key\n",
                           "does not belong to the certificate")):
            write_config("web.yml", bad)
            dp.check(d.hup("reload failed"), "a bad file on SIGHUP: reload failed")
            dp.check(what in d.output(), "... the log names it: %s" % what)
            dp.check(served_subject(d.port, ctx) == "second", "... and the running certificate stays")
            st, _, _ = d.get(ctx)
            dp.check(st == 200, "... and pages are served")
        # the client-certificate policy and the users change at once
        write_config("web.yml", tls_config(cert="server2"))
        dp.check(d.hup("configuration reloaded"), "reload to RequireAndVerifyClientCert and basic auth")
        dp.check(d.refused(context()) is not None, "... now a client without a certificate gets no page")
        st, _, _ = d.get(context("client"), headers=basic("alice", PASSWORD))
        dp.check(st == 200, "... and one with a certificate and password gets 200")
        write_config("web.yml", tls_config(cert="server2", auth="RequireAnyClientCert"))
        dp.check(d.hup("configuration reloaded"), "reload to RequireAnyClientCert")
        st, _, _ = d.get(context("client_other"), headers=basic("alice", PASSWORD))
        dp.check(st == 200, "... any client certificate will do (%s)" % st)
        dp.check(d.refused(context(), headers=basic("alice", PASSWORD)) is not None, "... but one is needed")
        # TLS cannot be turned off by a reload: the certificate stays, the users change
        write_config("web.yml", "basic_auth_users:\n  carol: '%s'\n" % HASH)
        dp.check(d.hup("turned on or off only by a restart"), "a reload without TLS says TLS needs a restart")
        st, _, _ = d.get(context("client_other"), headers=basic("carol", PASSWORD))
        dp.check(st == 200 and served_subject(d.port, context("client")) == "second",
                 "... HTTPS goes on with the running certificate, carol is let in (%s)" % st)
        st, _, _ = d.get(context("client_other"), headers=basic("alice", PASSWORD))
        dp.check(st == 401, "... alice is gone (%s)" % st)
        dp.check(d.refused(context(), headers=basic("carol", PASSWORD)) is not None,
                 "... and the running client-certificate policy stays with the certificate")
        os.unlink(path("web.yml"))
        dp.check(d.hup("reload failed"), "a removed file on SIGHUP: reload failed, old kept")
        st, _, _ = d.get(context("client_other"), headers=basic("carol", PASSWORD))
        dp.check(st == 200, "... still serving with the last good configuration")
        rc = d.stop()
        dp.check(rc == 0, "SIGTERM: exit 0 (%s)" % rc)


def cli():
    good = write_config("check.yml", tls_config())
    r = subprocess.run([BIN, "--check-config", "--web.config.file=" + good], capture_output=True, text=True)
    dp.check(r.returncode == 0 and "# web: TLS TLS12 to TLS13, client certificates RequireAndVerifyClientCert"
             in r.stdout and "web.config.file = " + good in r.stdout and "users alice bob" in r.stdout,
             "--check-config describes a good web config:\n%s" % r.stdout[-400:])
    bad = write_config("bad.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                       "  min_version: TLS14\n")
    for args in (["--check-config"], []):
        r = subprocess.run([BIN] + args + ["--web.config.file=" + bad, "--web.listen-address=127.0.0.1:%d"
                                           % dp.free_port(), "--state.directory=" + TMP],
                           capture_output=True, text=True, timeout=30)
        dp.check(r.returncode == 2 and "diskpulse: " + bad + ":4: min_version: unknown TLS version \"TLS14\"" in r.stderr,
                 "%s a bad web config: exit 2 with file:line (%d, %s)" % (args or "starting with", r.returncode,
                                                                       r.stderr.strip()[-200:]))
    r = subprocess.run([BIN, "--check-config", "--web.config.file=" + path("none.yml")], capture_output=True,
                       text=True)
    dp.check(r.returncode == 2 and "cannot read web config file" in r.stderr, "a missing web config file: exit 2")


def capabilities():
    """Keys are read without capabilities: as root, a key only another user may read is refused,
    by the daemon and by --check-config alike."""
    if os.geteuid() != 0:
        print("skip: not root, the capability check needs root")
        return
    shutil.copy(path("server.key"), path("locked.key"))
    os.chown(path("locked.key"), 65534, 65534)
    os.chmod(path("locked.key"), 0o600)
    cfg = write_config("locked.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: locked.key\n")
    for args in (["--check-config"], []):
        r = subprocess.run([BIN] + args + ["--web.config.file=" + cfg, "--web.listen-address=127.0.0.1:%d"
                                           % dp.free_port(), "--state.directory=" + TMP, "--no-collector.smart"],
                           capture_output=True, text=True, timeout=30)
        dp.check(r.returncode == 2 and "locked.key: Permission denied" in r.stderr,
                 "%s: a key readable only with CAP_DAC_OVERRIDE is refused (%d, %s)"
                 % (args or "start", r.returncode, r.stderr.strip()[-160:]))
    os.chown(path("locked.key"), 0, 0)
    with Daemon(cfg) as d:
        st, _, _ = d.get(context())
        dp.check(st == 200, "a root-owned 0600 key is read by the root daemon without capabilities")


def under_valgrind():
    """No leak and no memory error through handshakes with and without certificates, logins
    good, wrong and unknown, a certificate swapped and a bad file on SIGHUP, and SIGTERM."""
    if not shutil.which("valgrind"):
        print("skip: valgrind is not installed")
        return
    if b"__asan_init" in open(BIN, "rb").read():
        print("skip: valgrind runs on the plain build")
        return
    fast = sh("htpasswd", "-nbBC", "4", "", PASSWORD).stdout.strip().lstrip(":")
    text = tls_config().replace(HASH, fast)
    cfg = write_config("web-vg.yml", text)
    port = dp.free_port()
    log = path("valgrind.log")
    state = tempfile.mkdtemp(prefix="diskpulse-state-", dir=TMP)
    p = subprocess.Popen(dp.VALGRIND + ["--log-file=" + log, BIN, "--web.listen-address=127.0.0.1:%d" % port,
                          "--web.config.file=" + cfg, "--state.directory=" + state, "--no-collector.smart",
                          "--no-collector.canary"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    class V(Daemon):
        def __init__(self):
            self.port = port

    d = V()
    good = context("client")
    up = dp.wait_until(lambda: d.refused(good, headers=basic("alice", PASSWORD)) is None, 60, 0.3)
    dp.check(up, "the daemon under valgrind serves TLS")
    codes = []
    for i in range(3):
        codes.append(d.get(good, headers=basic("alice", PASSWORD))[0])
        codes.append(d.get(good, headers=basic("alice", "wrong %d" % i))[0])
        codes.append(d.get(good, headers=basic("nobody", "x"))[0])
        codes.append(d.get(good)[0])
        codes.append(bool(d.refused(context())))
        codes.append(bool(d.refused(context("client_other"))))
    dp.check(codes == [200, 401, 401, 401, True, True] * 3, "under valgrind: %s" % codes)
    plain_to_tls(port)
    write_config("web-vg.yml", text.replace("server.", "server2."))
    p.send_signal(signal.SIGHUP)
    dp.check(dp.wait_until(lambda: served_subject(port, good) == "second", 30, 0.3),
             "under valgrind: SIGHUP swaps the certificate")
    write_config("web-vg.yml", "tls_server_config: [\n")
    p.send_signal(signal.SIGHUP)
    time.sleep(2)
    dp.check(d.get(good, headers=basic("alice", PASSWORD))[0] == 200, "under valgrind: a bad file keeps serving")
    p.send_signal(signal.SIGTERM)
    rc = p.wait(60)
    report = open(log).read()
    report = dp.valgrind_report(report)
    dp.check(rc == 0 and report.strip() == "", "TLS and auth under valgrind: exit %d, report %r" % (rc, report[-1500:]))


def main():
    global HASH, HASH_BOB
    for tool in ("openssl", "htpasswd", "mkpasswd"):
        if not shutil.which(tool):
            dp.skip("%s is missing (scripts/deps.sh test installs it)" % tool)
    make_ca("ca")
    make_ca("other")
    make_cert("server", "ca", "first", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    make_cert("server2", "ca", "second", "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n", rsa=True)
    make_cert("client", "ca", "scraper", "subjectAltName=DNS:scraper.example\nextendedKeyUsage=clientAuth\n")
    make_cert("client_other", "other", "scraper", "extendedKeyUsage=clientAuth\n")
    # expired: signed by the right CA, valid for one day in 2020
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       path("client_expired.key"), "-out", path("client_expired.csr"), "-subj", "/CN=old")
    make_expired()
    HASH = bcrypt_hash(PASSWORD)
    HASH_BOB = bcrypt_hash_mkpasswd("bob's " + PASSWORD)
    dp.check(HASH.startswith("$2y$10$") and len(HASH) == 60, "htpasswd -nBC 10 gives a $2y$ bcrypt hash")
    dp.check(HASH_BOB.startswith("$2b$10$") and len(HASH_BOB) == 60, "mkpasswd -m bcrypt gives a $2b$ hash")
    try:
        client_certificates()
        optional_libraries()
        basic_auth()
        stop_during_checks()
        stop_during_dear_check()
        deadlines()
        min_version()
        reload()
        cli()
        capabilities()
        under_valgrind()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    dp.finish()


def make_expired():
    """A CA-signed certificate whose validity ended (openssl ca's -startdate and -enddate)."""
    with open(path("ca.db"), "w"):
        pass
    with open(path("ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca=d\n[d]\ndatabase=%s\nnew_certs_dir=%s\nserial=%s\ndefault_md=sha256\n"
                "policy=p\nunique_subject=no\n[p]\ncommonName=supplied\n" % (path("ca.db"), TMP, path("ca.serial")))
    with open(path("ca.serial"), "w") as f:
        f.write("1000\n")
    sh("openssl", "ca", "-batch", "-config", path("ca.cnf"), "-cert", path("ca.crt"), "-keyfile", path("ca.key"),
       "-in", path("client_expired.csr"), "-out", path("client_expired.crt"), "-startdate", "20200101000000Z",
       "-enddate", "20200102000000Z", "-notext")


if __name__ == "__main__":
    main()
