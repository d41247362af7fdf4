"""The biolatency collector end to end on this host (root, a kernel with BTF): a known number of
direct reads and writes, a flush and a discard on a loop device over tmpfs are counted in
diskpulse_io_device_latency_seconds (and reads and writes in diskpulse_io_queue_latency_seconds)
exactly as the kernel's own counters in /proc/diskstats count the requests; the histograms are well formed (cumulative buckets, +Inf equal to _count, the canary's
bounds among the "le"); device time on a loop over tmpfs is microseconds. Started as nobody (no
privilege to load BPF), the daemon says why in diskpulse_io_latency_up 0 and a log line, and serves
everything else, and so it does when the kernel's BTF cannot be read; --no-collector.biolatency has none of the collector's families.

Skips (exit 77) when not root, without kernel BTF, without losetup/blkdiscard, or when the binary
was built without BPF support (its log says so)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import dp

BIN = sys.argv[1]
READS, WRITES = 1500, 700
DEV_FAMILY = "diskpulse_io_device_latency_seconds"
QUEUE_FAMILY = "diskpulse_io_queue_latency_seconds"
# The canary's bucket bounds: the collector's default ones are among them (as the same "le" text).
CANARY_LE = ["1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
             "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10"]
# The collector's default classic bounds (--biolatency.buckets), 50 ms (the alert's) among them.
DEFAULT_LE = ["5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
              "0.1", "0.25", "1", "+Inf"]


def need():
    if os.geteuid() != 0:
        dp.skip("needs root (loop devices, and the helper's privilege to load BPF)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        dp.skip("the kernel has no BTF (/sys/kernel/btf/vmlinux): the collector cannot load here")
    for tool in ("losetup", "blkdiscard", "dd"):
        if not shutil.which(tool):
            dp.skip("%s is not installed" % tool)
    if not os.path.exists(dp.LOOP_CONTROL):
        dp.skip("no loop device support")


def stat_fields(dev):
    with open("/proc/diskstats") as f:
        for line in f:
            w = line.split()
            if len(w) > 3 and w[2] == dev:
                return tuple(w[3:])
    return None


# Completed requests in /proc/diskstats' fields (after the name): reads, writes, discards, flushes.
KERNEL_FIELD = {"read": 0, "write": 4, "discard": 11, "flush": 15}


def kernel_count(before, after, op):
    i = KERNEL_FIELD[op]
    return int(after[i]) - int(before[i])


def settle(dev, quiet=0.5, timeout=20):
    """Waits until nothing else (udev's probing after losetup) does I/O on dev for quiet s."""
    last, since, end = stat_fields(dev), time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.05)
        cur = stat_fields(dev)
        if cur != last:
            last, since = cur, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise RuntimeError("%s did not become idle" % dev)


def hist(metrics, family, dev, op):
    """{le: cumulative count}, _count, _sum of one histogram, or None when it is not on the page."""
    buckets = {}
    for ls, v in dp.series(metrics, family + "_bucket").items():
        d = dict(ls)
        if d.get("device") == dev and d.get("op") == op:
            buckets[d["le"]] = v
    if not buckets:
        return None
    return buckets, dp.value(metrics, family + "_count", device=dev, op=op), \
        dp.value(metrics, family + "_sum", device=dev, op=op)


def count(metrics, family, dev, op):
    h = hist(metrics, family, dev, op)
    return h[1] if h else 0


def well_formed(h, what, les_wanted=None):
    buckets, cnt, total = h
    les = sorted(buckets, key=lambda x: float(x))
    vals = [buckets[le] for le in les]
    dp.check(les[-1] == "+Inf" and vals[-1] == cnt, "%s: +Inf bucket equals _count (%s)" % (what, cnt))
    dp.check(all(a <= b for a, b in zip(vals, vals[1:])), "%s: buckets are cumulative" % what)
    les_wanted = les_wanted or DEFAULT_LE
    dp.check(les == les_wanted, "%s: the buckets are %s (%s)" % (what, ",".join(les_wanted), ",".join(les)))
    dp.check(all(le in CANARY_LE for le in les if le != "+Inf") or les_wanted != DEFAULT_LE,
             "%s: every default bound is a canary bound" % what)
    dp.check(total is not None and total >= 0, "%s: _sum %s" % (what, total))


def quantile(h, q):
    """The bound of the first bucket holding the q-quantile (what histogram_quantile lands in)."""
    buckets, cnt, _ = h
    for le in sorted(buckets, key=lambda x: float(x)):
        if buckets[le] >= q * cnt:
            return float(le)
    return float("inf")


def delta(before, after, family, dev, op):
    return count(after, family, dev, op) - count(before, family, dev, op)


def privileged_run(loop, dev):
    # Rounds every 100 ms: a scrape shows what happened up to 100 ms before it, so that the
    # counts compare with /proc/diskstats read at the same moment once the device is quiet.
    flags = ["--collector.diskstats.device-include=^%s$" % dev, "--no-collector.smart", "--no-collector.canary",
             "--diskstats.interval=100ms", "--biolatency.queue-ops=read,write,flush,discard"]
    with dp.Daemon(BIN, *flags) as d:
        # Loading happens in the helper's worker: BTF parsing and the verifier take a moment,
        # several times longer under the sanitizers.
        up = dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_io_latency_up") == 1, 60)
        if not up:
            log = d.output()
            if "without BPF support" in log:
                dp.skip("this binary was built without BPF support: " + log.strip().splitlines()[-1])
            dp.check(False, "diskpulse_io_latency_up becomes 1 within 60 s (log:\n%s)" % log)
            return
        dp.check(True, "diskpulse_io_latency_up 1: the programs are attached")
        settle(dev)
        before, before_k = d.scrape(), stat_fields(dev)
        subprocess.run(["dd", "if=" + loop, "of=/dev/null", "bs=4k", "count=%d" % READS, "iflag=direct"],
                       check=True, capture_output=True)
        subprocess.run(["dd", "if=/dev/zero", "of=" + loop, "bs=4k", "count=%d" % WRITES, "seek=4096",
                        "oflag=direct", "conv=notrunc"], check=True, capture_output=True)
        fd = os.open(loop, os.O_WRONLY)
        try:
            os.fsync(fd)  # a flush request: the loop device has a volatile write cache
        finally:
            os.close(fd)
        subprocess.run(["blkdiscard", "-o", "0", "-l", str(1 << 20), loop], check=True, capture_output=True)

        # udev probes the device again (reads) once a writer closes it, maybe late on a busy
        # machine: what the kernel's own counters say happened is what the histograms must count,
        # compared until they agree (a round, 100 ms, after the last I/O) or 20 s have passed.
        # The fsync's flush is an empty write with REQ_PREFLUSH: the kernel issues a flush
        # request for it (counted in flushes on both sides) and completes the empty write itself,
        # never issued to the driver. diskstats counts that write too; the collector, which
        # times what is issued, does not.
        def kernel_now():
            ks = {op: kernel_count(before_k, stat_fields(dev), op) for op in KERNEL_FIELD}
            ks["write"] -= ks["flush"]
            return ks

        def agree():
            ks = kernel_now()
            m = d.scrape()
            same = all(delta(before, m, fam, dev, op) == ks[op]
                       for fam in (DEV_FAMILY, QUEUE_FAMILY) for op in KERNEL_FIELD)
            return (m, ks) if same and ks == kernel_now() else None

        settle(dev)
        got = dp.wait_until(agree, 20)
        after, ks = got if got else (d.scrape(), kernel_now())
        print("kernel's counters for %s over the load (writes without the fsync's empty one): %s" % (dev, ks))
        for op, n in (("read", READS), ("write", WRITES), ("flush", 1), ("discard", 1)):
            dp.check(ks[op] >= n, "/proc/diskstats: %d %s requests at least (%d)" % (n, op, ks[op]))
        for op, n in ks.items():
            got = delta(before, after, DEV_FAMILY, dev, op)
            dp.check(got == n, "%s %s: %d, as /proc/diskstats (%d)" % (DEV_FAMILY, op, got, n))
        for op in KERNEL_FIELD:
            got = delta(before, after, QUEUE_FAMILY, dev, op)
            dp.check(got == ks[op], "%s %s: %d, as /proc/diskstats (%d)" % (QUEUE_FAMILY, op, got, ks[op]))
        for fam in (DEV_FAMILY, QUEUE_FAMILY):
            for op in ("read", "write"):
                h = hist(after, fam, dev, op)
                if dp.check(h is not None, "%s{device=%s,op=%s} is on the page" % (fam, dev, op)):
                    well_formed(h, "%s %s" % (fam, op))
        h = hist(after, DEV_FAMILY, dev, "read")
        if h:
            p50, p99 = quantile(h, 0.5), quantile(h, 0.99)
            mean = h[2] / h[1] if h[1] else 0
            print("loop over tmpfs, 4 KiB direct reads: device time p50 <= %g s, p99 <= %g s, mean %.2f us"
                  % (p50, p99, mean * 1e6))
            dp.check(1e-6 <= p50 <= 1e-3, "device time of a read on tmpfs is microseconds (p50 <= %g s)" % p50)
            dp.check(0 < mean < 1e-3, "its mean from _sum/_count too (%.2f us)" % (mean * 1e6))
        dp.check(dp.value(after, "diskpulse_collector_success", collector="biolatency") == 1,
                 "diskpulse_collector_success{collector=\"biolatency\"} 1")
        page = d.scrape_text()
        dp.check(not dp.expocheck.check(page), "the page is valid exposition text")


def custom_run(loop, dev):
    """Settings other than the defaults: two classic bounds, writes alone, no queue histogram. The
    write histogram still counts what /proc/diskstats counts, at exactly those buckets."""
    flags = ["--collector.diskstats.device-include=^%s$" % dev, "--no-collector.smart", "--no-collector.canary",
             "--diskstats.interval=100ms", "--biolatency.buckets=0.0002,0.3", "--biolatency.ops=write",
             "--biolatency.queue-ops="]
    with dp.Daemon(BIN, *flags) as d:
        if not dp.wait_until(lambda: dp.value(d.scrape(), "diskpulse_io_latency_up") == 1, 60):
            dp.check(False, "custom buckets: diskpulse_io_latency_up becomes 1 within 60 s (log:\n%s)" % d.output())
            return
        settle(dev)
        before, before_k = d.scrape(), stat_fields(dev)
        subprocess.run(["dd", "if=" + loop, "of=/dev/null", "bs=4k", "count=300", "iflag=direct"],
                       check=True, capture_output=True)
        subprocess.run(["dd", "if=/dev/zero", "of=" + loop, "bs=4k", "count=200", "seek=4096",
                        "oflag=direct", "conv=notrunc"], check=True, capture_output=True)
        settle(dev)

        def agree():
            n = kernel_count(before_k, stat_fields(dev), "write")
            m = d.scrape()
            return (m, n) if delta(before, m, DEV_FAMILY, dev, "write") == n else None

        got = dp.wait_until(agree, 20)
        after, n = got if got else (d.scrape(), kernel_count(before_k, stat_fields(dev), "write"))
        dp.check(n >= 200, "custom buckets: /proc/diskstats counted the 200 writes at least (%d)" % n)
        dp.check(delta(before, after, DEV_FAMILY, dev, "write") == n,
                 "custom buckets: %s write counts %d, as /proc/diskstats (%d)"
                 % (DEV_FAMILY, delta(before, after, DEV_FAMILY, dev, "write"), n))
        h = hist(after, DEV_FAMILY, dev, "write")
        if dp.check(h is not None, "custom buckets: the write histogram is on the page"):
            well_formed(h, "custom buckets: %s write" % DEV_FAMILY, ["0.0002", "0.3", "+Inf"])
        names = {n for n, _ in after}
        dp.check(hist(after, DEV_FAMILY, dev, "read") is None, "--biolatency.ops=write: no read histogram")
        dp.check(not any(n.startswith(QUEUE_FAMILY) for n in names),
                 "--biolatency.queue-ops=: no queue histogram (%s)"
                 % sorted(n for n in names if n.startswith(QUEUE_FAMILY)))
        page = d.scrape_text()
        dp.check(not dp.expocheck.check(page), "custom buckets: the page is valid exposition text")


def not_attached(what, prefix, dev, says, success=None):
    """The daemon started through prefix (a command that ends by running it) cannot attach: within
    30 s diskpulse_io_latency_up 0, diskstats still serves dev, no histogram, one log line of the
    collector contains says, diskpulse_collector_success{collector="biolatency"} is success (when
    given), and the daemon keeps running."""
    port = dp.free_port()
    url = "http://127.0.0.1:%d" % port
    state = tempfile.mkdtemp(prefix="diskpulse-state-")
    os.chmod(state, 0o777)  # nobody writes there too
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(prefix + [BIN, "--web.listen-address=127.0.0.1:%d" % port, "--state.directory=" + state,
                                      "--collector.diskstats.device-include=^%s$" % dev, "--no-collector.smart",
                                      "--no-collector.canary"], stdout=log, stderr=subprocess.STDOUT)
    try:
        def said_why():
            try:
                st, _, body = dp.http_get(url + "/metrics", timeout=2)
            except OSError:
                return None
            m = dp.parse(body.decode()) if st == 200 else None
            return m if m and dp.value(m, "diskpulse_io_latency_up") == 0 and \
                dp.value(m, "diskpulse_collector_success", collector="biolatency") is not None else None

        m = dp.wait_until(said_why, 30)
        log.seek(0)
        text = log.read()
        dp.check(bool(m), "%s: diskpulse_io_latency_up 0 on the page (log:\n%s)" % (what, text))
        if not m:
            return
        dp.check(dp.value(m, "diskpulse_disk_read_bytes_total", device=dev) is not None,
                 "%s: the diskstats collector still serves %s" % (what, dev))
        dp.check(not any(n.startswith(DEV_FAMILY) or n.startswith(QUEUE_FAMILY) for n, _ in m),
                 "%s: no latency histogram" % what)
        lines = [l for l in text.splitlines() if "biolatency" in l and says in l]
        dp.check(len(lines) == 1, "%s: one log line says why, %r (%s)" % (what, says, lines or "none"))
        if success is not None:
            got = dp.value(m, "diskpulse_collector_success", collector="biolatency")
            dp.check(got == success, "%s: diskpulse_collector_success{collector=\"biolatency\"} %s (%s)"
                     % (what, success, got))
        dp.check(proc.poll() is None, "%s: the daemon keeps running" % what)
    finally:
        dp.end_process(proc)
        log.close()
        shutil.rmtree(state, ignore_errors=True)


def unprivileged_run(dev):
    setpriv = shutil.which("setpriv")
    if not setpriv:
        print("skip: no setpriv: the run without privilege is skipped")
        return
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
    if subprocess.run(prefix + [BIN, "--version"], capture_output=True).returncode != 0:
        print("skip: nobody cannot run %s: the run without privilege is skipped" % BIN)
        return
    # A process never gains a capability: no retry fixes it, the operator chose it (a container's
    # default capabilities), so nothing to page about.
    not_attached("as nobody", prefix, dev, "CAP_", success=1)


def nobtf_run(dev):
    """The kernel's BTF unreadable (an empty file bound over it in a mount namespace of the
    daemon's own): the loader says so; no retry fixes it, so nothing to page about."""
    if not shutil.which("unshare"):
        print("skip: no unshare: the run without BTF is skipped")
        return
    # The namespace's mounts are made private from /sys down, not from / (in a chroot / is no
    # mount point, and unshare's default of making / private fails there).
    cmd = 'mount --make-rslave /sys && mount --bind /dev/null /sys/kernel/btf/vmlinux && exec "$@"'
    prefix = ["unshare", "-m", "--propagation", "unchanged", "sh", "-c", cmd, "sh"]
    probe = subprocess.run(prefix + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("skip: the run without BTF: no mount namespace hides the kernel's BTF here (%s)"
              % (probe.stdout + probe.stderr).strip()[-200:])
        return
    not_attached("without BTF", prefix, dev, "BTF", success=1)


def disabled_run(dev):
    with dp.Daemon(BIN, "--no-collector.biolatency", "--no-collector.smart", "--no-collector.canary",
                   "--collector.diskstats.device-include=^%s$" % dev) as d:
        m = d.scrape()
        names = {n for n, _ in m}
        dp.check(not any(n.startswith("diskpulse_io_") for n in names),
                 "--no-collector.biolatency: none of its families (%s)"
                 % sorted(n for n in names if n.startswith("diskpulse_io_")))
        dp.check(dp.value(m, "diskpulse_disk_read_bytes_total", device=dev) is not None,
                 "--no-collector.biolatency: diskstats still serves %s" % dev)


def main():
    need()
    tmp = tempfile.mkdtemp(prefix="diskpulse-biolat-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    img = os.path.join(tmp, "img")
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    loop = None
    try:
        loop = subprocess.run(["losetup", "-f", "--show", img], check=True, capture_output=True,
                              text=True).stdout.strip()
        dev = os.path.basename(loop)
        settle(dev)
        privileged_run(loop, dev)
        custom_run(loop, dev)
        unprivileged_run(dev)
        nobtf_run(dev)
        disabled_run(dev)
    finally:
        if loop:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    dp.finish()


main()
