#!/usr/bin/env python3
"""An upgrade loses nothing, a downgrade destroys nothing: the package of an earlier commit and
this build's package, in and out of each other, under systemd in a systemd-nspawn container (the
Container of check_nspawn.py), in the honest test mode (--canary.baseline-period=1s: a baseline
hour of one second, a day of 24, so the reference, the median of the first week's daily medians,
is learned in about three minutes).

  1. The earlier package installed; its daemon learns a reference for the default target.
  2. `dpkg -i` of this build's package while a scraper asks for /metrics every 50 ms: the service
     restarts once, the scrapes refused or failed are counted (reported; the socket stays
     listening, so the goal is 0), the reference is the same after as before and the daily
     medians are all kept; the conffile, unmodified, is replaced by the new one without a prompt.
  3. The conffile modified, then `dpkg -i` of the earlier package (a downgrade): the modified
     conffile is kept; the newer state file survives whatever the older daemon makes of it (the
     same bytes under its name or under an aside name in the state directory).
  4. `dpkg -i` of this build's package again: the reference is the one learned in step 1.

The earlier commit (OLD) is the last that wrote the state file's records in the older form: a
baseline's warm-up of 6 hours kept as "warmup=" (since then the warm-up is the disk's first day,
kept as "dayobs=", and the older field is read and migrated). The formats before that (header
versions 1 and 2, README "State and its safety") had no test mode, so no reference can be learned
under them in a test's time; unit/test_canary_state and vm/canary_baseline hold their migration.
OLD's package is built here from `git archive` of that commit (daemon only, tests off; a minute
or two, kept in BUILD_DIR/upgrade/ for the next run) and versioned below this build's
(0.1.0~old.COMMIT), as a package from before the first release would be.

Not in the default test run (about 8 minutes): `cmake --preset ci -DDISKPULSE_UPGRADE=ON` then
`ctest --preset ci -L upgrade`.
Usage: check_upgrade.py BUILD_DIR"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pkg
from check_nspawn import Container, metric, preconditions, wait

OLD = "9ee0d9ede758f5c562ee08f65d1e0f52e86017e6"
TEST_MODE = ("--canary.baseline-period=1s", "--canary.interval=150ms", "--canary.burst=2")
RESTORE_MARK = "<!-- upgrade: restore"


def restore_lines():
    """README, "Upgrades and downgrades": the lines that put the kept state file back after
    upgrading again, with {kept} for its name."""
    with open(os.path.join(pkg.SOURCE, "README.md"), encoding="utf-8") as f:
        text = f.read()
    block = re.search(re.escape(RESTORE_MARK) + r".*?\n```sh\n(.*?)```", text, re.S)
    if not block:
        raise RuntimeError("README.md has no restore block after %r" % RESTORE_MARK)
    lines = [l for l in block.group(1).splitlines() if l.strip()]
    return " && ".join(l.replace("canary-baselines.newer-VERSION", "{kept}") for l in lines)
DROPIN = "/etc/systemd/system/diskpulse.service.d/test-mode.conf"
STATE = "/var/lib/diskpulse/canary-baselines"
CONF = "/etc/diskpulse/diskpulse.conf"
TARGET = {"path": "/var/lib/diskpulse", "mode": "fdatasync"}

# Inside the container's network namespace: GET /metrics every 50 ms until killed (SIGTERM), then
# prints "ok N failed M" and the failures' kinds.
SCRAPER = r"""
import signal, socket, sys, time
ok, failed, kinds, stop = 0, 0, {}, []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
while not stop:
    try:
        s = socket.create_connection(("127.0.0.1", 9477), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        if data.startswith(b"HTTP/1.1 200") and b"diskpulse_build_info" in data:
            ok += 1
        else:
            failed += 1
            k = data[:12].decode(errors="replace") or "empty"
            kinds[k] = kinds.get(k, 0) + 1
    except OSError as e:
        failed += 1
        kinds[type(e).__name__] = kinds.get(type(e).__name__, 0) + 1
    time.sleep(0.05)
print("ok %d failed %d %s" % (ok, failed, kinds))
"""


def build_old(build):
    """The earlier commit's .deb, built once and kept: its path."""
    work = os.path.join(build, "upgrade")
    deb = os.path.join(work, "diskpulse-old-%s.deb" % OLD[:12])
    if os.path.exists(deb):
        return deb
    src, bld = os.path.join(work, "src-" + OLD[:12]), os.path.join(work, "build-" + OLD[:12])
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(bld, ignore_errors=True)
    os.makedirs(src)
    os.makedirs(bld)
    p = pkg.run(["sh", "-c", "git -C '%s' archive %s | tar -x -C '%s'" % (pkg.SOURCE, OLD, src)], timeout=120)
    if p.returncode != 0:
        pkg.skip("cannot take commit %s from the repository (a shallow clone?): %s" % (OLD[:12], p.stderr.strip()[-300:]))
    t = time.monotonic()
    for cmd in (["cmake", "-S", src, "-B", bld, "-DDISKPULSE_TESTS=OFF", "-DCMAKE_INSTALL_PREFIX=/usr",
                 "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                ["cmake", "--build", bld, "-j%d" % (os.cpu_count() or 2)],
                ["cpack", "-G", "DEB", "-D", "CPACK_PACKAGE_VERSION=0.1.0~old.%s" % OLD[:12]]):
        p = pkg.run(cmd, timeout=1800, cwd=bld)
        if p.returncode != 0:
            print((p.stdout + p.stderr)[-3000:])
            pkg.check(False, "the earlier commit %s builds: %s" % (OLD[:12], " ".join(cmd[:3])))
            pkg.finish()
    made = [f for f in os.listdir(bld) if f.endswith(".deb")]
    pkg.check(len(made) == 1, "the earlier commit's package made in %.0f s: %s" % (time.monotonic() - t, made))
    os.replace(os.path.join(bld, made[0]), deb)
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(bld, ignore_errors=True)
    return deb


def dpkg_i(c, path, label):
    """dpkg -i inside the running container as an operator runs it (noninteractive, no tty)."""
    t = time.monotonic()
    rc, out, err = c.sh("DEBIAN_FRONTEND=noninteractive dpkg -i %s < /dev/null" % path, timeout=300)
    pkg.check(rc == 0, "%s: dpkg -i exits 0 in %.1f s" % (label, time.monotonic() - t))
    if rc != 0:
        print(out + err)
    return out + err


def page(c):
    st, body = c.http("127.0.0.1")
    return body if st == "200" else ""


# The first week's daily medians, and one more day: the reference is final then (only a much
# faster week replaces it), so a day closing during an upgrade does not move it.
WEEK = 8


def learned(c, least=WEEK):
    body = page(c)
    return body if (metric(body, "diskpulse_sync_reference_seconds", **TARGET) and
                    (days(body) or 0) >= least) else None


def days(body):
    """The daily medians the trend holds (the gauge was renamed: either name)."""
    for name in ("diskpulse_sync_trend_daily_medians", "diskpulse_sync_trend_days"):
        v = metric(body, name, **TARGET)
        if v is not None:
            return v
    return None


def starts(c, cursor):
    """How many times the daemon started since the journal cursor."""
    return sum(1 for e in c.journal("diskpulse.service", cursor)
               if "diskpulse started" in str(e.get("MESSAGE", "")))


def cursor(c):
    return c.out("journalctl -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p'")


def state_files(c):
    """{name: sha256} of the canary state file and its aside copies."""
    out = c.out("cd /var/lib/diskpulse && sha256sum canary-baselines* 2>/dev/null")
    return {l.split()[1]: l.split()[0] for l in out.splitlines() if len(l.split()) == 2}


def upgrade_under_scrapes(c, deb, label):
    """dpkg -i deb while the scraper runs: (scraper's report, starts)."""
    cur = cursor(c)
    scraper = subprocess.Popen(c.enter("--net") + ["python3", "-c", SCRAPER], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    dpkg_i(c, deb, label)
    wait("serving", lambda: page(c), 30)
    time.sleep(1.0)
    scraper.send_signal(signal.SIGTERM)
    report = scraper.communicate(timeout=30)[0].strip()
    return report, starts(c, cur)


def main():
    build = sys.argv[1]
    preconditions(build)
    pkg.need_tool("cpack", "cmake")
    new = pkg.deb_path(build)
    if not new:
        pkg.skip("no .deb in %s (made by the package/deb test)" % build)
    old = build_old(build)
    new_version, old_version = pkg.deb_field(new, "Version"), pkg.deb_field(old, "Version")
    pkg.check(subprocess.run(["dpkg", "--compare-versions", old_version, "lt", new_version]).returncode == 0,
              "the earlier package's version %s sorts below this build's %s" % (old_version, new_version))
    base = pkg.fresh_root(build)
    tmp = tempfile.mkdtemp(prefix="diskpulse-upgrade-")
    c = None
    try:
        root = pkg.copy_root(base, os.path.join(tmp, "root"))
        shutil.copy(old, os.path.join(root, "root", "old.deb"))
        shutil.copy(new, os.path.join(root, "root", "new.deb"))
        os.makedirs(os.path.dirname(root + DROPIN))
        with open(root + DROPIN, "w") as f:
            f.write("[Service]\nExecStart=\nExecStart=/usr/sbin/diskpulse --config.file=%s %s\n" % (CONF, " ".join(TEST_MODE)))
        p = pkg.chroot(root, "dpkg", "-i", "/root/old.deb")
        if not pkg.check(p.returncode == 0, "dpkg -i of the earlier package into the root (offline)"):
            print(p.stdout + p.stderr)
            pkg.finish()
        try:
            c = Container(root, os.path.join(tmp, "console.log"))
        except RuntimeError as e:
            pkg.skip("systemd-nspawn could not boot the root here: %s" % str(e).strip()[-800:])
        state = c.booted()
        pkg.check(state in ("running", "degraded"), "container booted: %s" % state)

        # 1. The earlier daemon learns a reference.
        t = time.monotonic()
        body = wait("reference", lambda: learned(c), 900)
        if not pkg.check(body, "the earlier daemon (%s) learned a reference in %.0f s" % (old_version, time.monotonic() - t)):
            print(c.out("journalctl -u diskpulse.service --no-pager | tail -20"))
            pkg.finish()
        ref = metric(body, "diskpulse_sync_reference_seconds", **TARGET)
        days_before = days(body)
        print("reference %.9g s, %s daily medians" % (ref, days_before))

        # 2. The upgrade, under scrapes.
        report, n = upgrade_under_scrapes(c, "/root/new.deb", "upgrade to %s" % new_version)
        print("upgrade: scrapes %s" % report)
        failed = int(re.search(r"failed (\d+)", report).group(1)) if "failed" in report else -1
        pkg.note("scrapes refused or failed during the upgrade: %d (%s)" % (failed, report))
        pkg.check(n == 1, "the service started once during the upgrade (%d)" % n)
        body = page(c)
        pkg.check(metric(body, "diskpulse_sync_reference_seconds", **TARGET) == ref,
                  "the reference is the same after the upgrade (%s, before %s)"
                  % (metric(body, "diskpulse_sync_reference_seconds", **TARGET), ref))
        # a scaled day is 24 s: at most one more closes during the upgrade
        pkg.check(days(body) is not None and days_before <= days(body) <= days_before + 1,
                  "the daily medians are kept (%s, before %s)" % (days(body), days_before))
        shipped = pkg.run(["sh", "-c", "dpkg-deb --fsys-tarfile '%s' | tar -xO .%s" % (new, CONF)]).stdout
        pkg.check(c.out("cat %s" % CONF) == shipped.strip(),
                  "the unmodified conffile is replaced by the new package's, without a prompt")

        # 3. The downgrade, with a modified conffile.
        c.sh("echo '# changed by the operator' >> %s" % CONF)
        c.sh("systemctl stop diskpulse.service")
        before = state_files(c)
        newer = before.get("canary-baselines")
        pkg.check(newer is not None, "the newer daemon left its state file (%s)" % sorted(before))
        dpkg_i(c, "/root/old.deb", "downgrade to %s" % old_version)
        wait("serving", lambda: page(c), 30)
        time.sleep(3)
        c.sh("systemctl stop diskpulse.service")
        after = state_files(c)
        print("state files after the downgrade: %s" % after)
        kept = [k for k, v in after.items() if v == newer]
        pkg.check(kept, "the newer state file survives the downgrade (as %s)" % kept)
        pkg.check(c.out("tail -n 1 %s" % CONF) == "# changed by the operator",
                  "the modified conffile is kept through the downgrade")

        # 4. Upgraded again: the reference learned in step 1; then the kept file put back as the
        # README says (stop, copy, start), with the daily medians the newer daemon had.
        dpkg_i(c, "/root/new.deb", "upgrade again to %s" % new_version)
        body = wait("reference", lambda: learned(c, 1), 30) or ""
        pkg.check(metric(body, "diskpulse_sync_reference_seconds", **TARGET) == ref,
                  "after new, old, new the reference is the one learned first (%s, first %s)"
                  % (metric(body, "diskpulse_sync_reference_seconds", **TARGET), ref))
        aside = [k for k in kept if k != "canary-baselines"]
        if aside:
            rc, out, err = c.sh(restore_lines().format(kept=aside[0]))
            pkg.check(rc == 0, "the README's lines put %s back (%s)" % (aside[0], (out + err).strip()[-200:]))
            body = wait("reference", lambda: learned(c, days_before), 30) or ""
            pkg.check(metric(body, "diskpulse_sync_reference_seconds", **TARGET) == ref and
                      (days(body) or 0) >= days_before,
                      "with the kept file back: the reference %s (first %s), %s daily medians (%s before "
                      "the downgrade)" % (metric(body, "diskpulse_sync_reference_seconds", **TARGET), ref,
                                          days(body), days_before))
    finally:
        if c:
            c.poweroff()
        shutil.rmtree(tmp, ignore_errors=True)
    pkg.finish()


if __name__ == "__main__":
    main()
