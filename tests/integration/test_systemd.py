#!/usr/bin/env python3
"""What the systemd unit relies on. Socket activation as diskpulse.socket does it: two sockets
passed by systemd-socket-activate (IPv4 and IPv6) both serve, and the config file's listen
address is not bound. The notify protocol on a test NOTIFY_SOCKET: READY=1 and STATUS= once
serving, WATCHDOG=1 at most half of WATCHDOG_USEC apart (also when the loop has nothing else to
do), none for a WATCHDOG_PID that is another process, and none while the main loop is stalled
(its thread alone stopped), resuming when it runs again.
(One passed socket, --web.systemd-socket and STOPPING=1 are in test_http.py.)"""
import ctypes
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import dp

BIN = sys.argv[1]
FIXTURE = os.path.join(dp.FIXTURES, "linux-6.1")
WATCHDOG_USEC = 2000000
HALF = WATCHDOG_USEC / 2e6


class Notify:
    """A NOTIFY_SOCKET that records (monotonic time, message) from a thread."""

    def __init__(self, tmp):
        self.path = os.path.join(tmp, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.msgs = []
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            now = time.monotonic()
            for line in data.decode(errors="replace").splitlines():
                self.msgs.append((now, line))

    def times(self, what):
        return [t for t, m in list(self.msgs) if m == what]

    def wait_for(self, what, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(m == what or m.startswith(what) for _, m in list(self.msgs)):
                return True
            time.sleep(0.02)
        return False

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def start(tmp, notify, *args, env=None):
    e = dict(os.environ, NOTIFY_SOCKET=notify.path, WATCHDOG_USEC=str(WATCHDOG_USEC))
    e.pop("WATCHDOG_PID", None)
    e.update(env or {})
    port = dp.free_port()
    log = open(os.path.join(tmp, "log-%d" % port), "w+")
    p = subprocess.Popen([BIN, "--web.listen-address=127.0.0.1:%d" % port,
                          "--state.directory=" + os.path.join(tmp, "state"), "--no-collector.smart",
                          "--no-collector.canary", "--path.sysfs=" + os.path.join(FIXTURE, "sys"),
                          "--path.udev.data=" + os.path.join(tmp, "no-udev")] + list(args),
                         stdout=log, stderr=subprocess.STDOUT, env=e)
    return p, log


def stop(p, log):
    dp.end_process(p, timeout=5)
    log.seek(0)
    return log.read()


def gaps(times):
    return [b - a for a, b in zip(times, times[1:])]


def pings_within_half(tmp, label, *args):
    """Over 7 s the pings come at most half of WATCHDOG_USEC apart, the first one at most that
    long after READY=1."""
    n = Notify(tmp)
    p, log = start(tmp, n, "--path.procfs=" + os.path.join(FIXTURE, "proc"), *args)
    try:
        ready = n.wait_for("READY=1", 15)
        dp.check(ready, "%s: READY=1" % label)
        dp.check(n.wait_for("STATUS=Monitoring ", 5), "%s: STATUS=Monitoring ... sent" % label)
        time.sleep(7)
        t_ready = n.times("READY=1")[:1]
        pings = n.times("WATCHDOG=1")
        g = gaps(t_ready + pings)
        dp.check(len(pings) >= 7, "%s: %d WATCHDOG=1 pings in 7 s (WATCHDOG_USEC %.1f s)"
                 % (label, len(pings), WATCHDOG_USEC / 1e6))
        dp.check(g and max(g) <= HALF, "%s: pings at most %.2f s apart (half of WATCHDOG_USEC): "
                 "longest %.3f s, mean %.3f s" % (label, HALF, max(g or [0]), sum(g or [0]) / max(1, len(g))))
    finally:
        out = stop(p, log)
        n.close()
    dp.check(p.returncode == 0, "%s: exit status 0 (%s)" % (label, out.strip()[-200:]))


def other_pid(tmp):
    """WATCHDOG_PID names another process: the watchdog is not meant for this one."""
    n = Notify(tmp)
    p, log = start(tmp, n, "--path.procfs=" + os.path.join(FIXTURE, "proc"), env={"WATCHDOG_PID": "1"})
    try:
        dp.check(n.wait_for("READY=1", 15), "WATCHDOG_PID=1: READY=1")
        time.sleep(2.5)
        dp.check(n.times("WATCHDOG=1") == [], "WATCHDOG_PID=1: no pings (%d)" % len(n.times("WATCHDOG=1")))
    finally:
        stop(p, log)
        n.close()


# ptrace(2) requests (<sys/ptrace.h>) and waitpid's __WALL (<linux/wait.h>)
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WALL = 0x40000000


def ptrace(request, tid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    if libc.ptrace(request, tid, None, None) < 0:
        e = ctypes.get_errno()
        raise OSError(e, "ptrace: " + os.strerror(e))


def stop_thread(tid):
    """Stops one thread of a child process (PTRACE_SEIZE, PTRACE_INTERRUPT), its other threads
    running on, as a handler stuck in the kernel stops a main loop; returns once it has
    stopped. resume_thread() undoes it, from the same thread of the test."""
    ptrace(PTRACE_SEIZE, tid)
    ptrace(PTRACE_INTERRUPT, tid)
    os.waitpid(tid, WALL)


def resume_thread(tid):
    ptrace(PTRACE_DETACH, tid)


def thread_states(pid):
    """{thread name: [state letter, ...]} of a process, from /proc/PID/task/*/stat."""
    states = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        states.setdefault(name, []).append(stat[stat.rindex(")") + 2])
    return states


def stalled_loop(tmp):
    """The pings come from the main loop: while its thread alone is stopped (ptrace; the HTTP
    thread answers meanwhile, so the process runs on), none is sent, and they resume when it
    runs again. (The stall was a FIFO as /proc/diskstats, whose open() blocked the loop; the
    daemon refuses a FIFO now, as every file it reads that is not a regular file.)"""
    n = Notify(tmp)
    p, log = start(tmp, n, "--path.procfs=" + os.path.join(FIXTURE, "proc"), "--diskstats.interval=200ms",
                   "--diskstats.sampling=fixed")
    url = "http://" + [a for a in p.args if a.startswith("--web.listen-address=")][0].split("=", 1)[1]
    stopped = False
    try:
        dp.check(n.wait_for("READY=1", 15), "stall: READY=1")
        time.sleep(3)
        before = n.times("WATCHDOG=1")
        g = gaps(before)
        dp.check(len(before) >= 3 and max(g) <= HALF, "stall: pings %.2f s apart at most before the stall "
                 "(%d pings, longest gap %.3f s)" % (HALF, len(before), max(g or [0])))

        try:
            stop_thread(p.pid)  # the main thread's id is the process's
            stopped = True
        except OSError as e:
            dp.check(False, "stall: the main thread can be stopped alone (%s)" % e)
            return
        t_stall = time.monotonic()
        states = thread_states(p.pid)
        try:
            st = dp.http_get(url + "/-/healthy", timeout=5)[0]
        except OSError as e:
            st = str(e)
        dp.check(st in (200, 503) and len(sum(states.values(), [])) > 1,
                 "stall: only the main thread stopped, the HTTP thread answers (%s; threads %s)" % (st, states))
        time.sleep(4)
        # A ping sent just before the stop may be read a moment after it.
        during = [t for t in n.times("WATCHDOG=1") if t > t_stall + 0.5]
        dp.check(during == [], "stall: no WATCHDOG=1 while the main loop is stopped (%d pings in "
                 "%.1f s)" % (len(during), time.monotonic() - t_stall - 0.5))
        dp.check(p.poll() is None, "stall: the daemon is still alive (stopped, not dead)")

        resume_thread(p.pid)
        stopped = False
        t_resume = time.monotonic()
        time.sleep(2.5)
        after = [t for t in n.times("WATCHDOG=1") if t > t_resume]
        dp.check(len(after) >= 2 and after[0] - t_resume <= HALF,
                 "stall: pings resume when the loop runs again (%d in 2.5 s, first after %.3f s)"
                 % (len(after), (after[0] - t_resume) if after else -1))
    finally:
        if stopped:
            resume_thread(p.pid)  # a stopped main loop would not see SIGTERM
        out = stop(p, log)
        n.close()
    dp.check(p.returncode == 0, "stall: exit status 0 after SIGTERM (%s)" % out.strip()[-200:])


def socket_activation(tmp):
    """diskpulse.socket's way: sockets from systemd, a config file naming an address of its own."""
    activate = shutil.which("systemd-socket-activate")
    if not activate:
        print("note: systemd-socket-activate missing (Debian package systemd); not tested")
        return
    p4, p6, own = dp.free_port(), dp.free_port(), dp.free_port()
    conf = os.path.join(tmp, "diskpulse.conf")
    with open(conf, "w") as f:
        f.write("web.listen-address = 127.0.0.1:%d\n" % own)
    n = Notify(tmp)
    log = open(os.path.join(tmp, "log"), "w+")
    cmd = [activate, "-l", "127.0.0.1:%d" % p4, "-l", "[::1]:%d" % p6, "-E", "NOTIFY_SOCKET=" + n.path,
           BIN, "--config.file=" + conf, "--state.directory=" + os.path.join(tmp, "state"),
           "--no-collector.smart", "--no-collector.canary"]
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        # systemd-socket-activate starts the daemon at the first connection, as systemd would.
        st4 = st6 = None
        deadline = time.monotonic() + 15
        while st4 is None and time.monotonic() < deadline:
            try:
                st4 = dp.http_get("http://127.0.0.1:%d/metrics" % p4, timeout=10)[0]
            except OSError:
                time.sleep(0.05)
        dp.check(st4 == 200, "socket activation: the first connection (127.0.0.1) started the daemon "
                 "and was answered")
        try:
            st6 = dp.http_get("http://[::1]:%d/metrics" % p6, timeout=5)[0]
        except OSError as e:
            st6 = str(e)
        dp.check(st6 == 200, "socket activation: the second passed socket ([::1]) serves too (%s)" % st6)
        dp.check(n.wait_for("READY=1", 5), "socket activation: READY=1")
        with socket.socket() as c:
            refused = c.connect_ex(("127.0.0.1", own)) != 0
        dp.check(refused, "socket activation: the config file's listen address is not bound")
        log.flush()
        log.seek(0)
        out = log.read()
        dp.check("address=127.0.0.1:%d" % p4 in out and "address=[::1]:%d" % p6 in out,
                 "socket activation: both passed sockets logged as listening")
    finally:
        if p.poll() is None:
            dp.end_process(p, timeout=5)
        log.close()
        n.close()
    dp.check(p.returncode == 0, "socket activation: exit status 0 after SIGTERM")


def passed_socket_survives(tmp):
    """systemd keeps the listening socket across service restarts: the daemon must close its copy
    on exit, never shut it down (that fails diskpulse.socket with POLLHUP, and a stopped service
    is not activated again). Here this test plays systemd: it holds the socket, passes it as fd 3
    to two daemons in turn, and looks at it after each exit."""
    import select
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    port = lsock.getsockname()[1]

    def to_fd3():
        os.dup2(lsock.fileno(), 3)
        os.set_inheritable(3, True)

    for run in (1, 2):
        log = open(os.path.join(tmp, "log%d" % run), "w+")
        p = subprocess.Popen(["/bin/sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"', BIN,
                              "--state.directory=" + os.path.join(tmp, "state"), "--no-collector.smart",
                              "--no-collector.canary"], preexec_fn=to_fd3, close_fds=False,
                             stdout=log, stderr=subprocess.STDOUT)
        st = None
        deadline = time.monotonic() + 15
        while st is None and time.monotonic() < deadline and p.poll() is None:
            try:
                st = dp.http_get("http://127.0.0.1:%d/-/healthy" % port, timeout=5)[0]
            except OSError:
                time.sleep(0.05)
        dp.check(st == 200, "passed socket, daemon %d: serves on it" % run)
        p.terminate()
        p.wait(10)
        log.close()
        dp.check(p.returncode == 0, "passed socket, daemon %d: exit status 0" % run)
        po = select.poll()
        po.register(lsock, select.POLLIN | select.POLLHUP)
        events = po.poll(0)
        hup = any(ev & select.POLLHUP for _, ev in events)
        dp.check(not hup, "passed socket, daemon %d gone: the socket is not shut down (poll %s)" % (run, events))
        with socket.socket() as c:
            c.settimeout(2)
            queued = c.connect_ex(("127.0.0.1", port)) == 0
        dp.check(queued, "passed socket, daemon %d gone: connections still queue for the next one" % run)
        # Drop the connection queued while no daemon ran.
        lsock.settimeout(1)
        try:
            lsock.accept()[0].close()
        except OSError:
            pass
    lsock.close()


def main():
    tmp = tempfile.mkdtemp(prefix="diskpulse-notify-")
    try:
        for sub in ("a", "b", "c", "d", "e", "f", "g"):
            os.mkdir(os.path.join(tmp, sub))
        socket_activation(os.path.join(tmp, "e"))
        passed_socket_survives(os.path.join(tmp, "f"))
        pings_within_half(os.path.join(tmp, "a"), "1 s sampling", "--diskstats.sampling=fixed")
        # Sampling that follows scrapes, none coming: a round a minute, the pings on their own.
        pings_within_half(os.path.join(tmp, "g"), "no scraper (scrape sampling)")
        # Sampling once an hour: the loop has no other reason to wake up than the pings.
        pings_within_half(os.path.join(tmp, "b"), "idle loop (1 h sampling)", "--diskstats.interval=1h",
                          "--diskstats.window=1h")
        other_pid(os.path.join(tmp, "c"))
        stalled_loop(os.path.join(tmp, "d"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    dp.finish()


main()
