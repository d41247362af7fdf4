#!/usr/bin/env python3
"""Least privilege (SPEC §5) of the real daemon: every thread of the main process holds no
capability and has no_new_privs; its device-I/O helper child holds exactly CAP_SYS_ADMIN and
CAP_SYS_RAWIO (as root) and nothing else open; so does its zygote child, the process that starts
helpers, with nothing open but stdio and its control socket. A helper that is killed is replaced
within seconds with the same capabilities, which shows on /metrics (diskpulse_helper_up,
diskpulse_helper_restarts_total). Helper and zygote die with the daemon (SIGTERM, within a second,
and SIGKILL); started as nobody, the daemon still serves. In every way of starting it as root
(from a shell, socket activation by systemd-socket-activate, --once, --check-config, a bad config
file) every open of the config file is held (fanotify), so that each process that opens it to
parse it is caught in the act: it holds no capability at all (effective, permitted, bounding, ambient, inheritable 0,
NoNewPrivs 1), while the helper and its zygote hold theirs.

The daemon starts its zygote and helper whoever starts it (with capabilities or as nobody, then
holding none), so a missing helper or zygote is a failure, never a skip: a daemon that stops
starting its helper still serves (without SMART, saying so in its log), and only this test would
see it. The checks as root need root with CAP_SYS_ADMIN, CAP_SYS_RAWIO and CAP_SETPCAP (CI has
them); without them those checks are left out and said so, and the run as an ordinary user still
requires the helper and its zygote. The only skip (77): processes cannot be looked at here (no /proc)."""
import ctypes
import os
import queue
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
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


def find_child(pid, comm, within=5.0, exclude=()):
    """A live child of pid named comm (and not in exclude), or None."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for k in children(pid):
            s = stat(k)
            if s and s[1] not in ("Z", "X") and s[0] == comm and k not in exclude:
                return k
        time.sleep(0.05)
    return None


def find_helper(pid, within=5.0, exclude=()):
    """The daemon's helper child (comm diskpulse-priv), or None."""
    return find_child(pid, "diskpulse-priv", within, exclude)


def find_zygote(pid, within=5.0):
    """The daemon's zygote child (comm diskpulse-zyg), or None."""
    return find_child(pid, "diskpulse-zyg", within)


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


def thread_names(pid):
    return [(status("/proc/%d/task/%s/status" % (pid, t)) or {}).get("Name") for t in os.listdir("/proc/%d/task" % pid)]


def check_main(pid, expect_bounding_empty):
    """Every thread holds no capability; returns the thread names."""
    tasks = os.listdir("/proc/%d/task" % pid)
    names = []
    for tid in tasks:
        st = status("/proc/%d/task/%s/status" % (pid, tid))
        if st is None:
            continue
        c = caps(st)
        names.append(st.get("Name"))
        name = "main process thread %s (%s)" % (tid, st.get("Name"))
        dp.check(c["CapEff"] == 0 and c["CapPrm"] == 0 and c["CapInh"] == 0 and c["CapAmb"] == 0,
                 "%s: no effective, permitted, inheritable, ambient capability %s" % (name, c))
        if expect_bounding_empty:
            dp.check(c["CapBnd"] == 0, "%s: empty bounding set (%x)" % (name, c["CapBnd"]))
        dp.check(st.get("NoNewPrivs") == "1", "%s: NoNewPrivs 1 (%s)" % (name, st.get("NoNewPrivs")))
    dp.check(len(tasks) >= 1, "main process has %d thread(s)" % len(tasks))
    return names


def fds_of(pid):
    try:
        return {int(f): os.readlink("/proc/%d/fd/%s" % (pid, f)) for f in os.listdir("/proc/%d/fd" % pid)}
    except (PermissionError, FileNotFoundError):
        return None


def check_privileged_child(who, st, expect):
    """The capabilities (expect: the effective, permitted and bounding sets) and the hardening of
    the helper or the zygote, who, from its /proc status st."""
    c = caps(st)
    dp.check(c["CapEff"] == expect, "%s CapEff %x == %x" % (who, c["CapEff"], expect))
    dp.check(c["CapPrm"] == expect, "%s CapPrm %x == %x" % (who, c["CapPrm"], expect))
    dp.check(c["CapInh"] == 0 and c["CapAmb"] == 0, "%s: nothing inheritable or ambient" % who)
    if expect:
        dp.check(c["CapBnd"] == expect, "%s bounding set %x == %x" % (who, c["CapBnd"], expect))
    dp.check(st.get("NoNewPrivs") == "1", "%s NoNewPrivs 1" % who)
    dp.check(st.get("Threads") == "1", "%s is single-threaded (%s)" % (who, st.get("Threads")))


def check_helper(helper, expect):
    st = status("/proc/%d/status" % helper)
    if not dp.check(st is not None, "helper %d alive" % helper):
        return
    check_privileged_child("helper", st, expect)
    fds = fds_of(helper)
    if fds is None:
        return
    extra = {fd: t for fd, t in fds.items()
             if fd > 2 and not (t.startswith("socket:") or t == "anon_inode:[signalfd]")}
    dp.check(not extra and len(fds) <= 5,
             "helper holds only stdio, its socket and a signalfd: %s" % sorted(fds.items()))


def check_zygote(zygote, daemon, expect):
    st = status("/proc/%d/status" % zygote)
    if not dp.check(st is not None, "zygote %d alive" % zygote):
        return
    dp.check(stat(zygote)[2] == daemon, "zygote is a child of the daemon")
    check_privileged_child("zygote", st, expect)
    fds = fds_of(zygote)
    if fds is not None:
        dp.check(sorted(fds) == [0, 1, 2, 3] and fds[3].startswith("socket:"),
                 "zygote holds only stdio and its control socket: %s" % sorted(fds.items()))


def metric(d, name):
    try:
        return dp.value(d.scrape(), name)
    except (OSError, AssertionError):
        return None


def restart_after_kill(d, helper, zygote, expect):
    """SIGKILLs the helper of a running daemon: a new one with the same capabilities comes, and
    /metrics says so."""
    dp.check(metric(d, "diskpulse_helper_restarts_total") == 0, "diskpulse_helper_restarts_total 0 at start")
    os.kill(helper, signal.SIGKILL)
    t0 = time.monotonic()
    seen_down = False
    up = restarts = None
    while time.monotonic() - t0 < 10:
        up, restarts = metric(d, "diskpulse_helper_up"), metric(d, "diskpulse_helper_restarts_total")
        seen_down = seen_down or up == 0
        if up == 1 and restarts == 1:
            break
        time.sleep(0.05)
    took = time.monotonic() - t0
    print("helper %d killed: /metrics shows a new one after %.2f s (saw helper_up 0: %s)" % (helper, took, seen_down))
    dp.check(up == 1 and restarts == 1 and took < 5,
             "SIGKILL of the helper: within 5 s diskpulse_helper_up 1 (%s) and diskpulse_helper_restarts_total 1 (%s)"
             % (up, restarts))
    new = find_helper(d.proc.pid, exclude=(helper,))
    if dp.check(new is not None and new != helper, "a new helper child runs (%s, was %d)" % (new, helper)):
        check_helper(new, expect)
    dp.check(find_zygote(d.proc.pid, 1.0) == zygote, "the same zygote")
    dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "serves /metrics after the restart")
    return new


def helper_missing(d, who):
    """Fails the test when the daemon d has no helper child: what its log says, then exit 1."""
    below = ["%d %s (parent %d)" % (k, s[0], s[2]) for k in tree(d.proc.pid)[1:] for s in [stat(k)] if s]
    dp.check(False, "%s: the daemon (pid %d) has a helper child diskpulse-priv within 5 s (processes "
             "below it: %s)" % (who, d.proc.pid, below or "none"))
    print("daemon log:\n" + d.output())
    dp.finish()


def as_root(flags):
    with dp.Daemon(BIN, *flags) as d:
        helper = find_helper(d.proc.pid)
        if helper is None:
            helper_missing(d, "as root")
        zygote = find_zygote(d.proc.pid)
        print("daemon %d, helper %d (%s), zygote %s" % (d.proc.pid, helper, stat(helper)[0], zygote))
        if "--state.directory" in " ".join(flags):
            dp.wait_until(lambda: "dp-canary" in thread_names(d.proc.pid), 5)
        names = check_main(d.proc.pid, expect_bounding_empty=True)
        dp.check("dp-canary" in names, "the canary's prober thread is among them (threads: %s)" % sorted(set(names)))
        check_helper(helper, HELPER_CAPS)
        if dp.check(zygote is not None, "the daemon has a zygote child (diskpulse-zyg)"):
            check_zygote(zygote, d.proc.pid, HELPER_CAPS)
        dp.check(dp.http_get(d.url + "/metrics")[0] == 200, "serves /metrics")
        if zygote:
            helper = restart_after_kill(d, helper, zygote, HELPER_CAPS) or helper
            check_main(d.proc.pid, expect_bounding_empty=True)
        rc, took = d.stop()
        dp.check(rc == 0, "SIGTERM: exit status 0 (%s)" % rc)
        dp.check(took < 1.0, "SIGTERM: exits within 1 s (%.3f s)" % took)
        dp.check(gone(helper, 2.0), "SIGTERM: the helper is gone too")
        if zygote:
            dp.check(gone(zygote, 2.0), "SIGTERM: the zygote is gone too")

    # SIGKILL leaves no time for cleanup: PR_SET_PDEATHSIG must take helper and zygote down.
    with dp.Daemon(BIN, *flags) as d:
        helper = find_helper(d.proc.pid)
        zygote = find_zygote(d.proc.pid)
        dp.check(helper is not None, "second daemon has a helper")
        dp.check(zygote is not None, "second daemon has a zygote")
        d.proc.kill()
        d.proc.wait()
        if helper:
            dp.check(gone(helper, 2.0), "SIGKILL of the daemon: the helper dies with it")
        if zygote:
            dp.check(gone(zygote, 2.0), "SIGKILL of the daemon: the zygote dies with it")


def check_bounding(who, pid, expect):
    """check_privileged_child() leaves out an empty bounding set; here it is checked always."""
    st = status("/proc/%d/status" % pid)
    if dp.check(st is not None, "%s %d alive" % (who, pid)):
        dp.check(caps(st)["CapBnd"] == expect, "%s bounding set %x == %x" % (who, caps(st)["CapBnd"], expect))


def drops_unneeded(flags):
    """The helper and the zygote keep only what the enabled collectors need: SMART off, no
    CAP_SYS_RAWIO (CAP_SYS_ADMIN stays for biolatency's BPF loader); biolatency off too, nothing
    at all; the same for the helper the zygote starts after one was killed; and a reload that
    turns SMART on is refused that collector, which needs a restart."""
    for extra, expect, what in (
            (["--no-collector.smart"], 1 << CAP_SYS_ADMIN, "SMART off"),
            (["--no-collector.smart", "--no-collector.biolatency"], 0, "SMART and biolatency off")):
        with dp.Daemon(BIN, *(flags + extra)) as d:
            helper, zygote = find_helper(d.proc.pid), find_zygote(d.proc.pid)
            if helper is None:
                helper_missing(d, what)
            print("%s: daemon %d, helper %d, zygote %s" % (what, d.proc.pid, helper, zygote))
            check_helper(helper, expect)
            check_bounding("%s: helper" % what, helper, expect)
            if dp.check(zygote is not None, "%s: the daemon has a zygote" % what):
                check_zygote(zygote, d.proc.pid, expect)
                check_bounding("%s: zygote" % what, zygote, expect)
                new = restart_after_kill(d, helper, zygote, expect)
                if new:
                    check_bounding("%s: restarted helper" % what, new, expect)
            m = d.scrape()
            dp.check(dp.value(m, "diskpulse_helper_up") == 1 and
                     dp.value(m, "diskpulse_collector_success", collector="diskstats") == 1 and
                     dp.value(m, "diskpulse_collector_success", collector="smart") is None,
                     "%s: /metrics served, the helper up, diskstats collected, no SMART" % what)
            if "--no-collector.biolatency" not in extra:
                # the loader keeps working with CAP_SYS_ADMIN alone: attached where this kernel
                # allows it, and never refused for a capability
                up = dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_io_latency_up") == 1, 20)
                log = d.output()
                dp.check(up or ("biolatency" in log and "Operation not permitted" not in log),
                         "%s: biolatency attached (%s) or not for a reason other than a capability: %s"
                         % (what, bool(up), [l for l in log.splitlines() if "biolatency" in l][:2]))

    # SMART turned on by a reload: the helper cannot regain CAP_SYS_RAWIO; the collector stays
    # off and the log says a restart is needed; everything else reloads.
    cfg_dir = tempfile.mkdtemp(prefix="diskpulse-priv-cfg-")
    cfg = os.path.join(cfg_dir, "diskpulse.conf")
    with open(cfg, "w") as f:
        f.write("no-collector.smart = true\nno-collector.biolatency = true\n")
    try:
        with dp.Daemon(BIN, *(flags + ["--config.file=" + cfg])) as d:
            helper = find_helper(d.proc.pid)
            if helper is None:
                helper_missing(d, "reload")
            with open(cfg, "w") as f:
                f.write("collector.smart = true\nno-collector.biolatency = true\n"
                        "collector.diskstats.device-include = ^no-such-device$\n")
            d.signal(signal.SIGHUP)
            warned = dp.wait_until(lambda: "until diskpulse is restarted" in d.output(), 10)
            line = [l for l in d.output().splitlines() if "until diskpulse is restarted" in l]
            dp.check(warned and "collector=smart" in line[0] and "CAP_SYS_RAWIO" in line[0],
                     "reload turning SMART on: the log says it needs a restart: %s" % line[:1])
            dp.check(dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_disk_devices") == 0, 10),
                     "the rest of that reload is applied (the device filter)")
            m = d.scrape()
            dp.check(dp.value(m, "diskpulse_collector_success", collector="smart") is None and
                     not [k for k in m if k[0].startswith("diskpulse_smart_")],
                     "and SMART stays off: no smart metric on the page")
            dp.check(dp.value(m, "diskpulse_config_reload_success") == 1,
                     "the reload itself succeeded (diskpulse_config_reload_success 1)")
            check_helper(helper, 0)
            check_bounding("after the reload: helper", helper, 0)
            zygote = find_zygote(d.proc.pid)
            if zygote:
                check_bounding("after the reload: zygote", zygote, 0)
    finally:
        shutil.rmtree(cfg_dir, ignore_errors=True)


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
        zygote = find_zygote(proc.pid)
        if dp.check(zygote is not None, "unprivileged daemon has its zygote"):
            check_zygote(zygote, proc.pid, 0)
    finally:
        if proc.poll() is None:
            dp.end_process(proc)
        log.close()


def tree(pid):
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return out


class OpenGate:
    """Holds every open(2) of one regular file in the kernel until the test lets it go
    (fanotify(7) FAN_OPEN_PERM, a permission event: the opener waits for this process's answer),
    so that the test sees which process opens the file and what it holds meanwhile. (A FIFO did
    this until the daemon refused every file it reads that is not a regular file.) This
    process's own opens, to write the file, are let through by the gate's thread."""

    FAN_CLOEXEC, FAN_NONBLOCK, FAN_CLASS_CONTENT = 0x01, 0x02, 0x04
    FAN_MARK_ADD, FAN_OPEN_PERM, FAN_ALLOW = 0x01, 0x00010000, 0x01
    EVENT = struct.Struct("<IBBHQii")  # struct fanotify_event_metadata
    RESPONSE = struct.Struct("<iI")    # struct fanotify_response

    def __init__(self, path, text):
        self.path = path
        self.write(text)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
        libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                       ctypes.c_char_p]
        self.fd = libc.fanotify_init(self.FAN_CLASS_CONTENT | self.FAN_CLOEXEC | self.FAN_NONBLOCK,
                                     os.O_RDONLY | os.O_CLOEXEC)
        if self.fd < 0 or libc.fanotify_mark(self.fd, self.FAN_MARK_ADD, self.FAN_OPEN_PERM, -100,
                                             path.encode()) < 0:
            e = ctypes.get_errno()
            raise OSError(e, "fanotify: " + os.strerror(e))
        self.held = queue.Queue()
        self.quit = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        poll = select.poll()
        poll.register(self.fd, select.POLLIN)
        while not self.quit:
            if not poll.poll(50):
                continue
            try:
                buf = os.read(self.fd, 4096)
            except BlockingIOError:
                continue
            off = 0
            while off + self.EVENT.size <= len(buf):
                length, _, _, _, _, fd, pid = self.EVENT.unpack_from(buf, off)
                off += length
                if pid == os.getpid():
                    self._answer(fd)
                else:
                    self.held.put((pid, fd))

    def _answer(self, fd):
        os.write(self.fd, self.RESPONSE.pack(fd, self.FAN_ALLOW))
        os.close(fd)

    def write(self, text):
        with open(self.path, "w") as f:
            f.write(text)

    def opener(self, root, within=10.0):
        """The process below root (root included) held opening the file, or None. Held opens
        of other processes are let go."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                pid, fd = self.held.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if pid in tree(root):
                self.pending = fd
                return pid
            self._answer(fd)
        return None

    def release(self, text):
        """Writes text into the file and lets the held open go on."""
        self.write(text)
        fd, self.pending = self.pending, None
        self._answer(fd)

    def close(self):
        self.quit = True
        self.thread.join()
        while not self.held.empty():
            self._answer(self.held.get()[1])
        os.close(self.fd)


def holds_nothing(pid, what):
    """Every thread of pid holds no capability in any set and has NoNewPrivs."""
    ok = True
    for tid in os.listdir("/proc/%d/task" % pid):
        st = status("/proc/%d/task/%s/status" % (pid, tid))
        if st is None:
            continue
        c = caps(st)
        ok = ok and all(v == 0 for v in c.values()) and st.get("NoNewPrivs") == "1"
    dp.check(ok, "%s (pid %d): no capability in any set, NoNewPrivs 1 (%s)" % (what, pid, caps(status("/proc/%d/status" % pid) or {k: "0" for k in CAP_KEYS})))
    return ok


def diskpulse_root(root):
    """The daemon's own process below root: the first diskpulse with no diskpulse parent."""
    for p in tree(root):
        s = stat(p)
        if s and s[0] == "diskpulse" and (stat(s[2]) or ("",))[0] != "diskpulse":
            return p
    return None


def caught_parsing(proc_pid, gate, mode, text, expect_reparse=True):
    """Follows one start: the first reader of the config must be a child without capabilities
    while the daemon itself waits with them (and has no helper yet); with expect_reparse, the
    daemon then reads it again itself, by then without capabilities and with a helper and a
    zygote that hold theirs. Returns the daemon's pid."""
    reader = gate.opener(proc_pid)
    if not dp.check(reader is not None, "%s: a process opens the config file to parse it" % mode):
        return None
    daemon = diskpulse_root(proc_pid)
    dp.check(reader != daemon and stat(reader)[2] == daemon,
             "%s: the first reader is a child of the daemon (%s, daemon %s)" % (mode, reader, daemon))
    holds_nothing(reader, "%s: the process parsing flags and config at start" % mode)
    st = status("/proc/%d/status" % daemon)
    dp.check(st is not None and int(st["CapEff"], 16) != 0,
             "%s: meanwhile the daemon still holds its capabilities and parses nothing (%s)"
             % (mode, st and st["CapEff"]))
    dp.check(find_helper(daemon, 0.1) is None, "%s: no helper before the configuration is known" % mode)
    gate.release(text)
    if not expect_reparse:
        return daemon
    reader = gate.opener(proc_pid)
    if not dp.check(reader == daemon, "%s: then the daemon itself reads the config file (%s)" % (mode, reader)):
        return daemon
    holds_nothing(daemon, "%s: the daemon parsing the config file" % mode)
    helper, zygote = find_helper(daemon), find_zygote(daemon)
    if dp.check(helper is not None and zygote is not None, "%s: its helper and zygote run" % mode):
        for pid, name in ((helper, "helper"), (zygote, "zygote")):
            c = caps(status("/proc/%d/status" % pid))
            dp.check(c["CapEff"] == HELPER_CAPS and c["CapPrm"] == HELPER_CAPS,
                     "%s: the %s holds CAP_SYS_ADMIN and CAP_SYS_RAWIO (%x)" % (mode, name, c["CapEff"]))
    gate.release(text)
    return daemon


def start_modes(flags):
    """Every way of starting as root, caught while parsing."""
    tmp = tempfile.mkdtemp(prefix="diskpulse-priv-modes-")
    path = os.path.join(tmp, "diskpulse.conf")
    conf = "canary.interval = 1s\n"
    gate = OpenGate(path, conf)
    try:
        # from a shell
        port = dp.free_port()
        proc = subprocess.Popen([BIN, "--config.file=" + path, "--web.listen-address=127.0.0.1:%d" % port] + flags,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            daemon = caught_parsing(proc.pid, gate, "shell", conf)
            ok = dp.wait_until(lambda: dp.http_get("http://127.0.0.1:%d/-/healthy" % port, timeout=1)[0] == 200, 20)
            dp.check(ok, "shell: serves")
            if daemon and ok:
                check_main(daemon, expect_bounding_empty=True)
            proc.send_signal(signal.SIGHUP)  # a reload reads the file: the daemon, unprivileged
            reader = gate.opener(proc.pid)
            dp.check(reader == daemon, "shell: SIGHUP: the daemon reads the config again (%s)" % reader)
            if reader:
                holds_nothing(reader, "shell: the daemon parsing the config on SIGHUP")
                gate.release(conf)
        finally:
            proc.terminate()
            proc.wait(10)

        # socket activation: systemd-socket-activate starts it at the first connection
        activate = shutil.which("systemd-socket-activate")
        if activate:
            port = dp.free_port()
            proc = subprocess.Popen([activate, "-l", "127.0.0.1:%d" % port, BIN, "--web.systemd-socket",
                                     "--config.file=" + path] + flags,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                first = socket_connect(port)
                daemon = caught_parsing(proc.pid, gate, "socket activation", conf)
                ok = dp.wait_until(lambda: dp.http_get("http://127.0.0.1:%d/-/healthy" % port, timeout=2)[0] == 200, 20)
                dp.check(ok, "socket activation: serves on the passed socket")
                if daemon and ok:
                    check_main(daemon, expect_bounding_empty=True)
                    helper = find_helper(daemon)
                    if helper:
                        check_helper(helper, HELPER_CAPS)
                if first:
                    first.close()
            finally:
                proc.terminate()
                proc.wait(10)
        else:
            print("note: no systemd-socket-activate: socket activation not checked")

        # --once
        proc = subprocess.Popen([BIN, "--once", "--no-collector.canary", "--config.file=" + path] + flags,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            caught_parsing(proc.pid, gate, "--once", conf)
            out, _ = proc.communicate(timeout=60)
            dp.check(proc.returncode == 0 and "diskpulse_build_info" in out and not dp.expocheck.check(out),
                     "--once: exit 0 with a valid page (%s)" % proc.returncode)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

        # --check-config: only the child parses; nothing reads the file a second time
        proc = subprocess.Popen([BIN, "--check-config", "--config.file=" + path] + flags,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            caught_parsing(proc.pid, gate, "--check-config", conf, expect_reparse=False)
            out, _ = proc.communicate(timeout=20)
            dp.check(proc.returncode == 0 and "# configuration OK" in out and "canary.interval = 1s" in out,
                     "--check-config: exit 0, the effective configuration printed (%s)" % proc.returncode)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

        # a bad line: the child says so and the daemon exits 2 without reading anything itself
        proc = subprocess.Popen([BIN, "--config.file=" + path] + flags,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            caught_parsing(proc.pid, gate, "bad config", "canary.interval = 1s\nno equals sign\n",
                           expect_reparse=False)
            _, err = proc.communicate(timeout=20)
            dp.check(proc.returncode == 2 and "%s:2:" % path in err,
                     "bad config: exit 2 naming file:line (%s: %s)" % (proc.returncode, err.strip()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        gate.close()
        shutil.rmtree(tmp, ignore_errors=True)


def socket_connect(port):
    import socket
    for _ in range(100):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.05)
    return None


def main():
    me = status("/proc/self/status")
    if me is None or not os.path.isdir("/proc/%d/task" % os.getpid()):
        dp.skip("no /proc here: the processes and their capabilities cannot be looked at")
    flags = daemon_flags()
    need = HELPER_CAPS | (1 << CAP_SETPCAP)
    if os.geteuid() == 0 and (int(me["CapEff"], 16) & need) == need:
        as_root(flags)
        drops_unneeded(flags)
        start_modes(flags)
    else:
        print("note: not root with CAP_SYS_ADMIN, CAP_SYS_RAWIO, CAP_SETPCAP: root checks skipped")
        # Still started as this user, the daemon must have its helper (holding nothing): checked
        # here too, since the run as nobody below may be left out (no setpriv, no access).
        with dp.Daemon(BIN, *flags) as d:
            helper = find_helper(d.proc.pid)
            if helper is None:
                helper_missing(d, "as uid %d" % os.geteuid())
            dp.check(find_zygote(d.proc.pid) is not None, "as uid %d: the daemon has a zygote child" % os.geteuid())
    unprivileged(flags)
    dp.finish()


if __name__ == "__main__":
    main()
