#!/usr/bin/env python3
"""Benchmark: what basic auth and TLS cost per scrape. The daemon's CPU time and the latency of a
/metrics scrape without a web config, with basic auth whose bcrypt check is not cached yet (one
new user after another) and cached (the same user again, as Prometheus scrapes), and over TLS.
Each scrape is a new connection. Prints numbers; asserts nothing.
Usage: bench_auth.py BINARY [COST]   (COST: the bcrypt cost of the hashes, default 10)"""
import base64
import http.client
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import dp  # noqa: E402

BIN = sys.argv[1]
COST = int(sys.argv[2]) if len(sys.argv) > 2 else 10
USERS = 20
SCRAPES = 200
TMP = tempfile.mkdtemp(prefix="diskpulse-bench-auth-")


def cpu_seconds(pid):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            total += int(open("/proc/%d/task/%s/schedstat" % (pid, tid)).read().split()[0])
        except OSError:
            pass
    return total / 1e9


def start(config=None):
    port = dp.free_port()
    args = [BIN, "--web.listen-address=127.0.0.1:%d" % port, "--state.directory=" + TMP,
            "--no-collector.smart", "--no-collector.canary"]
    if config:
        args.append("--web.config.file=" + config)
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    return p, port


def scrape(port, ctx, user=None, password=None):
    c = (http.client.HTTPSConnection("localhost", port, context=ctx, timeout=30) if ctx
         else http.client.HTTPConnection("127.0.0.1", port, timeout=30))
    h = {}
    if user:
        h["Authorization"] = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    t = time.monotonic()
    c.request("GET", "/metrics", headers=h)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.monotonic() - t


def run(p, port, ctx, who):
    """CPU per scrape (ms) and latency median/p99 (ms) of scrapes as who(i) -> (user, password)."""
    lat = []
    n = len(who)
    c0 = cpu_seconds(p.pid)
    for u, pw in who:
        st, t = scrape(port, ctx, u, pw)
        assert st == 200, st
        lat.append(t)
    cpu = (cpu_seconds(p.pid) - c0) / n
    lat.sort()
    return cpu * 1e3, statistics.median(lat) * 1e3, lat[min(n - 1, int(n * 0.99))] * 1e3


def main():
    for tool in ("htpasswd", "openssl"):
        if not shutil.which(tool):
            print("%s is missing" % tool)
            sys.exit(1)
    users = ["u%d" % i for i in range(USERS)]
    lines = []
    for u in users:
        h = subprocess.run(["htpasswd", "-nbBC", str(COST), "", "pw-" + u], capture_output=True, text=True,
                           check=True).stdout.strip().lstrip(":")
        lines.append("  %s: %s\n" % (u, h))
    auth = os.path.join(TMP, "auth.yml")
    with open(auth, "w") as f:
        f.write("basic_auth_users:\n" + "".join(lines))
    key, crt = os.path.join(TMP, "k.pem"), os.path.join(TMP, "c.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", crt, "-days", "1", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    tls = os.path.join(TMP, "tls.yml")
    with open(tls, "w") as f:
        f.write("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n%s" % (crt, key,
                                                                                              "".join(lines)))
    ctx = ssl.create_default_context(cafile=crt)
    print("each row: daemon CPU per scrape, scrape latency median and p99 (ms); bcrypt cost %d" % COST)
    rows = []
    p, port = start()
    rows.append(("no web config", run(p, port, None, [(None, None)] * SCRAPES)))
    p.terminate()
    p.wait()
    p, port = start(auth)
    rows.append(("basic auth, not cached (%d users)" % USERS, run(p, port, None, [(u, "pw-" + u) for u in users])))
    rows.append(("basic auth, cached", run(p, port, None, [(users[0], "pw-" + users[0])] * SCRAPES)))
    rows.append(("wrong password, cached", run_wrong(p, port)))
    p.terminate()
    p.wait()
    p, port = start(tls)
    run(p, port, ctx, [(users[0], "pw-" + users[0])])
    rows.append(("TLS 1.3 (ECDSA P-256) + basic auth, cached", run(p, port, ctx, [(users[0], "pw-" + users[0])] * SCRAPES)))
    p.terminate()
    p.wait()
    for name, (cpu, med, p99) in rows:
        print("%-45s %8.3f %8.2f %8.2f" % (name, cpu, med, p99))
    shutil.rmtree(TMP, ignore_errors=True)


def run_wrong(p, port):
    scrape(port, None, "u0", "wrong")
    lat = []
    c0 = cpu_seconds(p.pid)
    for _ in range(SCRAPES):
        st, t = scrape(port, None, "u0", "wrong")
        assert st == 401, st
        lat.append(t)
    cpu = (cpu_seconds(p.pid) - c0) / SCRAPES
    lat.sort()
    return cpu * 1e3, statistics.median(lat) * 1e3, lat[int(SCRAPES * 0.99)] * 1e3


if __name__ == "__main__":
    main()
