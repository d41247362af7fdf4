#!/usr/bin/env python3
"""The .deb under real systemd: a fresh Debian 12 root with the package installed boots in a
systemd-nspawn container (systemd 252 as its PID 1, a network namespace of its own), and there
diskpulse.service, started at boot as the postinst enabled it, serves /metrics on
diskpulse.socket's socket (IPv4 and IPv6); the canary probes its default target; the serving
process holds no capability, the helper exactly its three; `systemd-analyze security` of the
loaded unit is at most 2.0; the journal has its logfmt lines with priorities (info, warning,
error); `systemctl reload` applies a changed config (and survives a broken one); `systemctl
stop` is clean; diskpulse.socket alone starts the service at the first connection; the example
IPAddressAllow= drop-in lets only the listed addresses in; a canary target in a postgres-owned
/var/lib/postgresql counts EACCES, and the documented diskpulse-canary directory there (the
shipped tmpfiles.d snippet, the runbook's sed) is probed; `dpkg -P` and `dpkg -i` with systemd
running stop and start the units and leave nothing running behind.
Usage: check_nspawn.py BUILD_DIR"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pkg

SYS_ADMIN, SYS_RAWIO, DAC_READ_SEARCH = 21, 17, 2
HELPER_CAPS = (1 << SYS_ADMIN) | (1 << SYS_RAWIO) | (1 << DAC_READ_SEARCH)

# Run inside the container's network namespace by the host's python3: GET a URL, optionally
# from a given source address; prints the status and the body, or the error.
HTTP = r"""
import socket, sys
host, port, path, source, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.settimeout(timeout)
try:
    if source:
        s.bind((source, 0))
    s.connect((host, port))
    s.sendall(("GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" % path).encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    print(head.split(b" ")[1].decode())
    sys.stdout.write(body.decode(errors="replace"))
except OSError as e:
    print("ERROR %s" % type(e).__name__)
"""


def cgroup2_mount():
    """Where the cgroup2 hierarchy is mounted here, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                return fields[4]
    return None


class Container:
    """systemd-nspawn --boot of root. On a host run by systemd the container gets a delegated
    scope of its own (systemd-run --scope -p Delegate=yes). Elsewhere (a container, a sandbox)
    it runs in a cgroup2 directory made for it below this process's, with the unified hierarchy
    forced, so that systemd in it has BPF device and IP filters as on a Debian 12 host. extra:
    more systemd-nspawn arguments (--bind=..., another --capability=...)."""

    def __init__(self, root, log, extra=()):
        self.root = root
        self.name = "diskpulse-test-%d" % os.getpid()
        self.log = open(log, "w+")
        self.cgroup = None
        self.unified = True
        # --keep-unit --register=no: no machined to ask. CAP_SYS_RAWIO is not in nspawn's default
        # set and the unit asks for it; bpf(2) (with CAP_BPF) lets systemd inside load its device
        # and IP filters.
        nspawn = ["systemd-nspawn", "--boot", "--directory=" + root, "--machine=" + self.name, "--register=no",
                  "--keep-unit", "--private-network", "--capability=CAP_SYS_RAWIO,CAP_BPF",
                  "--system-call-filter=bpf", "--console=read-only"] + list(extra)
        env = dict(os.environ)
        if os.path.isdir("/run/systemd/system") and shutil.which("systemd-run"):
            cmd = ["systemd-run", "--scope", "--quiet", "-p", "Delegate=yes", "--"] + nspawn
        else:
            mount = cgroup2_mount()
            cmd = nspawn
            if mount:
                with open("/proc/self/cgroup") as f:
                    own = [l.split(":", 2)[2].strip() for l in f if l.startswith("0::")][0]
                self.cgroup = (mount, os.path.join(own.lstrip("/"), self.name))
                path = os.path.join(mount, self.cgroup[1])
                os.makedirs(path)
                cmd = ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', path] + nspawn
                env["SYSTEMD_NSPAWN_UNIFIED_HIERARCHY"] = "1"
            else:
                self.unified = False
                pkg.note("no cgroup2 hierarchy here: the container runs with cgroup v1, without BPF filters")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.leader = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None and self.leader is None:
            self.leader = self._find_leader()
            time.sleep(0.1)
        if self.leader is None:
            raise RuntimeError("the container's systemd did not start:\n" + self.console())

    def _find_leader(self):
        """The container's PID 1: the process named systemd whose parent is systemd-nspawn."""
        nspawn_pids = set()
        procs = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    st = f.read()
            except OSError:
                continue
            comm = st[st.index("(") + 1:st.rindex(")")]
            procs[int(pid)] = (comm, int(st[st.rindex(")") + 2:].split()[1]))
            if comm == "systemd-nspawn":
                nspawn_pids.add(int(pid))
        mine = {pid for pid in nspawn_pids if pid == self.proc.pid or procs[pid][1] == self.proc.pid}
        for pid, (comm, ppid) in procs.items():
            if comm == "systemd" and ppid in mine:
                return pid
        return None

    def booted(self, timeout=120):
        """systemctl is-system-running --wait, once systemd inside answers at all."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline and self.proc.poll() is None:
            state = self.out("systemctl is-system-running --wait", timeout=timeout)
            if state in ("running", "degraded", "maintenance", "stopping"):
                return state
            time.sleep(0.5)
        return state

    def console(self, lines=60):
        self.log.flush()
        self.log.seek(0)
        return "".join(self.log.readlines()[-lines:])

    def enter(self, *ns):
        return ["nsenter", "--target", str(self.leader)] + list(ns) + ["--"]

    def sh(self, cmd, timeout=60):
        """A shell command inside the container (all its namespaces)."""
        p = pkg.run(self.enter("--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup") + ["/bin/sh", "-c", cmd],
                    timeout=timeout, env={"PATH": pkg.SBIN_PATH, "LANG": "C.UTF-8", "SYSTEMD_COLORS": "0",
                                          "SYSTEMD_PAGER": "", "TERM": "dumb"})
        return p.returncode, p.stdout, p.stderr

    def out(self, cmd, timeout=60):
        return self.sh(cmd, timeout)[1].strip()

    def show(self, unit, *props):
        text = self.out("systemctl show %s -p %s" % (unit, ",".join(props)))
        return dict(l.split("=", 1) for l in text.splitlines() if "=" in l)

    def http(self, host, path="/metrics", source="", timeout=5):
        """(status or "ERROR ...", body) of a GET inside the container's network namespace."""
        p = pkg.run(self.enter("--net") + ["python3", "-c", HTTP, host, "9477", path, source, str(timeout)],
                    timeout=timeout + 30)
        status, _, body = p.stdout.partition("\n")
        return status.strip(), body

    def net(self, *cmd):
        return pkg.run(self.enter("--net") + list(cmd))

    def status_file(self, pid):
        text = self.out("cat /proc/%s/status" % pid)
        return dict(re.findall(r"^(\w+):\s*(.*)$", text, re.M))

    def processes(self):
        """{pid: comm} of diskpulse's processes."""
        out = self.out("for d in /proc/[0-9]*; do c=$(cat $d/comm 2>/dev/null); "
                       "case $c in diskpulse*) echo ${d#/proc/} $c;; esac; done")
        return dict(l.split(None, 1) for l in out.splitlines())

    def journal(self, unit, since_cursor=None):
        cmd = "journalctl -u %s -o json --no-pager" % unit
        if since_cursor:
            cmd += " --after-cursor='%s'" % since_cursor
        entries = []
        for line in self.out(cmd).splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                pass
        return entries

    def poweroff(self):
        if self.proc.poll() is None:
            self.sh("systemctl poweroff --no-block")
            try:
                self.proc.wait(45)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        if self.cgroup:
            # The directories nspawn and the container's systemd made, in cgroup2 and in the
            # named v1 hierarchy nspawn mirrors them to when there is one.
            for base in (self.cgroup[0], "/sys/fs/cgroup/systemd"):
                top = os.path.join(base, self.cgroup[1])
                for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
                    try:
                        os.rmdir(dirpath)
                    except OSError:
                        pass
        return self.proc.returncode


def wait(what, fn, timeout):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(0.25)


def metric(body, name, **labels):
    for line in body.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


def caps(status, field):
    return int(status.get(field, "-1"), 16)


def check_privileges(c, main_pid, uid):
    """The serving process holds no capability and the helper exactly its three, as the kernel
    shows them; returns the helper's pids (one when all is well)."""
    procs = c.processes()
    print("processes: %s" % procs)
    st = c.status_file(main_pid)
    pkg.check(st.get("Uid", "").split()[:1] == [uid], "the daemon runs as diskpulse (uid %s)" % st.get("Uid"))
    for f in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
        pkg.check(caps(st, f) == 0, "the serving process: %s %s" % (f, st.get(f)))
    pkg.check(st.get("NoNewPrivs") == "1" and st.get("Seccomp") == "2", "the serving process: NoNewPrivs 1, Seccomp 2")
    helpers = [pid for pid, comm in procs.items() if comm == "diskpulse-priv"]
    pkg.check(len(helpers) == 1, "one helper diskpulse-priv (%s)" % helpers)
    if helpers:
        hs = c.status_file(helpers[0])
        pkg.check(caps(hs, "CapEff") == HELPER_CAPS and caps(hs, "CapPrm") == HELPER_CAPS,
                  "the helper holds CAP_SYS_ADMIN, CAP_SYS_RAWIO, CAP_DAC_READ_SEARCH only (CapEff %s)" % hs.get("CapEff"))
        pkg.check(caps(hs, "CapAmb") == 0 and hs.get("NoNewPrivs") == "1", "the helper: CapAmb 0, NoNewPrivs 1")
    return helpers


def preconditions(build):
    """What a test booting the package under nspawn needs: root, the plain build, the tools; a
    SIGTERM (ctest's timeout) unwinds, so that the container is powered off."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    pkg.need_root()
    if pkg.sanitized(build):
        pkg.skip("a sanitizer build: the package is tested from the plain build")
    pkg.need_tool("systemd-nspawn", "systemd-container")
    pkg.need_tool("nsenter", "util-linux")


def check_serving(c, label):
    st4, body = c.http("127.0.0.1")
    st6, body6 = c.http("::1")
    pkg.check(st4 == "200" and "diskpulse_build_info" in body, "%s: /metrics on 127.0.0.1:9477 (%s)" % (label, st4))
    pkg.check(st6 == "200" and "diskpulse_build_info" in body6, "%s: /metrics on [::1]:9477 (%s)" % (label, st6))
    return body


def check_postgresql_canary(c):
    """The documented canary target on PostgreSQL's filesystem under the real unit: with a
    postgres user and /var/lib/postgresql as PostgreSQL's package makes them, a target there
    counts EACCES; after the README's two lines (the shipped tmpfiles.d snippet linked into
    /etc/tmpfiles.d, systemd-tmpfiles --create) and the runbook's sed on the config file, its
    diskpulse-canary subdirectory is up and probed. The config file is restored afterwards."""
    conf = "/etc/diskpulse/diskpulse.conf"
    pg, mine = "/var/lib/postgresql", "/var/lib/postgresql/diskpulse-canary"
    rc, _, err = c.sh("groupadd --system postgres && useradd --system -g postgres -d %s -s /bin/sh postgres && "
                      "install -d -o postgres -g postgres -m 0755 %s" % (pg, pg))
    if not pkg.check(rc == 0, "a postgres user and %s (0755) as PostgreSQL's package makes them %s" % (pg, err.strip())):
        return
    c.sh("cp %s /tmp/diskpulse.conf.canary && sed -i 's/^canary.interval = .*/canary.interval = 200ms/' %s && "
         "echo 'canary.path = %s' >> %s && systemctl restart diskpulse.service" % (conf, conf, pg, conf))

    def counted(errno):
        return lambda: (metric(c.http("127.0.0.1")[1], "diskpulse_sync_errors_total", path=pg, errno=errno) or 0) >= 2

    def errnos():
        return sorted({m.group(1) for line in c.http("127.0.0.1")[1].splitlines()
                       if line.startswith("diskpulse_sync_errors_total{") and 'path="%s"' % pg in line
                       for m in [re.search(r'errno="(\w+)"', line)] if m})
    # The unit mounts it read-only (ProtectSystem=strict, not in ReadWritePaths=): EROFS. With the
    # drop-in the documentation used to give (ReadWritePaths=/var/lib/postgresql): EACCES, the
    # directory being postgres'.
    pkg.check(wait("EROFS", counted("EROFS"), 60), "canary.path = %s: EROFS under the unit as shipped (%s)" % (pg, errnos()))
    c.sh("mkdir -p /etc/systemd/system/diskpulse.service.d && "
         "printf '[Service]\\nReadWritePaths=%s\\n' > /etc/systemd/system/diskpulse.service.d/pg.conf && "
         "systemctl daemon-reload && systemctl restart diskpulse.service" % pg)
    pkg.check(wait("EACCES", counted("EACCES"), 60),
              "with ReadWritePaths=%s the service counts EACCES: the directory is postgres' (%s)" % (pg, errnos()))
    c.sh("rm -r /etc/systemd/system/diskpulse.service.d && systemctl daemon-reload")

    rc, _, err = c.sh("ln -s /usr/share/diskpulse/tmpfiles.d/postgresql-canary.conf /etc/tmpfiles.d/diskpulse-canary.conf && "
                      "systemd-tmpfiles --create /etc/tmpfiles.d/diskpulse-canary.conf")
    owner = c.out("stat -c '%%U:%%G %%a' %s" % mine)
    pkg.check(rc == 0 and owner == "diskpulse:postgres 750",
              "the README's tmpfiles.d lines make %s: %s %s" % (mine, owner, err.strip()))
    c.sh("sed -i 's|^canary.path = /var/lib/postgresql$|canary.path = /var/lib/postgresql/diskpulse-canary|' %s && "
         "systemctl restart diskpulse.service" % conf)

    def probed():
        body = c.http("127.0.0.1")[1]
        return (metric(body, "diskpulse_sync_target_up", path=mine) == 1
                and (metric(body, "diskpulse_sync_probes_total", path=mine) or 0) >= 3
                and metric(body, "diskpulse_sync_target_up", path=pg) is None)
    pkg.check(wait("probed", probed, 60), "after the runbook's sed the service probes %s, up" % mine)
    c.sh("cp /tmp/diskpulse.conf.canary %s && rm %s/* %s/.[!.]* 2>/dev/null; systemctl restart diskpulse.service"
         % (conf, mine, mine))


RESET_PATH = "/srv/db"
RESET_RECORD = ("disk=serial:DPTEST-RESET mode=fdatasync path=%s regime=idle baseline=0.004 updates=900 "
                "updated=5 warmup=- reference=0.002 refdays=final dayobs=- "
                "days=1717000000:0.0039,1717086400:0.004" % RESET_PATH)
RESET_DONE = ("path=%s regime=idle baseline=0.004 updates=900 updated=5 reference=0.004 "
              "refdays=- dayobs=- days=-" % RESET_PATH)


def check_reset_recipe(c):
    """The runbook's reset of one target's reference under systemd, with diskpulse.socket active
    and a scraper knocking all along: the reset refuses while the service runs; the recipe
    (stop the socket and the service, reset as the service user, start both) applies it and the
    daemon started after keeps it; a daemon the socket starts while another process holds the
    state directory refuses (exit 1) and systemd's restart brings it back once the lock is gone."""
    state = "/var/lib/diskpulse/canary-baselines"
    c.sh("systemctl stop diskpulse.socket diskpulse.service")
    c.sh("echo '%s' >> %s" % (RESET_RECORD, state))
    c.sh("systemctl start diskpulse.socket diskpulse.service")
    check_serving(c, "with a record of another path")
    svc = c.show("diskpulse.service", "MainPID")
    rc, out, err = c.sh("runuser -u diskpulse -- diskpulse --state.directory=/var/lib/diskpulse "
                        "--canary.reset-reference=%s" % RESET_PATH)
    pkg.check(rc == 1 and ("(pid %s)" % svc.get("MainPID")) in err,
              "the reset refuses while the service runs, naming its pid: %d %s" % (rc, err.strip()))

    # a scraper knocking every 0.2 s while the recipe runs, as Prometheus would
    knocks = []
    stop = threading.Event()

    def knock():
        while not stop.is_set():
            knocks.append(c.http("127.0.0.1", timeout=2)[0])
            time.sleep(0.2)
    t = threading.Thread(target=knock)
    t.start()
    try:
        wait("a first answered knock", lambda: "200" in knocks, 15)
        before = len(knocks)
        rc1, _, err1 = c.sh("systemctl stop diskpulse.socket diskpulse")
        rc2, out2, err2 = c.sh("runuser -u diskpulse -- diskpulse --state.directory=/var/lib/diskpulse "
                               "--canary.reset-reference=%s" % RESET_PATH)
        # scrapes knock on the closed port meanwhile
        wait("a refused knock", lambda: any(k.startswith("ERROR") for k in knocks[before:]), 15)
        rc3, _, err3 = c.sh("systemctl start diskpulse.socket diskpulse")
        after = len(knocks)
        wait("an answered knock after the start", lambda: "200" in knocks[after:], 15)
    finally:
        stop.set()
        t.join()
    pkg.check(rc1 == 0 and rc2 == 0 and rc3 == 0 and "kept: the previous file as canary-baselines.reset-" in out2,
              "the runbook's recipe ran: stop %d, reset %d (%s), start %d" % (rc1, rc2, (out2 + err2).strip()[-300:], rc3))
    pkg.check("200" in knocks[:before] and any(k.startswith("ERROR") for k in knocks[before:after])
              and "200" in knocks[after:],
              "the scraper knocked before, during and after (%d knocks, %d answered)"
              % (len(knocks), knocks.count("200")))
    text = c.out("cat %s" % state)
    pkg.check(RESET_DONE in text, "the reset is in the state file")
    check_serving(c, "after the reset")
    c.sh("systemctl stop diskpulse.socket diskpulse.service")
    text = c.out("cat %s" % state)
    pkg.check(RESET_DONE in text and c.out("ls /var/lib/diskpulse | grep -c '^canary-baselines.reset-'") == "1",
              "the daemon run after the reset kept it; one copy of the previous file beside it")

    # A holder of the state directory's lock (a reset in progress): the socket-started service
    # refuses, and the restart brings it back once the lock is released.
    # (the starts above count against the unit's start limit, 5 in 10 s: forget them)
    c.sh("systemctl reset-failed diskpulse.service diskpulse.socket")
    c.sh("(flock -x /var/lib/diskpulse sleep 5 >/dev/null 2>&1 &) ; sleep 0.5")
    c.sh("systemctl start diskpulse.socket")
    c.http("127.0.0.1", timeout=3)  # starts the service while the lock is held

    def refused():
        return [e.get("MESSAGE", "") for e in c.journal("diskpulse.service")
                if "in use by another process" in e.get("MESSAGE", "")]
    said = wait("the refusal in the journal", refused, 15)
    pkg.check(bool(said), "a service the socket starts while the lock is held refuses: %s" % (said or [])[-1:])
    back = wait("restart after the lock", lambda: c.http("127.0.0.1")[0] == "200", 30)
    pkg.check(back, "systemd's restart brings it back once the lock is gone (%s)"
              % c.show("diskpulse.service", "ActiveState", "NRestarts", "Result"))


def main():
    build = sys.argv[1]
    preconditions(build)
    deb = pkg.deb_path(build)
    if not deb:
        pkg.skip("no .deb in %s (made by the package/deb test)" % build)
    base = pkg.fresh_root(build)
    tmp = tempfile.mkdtemp(prefix="diskpulse-nspawn-")
    c = None
    try:
        root = pkg.copy_root(base, os.path.join(tmp, "root"))
        shutil.copy(deb, os.path.join(root, "root", "diskpulse.deb"))  # /tmp is a tmpfs in the container
        p = pkg.chroot(root, "dpkg", "-i", "/root/diskpulse.deb")
        if not pkg.check(p.returncode == 0, "dpkg -i into the root (offline)"):
            print(p.stdout + p.stderr)
            pkg.finish()

        t0 = time.monotonic()
        try:
            c = Container(root, os.path.join(tmp, "console.log"))
        except RuntimeError as e:
            # nspawn itself could not run here (no namespaces or mounts allowed, a container
            # without privileges): nothing of diskpulse was tried yet.
            pkg.skip("systemd-nspawn could not boot the root here: %s" % str(e).strip()[-800:])
        state = c.booted()
        pkg.check(state in ("running", "degraded"), "container booted: %s in %.1f s" % (state, time.monotonic() - t0))
        if state == "degraded":
            pkg.note("failed units: " + c.out("systemctl --failed --no-legend"))
        uid = c.out("id -u diskpulse")

        # Started at boot, as enabled by the postinst, on the socket's socket.
        svc = c.show("diskpulse.service", "ActiveState", "SubState", "MainPID", "StatusText", "NRestarts", "User",
                     "TriggeredBy", "Type")
        pkg.check(svc.get("ActiveState") == "active" and svc.get("SubState") == "running",
                  "diskpulse.service active (running) after boot: %s/%s" % (svc.get("ActiveState"), svc.get("SubState")))
        pkg.check(svc.get("StatusText", "").startswith("Monitoring "), "STATUS= reached systemd: %r" % svc.get("StatusText"))
        sock = c.show("diskpulse.socket", "ActiveState", "Listen")
        pkg.check(sock.get("ActiveState") == "active" and "9477" in sock.get("Listen", ""),
                  "diskpulse.socket listening: %s" % sock.get("Listen"))
        main_pid = svc.get("MainPID")
        body = check_serving(c, "at boot")
        # systemd's last watchdog ping, to compare with later (one comes every 10 s).
        wd0 = c.show("diskpulse.service", "WatchdogTimestampMonotonic", "WatchdogUSec")

        # The canary probes its default target, the state directory.
        def probed():
            _, b = c.http("127.0.0.1")
            n = metric(b, "diskpulse_sync_probes_total", path="/var/lib/diskpulse", mode="fdatasync")
            return b if n and n >= 1 else None
        body = wait("probe", probed, 30) or body
        pkg.check(metric(body, "diskpulse_sync_probes_total", path="/var/lib/diskpulse", mode="fdatasync") is not None
                  and metric(body, "diskpulse_sync_target_up", path="/var/lib/diskpulse") == 1,
                  "the canary probes /var/lib/diskpulse (probes %s, up %s)"
                  % (metric(body, "diskpulse_sync_probes_total", path="/var/lib/diskpulse"),
                     metric(body, "diskpulse_sync_target_up", path="/var/lib/diskpulse")))
        pkg.check(metric(body, "diskpulse_sync_errors_total") is None, "no canary errors (no EROFS under ProtectSystem=strict)")
        pkg.check(metric(body, "diskpulse_helper_up") == 1, "the SMART helper is up")
        devices = metric(body, "diskpulse_disk_devices")
        pkg.check(devices is not None and devices >= 1, "diskstats sees the host's disks (%s)" % devices)

        # Privileges as the kernel shows them.
        helpers = check_privileges(c, main_pid, uid)
        fds = c.out("ls -l /proc/%s/fd/ | grep -c socket:" % main_pid)
        pkg.note("sockets of the serving process: %s" % fds)
        # The canary's prober runs at best-effort 7 as documented: the unit sets the class, since its
        # own ioprio_set() is filtered out with @resources.
        prio = c.out("for t in /proc/%s/task/*; do [ \"$(cat $t/comm)\" = dp-canary ] && ionice -p ${t##*/}; done"
                     % main_pid)
        pkg.check(prio.splitlines() == ["best-effort: prio 7"], "the canary thread's I/O priority: %r" % prio)
        # A helper killed under the unit's sandbox and seccomp filter is replaced (the zygote's
        # clone, pidfd and fd passing are all allowed), with the same capabilities.
        if helpers:
            c.sh("kill -KILL %s" % helpers[0])
            def replaced():
                b = c.http("127.0.0.1")[1]
                return metric(b, "diskpulse_helper_restarts_total") == 1 and metric(b, "diskpulse_helper_up") == 1
            pkg.check(wait("helper", replaced, 15), "a killed helper is replaced (diskpulse_helper_restarts_total 1, up 1)")
            new = [pid for pid, comm in c.processes().items() if comm == "diskpulse-priv"]
            pkg.check(len(new) == 1 and new != helpers and caps(c.status_file(new[0]), "CapEff") == HELPER_CAPS,
                      "the new helper %s holds the same three capabilities" % new)

        # The loaded unit's score, as the running manager sees it.
        out = c.out("systemd-analyze security --no-pager diskpulse.service")
        m = re.search(r"Overall exposure level for diskpulse.service: (\d+\.\d)", out)
        pkg.check(m is not None and float(m.group(1)) <= 2.0, "systemd-analyze security of the loaded unit: %s"
                  % (m.group(1) if m else out[-300:]))

        # The journal: the daemon's logfmt lines with their priorities.
        entries = [e for e in c.journal("diskpulse.service") if e.get("SYSLOG_IDENTIFIER") == "diskpulse"]
        info = [e for e in entries if e.get("PRIORITY") == "6" and "level=info" in e.get("MESSAGE", "")]
        pkg.check(any('msg="diskpulse started"' in e["MESSAGE"] for e in info),
                  "journal: 'diskpulse started' at priority 6 (info), %d lines from diskpulse" % len(entries))
        pkg.check(all(not e.get("MESSAGE", "").startswith("<") for e in entries), "journal: no raw <N> prefixes left in messages")
        cursor = c.out("journalctl -u diskpulse.service -n 1 -o json --no-pager | "
                       "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"__CURSOR\"])' 2>/dev/null || true")

        # The watchdog pings reach systemd from the main process (every third of WatchdogSec=30s).
        def pinged():
            w = c.show("diskpulse.service", "WatchdogTimestampMonotonic")
            return w["WatchdogTimestampMonotonic"] if w.get("WatchdogTimestampMonotonic") not in (
                None, "0", wd0.get("WatchdogTimestampMonotonic")) else None
        t = time.monotonic()
        ping = wait("watchdog", pinged, 15)
        pkg.check(ping is not None, "systemd received a WATCHDOG=1 ping (WatchdogUSec %s, after %.1f s more)"
                  % (wd0.get("WatchdogUSec"), time.monotonic() - t))

        # Reload: a changed config takes effect without a restart; a broken one is refused.
        conf = "/etc/diskpulse/diskpulse.conf"
        c.sh("cp %s /tmp/diskpulse.conf.orig" % conf)
        c.sh("printf 'collector.diskstats.device-include = ^no-such-device$\\nweb.listen-address = 127.0.0.1:9999\\n' >> %s" % conf)
        rc, _, err = c.sh("systemctl reload diskpulse.service")
        pkg.check(rc == 0, "systemctl reload: exit %d %s" % (rc, err.strip()))
        def no_devices():
            _, b = c.http("127.0.0.1")
            return metric(b, "diskpulse_disk_devices") == 0
        pkg.check(wait("reload", no_devices, 10), "reload applied the new device filter: diskpulse_disk_devices 0")
        after = c.show("diskpulse.service", "MainPID", "NRestarts", "ActiveState")
        pkg.check(after.get("MainPID") == main_pid and after.get("NRestarts") == "0" and after.get("ActiveState") == "active",
                  "reload kept the process (MainPID %s, NRestarts %s)" % (after.get("MainPID"), after.get("NRestarts")))
        c.sh("echo 'diskstats.interval = banana' >> %s" % conf)
        rc, _, _ = c.sh("systemctl reload diskpulse.service")
        time.sleep(1)
        st4, b = c.http("127.0.0.1")
        pkg.check(rc == 0 and st4 == "200" and metric(b, "diskpulse_disk_devices") == 0,
                  "a broken config on reload: still serving with the running configuration")
        c.sh("cp /tmp/diskpulse.conf.orig %s && systemctl reload diskpulse.service" % conf)
        pkg.check(wait("restore", lambda: (metric(c.http("127.0.0.1")[1], "diskpulse_disk_devices") or 0) >= 1, 10),
                  "the original config back: devices again")
        new = [e for e in c.journal("diskpulse.service", cursor) if e.get("SYSLOG_IDENTIFIER") == "diskpulse"]
        warn = [e for e in new if e.get("PRIORITY") == "4" and "level=warn" in e.get("MESSAGE", "")]
        errs = [e for e in new if e.get("PRIORITY") == "3" and "level=error" in e.get("MESSAGE", "")]
        pkg.check(any("restart" in e["MESSAGE"] for e in warn), "journal: the listen address change warned at priority 4")
        pkg.check(any("banana" in e["MESSAGE"] or "reload failed" in e["MESSAGE"] for e in errs),
                  "journal: the broken config logged at priority 3: %s" % [e["MESSAGE"][:120] for e in errs][:1])
        pkg.check(any('msg="configuration reloaded"' in e.get("MESSAGE", "") and e.get("PRIORITY") == "6" for e in new),
                  "journal: 'configuration reloaded' at priority 6")

        # A lost zygote heals: the daemon exits with status 75 after --helper.zygote-grace and
        # Restart=on-failure starts a new one (with a new zygote) while diskpulse.socket keeps
        # the listening socket; the state file is kept.
        zyg = [pid for pid, comm in c.processes().items() if comm == "diskpulse-zyg"]
        pkg.check(len(zyg) == 1, "one zygote diskpulse-zyg (%s)" % zyg)
        if zyg:
            c.sh("echo 'helper.zygote-grace = 2s' >> %s && systemctl reload diskpulse.service" % conf)
            time.sleep(1)
            before = c.show("diskpulse.service", "MainPID", "NRestarts")
            t = time.monotonic()
            c.sh("kill -KILL %s" % zyg[0])
            seen_down = wait("zygote down", lambda: metric(c.http("127.0.0.1")[1], "diskpulse_helper_zygote_up") == 0, 5)
            pkg.check(seen_down, "diskpulse_helper_zygote_up 0 during the grace period")
            def restarted():
                a = c.show("diskpulse.service", "MainPID", "NRestarts", "ActiveState")
                return a if (a.get("MainPID") not in ("0", before.get("MainPID")) and a.get("ActiveState") == "active"
                             and a.get("NRestarts") == str(int(before.get("NRestarts") or 0) + 1)) else None
            a = wait("restart", restarted, 30)
            pkg.check(a is not None, "systemd restarted diskpulse after the zygote was lost (%.1f s; %s)"
                      % (time.monotonic() - t, a or c.show("diskpulse.service", "MainPID", "NRestarts", "ActiveState")))
            st5, b = c.http("127.0.0.1")
            pkg.check(st5 == "200" and metric(b, "diskpulse_helper_zygote_up") == 1 and metric(b, "diskpulse_helper_up") == 1,
                      "the new daemon serves on the same socket with a zygote and a helper")
            errs = [e.get("MESSAGE", "") for e in c.journal("diskpulse.service") if e.get("PRIORITY") == "3"]
            pkg.check(any("restarts diskpulse with a new zygote" in m for m in errs),
                      "journal: the exit for a restart logged at priority 3")
            pkg.check(c.sh("head -1 /var/lib/diskpulse/canary-baselines")[1].startswith("diskpulse-canary-baselines"),
                      "the state file kept across the restart")
            c.sh("cp /tmp/diskpulse.conf.orig %s && systemctl reload diskpulse.service" % conf)

        # A clean stop.
        rc, _, err = c.sh("systemctl stop diskpulse.socket diskpulse.service")
        stopped = c.show("diskpulse.service", "ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
        pkg.check(rc == 0 and stopped.get("ActiveState") == "inactive" and stopped.get("Result") == "success"
                  and stopped.get("ExecMainCode") == "1" and stopped.get("ExecMainStatus") == "0",
                  "systemctl stop: inactive, result %s, exit code %s status %s" % (stopped.get("Result"),
                                                                                  stopped.get("ExecMainCode"), stopped.get("ExecMainStatus")))
        pkg.check(c.processes() == {}, "no diskpulse process left after stop")
        pkg.check(c.sh("test -f /var/lib/diskpulse/canary-baselines")[0] == 0, "the state file was written (by the prober, for a disk new to it)")
        pkg.check(any('msg="shutting down"' in e.get("MESSAGE", "") for e in c.journal("diskpulse.service")),
                  "journal: 'shutting down'")

        # The socket alone: the service starts at the first connection.
        c.sh("systemctl start diskpulse.socket")
        pkg.check(c.show("diskpulse.service", "ActiveState").get("ActiveState") == "inactive",
                  "diskpulse.socket started alone; the service is not running")
        check_serving(c, "socket-activated")
        act = c.show("diskpulse.service", "ActiveState", "MainPID")
        pkg.check(act.get("ActiveState") == "active" and act.get("MainPID") not in ("0", main_pid),
                  "the first connection started diskpulse.service (MainPID %s)" % act.get("MainPID"))

        check_reset_recipe(c)

        # The example allow-list on the socket: 192.0.2.10 is let in, 192.0.2.20 is not.
        c.net("ip", "addr", "add", "192.0.2.10/32", "dev", "lo")
        c.net("ip", "addr", "add", "192.0.2.20/32", "dev", "lo")
        c.sh("mkdir -p /etc/systemd/system/diskpulse.socket.d && cp /usr/share/doc/diskpulse/examples/ip-allow.conf "
             "/etc/systemd/system/diskpulse.socket.d/ && systemctl daemon-reload && "
             "systemctl stop diskpulse.service diskpulse.socket && systemctl start diskpulse.socket")
        firewall = c.unified
        allowed = c.http("192.0.2.10", source="192.0.2.10")[0]
        local = c.http("127.0.0.1")[0]
        denied = c.http("192.0.2.10", source="192.0.2.20", timeout=3)[0]
        if firewall:
            pkg.check(allowed == "200" and local == "200", "ip-allow.conf: 192.0.2.10 and localhost get in (%s, %s)" % (allowed, local))
            pkg.check(denied.startswith("ERROR"), "ip-allow.conf: 192.0.2.20 is dropped (%s)" % denied)
        else:
            pkg.note("cgroup v1 only here, so no BPF IP filters: allow-list not tested (%s/%s/%s)"
                     % (allowed, local, denied))
        c.sh("rm -r /etc/systemd/system/diskpulse.socket.d && systemctl daemon-reload && "
             "systemctl stop diskpulse.service diskpulse.socket")

        # The service alone: it pulls its socket in (Requires=) and serves on it.
        rc, _, err = c.sh("systemctl start diskpulse.service")
        both = (c.show("diskpulse.service", "ActiveState").get("ActiveState"),
                c.show("diskpulse.socket", "ActiveState").get("ActiveState"))
        pkg.check(rc == 0 and both == ("active", "active"),
                  "systemctl start diskpulse.service starts the socket with it: %s %s" % (both, err.strip()))
        check_serving(c, "service started alone")
        check_postgresql_canary(c)

        # Maintainer scripts with systemd running: purge stops everything, install starts it.
        rc, out, err = c.sh("dpkg -P diskpulse", timeout=120)
        pkg.check(rc == 0, "dpkg -P with systemd running: exit %d %s" % (rc, err.strip()[-300:]))
        pkg.check(c.processes() == {}, "nothing of diskpulse runs after the purge")
        gone = c.show("diskpulse.service", "LoadState").get("LoadState")
        pkg.check(gone == "not-found", "the unit is gone for systemd (LoadState %s)" % gone)
        pkg.check(c.sh("test -e /var/lib/diskpulse")[0] != 0, "the state directory is gone after the purge")
        rc, out, err = c.sh("dpkg -i /root/diskpulse.deb", timeout=120)
        pkg.check(rc == 0, "dpkg -i with systemd running: exit %d %s" % (rc, err.strip()[-300:]))
        started = c.show("diskpulse.service", "ActiveState")
        pkg.check(started.get("ActiveState") == "active", "the postinst started diskpulse.service (%s)" % started)
        check_serving(c, "after dpkg -i")
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


if __name__ == "__main__":  # tests/runbook boots its own container with Container
    main()
