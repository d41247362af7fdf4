#!/usr/bin/env python3
"""The README's test command where a new user may run it: the suite's unit and integration tests,
built with AddressSanitizer + UndefinedBehaviorSanitizer, in the fresh Debian 12 root the other
package tests use, twice:
  chroot     entered with chroot as root, /proc, /sys and /dev of the host mounted (/ is not a
             mount point there, so no private mount namespace can be made). Everything else is
             as on the host, where the suite runs anyway: this pass installs the packages
             (scripts/deps.sh), builds, and runs the tests a chroot changes (label mountns:
             those that make a private mount namespace).
  container  as a container runtime starts a process: its own PID namespace, a read-only /sys,
             a /dev with only the basic nodes (no loop devices, no disks), and only the
             capabilities a container gets by default (Docker's list: no CAP_SYS_ADMIN, no
             CAP_SYS_RAWIO, no CAP_DAC_READ_SEARCH, no CAP_SYS_PTRACE): every unit and
             integration test but the connection floods, and each test it skips whole must say
             why by a limit of the container (no loop devices, no mounts, the sanitizer build),
             never a missing package that scripts/deps.sh should have installed. The floods
             (integration/flood: three minutes alone, RUN_SERIAL) depend on nothing the container
             changes (its network is the host's, they need no capability and no device) and run
             on the host in both builds.
Both must pass: every test passes or skips with its reason. The packages come from
scripts/deps.sh inside the root (as the README's command installs them), the source is this
tree's files (tracked and untracked, not ignored ones), so uncommitted edits are tested too.
Usage: check_suite_root.py BUILD_DIR SOURCE_DIR"""
import os
import re
import shutil
import sys
import time

import pkg

# The capabilities a container gets by default (moby's oci/caps/defaults.go).
CONTAINER_CAPS = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid",
                  "setpcap", "net_bind_service", "net_raw", "sys_chroot", "mknod",
                  "audit_write", "setfcap")
# The device nodes a container's /dev has: (name, major, minor)
CONTAINER_DEVS = (("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8),
                  ("urandom", 1, 9), ("tty", 5, 0))
# The labels each pass runs (ctest -L), and the tests it leaves out (ctest -E)
PASS_LABELS = {"chroot": "^mountns$", "container": "^(unit|integration)$"}
PASS_EXCLUDE = {"chroot": "^$", "container": "^integration/flood$"}
# Why a test may skip whole in the container: its limits, or this being the sanitizer build.
CONTAINER_SKIPS = re.compile(r"loop|mount|CAP_|capabilit|sanitizer|valgrind runs on the plain")

SUITE = r"""#!/bin/bash
# the README's test command for one label set of the sanitizer build: suite.sh PASS LABELS EXCLUDE
set -euo pipefail
cd /root/diskpulse
echo "== $1: scripts/deps.sh test"
bash scripts/deps.sh test > /root/deps-$1.log 2>&1 || { tail -30 /root/deps-$1.log; exit 1; }
echo "== $1: configure and build (asan)"
cmake --preset asan > /dev/null
cmake --build --preset asan -j"$(nproc)" > /root/build-$1.log 2>&1 || { tail -40 /root/build-$1.log; exit 1; }
echo "== $1: ctest -L '$2' -E '$3'"
status=0
ctest --preset asan -j"$(nproc)" -L "$2" -E "$3" || status=$?
python3 scripts/skips.py build-asan
exit $status
"""


def chroot_setup(root):
    return ("mount -t proc proc {r}/proc && mount --rbind /sys {r}/sys && "
            "mount --rbind /dev {r}/dev && exec chroot {r} /bin/bash /root/suite.sh chroot '{l}' '{e}'").format(
                r=root, l=PASS_LABELS["chroot"], e=PASS_EXCLUDE["chroot"])


def container_setup(root):
    cmds = ["mount -t proc proc {r}/proc", "mount -t sysfs -o ro,nosuid,nodev,noexec sysfs {r}/sys",
            "mount -t tmpfs -o mode=755,nosuid tmpfs {r}/dev"]
    cmds += ["mknod -m 666 {r}/dev/%s c %d %d" % d for d in CONTAINER_DEVS]
    cmds += ["mkdir {r}/dev/pts {r}/dev/shm", "mount -t devpts -o newinstance,ptmxmode=0666 devpts {r}/dev/pts",
             "ln -s pts/ptmx {r}/dev/ptmx", "mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs {r}/dev/shm",
             "ln -s /proc/self/fd {r}/dev/fd", "ln -s /proc/self/fd/0 {r}/dev/stdin",
             "ln -s /proc/self/fd/1 {r}/dev/stdout", "ln -s /proc/self/fd/2 {r}/dev/stderr"]
    caps = ",".join("+" + c for c in CONTAINER_CAPS)
    cmds.append("exec setpriv --bounding-set=-all,%s --inh-caps=-all -- chroot {r} /bin/bash "
                "/root/suite.sh container '%s' '%s'" % (caps, PASS_LABELS["container"],
                                                         PASS_EXCLUDE["container"]))
    return " && ".join(cmds).format(r=root)


def run_pass(name, root, setup, timeout, env):
    """One pass in a private mount namespace (its mounts vanish with it); returns its output."""
    t = time.monotonic()
    cmd = ["unshare", "--mount", "--propagation", "private"]
    if name == "container":
        cmd += ["--pid", "--fork", "--ipc", "--uts"]
    p = pkg.run(cmd + ["sh", "-c", setup], timeout=timeout, env=env)
    out = p.stdout + p.stderr
    log = os.path.join(os.path.dirname(root), "suite-root-%s.log" % name)
    with open(log, "w") as f:
        f.write(out)
    skipped = re.findall(r"Test +#\d+: (\S+) \.+\*+Skipped", out)
    summary = re.search(r"\d+% tests passed.*", out)
    print("%s: %s in %.0f s (log %s)" % (name, summary.group(0) if summary else "no ctest summary",
                                         time.monotonic() - t, log), flush=True)
    reasons = re.search(r"^skipped here \(\d+\):\n((?:  .*\n)*)", out, re.M)
    if reasons:
        print("%s: skipped there:\n%s" % (name, reasons.group(1).rstrip()), flush=True)
    elif skipped:
        print("%s: skipped there: %s" % (name, ", ".join(skipped)), flush=True)
    if name == "container":
        lines = reasons.group(1).splitlines() if reasons else ["  %s: (no reason printed)" % t for t in skipped]
        odd = [x.strip() for x in lines if not CONTAINER_SKIPS.search(x)]
        pkg.check(not odd, "container: every test skipped whole says why by a limit of the container "
                  "(not by a package deps.sh did not install)%s" % ("; not: " + "; ".join(odd) if odd else ""))
    failed = re.findall(r"^\s*\d+ - (\S+) \(Failed|Timeout\)", out, re.M)
    if p.returncode != 0:
        print(out[-6000:], flush=True)
    pkg.check(p.returncode == 0, "%s: every unit and integration test passes or skips (exit %d%s)" % (
        name, p.returncode, "; failed: " + ", ".join(failed) if failed else ""))
    return out


def main():
    build, source = sys.argv[1], sys.argv[2]
    pkg.need_root()
    if pkg.sanitized(build):
        pkg.skip("a sanitizer build: the suite's own sanitizer run inside the root is driven from the plain build")
    if not pkg.deb_path(build):
        pkg.skip("no .deb in %s (made by the package/deb test)" % build)
    for tool in ("unshare", "setpriv", "chroot", "mknod"):
        if not shutil.which(tool):
            pkg.skip("%s is missing" % tool)
    # Both passes make a private mount namespace and mount /proc, /sys and /dev in the copy: a
    # container without CAP_SYS_ADMIN (where this suite may itself be running) cannot.
    probe = pkg.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                     "mount -t tmpfs none /mnt"], timeout=30)
    if probe.returncode != 0:
        pkg.skip("cannot make a private mount namespace and mount in it here (in a chroot / is "
                 "not a mount point; a container has no CAP_SYS_ADMIN): %s"
                 % (probe.stdout + probe.stderr).strip()[-200:])
    base = pkg.fresh_root(build)
    work = os.path.join(build, "suite-root")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    root = pkg.copy_root(base, os.path.join(work, "root"))
    try:
        pkg.copy_source(source, os.path.join(root, "root", "diskpulse"))
        with open(os.path.join(root, "root", "suite.sh"), "w") as f:
            f.write(SUITE)
        shutil.copy("/etc/resolv.conf", os.path.join(root, "etc", "resolv.conf"))
        env = {"PATH": pkg.SBIN_PATH, "HOME": "/root", "LANG": "C.UTF-8",
               "DEBIAN_FRONTEND": "noninteractive"}
        env.update(pkg.apt_proxy_env())
        run_pass("chroot", root, chroot_setup(root), 2400, env)
        run_pass("container", root, container_setup(root), 2400, env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    pkg.finish()


main()
