"""A real Prometheus for the fleet tests: started on a free loopback port with a given config and
data directory, asked over its HTTP API, stopped. Standard library only."""
import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, workdir, name, config, extra=()):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.data = os.path.join(self.dir, "data")
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write(config)
        self.extra = list(extra)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None

    def start(self, timeout=120):
        log = open(os.path.join(self.dir, "prometheus.log"), "ab")
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=" + self.config, "--storage.tsdb.path=" + self.data,
             "--web.listen-address=127.0.0.1:%d" % self.port, "--storage.tsdb.retention.time=30d",
             "--query.max-samples=500000000", "--query.timeout=10m", "--log.level=warn"]
            + self.extra, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("prometheus %s exited %d: see %s/prometheus.log"
                                   % (self.dir, self.proc.returncode, self.dir))
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError("prometheus %s not ready within %d s" % (self.dir, timeout))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def api(self, path, **params):
        url = self.url + "/api/v1/" + path + "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=900) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError("%s: %s" % (path, body))
        return body["data"]

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = at
        return self.api("query", **params)["result"]

    def query_range(self, expr, start, end, step):
        return self.api("query_range", query=expr, start=start, end=end, step=step)["result"]
