"""Shared helpers of the end-to-end tests: run the real daemon, scrape it, parse and check pages."""
import errno
import fcntl
import glob
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import expocheck  # noqa: E402

SKIP = 77
FIXTURES = os.path.join(HERE, "..", "fixtures")
GOLDEN = os.path.join(HERE, "..", "golden")
LOOP_CONTROL = "/dev/loop-control"

_failures = []


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(SKIP)


def check(cond, what):
    """Records one assertion; prints it. The test fails at finish() if any failed."""
    print(("ok     " if cond else "FAILED ") + what)
    if not cond:
        _failures.append(what)
    return cond


def finish():
    if _failures:
        # Again at the end, where a long output's tail is what a reader sees first.
        print("%d check(s) failed:" % len(_failures))
        for what in _failures:
            print("  FAILED " + what)
        sys.exit(1)
    print("all checks passed")
    sys.exit(0)


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A port free on every address, IPv4 and IPv6, taken from outside the kernel's ephemeral
    range: a port the kernel hands out for bind(0) can be reused at once as the source port of
    some other test's outgoing connection, and a daemon listening on ":PORT" then finds it in use
    (seen with tests running side by side)."""
    lo, hi = _ephemeral_range()
    first, last = (1024, lo - 1) if lo - 1024 >= 4096 else (hi + 1, 65535)
    rnd = random.Random()
    for _ in range(200):
        port = rnd.randint(first, last)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s4:
                s4.bind(("0.0.0.0", port))
                if socket.has_ipv6:
                    try:
                        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s6:
                            s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                            s6.bind(("::", port))
                    except OSError as e:
                        if e.errno == errno.EADDRINUSE:
                            continue
            return port
        except OSError:
            continue
    raise RuntimeError("no free port in %d-%d" % (first, last))


def parse(text):
    """Parses an exposition into {(name, frozenset(labels.items())): value}; checks it strictly."""
    errors = expocheck.check(text)
    if errors:
        raise AssertionError("invalid exposition: %s" % errors[:5])
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        labels = {}
        if m.group(3):
            for k, v in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3)):
                labels[k] = v.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(4))
    return out


def value(metrics, name, **labels):
    """The value of the one series of name whose labels include labels, or None."""
    want = set(labels.items())
    found = [v for (n, ls), v in metrics.items() if n == name and want <= set(ls)]
    return found[0] if len(found) == 1 else None


def series(metrics, name):
    return {ls: v for (n, ls), v in metrics.items() if n == name}


def http_get(url, method="GET", timeout=5, headers=None):
    """Returns (status, headers dict, body bytes)."""
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def end_process(proc, sig=signal.SIGTERM, timeout=10):
    """Sends sig to proc and waits up to timeout seconds for it to exit, then kills it; returns
    its exit status."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def signal_exit_time(proc, sig=signal.SIGTERM, timeout=10):
    """Sends sig to proc and returns (exit status, seconds from the signal to the exit), killing
    it after timeout seconds. The exit is seen through a pidfd (poll(2) wakes at the exit), not
    by Popen.wait's polling, whose sleeps (up to 50 ms) and the test's own threads competing for
    the GIL would be counted as the daemon's time."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = None
    t0 = time.monotonic()
    proc.send_signal(sig)
    if fd is None:
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        return rc, time.monotonic() - t0
    try:
        import select
        p = select.poll()
        p.register(fd, select.POLLIN)
        exited = p.poll(timeout * 1000)
        took = time.monotonic() - t0
    finally:
        os.close(fd)
    if not exited:
        proc.kill()
    return proc.wait(), took


def ioping(path, interval, count):
    """Runs ioping -W (4 KiB writes) on path count times, interval apart (ioping's -i, a string);
    returns (the latencies in seconds, warm-up excluded; ioping's output)."""
    out = subprocess.run(["ioping", "-W", "-s", "4k", "-c", str(count + 1), "-i", interval, path],
                         check=True, capture_output=True, text=True).stdout
    v = []
    for line in out.splitlines():
        m = re.search(r"request=\d+ time=([\d.]+) (us|ms|s)\b", line)
        if m and "warmup" not in line:
            v.append(float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)])
    return v, out


def loop_test_binary(script, what):
    """The daemon binary named on the command line of script, a test that makes loop devices
    (what says which); exits with its usage when there is none, skips unless root and the loop
    driver are there."""
    if len(sys.argv) != 2:
        print("usage: %s DISKPULSE_BINARY" % script)
        sys.exit(2)
    if os.geteuid() != 0:
        skip("needs root (creates %s)" % what)
    if not os.path.exists(LOOP_CONTROL):
        skip(LOOP_CONTROL + " is missing (no loop driver)")
    return sys.argv[1]


# valgrind for the daemon: no leak, no memory error (exit 99), its helper's workers too (they
# are forks, which valgrind follows); libbpf's bpf(2) calls read to valgrind's model of the
# syscall as uninitialised (valgrind.supp says why).
VALGRIND = ["valgrind", "--quiet", "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
            "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=99",
            "--suppressions=" + os.path.join(HERE, "valgrind.supp")]


def valgrind_report(text):
    """valgrind's log without its notes about itself: syscalls and bpf(2) commands it does not
    know (pidfd_open, which the helper client tries before falling back; the commands libbpf
    uses to load and attach), which are about valgrind, not about memory."""
    return "\n".join(l for l in text.splitlines()
                     if not re.match(r"^--\d+-- (WARNING: unhandled amd64-linux syscall: 434|"
                                     r"WARNING: unhandled eBPF command|You may be able|"
                                     r"Read the file README_MISSING|Nevertheless we consider|it at http)", l))


def with_state_dir(args):
    """args plus a fresh --state.directory (the canary writes there) unless they name one;
    returns (args, the temp directory or None)."""
    if any(a.startswith("--state.directory") for a in args):
        return list(args), None
    d = tempfile.mkdtemp(prefix="diskpulse-state-")
    return list(args) + ["--state.directory=" + d], d


class Daemon:
    """The real binary on a random loopback port, with its own state directory unless args give
    one."""

    def __init__(self, binary, *args, port=None, env=None, on_spawn=None):
        """on_spawn, if given, is called with the Popen right after the spawn, before the daemon
        is healthy (a test can act on the process while it starts)."""
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        args, self.state_dir = with_state_dir(args)
        self.args = [binary, "--web.listen-address=127.0.0.1:%d" % self.port] + args
        e = dict(os.environ)
        e.update(env or {})
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "diskpulse-test-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=e)
        if on_spawn:
            on_spawn(self.proc)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("daemon exited with %s:\n%s" % (self.proc.returncode, self.output()))
            try:
                # A probe waits as long as the start may take: the daemon listens before its
                # first round and serves after it, and a probe given up (a start slower than its
                # timeout, as on a loaded machine under the sanitizers) would leave its request
                # in the backlog, to be counted (or refused at a limit of 1) like a client's.
                # If the daemon exits meanwhile, the probe gets a reset.
                if http_get(self.url + "/-/healthy", timeout=max(1.0, deadline - time.monotonic()))[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("daemon did not become healthy:\n" + self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def scrape_text(self):
        status, _, body = http_get(self.url + "/metrics")
        assert status == 200, status
        return body.decode("utf-8")

    def scrape(self):
        return parse(self.scrape_text())

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=10):
        """Sends SIGTERM; returns (exit status, seconds to the exit: signal_exit_time)."""
        return signal_exit_time(self.proc, timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.stop()
        self.log.close()
        if self.state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def run_once(binary, *args):
    """Runs --once; returns (exit status, stdout, stderr)."""
    args, state = with_state_dir(args)
    try:
        p = subprocess.run([binary, "--once"] + args, capture_output=True, text=True, timeout=60)
    finally:
        if state:
            shutil.rmtree(state, ignore_errors=True)
    return p.returncode, p.stdout, p.stderr


LOOP_CTL_ADD = 0x4C80
LOOP_CTL_REMOVE = 0x4C81


def loop_add(ctl, first, last):
    """Creates a loop device (LOOP_CTL_ADD on /dev/loop-control's fd ctl) with a free number in
    first..last; returns the number."""
    nums = [n for n in range(first, last + 1) if not os.path.exists("/sys/block/loop%d" % n)]
    random.shuffle(nums)
    for n in nums:
        try:
            return fcntl.ioctl(ctl, LOOP_CTL_ADD, n)
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise
    raise RuntimeError("no free loop device number in %d..%d" % (first, last))


def loop_remove(ctl, n, timeout=5.0):
    """LOOP_CTL_REMOVE, retried while the device is busy (briefly opened by someone)."""
    end = time.monotonic() + timeout
    while True:
        try:
            fcntl.ioctl(ctl, LOOP_CTL_REMOVE, n)
            return
        except OSError as e:
            if e.errno in (errno.ENODEV, errno.ENXIO):
                return
            if e.errno != errno.EBUSY or time.monotonic() > end:
                raise
            time.sleep(0.05)


class LoopFs:
    """An ext4 filesystem on a loop device over a sparse image, mounted on a temp directory
    (root only). .dev is "loopN", .mnt the mount point."""

    def __init__(self, size_mb=256, mkfs_args=(), mount_opts="", prefix="diskpulse-fs-"):
        self.tmp = tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR", "/var/tmp"))
        self.mnt = os.path.join(self.tmp, "mnt")
        self.mount_opts = mount_opts
        self.size_mb, self.mkfs_args = size_mb, list(mkfs_args)
        self.images = 0
        self.loop = None
        self.old_loops = []
        os.mkdir(self.mnt)
        try:
            self.make()
            self.mount()
        except BaseException:
            self.close()
            raise

    def make(self):
        """A new sparse image on a new loop device, with a new ext4 filesystem (not mounted)."""
        self.images += 1
        self.img = os.path.join(self.tmp, "img" if self.images == 1 else "img.%d" % self.images)
        with open(self.img, "wb") as f:
            f.truncate(self.size_mb * 1024 * 1024)
        self.loop = subprocess.run(["losetup", "-f", "--show", self.img], check=True, capture_output=True,
                                   text=True).stdout.strip()
        self.dev = os.path.basename(self.loop)
        subprocess.run(["mkfs.ext4", "-q", "-F"] + self.mkfs_args + [self.loop], check=True,
                       capture_output=True, text=True)

    def replace(self):
        """After umount(): a new, empty filesystem on a new image and loop device mounted at the
        same place, as a replaced disk would be. For a filesystem that cannot be mounted afresh:
        a process in a mount namespace made while it was mounted (another test's unshare or
        systemd-nspawn) holds its superblock, and mounting the same device gets that one back
        (shut down, say). The old device is detached when its last user lets go."""
        subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        self.old_loops.append(self.loop)
        self.loop = None
        self.make()
        self.mount()

    def mount(self):
        opts = ["-o", self.mount_opts] if self.mount_opts else []
        subprocess.run(["mount"] + opts + [self.loop, self.mnt], check=True, capture_output=True, text=True)

    def umount(self, timeout=10.0):
        """Unmounts, retrying while busy (a canary file may be open for a moment)."""
        end = time.monotonic() + timeout
        while True:
            r = subprocess.run(["umount", self.mnt], capture_output=True, text=True)
            if r.returncode == 0:
                return
            if time.monotonic() > end:
                raise RuntimeError("umount %s: %s" % (self.mnt, r.stderr.strip()))
            time.sleep(0.05)

    def close(self):
        subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        for loop in self.old_loops + ([self.loop] if self.loop else []):
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def sanitized(binary):
    """Whether binary is built with AddressSanitizer (whose quarantine keeps freed memory, and
    whose shadow memory multiplies RSS: memory bounds mean nothing there)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def need_loop_fs(*tools):
    """Skips (with the reason) unless this process can make the ext4-on-a-loop-device
    filesystems LoopFs makes: root, the tools (and any extra ones named), the loop driver, and
    the right to mount (a container has /dev without loop devices, or no CAP_SYS_ADMIN). It
    tries: a tiny LoopFs made and thrown away."""
    if os.geteuid() != 0:
        skip("needs root for loop devices and mounts")
    for tool in ("losetup", "mkfs.ext4", "mount") + tools:
        if not shutil.which(tool):
            skip("%s is not installed" % tool)
    if not os.path.exists("/dev/loop-control"):
        skip("no loop device support (/dev/loop-control is missing)")
    try:
        LoopFs(size_mb=4).close()
    except (subprocess.CalledProcessError, OSError) as e:
        why = getattr(e, "stderr", None) or str(e)
        skip("cannot make and mount a loop device here: %s" % (why.strip() if isinstance(why, str) else why))


def diskstats_field(name, index):
    """Field index (0-based after the name: 0 = reads completed, 14 = flushes completed) of
    name's /proc/diskstats line, or None."""
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if len(p) > 3 + index and p[2] == name:
                return int(p[3 + index])
    return None


def wait_until(pred, timeout, poll=0.05):
    """Calls pred() until it returns a true value or timeout passes; returns the last value."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(poll)


def fill_filesystem(path, name="filler"):
    """Fills the filesystem of path: one big file until ENOSPC, then 4 KiB and 1-byte files
    until ENOSPC (delayed allocation holds blocks back; FACTS.md), all named name*, so that a
    second call with another name tops a filesystem up. Returns the bytes written."""
    n = 0
    buf = b"\x5a" * (1 << 20)
    try:
        big = open(os.path.join(path, name), "wb", buffering=0)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        return 0  # too full for even a new file's directory entry
    with big as f:
        try:
            while True:
                n += f.write(buf)
        except OSError:
            pass
        try:
            os.fsync(f.fileno())
        except OSError:
            pass
    for size in (4096, 1):
        for i in range(100000):
            try:
                with open(os.path.join(path, "%s-%d-%d" % (name, size, i)), "wb") as f:
                    f.write(buf[:size])
                    f.flush()
                    os.fsync(f.fileno())
                n += size
            except OSError:
                break
    return n


def unfill_filesystem(path):
    for p in glob.glob(os.path.join(path, "filler*")):
        os.unlink(p)


def thread_cpus(pid):
    """{tid: (name, CPUs it may run on)} of pid's threads."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            name = open("/proc/%d/task/%s/comm" % (pid, t)).read().strip()
            status = open("/proc/%d/task/%s/status" % (pid, t)).read()
        except OSError:
            continue
        cpus = re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M).group(1)
        out[int(t)] = (name, cpus)
    return out


def shared_cpu_threads(pid):
    """The threads of pid that may run on one CPU only: [(name, cpu)]."""
    return sorted((name, cpus) for name, cpus in thread_cpus(pid).values() if cpus.isdigit())
