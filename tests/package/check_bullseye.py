#!/usr/bin/env python3
"""The Debian 11 package under Debian 11's systemd (247): diskpulse_<version>~deb11_<arch>.deb,
built from this tree in a Debian 11 root (build_bullseye.py; about 1.5 GB while it builds, removed
after, kept for a look when the build fails) or taken from BUILD/package-bullseye/ when one was
built there from the same commit and the same uncommitted changes, installs with `dpkg -i` into a
fresh Debian 11 root holding only its dependencies, as Debian 11's archive gives them (a
dependency Debian 11 cannot satisfy fails the install), and boots under systemd-nspawn
(check_nspawn's Container). There, as on Debian 12: diskpulse.service is active after boot,
/metrics answers on 127.0.0.1:9477 and [::1]:9477 with diskpulse_build_info of the package's
version, the canary probes /var/lib/diskpulse, the serving process holds no capability under the
unit's seccomp filter (systemd 247's @system-service) and the helper exactly its three,
`systemd-analyze security` of the loaded unit is at most 2.0 as on Debian 12, and `dpkg -r` stops
the service and leaves nothing of it running or listening.
Usage: check_bullseye.py BUILD_DIR"""
import glob
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time

import build_bullseye
import pkg
from check_nspawn import Container, check_privileges, check_serving, metric, preconditions, wait


def source_key():
    """The source's commit, with a hash of its uncommitted changes when there are any; None when
    it is no git tree (then the package is always built)."""
    head = pkg.run(["git", "-C", pkg.SOURCE, "rev-parse", "HEAD"])
    if head.returncode != 0:
        return None
    changed = pkg.run(["git", "-C", pkg.SOURCE, "status", "--porcelain", "-z", "--untracked-files=all"],
                      check_rc=True).stdout
    if not changed:
        return head.stdout.strip()
    h = hashlib.sha256(changed.encode())
    for entry in sorted(changed.split("\0")):
        path = os.path.join(pkg.SOURCE, entry[3:])
        if entry and os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(f.read())
    return "%s-changed-%s" % (head.stdout.strip(), h.hexdigest()[:12])


def bullseye_deb(build):
    """The ~deb11 package of this source: the cached one, or built now (and cached)."""
    cache = os.path.join(build, "package-bullseye")
    key = source_key()
    if key:
        found = glob.glob(os.path.join(cache, key, "diskpulse_*~deb11_*.deb"))
        if len(found) == 1:
            pkg.note("the package built before from the same source: %s" % found[0])
            return found[0]
    shutil.rmtree(cache, ignore_errors=True)  # other commits' packages, an interrupted build
    out = os.path.join(cache, key or "uncommitted")
    os.makedirs(out)
    t = time.monotonic()
    deb = build_bullseye.build(out, keep_root=False)
    pkg.note("built in Debian 11 in %.0f s" % (time.monotonic() - t))
    if not key:
        os.rename(out, out + ".once")  # no commit to know it by: never reused
        deb = os.path.join(out + ".once", os.path.basename(deb))
    return deb


def main():
    build = sys.argv[1]
    preconditions(build)
    pkg.need_tool("debootstrap", "debootstrap")
    deb = bullseye_deb(build)
    version = pkg.deb_field(deb, "Version")
    depends = pkg.deb_field(deb, "Depends")
    pkg.note("%s: Depends: %s" % (os.path.basename(deb), depends))
    pkg.check(version.endswith("~deb11"), "the package's version ends in ~deb11: %s" % version)
    pkg.check("libbpf" not in depends, "libbpf is linked in, not a dependency (Debian 11's libbpf0 is 0.3)")

    base = pkg.fresh_root(build, extra=(), suite="bullseye", deb=deb)
    tmp = tempfile.mkdtemp(prefix="diskpulse-bullseye-")
    c = None
    try:
        root = pkg.copy_root(base, os.path.join(tmp, "root"))
        shutil.copy(deb, os.path.join(root, "root", "diskpulse.deb"))
        release = open(os.path.join(root, "etc/debian_version")).read().strip()
        # /proc mounted as on a running host: systemd 247's systemd-sysusers (the postinst's) sets
        # the mode of the files it writes through /proc/self/fd and fails without it ("Failed to
        # write files: Function not implemented"); Debian 12's needs no /proc.
        proc = os.path.join(root, "proc")
        pkg.run(["mount", "-t", "proc", "proc", proc], check_rc=True)
        try:
            p = pkg.chroot(root, "dpkg", "-i", "/root/diskpulse.deb")
        finally:
            pkg.run(["umount", proc], check_rc=True)
        if not pkg.check(p.returncode == 0 and release.startswith("11"),
                         "dpkg -i into a fresh Debian %s root (offline, its dependencies from Debian 11)" % release):
            print(p.stdout + p.stderr)
            pkg.finish()
        versions = pkg.chroot(root, "dpkg-query", "-W", "-f", "${Package} ${Version}\n", "systemd", "libc6",
                              "libmicrohttpd12", "libgnutls30").stdout.split("\n")
        pkg.note("in the root: %s" % ", ".join(v for v in versions if v))

        t0 = time.monotonic()
        try:
            c = Container(root, os.path.join(tmp, "console.log"))
        except RuntimeError as e:
            pkg.skip("systemd-nspawn could not boot the root here: %s" % str(e).strip()[-800:])
        state = c.booted()
        pkg.check(state in ("running", "degraded"), "container booted: %s in %.1f s" % (state, time.monotonic() - t0))
        if state == "degraded":
            pkg.note("failed units: " + c.out("systemctl --failed --no-legend"))
        pkg.note(c.out("systemctl --version | head -1"))
        uid = c.out("id -u diskpulse")

        svc = c.show("diskpulse.service", "ActiveState", "SubState", "MainPID", "StatusText")
        pkg.check(svc.get("ActiveState") == "active" and svc.get("SubState") == "running",
                  "diskpulse.service active (running) after boot: %s/%s" % (svc.get("ActiveState"), svc.get("SubState")))
        pkg.check(svc.get("StatusText", "").startswith("Monitoring "), "STATUS= reached systemd: %r" % svc.get("StatusText"))
        main_pid = svc.get("MainPID")
        body = check_serving(c, "at boot")
        info = [l for l in body.splitlines() if l.startswith("diskpulse_build_info{")]
        pkg.check(len(info) == 1 and 'version="%s"' % version[:-len("~deb11")] in info[0],
                  "diskpulse_build_info names the package's version: %s" % info[:1])

        def probed():
            _, b = c.http("127.0.0.1")
            n = metric(b, "diskpulse_sync_probes_total", path="/var/lib/diskpulse", mode="fdatasync")
            return b if n and n >= 1 else None
        body = wait("probe", probed, 30) or body
        pkg.check(metric(body, "diskpulse_sync_target_up", path="/var/lib/diskpulse") == 1
                  and metric(body, "diskpulse_sync_probes_total", path="/var/lib/diskpulse", mode="fdatasync"),
                  "the canary probes /var/lib/diskpulse (probes %s, up %s)"
                  % (metric(body, "diskpulse_sync_probes_total", path="/var/lib/diskpulse"),
                     metric(body, "diskpulse_sync_target_up", path="/var/lib/diskpulse")))
        pkg.check(metric(body, "diskpulse_sync_errors_total") is None, "no canary errors (no EROFS under ProtectSystem=strict)")
        pkg.check(metric(body, "diskpulse_helper_up") == 1, "the SMART helper is up")

        check_privileges(c, main_pid, uid)
        # Nothing the seccomp filter refused on the way: a denied call is EPERM (the unit's
        # SystemCallErrorNumber=), which the daemon would log.
        denied = [e.get("MESSAGE", "") for e in c.journal("diskpulse.service")
                  if "Operation not permitted" in e.get("MESSAGE", "") or "EPERM" in e.get("MESSAGE", "")]
        pkg.check(not denied, "journal: no EPERM under systemd 247's filter %s" % denied[:2])

        out = c.out("systemd-analyze security --no-pager diskpulse.service")
        m = re.search(r"Overall exposure level for diskpulse.service: (\d+\.\d)", out)
        pkg.check(m is not None and float(m.group(1)) <= 2.0, "systemd-analyze security of the loaded unit: %s"
                  % (m.group(1) if m else out[-300:]))

        rc, _, err = c.sh("dpkg -r diskpulse", timeout=120)
        pkg.check(rc == 0, "dpkg -r with systemd running: exit %d %s" % (rc, err.strip()[-300:]))
        pkg.check(wait("stopped", lambda: c.processes() == {}, 10) is True, "nothing of diskpulse runs after dpkg -r")
        gone = c.show("diskpulse.service", "ActiveState", "LoadState")
        pkg.check(gone.get("ActiveState") == "inactive" and gone.get("LoadState") in ("masked", "not-found"),
                  "the unit is stopped, masked or gone for systemd: %s" % gone)
        st4, _ = c.http("127.0.0.1", timeout=3)
        pkg.check(st4.startswith("ERROR"), "nothing listens on 127.0.0.1:9477 after dpkg -r (%s)" % st4)
    except Exception:
        if c:
            print("----- container console -----\n" + c.console())
        raise
    finally:
        if c:
            rc = c.poweroff()
            pkg.note("container powered off (nspawn exit %s)" % rc)
        shutil.rmtree(tmp, ignore_errors=True)
    pkg.finish()


if __name__ == "__main__":
    main()
