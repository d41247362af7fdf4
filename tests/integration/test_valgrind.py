#!/usr/bin/env python3
"""No leaks and no memory errors under valgrind: --once on a fixture tree and on this host, and
the daemon with canary targets through scrapes, a reload that changes the targets, and SIGTERM."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dp

BIN = sys.argv[1]
VALGRIND = dp.VALGRIND + ["--track-fds=no"]

if not shutil.which("valgrind"):
    dp.skip("valgrind is not installed")
if b"__asan_init" in open(BIN, "rb").read():
    dp.skip("this is a sanitizer build; valgrind runs on the plain build")

fixture = os.path.join(dp.FIXTURES, "linux-6.1")
roots = ["--path.procfs=" + fixture + "/proc", "--path.sysfs=" + fixture + "/sys", "--path.udev.data=" + fixture + "/udev"]
state = tempfile.mkdtemp(prefix="diskpulse-valgrind-")
canary = os.path.join(state, "canary")
os.mkdir(canary)
conf = os.path.join(state, "diskpulse.conf")
with open(conf, "w") as f:
    f.write("canary.path = %s\ncanary.path = %s:append\ncanary.interval = 200ms\n" % (canary, canary))
for args in (roots, []):
    r = subprocess.run(VALGRIND + [BIN, "--once", "--state.directory=" + state, "--config.file=" + conf] + args,
                       capture_output=True, text=True, timeout=120)
    # forked helper workers report their own leaks on stderr
    dp.check(r.returncode == 0 and not dp.expocheck.check(r.stdout) and " lost in loss record" not in r.stderr,
             "valgrind --once %s: exit %d %s" % ("fixture" if args else "host", r.returncode, r.stderr[-800:]))

log = os.path.join(os.environ.get("TMPDIR", "/tmp"), "diskpulse-valgrind-%d.log" % os.getpid())
port = dp.free_port()
p = subprocess.Popen(VALGRIND + ["--log-file=" + log, BIN, "--web.listen-address=127.0.0.1:%d" % port,
                                 "--diskstats.interval=100ms", "--state.directory=" + state,
                                 "--config.file=" + conf], stderr=subprocess.DEVNULL)
url = "http://127.0.0.1:%d" % port
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        if dp.http_get(url + "/-/healthy", timeout=2)[0] == 200:
            break
    except OSError:
        time.sleep(0.2)
ok = True
for _ in range(10):
    ok = ok and dp.http_get(url + "/metrics", timeout=10)[0] == 200
    ok = ok and dp.http_get(url + "/", timeout=10)[0] == 200
    ok = ok and dp.http_get(url + "/nope", timeout=10)[0] == 404
dp.check(ok, "the daemon under valgrind serves every request")


def append_probed():
    m = dp.parse(dp.http_get(url + "/metrics", timeout=10)[2].decode())
    return (dp.value(m, "diskpulse_sync_probes_total", path=canary, mode="append") or 0) >= 1


dp.check(dp.wait_until(append_probed, 30, 0.5), "the canary probes under valgrind")
with open(conf, "w") as f:
    f.write("canary.path = %s\ncanary.path = %s:dsync\ncanary.interval = 300ms\n" % (canary, canary))
p.send_signal(signal.SIGHUP)


def dsync_probed():
    m = dp.parse(dp.http_get(url + "/metrics", timeout=10)[2].decode())
    return (dp.value(m, "diskpulse_sync_probes_total", path=canary, mode="dsync") or 0) >= 1 and \
        dp.value(m, "diskpulse_sync_probes_total", path=canary, mode="append") is None


dp.check(dp.wait_until(dsync_probed, 30, 0.5), "SIGHUP swapped a canary target under valgrind")
p.send_signal(signal.SIGTERM)
rc = p.wait(60)
report = open(log).read()
os.unlink(log)
shutil.rmtree(state, ignore_errors=True)
report = dp.valgrind_report(report)
dp.check(rc == 0 and report.strip() == "", "daemon under valgrind: exit %d, report %r" % (rc, report[-1500:]))
dp.finish()
