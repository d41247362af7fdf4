#!/usr/bin/env python3
"""Hostile input, handled: files that are not regular files where the daemon reads one (a FIFO, a
directory, a device) refused at once with what they are, at start, by --check-config and on
SIGHUP (the running configuration stays, the daemon keeps serving and stops on SIGTERM); a key
given twice in the config file refused with both lines; --no-SWITCH=BOOL as the file's no- form,
and no "no-" form for a command."""
import http.client
import os
import signal
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
    dp.check(rc == 0 and took < 2, "... SIGTERM ends it: exit %s in %.2f s" % (rc, took))


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
    """--check-config with args: (exit status, stdout, stderr)."""
    r = subprocess.run([BIN, "--check-config", "--state.directory=" + path("state")] + list(args),
                       capture_output=True, text=True, timeout=HUNG)
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


not_regular_at_start()
config_keys()
reload_config_fifo()
reload_webconfig_fifo()
reload_key_fifo()
dp.finish()
