#!/usr/bin/env python3
"""The systemd units: `systemd-analyze security --offline=yes` of diskpulse.service at most 2.0
(its --threshold=20 exit status and the printed level), as shipped in systemd/ and as installed,
also with the example drop-ins; `systemd-analyze verify` clean (no message at all) on the
installed units, binary and manual page, with and without the drop-ins. Controls show that the
checks can fail: the unit with its own IP sockets scores above 2.0, and a misspelt directive
makes verify talk.
Usage: check_units.py BUILD_DIR"""
import os
import re
import shutil
import sys
import tempfile

import pkg

THRESHOLD = 20  # systemd-analyze's exposure in tenths: 2.0


def security(unit_file, root=None):
    """(exit status of --threshold, exposure level as printed, the full table)."""
    cmd = ["systemd-analyze", "security", "--offline=yes", "--threshold=%d" % THRESHOLD, "--no-pager"]
    if root:
        cmd.append("--root=" + root)
    p = pkg.run(cmd + [unit_file], env=dict(os.environ, SYSTEMD_COLORS="0"))
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d)", p.stdout)
    return p.returncode, float(m.group(1)) if m else None, p.stdout + p.stderr


def verify(root, units):
    """systemd-analyze verify of units inside root; (exit status, everything it printed)."""
    env = dict(os.environ, MANPATH=os.path.join(root, "usr/share/man"), SYSTEMD_COLORS="0")
    p = pkg.run(["systemd-analyze", "verify", "--root=" + root] + units, env=env)
    return p.returncode, (p.stdout + p.stderr).strip()


def make_root(build, tmp):
    """The staged installation, plus what verify looks for around it: the host's own units
    (targets and slices the unit depends on) and a /bin/sh for ExecReload=."""
    root = pkg.stage(build, os.path.join(tmp, "root"))
    unitdir = pkg.cache_value(build, "DISKPULSE_SYSTEMD_UNITDIR")
    for host_dir in ("/lib/systemd/system", "/usr/lib/systemd/system"):
        if os.path.isdir(host_dir) and not os.path.islink(host_dir):
            dest = root + host_dir
            os.makedirs(dest, exist_ok=True)
            for name in os.listdir(host_dir):
                src = os.path.join(host_dir, name)
                if not name.startswith("diskpulse") and not os.path.lexists(os.path.join(dest, name)):
                    if os.path.islink(src):
                        os.symlink(os.readlink(src), os.path.join(dest, name))
                    elif os.path.isfile(src):
                        shutil.copy2(src, dest)
    os.makedirs(os.path.join(root, "bin"), exist_ok=True)
    shutil.copy2(os.path.realpath("/bin/sh"), os.path.join(root, "bin", "sh"))
    return root, unitdir


def main():
    build = sys.argv[1]
    pkg.need_tool("systemd-analyze", "systemd")
    tmp = tempfile.mkdtemp(prefix="diskpulse-units-")
    try:
        root, unitdir = make_root(build, tmp)
        service = unitdir + "/diskpulse.service"
        socket_unit = unitdir + "/diskpulse.socket"
        if pkg.cache_value(build, "CMAKE_INSTALL_PREFIX") == "/usr":
            for name in ("diskpulse.service", "diskpulse.socket"):
                with open(os.path.join(pkg.SOURCE, "systemd", name)) as a, open(root + unitdir + "/" + name) as b:
                    pkg.check(a.read() == b.read(), "installed %s is systemd/%s as it is" % (name, name))

        # The score, of the file as shipped and as installed.
        for label, path, r in (("systemd/diskpulse.service", os.path.join(pkg.SOURCE, "systemd", "diskpulse.service"), None),
                               ("installed " + service, service, root)):
            rc, level, table = security(path, r)
            print(table)
            pkg.check(level is not None and level <= THRESHOLD / 10,
                      "%s: exposure %s (at most %.1f)" % (label, level, THRESHOLD / 10))
            pkg.check(rc == 0, "%s: systemd-analyze security --threshold=%d exits 0 (%d)" % (label, THRESHOLD, rc))

        rc, out = verify(root, [service, socket_unit])
        pkg.check(rc == 0 and out == "", "systemd-analyze verify of both units: exit %d, %s"
                  % (rc, "silent" if not out else "said:\n" + out))

        # The canary directory the installed tmpfiles.d snippet makes is writable for the service:
        # named in ReadWritePaths= (ProtectSystem=strict makes every other path read-only), not
        # under ProtectHome='s directories, nor in InaccessiblePaths=/ReadOnlyPaths=.
        with open(os.path.join(root, "usr/share/diskpulse/tmpfiles.d/postgresql-canary.conf")) as f:
            made = [l.split() for l in f if l.strip() and not l.lstrip().startswith("#")]
        pkg.check(len(made) == 1 and made[0][0] == "d" and made[0][3:5] == ["diskpulse", "postgres"],
                  "the tmpfiles.d snippet makes one directory, the diskpulse user's, group postgres: %s" % made)
        with open(root + service) as f:
            settings = [l.strip().split("=", 1) for l in f if "=" in l and not l.lstrip().startswith("#")]
        writable = [w.lstrip("-+") for k, v in settings if k == "ReadWritePaths" for w in v.split()]
        hidden = [w.lstrip("-+") for k, v in settings if k in ("InaccessiblePaths", "ReadOnlyPaths") for w in v.split()]
        target = made[0][1] if made else None
        pkg.check(target in writable and ["ProtectSystem", "strict"] in settings
                  and not target.startswith(("/home", "/root", "/run/user"))
                  and not any(target == h or target.startswith(h.rstrip("/") + "/") for h in hidden),
                  "the service may write %s (ReadWritePaths=%s, ProtectSystem=strict, ProtectHome= hides /home, /root, "
                  "/run/user only)" % (target, writable))

        # With the example drop-ins in place (an address allow-list on the socket, canary paths).
        examples = os.path.join(root, "usr/share/doc/diskpulse/examples")
        for unit, example in (("diskpulse.socket", "ip-allow.conf"), ("diskpulse.service", "canary-paths.conf")):
            d = os.path.join(root, "etc/systemd/system", unit + ".d")
            os.makedirs(d, exist_ok=True)
            shutil.copy(os.path.join(examples, example), d)
        rc, out = verify(root, [service, socket_unit])
        pkg.check(rc == 0 and out == "", "verify with the example drop-ins: exit %d, %s"
                  % (rc, "silent" if not out else "said:\n" + out))
        rc, level, _ = security(service, root)
        pkg.check(rc == 0 and level is not None and level <= THRESHOLD / 10,
                  "exposure with the canary-paths drop-in: %s" % level)
        shutil.rmtree(os.path.join(root, "etc/systemd/system"))

        # Controls. The unit opening its own IPv4/IPv6 sockets (the daemon binding itself, with no
        # IPAddressDeny=) scores above the limit, which is why the service serves on the socket's.
        with open(root + service) as f:
            text = f.read()
        own = text.replace("RestrictAddressFamilies=AF_UNIX AF_NETLINK",
                           "RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6").replace("IPAddressDeny=any\n", "")
        pkg.check(own != text, "control: unit variant with its own IP sockets made")
        control = os.path.join(tmp, "own-sockets", "diskpulse.service")
        os.makedirs(os.path.dirname(control))
        with open(control, "w") as f:
            f.write(own)
        rc, level, _ = security(control)
        pkg.check(rc != 0 and level is not None and level > THRESHOLD / 10,
                  "control: with its own IP sockets the exposure is %s and --threshold fails (exit %d)" % (level, rc))
        with open(root + service, "w") as f:
            f.write(text.replace("ProtectClock=yes", "ProtectClok=yes"))
        rc, out = verify(root, [service])
        pkg.check(out != "", "control: verify reports a misspelt directive: %s" % out.splitlines()[:1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pkg.finish()


main()
