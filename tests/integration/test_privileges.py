#!/usr/bin/env python3
"""Least privilege (SPEC §5) of the real daemon: every thread of the main process holds no
capability and has no_new_privs; its device-I/O helper child holds exactly CAP_SYS_ADMIN and
CAP_SYS_RAWIO (as root) and nothing else open; the helper dies with the daemon (SIGTERM, SIGKILL);
started as nobody, the daemon still serves. Skips (77) while the daemon starts no helper."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dp

BIN = sys.argv[1]
CAP_SYS_RAWIO, CAP_SYS_ADMIN, CAP_SETPCAP = 17, 21, 8
HELPER_CAPS = (1 << CAP_SYS_ADMIN) | (1 << CAP_SYS_RAWIO)
CAP_KEYS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def status(path):
    """/proc/.../status as a dict of strings, or None when the process is gone."""
    try:
        with open(path) as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except (FileNotFoundError, ProcessLookupError):
        return None


def stat(pid):
    """(comm, state, ppid) of a process, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    comm = data[data.index("(") + 1:data.rindex(")")]
    fields = data[data.rindex(")") + 2:].split()
    return comm, fields[0], int(fields[1])


def children(pid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = stat(int(name))
            if s and s[2] == pid:
                out.append(int(name))
    return out


def find_helper(pid, within=5.0):
    """The daemon's helper child (comm diskpulse-priv, else any child), or None."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        kids = [k for k in children(pid) if stat(k) and stat(k)[1] != "Z"]
        named = [k for k in kids if stat(k) and stat(k)[0] == "diskpulse-priv"]
        if named or kids:
            return (named or kids)[0]
        time.sleep(0.1)
    return None


def gone(pid, within):
    """True when pid exits (or is a zombie) within the time."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        s = stat(pid)
        if s is None or s[1] in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def caps(st):
    return {k: int(st[k], 16) for k in CAP_KEYS}


def daemon_flags():
    """A private state directory when the daemon has the flag (nobody must be able to write it)."""
    flags = []
    help_text = subprocess.run([BIN, "--help"], capture_output=True, text=True).stdout
    if "--state.directory" in help_text:
        state = tempfile.mkdtemp(prefix="diskpulse-priv-state-")
        os.chmod(state, 0o777)
        flags.append("--state.directory=" + state)
    return flags


def check_main(pid, expect_bounding_empty):
    tasks = os.listdir("/proc/%d/task" % pid)
    for tid in tasks:
        st = status("/proc/%d/task/%s/status" % (pid, tid))
        if st is None:
            continue
        c = caps(st)
        name = "main process thread %s (%s)" % (tid, st.get("Name"))
        dp.check(c["CapEff"] == 0 and c["CapPrm"] == 0 and c["CapInh"] == 0 and c["CapAmb"] == 0,
                 "%s: no effective, permitted, inheritable, ambient capability %s" % (name, c))
        if expect_bounding_empty:
            dp.check(c["CapBnd"] == 0, "%s: empty bounding set (%x)" % (name, c["CapBnd"]))
        dp.check(st.get("NoNewPrivs") == "1", "%s: NoNewPrivs 1 (%s)" % (name, st.get("NoNewPrivs")))
    dp.check(len(tasks) >= 1, "main process has %d thread(s)" % len(tasks))


def check_helper(helper, expect):
    st = status("/proc/%d/status" % helper)
    if not dp.check(st is not None, "helper %d alive" % helper):
        return
    c = caps(st)
    dp.check(c["CapEff"] == expect, "helper CapEff %x == %x" % (c["CapEff"], expect))
    dp.check(c["CapPrm"] == expect, "helper CapPrm %x == %x" % (c["CapPrm"], expect))
    dp.check(c["CapInh"] == 0 and c["CapAmb"] == 0, "helper: nothing inheritable or ambient")
    if expect:
        dp.check(c["CapBnd"] == expect, "helper bounding set %x == %x" % (c["CapBnd"], expect))
    dp.check(st.get("NoNewPrivs") == "1", "helper NoNewPrivs 1")
    dp.check(st.get("Threads") == "1", "helper is single-threaded (%s)" % st.get("Threads"))
    try:
        fds = {int(f): os.readlink("/proc/%d/fd/%s" % (helper, f)) for f in os.listdir("/proc/%d/fd" % helper)}
    except (PermissionError, FileNotFoundError):
        return
    extra = {fd: t for fd, t in fds.items()
             if fd > 2 and not (t.startswith("socket:") or t == "anon_inode:[signalfd]")}
    dp.check(not extra and len(fds) <= 5,
             "helper holds only stdio, its socket and a signalfd: %s" % sorted(fds.items()))


def as_root(flags):
    with dp.Daemon(BIN, *flags) as d:
        helper = find_helper(d.proc.pid)
        if helper is None:
            dp.skip("the daemon started no helper child process (privsep not wired in yet)")
        print("daemon %d, helper %d (%s)" % (d.proc.pid, helper, stat(helper)[0]))
        check_main(d.proc.pid, expect_bounding_empty=True)
        check_helper(helper, HELPER_CAPS)
        dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "serves /metrics")
        rc, took = d.stop()
        dp.check(rc == 0, "SIGTERM: exit status 0 (%s)" % rc)
        dp.check(gone(helper, 2.0), "SIGTERM: the helper is gone too")

    # SIGKILL leaves no time for cleanup: PR_SET_PDEATHSIG must take the helper down.
    with dp.Daemon(BIN, *flags) as d:
        helper = find_helper(d.proc.pid)
        dp.check(helper is not None, "second daemon has a helper")
        d.proc.kill()
        d.proc.wait()
        if helper:
            dp.check(gone(helper, 2.0), "SIGKILL of the daemon: the helper dies with it")


def unprivileged(flags):
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and not setpriv:
        print("note: no setpriv, the unprivileged run is skipped")
        return
    if os.geteuid() == 0:
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
        if subprocess.run(prefix + [BIN, "--version"], capture_output=True).returncode != 0:
            print("note: nobody cannot run %s (directory permissions?): unprivileged run skipped" % BIN)
            return
    else:
        prefix = []
    port = dp.free_port()
    url = "http://127.0.0.1:%d" % port
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(prefix + [BIN, "--web.listen-address=127.0.0.1:%d" % port] + flags,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        healthy = False
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None and not healthy:
            try:
                healthy = dp.http_get(url + "/-/healthy", timeout=1)[0] == 200
            except OSError:
                time.sleep(0.05)
        log.seek(0)
        dp.check(healthy, "unprivileged daemon becomes healthy" + ("" if healthy else ":\n" + log.read()))
        if not healthy:
            return
        st, _, body = dp.http_get(url + "/metrics")
        dp.check(st == 200 and not dp.expocheck.check(body.decode()), "unprivileged daemon serves a valid page")
        check_main(proc.pid, expect_bounding_empty=False)
        helper = find_helper(proc.pid)
        dp.check(helper is not None, "unprivileged daemon has its helper")
        if helper:
            check_helper(helper, 0)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def main():
    flags = daemon_flags()
    me = status("/proc/self/status")
    need = HELPER_CAPS | (1 << CAP_SETPCAP)
    if os.geteuid() == 0 and (int(me["CapEff"], 16) & need) == need:
        as_root(flags)
    else:
        print("note: not root with CAP_SYS_ADMIN, CAP_SYS_RAWIO, CAP_SETPCAP: root checks skipped")
        with dp.Daemon(BIN, *flags) as d:
            if find_helper(d.proc.pid) is None:
                dp.skip("the daemon started no helper child process (privsep not wired in yet)")
    unprivileged(flags)
    dp.finish()


if __name__ == "__main__":
    main()
