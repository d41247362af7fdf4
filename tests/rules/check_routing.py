#!/usr/bin/env python3
"""The shipped Alertmanager routing (etc/alertmanager/diskpulse-route.yml) on a live Alertmanager
(Debian's prometheus-alertmanager): the alerts one failing NVMe drive raises together - SMART
unhealthy, two critical-warning bits, spare below threshold, media errors, temperature - are sent
to it as Prometheus would, while another host has a slow canary target, and a small webhook
receiver counts what arrives. One failing drive must be one notification, to the pager, holding
only the alert that explains the rest; the other host's warning one ticket; a third host's
canary ENOSPC, under node_exporter's full-filesystem alert, nothing. The config is the
shipped one with the receivers' URLs pointed at the test's receiver and group_wait shortened to
1 s (nothing else changed).
Exit 77 (skip) when Alertmanager is not installed.
Usage: check_routing.py"""
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AMCONF = os.path.join(ROOT, "etc", "alertmanager", "diskpulse-route.yml")

FAILING = {"instance": "db1:9477", "job": "diskpulse", "device": "nvme0n1"}
ALERTS = [
    dict(FAILING, alertname="DiskpulseSmartUnhealthy", severity="critical"),
    dict(FAILING, alertname="DiskpulseNvmeCriticalWarning", severity="critical", flag="spare"),
    dict(FAILING, alertname="DiskpulseNvmeCriticalWarning", severity="critical", flag="reliability"),
    dict(FAILING, alertname="DiskpulseSpareLow", severity="critical"),
    dict(FAILING, alertname="DiskpulseMediaErrorsIncreasing", severity="warning"),
    dict(FAILING, alertname="DiskpulseTemperatureHigh", severity="warning"),
    # another host: one slow canary target
    {"instance": "db2:9477", "job": "diskpulse", "path": "/var/lib/postgresql", "mode": "fdatasync",
     "alertname": "DiskpulseSyncLatencyDegraded", "severity": "warning"},
    # a third: its filesystem is full (node_exporter's mixin says so), which explains the
    # canary's ENOSPC there
    {"instance": "db3:9100", "host": "db3", "job": "node", "mountpoint": "/var/lib/postgresql",
     "alertname": "NodeFilesystemAlmostOutOfSpace", "severity": "critical"},
    {"instance": "db3:9477", "host": "db3", "job": "diskpulse", "path": "/var/lib/postgresql",
     "mode": "fdatasync", "errno": "ENOSPC", "alertname": "DiskpulseSyncProbeErrors", "severity": "warning"},
]

failures = []


def check(cond, what):
    print(("ok     " if cond else "FAILED ") + what, flush=True)
    if not cond:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver(http.server.BaseHTTPRequestHandler):
    got = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Receiver.got.append((self.path, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


def config(receiver_port):
    with open(AMCONF) as f:
        conf = yaml.safe_load(f)
    for r in conf["receivers"]:
        for w in r.get("webhook_configs", []):
            w["url"] = "http://127.0.0.1:%d/%s" % (receiver_port, r["name"])
    def shorten(route):
        if "group_wait" in route:
            route["group_wait"] = "1s"
        for child in route.get("routes", []):
            shorten(child)
    shorten(conf["route"])
    return conf


def post_alerts(am_port):
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = json.dumps([{"labels": a, "annotations": {"summary": a["alertname"]}, "startsAt": now}
                       for a in ALERTS]).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/api/v2/alerts" % am_port, data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status


def alertmanager_binary():
    return shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


class Alertmanager:
    """Debian's Alertmanager in tmp with the shipped routing (config()), its receivers pointed at
    a Receiver of its own: .port, .got (the notifications, (path, body)), .stop(). Raises
    RuntimeError when it does not become ready."""

    def __init__(self, tmp):
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.got = Receiver.got
        self.port = free_port()
        conf = os.path.join(tmp, "am.yml")
        with open(conf, "w") as f:
            yaml.safe_dump(config(self.srv.server_address[1]), f)
        self.log = open(os.path.join(tmp, "am.log"), "w+")
        self.proc = subprocess.Popen([alertmanager_binary(), "--config.file=" + conf, "--storage.path=" + tmp,
                                      "--web.listen-address=127.0.0.1:%d" % self.port,
                                      "--cluster.listen-address=", "--log.level=warn"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port, timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("Alertmanager did not start:\n" + self.output()[-2000:])
            time.sleep(0.2)

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.srv.shutdown()
        self.srv.server_close()


def main():
    if not alertmanager_binary():
        print("SKIP: Alertmanager is not installed (Debian package prometheus-alertmanager)")
        return 77
    tmp = tempfile.mkdtemp(prefix="diskpulse-am-")
    try:
        am = Alertmanager(tmp)
    except RuntimeError as e:
        print(e)
        shutil.rmtree(tmp, ignore_errors=True)
        return 1
    port = am.port
    try:
        check(post_alerts(port) == 200, "Alertmanager took the %d alerts" % len(ALERTS))
        # group_wait is 1 s; inhibitions apply when a group is flushed. Wait well past it.
        time.sleep(6)
        got = list(Receiver.got)
        for path, body in got:
            print("  %s: %s" % (path, sorted((a["labels"]["alertname"], a["labels"].get("flag", ""))
                                          for a in body["alerts"])))
        db1 = [(path, b) for path, b in got if b["commonLabels"].get("instance") == "db1:9477"
               or any(a["labels"]["instance"] == "db1:9477" for a in b["alerts"])]
        db2 = [(path, b) for path, b in got if any(a["labels"]["instance"] == "db2:9477" for a in b["alerts"])]
        check(len(db1) == 1, "the failing drive is one notification (%d)" % len(db1))
        if db1:
            path, body = db1[0]
            names = sorted(a["labels"]["alertname"] for a in body["alerts"])
            check(path == "/diskpulse-page", "... to the pager (%s)" % path)
            check(names == ["DiskpulseSmartUnhealthy"],
                  "... holding the alert that explains the rest, the others inhibited (%s)" % names)
        check(len(db2) == 1 and db2[0][0] == "/diskpulse-ticket",
              "the other host's slow target is one ticket (%s)" % [x[0] for x in db2])
        db3 = [x[0] for x in got if any(a["labels"]["instance"] == "db3:9477" for a in x[1]["alerts"])]
        check(not db3, "the canary's ENOSPC under a full filesystem is inhibited (%s)" % db3)
        check(len(got) == 2, "two notifications in all (%d)" % len(got))
    finally:
        am.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % len(failures) if failures else "all routing checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
