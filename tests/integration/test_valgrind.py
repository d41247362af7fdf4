#!/usr/bin/env python3
"""No leaks and no memory errors under valgrind: --once on a fixture tree and on this host, and
the daemon through scrapes, a reload and SIGTERM."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import dp

BIN = sys.argv[1]
VALGRIND = ["valgrind", "--quiet", "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
            "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=99", "--track-fds=no"]

if not shutil.which("valgrind"):
    dp.skip("valgrind is not installed")
if b"__asan_init" in open(BIN, "rb").read():
    dp.skip("this is a sanitizer build; valgrind runs on the plain build")

fixture = os.path.join(dp.FIXTURES, "linux-6.1")
roots = ["--path.procfs=" + fixture + "/proc", "--path.sysfs=" + fixture + "/sys", "--path.udev.data=" + fixture + "/udev"]
for args in (roots, []):
    r = subprocess.run(VALGRIND + [BIN, "--once"] + args, capture_output=True, text=True, timeout=120)
    dp.check(r.returncode == 0 and not dp.expocheck.check(r.stdout),
             "valgrind --once %s: exit %d %s" % ("fixture" if args else "host", r.returncode, r.stderr[-800:]))

log = os.path.join(os.environ.get("TMPDIR", "/tmp"), "diskpulse-valgrind-%d.log" % os.getpid())
port = dp.free_port()
p = subprocess.Popen(VALGRIND + ["--log-file=" + log, BIN, "--web.listen-address=127.0.0.1:%d" % port,
                                 "--diskstats.interval=100ms"], stderr=subprocess.DEVNULL)
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
p.send_signal(signal.SIGHUP)
time.sleep(1)
dp.check(dp.http_get(url + "/metrics", timeout=10)[0] == 200, "serves after SIGHUP under valgrind")
p.send_signal(signal.SIGTERM)
rc = p.wait(60)
report = open(log).read()
os.unlink(log)
# valgrind 3.19 does not know pidfd_open (434), which the helper client tries before falling
# back; that note is about valgrind, not about memory.
report = "\n".join(l for l in report.splitlines()
                   if not re.match(r"^--\d+-- (WARNING: unhandled amd64-linux syscall: 434|You may be able|"
                                   r"Read the file README_MISSING|Nevertheless we consider|it at http)", l))
dp.check(rc == 0 and report.strip() == "", "daemon under valgrind: exit %d, report %r" % (rc, report[-1500:]))
dp.finish()
