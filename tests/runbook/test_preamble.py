#!/usr/bin/env python3
"""The runbook's preamble, run: its curl lines against daemons with the web configs they are for
(TLS with the CA file where the preamble says, /etc/prometheus/diskpulse-ca.pem, in a mount
namespace of the test's own; client certificates; basic auth with the password file), its amtool
silences on a live Alertmanager holding the alerts of two disks and a canary target (the first
silences sda's alerts and nothing else, the second the canary's, the expiry brings sda's back),
and its bad-sector-to-file recipe on a partitioned loop device: a file on ext4 and one on XFS,
each found from the LBA of its first block (the partition's start added, as a drive reports it)
back to its inode and path, then read back.
Usage: test_preamble.py BINARY"""
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import situation
from situation import check, dp
import runbook
from runbook import Expect, has, run_section

sys.path.insert(0, os.path.join(situation.ROOT, "tests", "rules"))
import check_routing  # noqa: E402

RUNBOOK_SECTIONS = {"": "TLS, client certificates, basic auth; silences on a live Alertmanager; an LBA on "
                        "ext4 and XFS partitions of a loop device traced to its file"}


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, **kw)


def certificates(d):
    """ca.pem, server.pem/.key (localhost, 127.0.0.1), client.pem/.key under d."""
    p = lambda n: os.path.join(d, n)
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", p("ca.key"), "-out", p("ca.pem"), "-days", "2", "-subj", "/CN=runbook-ca",
       "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=keyCertSign,cRLSign")
    for name, ext in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", p(name + ".key"), "-out", p(name + ".csr"), "-subj", "/CN=" + name)
        with open(p(name + ".ext"), "w") as f:
            f.write(ext)
        sh("openssl", "x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"),
           "-CAcreateserial", "-out", p(name + ".pem"), "-days", "2", "-extfile", p(name + ".ext"))


class Served:
    """The daemon with a web config: started, and ready once its port takes connections (its
    /-/healthy speaks TLS or asks for the password)."""

    def __init__(self, *args):
        import socket
        self.port = dp.free_port()
        self.state = tempfile.mkdtemp(prefix="diskpulse-rbpre-state-")
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([situation.BINARY, "--web.listen-address=127.0.0.1:%d" % self.port,
                                      "--state.directory=" + self.state] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT)

        def up():
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("diskpulse exited: " + self.log.read())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False
        if not dp.wait_until(up, 20, poll=0.1):
            raise RuntimeError("diskpulse did not listen")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        dp.end_process(self.proc)
        shutil.rmtree(self.state, ignore_errors=True)


def web_config(d, name, text):
    path = os.path.join(d, name + ".yml")
    with open(path, "w") as f:
        f.write(text)
    return "--web.config.file=" + path


def in_namespace(etc):
    """A runner whose commands see etc as /etc/prometheus (a mount namespace of their own)."""
    def run(text, timeout):
        return runbook.run_local("unshare -m sh -c 'mount --bind %s /etc/prometheus && exec bash -c \"$0\"' %s"
                                 % (etc, __import__("shlex").quote(text)), timeout)
    return run


def web(tmp):
    etc = os.path.join(tmp, "etc-prometheus")
    os.mkdir(etc)
    certificates(tmp)
    shutil.copy(os.path.join(tmp, "ca.pem"), os.path.join(etc, "diskpulse-ca.pem"))
    password = "s3cret-%d" % os.getpid()
    with open(os.path.join(etc, "diskpulse.password"), "w") as f:
        f.write(password + "\n")
    hashed = sh("htpasswd", "-nbBC", "10", "", password).stdout.strip().lstrip(":")
    srv = "tls_server_config:\n  cert_file: %s/server.pem\n  key_file: %s/server.key\n" % (tmp, tmp)
    args = ("--no-collector.smart", "--no-collector.canary")
    runner = in_namespace(etc)
    build_info = has(r"^diskpulse_build_info\{")
    with Served(*args, web_config(tmp, "tls", srv)) as tls, \
            Served(*args, web_config(tmp, "mtls", srv + "  client_auth_type: RequireAndVerifyClientCert\n"
                                     "  client_ca_file: %s/ca.pem\n" % tmp)) as mtls, \
            Served(*args, web_config(tmp, "basic", "basic_auth_users:\n  prometheus: '%s'\n" % hashed)) as basic:
        run_section("", {"HOST:9477": "localhost:%d" % tls.port}, [
            Expect(r"^curl -s --cacert /etc/prometheus/diskpulse-ca.pem https://HOST:9477/metrics$", build_info),
        ], check, runner=runner, only=r"--cacert /etc/prometheus")
        run_section("", {"HOST:9477": "localhost:%d" % mtls.port, "CA": os.path.join(tmp, "ca"),
                         "CLIENT": os.path.join(tmp, "client")}, [
            Expect(r"^curl -s --cacert CA.pem --cert CLIENT.pem --key CLIENT.key https://HOST:9477/metrics$", build_info),
        ], check, runner=runner, only=r"--cert CLIENT")
        rc, out = runner("curl -s --cacert %s/ca.pem https://localhost:%d/metrics" % (tmp, mtls.port), 30)
        check("diskpulse_build_info" not in out, "without the client certificate: no page (exit %s)" % rc)
        run_section("", {"localhost:9477": "localhost:%d" % basic.port}, [
            Expect(r"^curl -s -u prometheus:\"\$\(cat /etc/prometheus/diskpulse.password\)\"", build_info),
        ], check, runner=runner, only=r"^curl -s -u prometheus")
        code = runbook.run_local("curl -s -o /dev/null -w '%%{http_code}' http://localhost:%d/metrics" % basic.port, 30)[1]
        check(code == "401", "without the password: %s" % code)


def silences(tmp):
    if not shutil.which("amtool") or not check_routing.alertmanager_binary():
        dp.skip("amtool or the Alertmanager is not installed (Debian package prometheus-alertmanager)")
    am = check_routing.Alertmanager(tmp)
    try:
        home = os.path.join(tmp, "home")
        os.makedirs(os.path.join(home, ".config", "prometheus"))
        with open(os.path.join(home, ".config", "prometheus", "amtool.yml"), "w") as f:
            f.write("alertmanager.url: http://127.0.0.1:%d\n" % am.port)
        base = "http://127.0.0.1:%d/api/v2/" % am.port
        alerts = [dict(alertname=a, instance="db1:9477", severity="warning", **extra) for a, extra in (
            ("DiskpulseTemperatureHigh", {"device": "sda"}), ("DiskpulseSectorsReallocated", {"device": "sda"}),
            ("DiskpulseTemperatureHigh", {"device": "sdb"}),
            ("DiskpulseSyncLatencyHigh", {"path": "/srv/db", "mode": "fdatasync", "device": "sdb"}))]

        def post():
            body = json.dumps([{"labels": a, "endsAt": "2099-01-01T00:00:00Z"} for a in alerts]).encode()
            urllib.request.urlopen(urllib.request.Request(base + "alerts", body, {"Content-Type": "application/json"}),
                                   timeout=10).read()
        post()

        def silenced():
            post()
            time.sleep(1)
            got = json.loads(urllib.request.urlopen(base + "alerts", timeout=10).read())
            return {(a["labels"]["alertname"], a["labels"].get("device"), a["labels"].get("path"))
                    for a in got if a["status"]["state"] == "suppressed"}
        values = {}
        runner = lambda text, timeout: runbook.run_local(text, timeout, env=dict(os.environ, HOME=home))

        def added(rc, out):
            values.setdefault("ids", []).append(out.strip())
            values["ID"] = values["ids"][0]
            return (len(out.strip()) == 36, "the silence's ID: %s" % out.strip())
        run_section("", values, [
            Expect(r"^amtool silence add instance=db1:9477 device=sda ", added),
        ], check, runner=runner, only=r"device=sda --duration")
        s = silenced()
        check(s == {("DiskpulseTemperatureHigh", "sda", None), ("DiskpulseSectorsReallocated", "sda", None)},
              "the disk's silence mutes sda's two alerts and nothing else: %s" % sorted(s))
        run_section("", values, [
            Expect(r"^amtool silence add instance=db1:9477 alertname=~\"DiskpulseSync\.\*\"", added),
        ], check, runner=runner, only=r"alertname=~")
        s = silenced()
        check(("DiskpulseSyncLatencyHigh", "sdb", "/srv/db") in s and ("DiskpulseTemperatureHigh", "sdb", None) not in s,
              "the canary's silence mutes its alert, not sdb's temperature: %s" % sorted(s))
        run_section("", values, [
            Expect(r"^amtool silence query; amtool silence expire ID$",
                   lambda rc, out: (all(i in out for i in values["ids"]) and "replacing sda" in out,
                                    "both silences listed with their comments, the first expired")),
        ], check, runner=runner, only=r"silence query")
        s = silenced()
        check(("DiskpulseTemperatureHigh", "sda", None) not in s and ("DiskpulseSyncLatencyHigh", "sdb", "/srv/db") in s,
              "after the expiry sda's alerts are back, the canary's still muted: %s" % sorted(s))
    finally:
        am.stop()


def sectors(tmp):
    """A disk image with two partitions, ext4 at sector 2048 and XFS at sector 206848, each with
    a file; the LBA of each file's first block on the whole disk traced back to it. This host's
    kernel may read no partition table (CONFIG_MSDOS_PARTITION off), so each partition is a loop
    device at its offset of the image (PART), beside one over the whole image (DEV)."""
    img = os.path.join(tmp, "disk.img")
    with open(img, "wb") as f:
        f.truncate(512 << 20)
    parts = {"p1": (2048, 204800, "ext4"), "p2": (206848, 614400, "xfs")}
    loops, mounts = [], []
    try:
        loops.append(sh("losetup", "-f", "--show", img).stdout.strip())
        dev = os.path.basename(loops[0])
        files = {}
        for name, (start, count, fstype) in sorted(parts.items()):
            part = sh("losetup", "-f", "--show", "-o", str(start * 512), "--sizelimit", str(count * 512),
                      img).stdout.strip()
            loops.append(part)
            sh(*(["mkfs.ext4", "-q", "-b", "4096"] if fstype == "ext4" else ["mkfs.xfs", "-q"]), part)
            mnt = os.path.join(tmp, name)
            os.mkdir(mnt)
            sh("mount", part, mnt)
            mounts.append(mnt)
            os.mkdir(os.path.join(mnt, "pgdata"))
            path = os.path.join(mnt, "pgdata", "16384")
            with open(path, "wb") as f:
                f.write(os.urandom(1 << 20))
                os.fsync(f.fileno())
            # the file's first block (filefrag -e in 4 KiB blocks); the drive reports the LBA of
            # the whole disk: the partition's start plus the block's sector
            out = sh("filefrag", "-b4096", "-e", path).stdout
            first = int([l for l in out.splitlines() if l.strip().startswith("0:")][0].split(":")[2].split("..")[0])
            files[name] = (path, mnt, os.path.basename(part), start, start + first * 8, os.stat(path).st_ino)
            # the disk says the same as the partition at that sector
            with open(loops[0], "rb") as d, open(path, "rb") as f:
                d.seek((start + first * 8) * 512)
                check(d.read(4096) == f.read(4096), "%s: sector %d of %s holds the file's first block"
                      % (fstype, start + first * 8, dev))
        for name, (path, mnt, part, start, lba, ino) in sorted(files.items()):
            values = {"DEV": dev, "PART": part, "LBA": str(lba), "START": str(start), "PATH": path}
            if name == "p1":
                def icheck(rc, out, values=values, ino=ino, lba=lba):
                    m = __import__("re").search(r"^\d+\s+(\d+)$", out, __import__("re").M)
                    values["INODE"] = m.group(1) if m else ""
                    return values["INODE"] == str(ino), "the block of LBA %s belongs to inode %s (the file's: %d)" % (
                        lba, values["INODE"], ino)
                rel = "/" + os.path.relpath(path, mnt)
                run_section("", values, [
                    Expect(r"^debugfs -R \"icheck", icheck),
                    Expect(r"^debugfs -R \"ncheck INODE\"", has(r"^%d\s+%s$" % (ino, rel))),
                    Expect(r"^dd if=PATH of=/dev/null", has(r"1048576 bytes")),
                ], check, only=r"^debugfs|^dd if")
            else:
                def convert(rc, out, values=values):
                    m = __import__("re").search(r"(0x[0-9a-f]+)", out)
                    values["FSB"] = m.group(1) if m else ""
                    return bool(m), "XFS block %s" % values["FSB"]
                # as the runbook says: unmounted (a mounted XFS stops at its log)
                r = subprocess.run(["xfs_db", "-r", "-c", "blockget -n", "/dev/" + part], capture_output=True, text=True)
                check("log which needs to" in r.stdout + r.stderr,
                      "mounted, xfs_db stops at the log: %s" % (r.stdout + r.stderr).strip()[:80])
                sh("umount", mnt)
                run_section("", values, [
                    Expect(r"^xfs_db -r -c \"convert daddr", convert),
                    Expect(r"^xfs_db -r -c \"blockget -n -b FSB\" -c \"ncheck\"", has(r"\b%d\s+pgdata/16384$" % ino)),
                ], check, only=r"^xfs_db")
                sh("mount", "/dev/" + part, mnt)
                run_section("", values, [
                    Expect(r"^dd if=PATH of=/dev/null", has(r"1048576 bytes")),
                ], check, only=r"^dd if")
    finally:
        for m in mounts:
            subprocess.run(["umount", m])
        for l in reversed(loops):
            subprocess.run(["losetup", "-d", l])


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: unwind, clean up
    situation.BINARY = dp.loop_test_binary(__file__, "a partitioned loop device")
    situation.not_sanitized(situation.BINARY)
    dp.need_loop_fs("openssl", "htpasswd", "unshare", "filefrag", "debugfs", "mkfs.xfs", "xfs_db")
    if not os.path.isdir("/etc/prometheus"):
        dp.skip("/etc/prometheus is missing (the preamble's files live there; Debian package prometheus)")
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="diskpulse-rbpre-")
    try:
        web(tmp)
        silences(tmp)
        sectors(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("took %.0f s" % (time.monotonic() - t0))
    dp.finish()


if __name__ == "__main__":
    main()
