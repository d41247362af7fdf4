#!/usr/bin/env python3
"""The .deb in a fresh Debian 12 root (debootstrap minbase with its dependencies, no systemd
running): `dpkg -i` installs exactly its files, creates the diskpulse system user and enables
diskpulse.service and diskpulse.socket; the installed units verify clean; reinstalling keeps an
administrator's `systemctl disable` and edited config; `dpkg -r` removes the files and leaves
the conffile, the state directory, the user and masked units (Debian's "config-files" state);
`dpkg -P` then leaves nothing but the diskpulse user and group (Debian leaves system users in
place) and dpkg's own records.
Usage: check_dpkg.py BUILD_DIR"""
import os
import shutil
import sys
import tempfile

import pkg

# What dpkg itself keeps about packages, and its log: not the package's leftovers.
DPKG_OWN = ("var/lib/dpkg", "var/log/dpkg.log", "var/cache/debconf")
USER_FILES = ("etc/passwd", "etc/passwd-", "etc/group", "etc/group-", "etc/shadow", "etc/shadow-",
              "etc/gshadow", "etc/gshadow-")
SKIP = ("proc", "sys", "dev", "run", "tmp")


def dpkg(root, *args):
    p = pkg.chroot(root, "dpkg", *args)
    return p.returncode, (p.stdout + p.stderr).strip()


def status(root):
    return pkg.chroot(root, "dpkg-query", "-W", "-f=${Status}", "diskpulse").stdout.strip()


def lexists(root, path):
    return os.path.lexists(os.path.join(root, path.lstrip("/")))


def main():
    build = sys.argv[1]
    pkg.need_root()
    if pkg.sanitized(build):
        pkg.skip("a sanitizer build: the package is tested from the plain build")
    deb = pkg.deb_path(build)
    if not deb:
        pkg.skip("no .deb in %s (made by the package/deb test)" % build)
    base = pkg.fresh_root(build)
    tmp = tempfile.mkdtemp(prefix="diskpulse-dpkg-")
    try:
        root = pkg.copy_root(base, os.path.join(tmp, "root"))
        before = pkg.tree(root, SKIP)
        shutil.copy(deb, os.path.join(root, "tmp", "diskpulse.deb"))
        members = [l.split()[-1].lstrip(".") for l in pkg.run(["dpkg-deb", "-c", deb], check_rc=True).stdout.splitlines()]
        files = sorted(m for m in members if not m.endswith("/"))

        # Install.
        rc, out = dpkg(root, "-i", "/tmp/diskpulse.deb")
        print(out)
        pkg.check(rc == 0 and status(root) == "install ok installed", "dpkg -i: exit %d, %s" % (rc, status(root)))
        missing = [f for f in files if not lexists(root, f)]
        pkg.check(not missing, "every file of the package is installed%s" % (": missing " + " ".join(missing) if missing else ""))
        listed = sorted(l for l in pkg.chroot(root, "dpkg", "-L", "diskpulse").stdout.split() if not os.path.isdir(root + l))
        pkg.check(listed == files, "dpkg -L lists the package's %d files" % len(files))
        pw = pkg.chroot(root, "getent", "passwd", "diskpulse").stdout.strip().split(":")
        gr = pkg.chroot(root, "getent", "group", "diskpulse").stdout.strip().split(":")
        pkg.check(len(pw) == 7 and 0 < int(pw[2]) < 1000 and pw[5] == "/var/lib/diskpulse"
                  and pw[6] in ("/usr/sbin/nologin", "/sbin/nologin"),
                  "system user diskpulse (uid %s, home %s, shell %s)" % (pw[2:3], pw[5:6], pw[6:7]))
        pkg.check(len(gr) == 4 and gr[2] == pw[3] and gr[3] == "", "its own group, no members, no supplementary groups")
        disk = pkg.chroot(root, "getent", "group", "disk").stdout.strip().split(":")
        pkg.check(len(disk) == 4 and "diskpulse" not in disk[3].split(","), "diskpulse is not in the disk group")
        links = {"etc/systemd/system/multi-user.target.wants/diskpulse.service": "/lib/systemd/system/diskpulse.service",
                 "etc/systemd/system/sockets.target.wants/diskpulse.socket": "/lib/systemd/system/diskpulse.socket"}
        for link, target in links.items():
            pkg.check(os.path.islink(os.path.join(root, link)) and os.readlink(os.path.join(root, link)) == target,
                      "enabled: %s" % link)
        conff = pkg.chroot(root, "dpkg-query", "-W", "-f=${Conffiles}", "diskpulse").stdout.split()
        pkg.check(conff[:1] == ["/etc/diskpulse/diskpulse.conf"], "dpkg knows the conffile: %s" % conff[:1])
        pkg.check(not lexists(root, "var/lib/diskpulse"), "no state directory before the service ever ran")
        env = dict(os.environ, MANPATH=os.path.join(root, "usr/share/man"), SYSTEMD_COLORS="0")
        v = pkg.run(["systemd-analyze", "verify", "--root=" + root, "/lib/systemd/system/diskpulse.service",
                     "/lib/systemd/system/diskpulse.socket"], env=env)
        pkg.check(v.returncode == 0 and (v.stdout + v.stderr).strip() == "",
                  "systemd-analyze verify in the root: exit %d %s" % (v.returncode, (v.stdout + v.stderr).strip()))

        # Reinstall over it: what the administrator changed stays.
        # (Also=diskpulse.socket in the service's [Install]: disabling diskpulse disables both.)
        pkg.chroot(root, "systemctl", "disable", "diskpulse.service")
        pkg.check(not any(lexists(root, l) for l in links), "systemctl disable diskpulse.service (offline) disables both units")
        conf = os.path.join(root, "etc/diskpulse/diskpulse.conf")
        with open(conf, "a") as f:
            f.write("canary.interval = 30s\n")
        rc, out = dpkg(root, "-i", "/tmp/diskpulse.deb")
        pkg.check(rc == 0, "dpkg -i again (an upgrade to the same version): exit %d" % rc)
        pkg.check(not any(lexists(root, l) for l in links), "the administrator's disable is kept for both units")
        with open(conf) as f:
            pkg.check(f.read().endswith("canary.interval = 30s\n"), "the edited conffile is kept")
        pkg.chroot(root, "systemctl", "enable", "diskpulse.service")
        # What the running service would leave: its state directory.
        uid, gid = int(pw[2]), int(pw[3])
        state = os.path.join(root, "var/lib/diskpulse")
        os.mkdir(state, 0o750)
        with open(os.path.join(state, "canary-baselines"), "w") as f:
            f.write("state\n")
        for p in (state, os.path.join(state, "canary-baselines")):
            os.chown(p, uid, gid)

        # Remove.
        rc, out = dpkg(root, "-r", "diskpulse")
        print(out)
        pkg.check(rc == 0 and status(root) == "deinstall ok config-files", "dpkg -r: exit %d, %s" % (rc, status(root)))
        left = [f for f in files if lexists(root, f) and f != "/etc/diskpulse/diskpulse.conf"]
        pkg.check(not left, "dpkg -r removes every file but the conffile%s" % (": left " + " ".join(left) if left else ""))
        pkg.check(os.path.isfile(conf), "the conffile stays until purge")
        pkg.check(os.path.isfile(os.path.join(state, "canary-baselines")), "the state directory stays until purge")
        for unit in ("diskpulse.service", "diskpulse.socket"):
            mask = os.path.join(root, "etc/systemd/system", unit)
            pkg.check(os.path.islink(mask) and os.readlink(mask) == "/dev/null", "%s masked while removed" % unit)
        pkg.check(pkg.chroot(root, "getent", "passwd", "diskpulse").returncode == 0, "the user stays")

        # Purge.
        rc, out = dpkg(root, "-P", "diskpulse")
        print(out)
        pkg.check(rc == 0 and status(root) == "", "dpkg -P: exit %d, status now %r" % (rc, status(root)))
        os.unlink(os.path.join(root, "tmp", "diskpulse.deb"))
        after = pkg.tree(root, SKIP)
        added, removed, changed = pkg.tree_diff(before, after)
        own = lambda p: any(p == d or p.startswith(d + "/") for d in DPKG_OWN)
        leftovers = [p for p in added + removed + changed if not own(p) and p not in USER_FILES]
        pkg.check(not leftovers, "after dpkg -P nothing is left but the user and dpkg's records%s"
                  % (": " + ", ".join(leftovers) if leftovers else ""))
        for name in ("etc/passwd", "etc/group", "etc/shadow", "etc/gshadow"):
            with open(os.path.join(base, name)) as f:
                old = f.read().splitlines()
            with open(os.path.join(root, name)) as f:
                new = f.read().splitlines()
            extra = [l for l in new if l not in old]
            gone = [l for l in old if l not in new]
            pkg.check(not gone and len(extra) == 1 and extra[0].startswith("diskpulse:"),
                      "%s: only the diskpulse entry added (%s)" % (name, extra))
        pkg.note("paths changed by dpkg's own records: %s" % ", ".join(sorted(p for p in added + removed + changed if own(p))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pkg.finish()


main()
