"""A host as an operator gets paged about: the .deb installed in a fresh Debian 12 root booted
under systemd in a systemd-nspawn container (tests/package/check_nspawn.py's Container), with the
runbook's tools (pkg.ROOT_EXTRA), loop filesystems of this machine bound into it, and a
prometheus.service of its own (this machine's Debian prometheus and promtool bound in) that
scrapes localhost:9477 with the shipped example config and rules, every interval 1 s and every
alert's for: divided by FOR_SCALE (their expressions as shipped). The runbook's commands run in
it through nsenter: runner(text, timeout)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "package"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "tests", "rules"))
import pkg  # noqa: E402
import dp  # noqa: E402
from check_nspawn import Container, metric  # noqa: E402
from promtime import scale_durations  # noqa: E402

ETC = os.path.join(ROOT, "etc", "prometheus")
FOR_SCALE = 600  # an alert's for: of 1h waits 6 s, 15m 1.5 s
CONF = "/etc/diskpulse/diskpulse.conf"

PROMETHEUS_UNIT = """[Unit]
Description=Prometheus (this machine's binary, for the runbook tests)
After=network.target

[Service]
ExecStart=/usr/bin/prometheus --config.file=/etc/prometheus/prometheus.yml \\
  --storage.tsdb.path=/var/lib/prometheus --web.listen-address=127.0.0.1:9090 --log.level=info
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def prometheus_files(root, scrape_file_sd=None):
    """The shipped example config and rules in root/etc/prometheus: intervals 1 s, target
    localhost:9477, the slow group's 10-minute interval dropped, every alert's for: divided by
    FOR_SCALE. With scrape_file_sd, the diskpulse job's targets come from that file instead."""
    conf = yaml.safe_load(open(os.path.join(ETC, "prometheus.yml")))
    conf["global"].update(scrape_interval="1s", evaluation_interval="1s")
    job = [j for j in conf["scrape_configs"] if j["job_name"] == "diskpulse"][0]
    job.update(scrape_interval="1s", scrape_timeout="1s")
    if scrape_file_sd:
        job.pop("static_configs", None)
        job["file_sd_configs"] = [{"files": [scrape_file_sd], "refresh_interval": "1s"}]
    rules = yaml.safe_load(open(os.path.join(ETC, "diskpulse.rules.yml")))
    for g in rules["groups"]:
        g.pop("interval", None)
        for r in g["rules"]:
            if "alert" in r and "for" in r:
                r["for"] = scale_durations(r["for"], FOR_SCALE)
    d = os.path.join(root, "etc", "prometheus")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        yaml.safe_dump(conf, f)
    with open(os.path.join(d, "diskpulse.rules.yml"), "w") as f:
        yaml.safe_dump(rules, f)
    return yaml.safe_dump(conf)


class Host:
    """The booted container. binds: {path in the container: a directory of this machine} (loop
    filesystems' mount points); config: lines appended to diskpulse.conf; dropin: the text of a
    diskpulse.service drop-in; udev: {maj:min: udev data text} under /etc/diskpulse/udev (the
    config then names it as path.udev.data). Use as a context manager."""

    def __init__(self, build, binds, config, dropin="", udev=None):
        pkg.need_root()
        if pkg.sanitized(build):
            pkg.skip("a sanitizer build: the package is tested from the plain build")
        pkg.need_tool("systemd-nspawn", "systemd-container")
        pkg.need_tool("nsenter", "util-linux")
        for tool in ("prometheus", "promtool"):
            if not shutil.which(tool):
                pkg.skip("%s is not installed (Debian package prometheus)" % tool)
        deb = pkg.deb_path(build)
        if not deb:
            pkg.skip("no .deb in %s (made by the package/deb test)" % build)
        base = pkg.fresh_root(build)
        self.tmp = tempfile.mkdtemp(prefix="diskpulse-rbhost-")
        self.c = None
        try:
            self.root = pkg.copy_root(base, os.path.join(self.tmp, "root"))
            shutil.copy(deb, os.path.join(self.root, "root", "diskpulse.deb"))
            p = pkg.chroot(self.root, "dpkg", "-i", "/root/diskpulse.deb")
            if p.returncode != 0:
                raise RuntimeError("dpkg -i: %s" % (p.stdout + p.stderr))
            pw = open(os.path.join(self.root, "etc", "passwd")).read()
            m = re.search(r"^diskpulse:[^:]*:(\d+):(\d+):", pw, re.M)
            self.uid, self.gid = int(m.group(1)), int(m.group(2))
            # a key given twice is refused: a key set here replaces the shipped file's line
            if udev:
                config = list(config) + ["path.udev.data = /etc/diskpulse/udev"]
            keys = {l.split("=", 1)[0].strip() for l in config}
            conf = os.path.join(self.root, CONF.lstrip("/"))
            kept = [l for l in open(conf).read().splitlines()
                    if l.split("=", 1)[0].strip() not in keys or l.lstrip().startswith("#")]
            with open(conf, "w") as f:
                f.write("".join(l + "\n" for l in kept))
                f.write("\n# tests/runbook\n" + "".join(l + "\n" for l in config))
            if udev:
                ud = os.path.join(self.root, "etc", "diskpulse", "udev")
                os.makedirs(ud)
                for majmin, text in udev.items():
                    with open(os.path.join(ud, "b" + majmin), "w") as f:
                        f.write(text)
            if dropin:
                d = os.path.join(self.root, "etc", "systemd", "system", "diskpulse.service.d")
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "runbook-test.conf"), "w") as f:
                    f.write(dropin)
            # debootstrap writes no /etc/hosts (the installer does): localhost for Go's resolver
            hosts = os.path.join(self.root, "etc", "hosts")
            if not os.path.exists(hosts) or "localhost" not in open(hosts).read():
                with open(hosts, "a") as f:
                    f.write("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
            prometheus_files(self.root)
            units = os.path.join(self.root, "etc", "systemd", "system")
            with open(os.path.join(units, "prometheus.service"), "w") as f:
                f.write(PROMETHEUS_UNIT)
            wants = os.path.join(units, "multi-user.target.wants")
            os.makedirs(wants, exist_ok=True)
            os.symlink("/etc/systemd/system/prometheus.service", os.path.join(wants, "prometheus.service"))
            os.makedirs(os.path.join(self.root, "var", "lib", "prometheus"), exist_ok=True)
            extra = ["--capability=CAP_SYSLOG", "--bind-ro=%s:/usr/bin/prometheus" % shutil.which("prometheus"),
                     "--bind-ro=%s:/usr/bin/promtool" % shutil.which("promtool")]
            for inside, outside in binds.items():
                os.makedirs(os.path.join(self.root, inside.lstrip("/")), exist_ok=True)
                extra.append("--bind=%s:%s" % (outside, inside))
            t0 = time.monotonic()
            try:
                self.c = Container(self.root, os.path.join(self.tmp, "console.log"), extra)
            except RuntimeError as e:
                pkg.skip("systemd-nspawn could not boot the root here: %s" % str(e).strip()[-800:])
            state = self.c.booted()
            if state not in ("running", "degraded"):
                raise RuntimeError("the container did not boot: %s\n%s" % (state, self.c.console()))
            print("container booted (%s) in %.1f s" % (state, time.monotonic() - t0))
            if not dp.wait_until(lambda: self.metrics() and self.prom_ready(), 60, poll=0.5):
                raise RuntimeError("diskpulse or prometheus did not come up:\n%s\n%s" % (
                    self.sh("systemctl status diskpulse prometheus")[1], self.c.console()))
        except BaseException:
            self.close()
            raise

    def sh(self, cmd, timeout=60):
        """(exit status or None on a timeout, stdout, stderr) of a shell command inside."""
        try:
            return self.c.sh(cmd, timeout)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return None, out, "[timed out after %s s]" % timeout

    def runner(self, text, timeout):
        rc, out, err = self.sh(text, timeout)
        return rc, out + err

    def metrics(self):
        st, body = self.c.http("127.0.0.1", timeout=5)
        return body if st == "200" else ""

    def value(self, name, **labels):
        return metric(self.metrics(), name, **labels)

    def prom(self, path, **params):
        q = ("?" + urllib.parse.urlencode(params)) if params else ""
        rc, out, _ = self.sh("curl -s 'http://127.0.0.1:9090/api/v1/%s%s'" % (path, q))
        try:
            doc = json.loads(out)
        except ValueError:
            return None
        return doc.get("data") if doc.get("status") == "success" else None

    def prom_ready(self):
        return self.sh("curl -sf http://127.0.0.1:9090/-/ready")[0] == 0

    def alerts(self, alertname, state="firing", **labels):
        data = self.prom("alerts") or {"alerts": []}
        return [a for a in data["alerts"] if a["labels"].get("alertname") == alertname and a["state"] == state
                and all(a["labels"].get(k) == v for k, v in labels.items())]

    def wait_firing(self, alertname, timeout, **labels):
        """Checks that the shipped alertname fires with labels within timeout seconds."""
        t = time.monotonic()
        got = dp.wait_until(lambda: self.alerts(alertname, **labels), timeout, poll=1)
        pkg.check(bool(got), "the shipped %s fires %s (after %.0f s; for: / %d)" % (
            alertname, " ".join("%s=%s" % kv for kv in sorted(labels.items())), time.monotonic() - t, FOR_SCALE))
        return got[0] if got else None

    def wait_quiet(self, alertname, timeout, **labels):
        t = time.monotonic()
        ok = dp.wait_until(lambda: not self.alerts(alertname, **labels)
                           and not self.alerts(alertname, state="pending", **labels), timeout, poll=1)
        pkg.check(ok, "%s is quiet again (after %.0f s)" % (alertname, time.monotonic() - t))
        return ok

    def close(self):
        if self.c:
            if pkg.failures():
                print("----- container console -----\n" + self.c.console())
            rc = self.c.poweroff()
            pkg.note("container powered off (nspawn exit %s)" % rc)
            self.c = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def prefetch(runner, texts):
    """A runner that starts the commands texts at once, each in a thread of its own, and gives
    their results when the section comes to them (commands that take minutes as written, run
    side by side); any other command it runs as it comes."""
    import threading
    results, threads = {}, {}

    def one(t):
        results[t] = runner(t, 900)
    for t in texts:
        threads[t] = threading.Thread(target=one, args=(t,), daemon=True)
        threads[t].start()

    def run(text, timeout):
        if text in threads:
            threads[text].join(timeout)
            return results.get(text, (None, "[timed out after %s s]" % timeout))
        return runner(text, timeout)
    return run
