"""Shared set-up of the runbook tests on this host: the end-to-end helpers of tests/integration
(dp: the real daemon, loop filesystems), and a live Prometheus that scrapes a daemon with the
shipped rules so that a test shows the alert of its section really firing on the situation it
made, before it runs the section's commands.

The Prometheus is Debian's, on loopback with temporary storage, scraping and evaluating every
second (tests/integration/test_prometheus.py's config writer). Only the waiting of the alerts is
shortened: every alert's `for:` is divided by `for_scale`; their expressions (and so every range
they read) stay as shipped."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "tests", "rules"))
sys.path.insert(0, HERE)
import dp  # noqa: E402
import runbook  # noqa: E402
import test_prometheus  # noqa: E402
from promtime import scale_durations  # noqa: E402

check = dp.check


def not_sanitized(binary):
    """Skips under AddressSanitizer: the runbook's commands and what they show are the same
    there, the daemon's memory is the unit and integration labels' business, and these tests
    wait minutes as the runbook's commands do (the CI's time)."""
    if dp.sanitized(binary):
        dp.skip("a sanitizer build: the runbook's commands are run against the plain build")
    return binary


class Alerts:
    """Debian's prometheus scraping 127.0.0.1:port with the shipped rules, each alert's for:
    divided by for_scale. Use as a context manager."""

    def __init__(self, port, for_scale=60):
        if not shutil.which("prometheus"):
            dp.skip("prometheus is not installed (Debian package prometheus)")
        self.tmp = tempfile.mkdtemp(prefix="diskpulse-rbprom-")
        config = test_prometheus.write_config(self.tmp, port)
        path = os.path.join(self.tmp, "diskpulse.rules.yml")
        rules = yaml.safe_load(open(path))
        for g in rules["groups"]:
            for r in g["rules"]:
                if "alert" in r and "for" in r:
                    r["for"] = scale_durations(r["for"], for_scale)
        with open(path, "w") as f:
            yaml.safe_dump(rules, f)
        self.prom = test_prometheus.Prometheus(config, self.tmp)
        self.url = self.prom.url

    def active(self, alertname, state="firing", **labels):
        """The alerts named alertname in state whose labels include labels."""
        return [a for a in test_prometheus.alerts(self.prom)
                if a["labels"].get("alertname") == alertname and a["state"] == state
                and all(a["labels"].get(k) == v for k, v in labels.items())]

    def wait_firing(self, alertname, timeout, **labels):
        """Checks that alertname fires with labels within timeout seconds; returns the alert."""
        t = time.monotonic()
        got = dp.wait_until(lambda: self.active(alertname, **labels), timeout, poll=0.5)
        check(got, "the shipped %s fires %s (%.0f s, its for: shortened)"
              % (alertname, " ".join("%s=%s" % kv for kv in sorted(labels.items())), time.monotonic() - t))
        return got[0] if got else None

    def wait_quiet(self, alertname, timeout, **labels):
        t = time.monotonic()
        quiet = dp.wait_until(lambda: not self.active(alertname, **labels)
                              and not self.active(alertname, state="pending", **labels), timeout, poll=0.5)
        check(quiet, "%s is no longer active after the fix (%.0f s)" % (alertname, time.monotonic() - t))
        return quiet

    def query(self, expr):
        return test_prometheus.query(self.url, expr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.prom.finish()
        shutil.rmtree(self.tmp, ignore_errors=True)


def kernel_lines_since(out, began, margin=5):
    """The lines of a `dmesg -T` output stamped at began (a time.time()) or later: a loop
    device's number is used again and again, and the kernel log keeps what earlier ones said."""
    import re
    keep = []
    for line in out.splitlines():
        m = re.match(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]", line)
        if not m or time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")) >= began - margin:
            keep.append(line)
    return keep


def diskstats_line(dev):
    """The fields of dev's /proc/diskstats line after its name (0: reads completed ... 14: flushes
    completed)."""
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if p[2] == dev:
                return [int(x) for x in p[3:]]
    return None


def column(out, dev, col):
    """Column col (1-based, as the runbook counts) of dev's line in the output of a grep of
    /proc/diskstats, for each such line in order."""
    return [int(line.split()[col - 1]) for line in out.splitlines()
            if len(line.split()) >= col and line.split()[2] == dev]


def metric_lines(out, name, **labels):
    """The values of name's samples in a grep of an exposition whose labels include labels."""
    vals = []
    for line in out.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all('%s="%s"' % kv in line for kv in labels.items()):
            vals.append(float(line.rsplit(" ", 1)[1]))
    return vals


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(cmd, **kw)
