#!/usr/bin/env python3
"""Benchmark: the canary's two regimes against a database's own sync timing on the same
filesystem (ext4, 4 KiB blocks, on a loop device), one after the other so that neither disturbs
the other:

  - PostgreSQL's WAL sync time (pg_stat_wal.wal_sync_time / wal_sync, with track_wal_io_timing)
    at about one commit a second (pgbench -N -R 1, one client) and at busy rates (pgbench -N
    unthrottled: one client, whose commits follow each other, and 8 clients, whose commits share
    each sync);
  - the canary with a cycle a second (its idle regime at PostgreSQL's low-rate spacing) and at
    its default interval;
  - ioping -W a request a second and back-to-back (-i 0), and pg_test_fsync's fdatasync line.

PostgreSQL reports a mean per sync; the canary's mean (from its histogram) is printed beside its
median. Needs root, PostgreSQL's server binaries (Debian: postgresql-15) with its postgres user,
ioping. Prints numbers; asserts nothing.
Usage: bench_canary_pg.py BINARY [SECONDS_PER_PHASE (120)] [DEFAULT_INTERVAL_CYCLES (10)]"""
import glob
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import dp  # noqa: E402


def pg_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return os.path.dirname(found[-1]) if found else None


def as_postgres(cmd, **kw):
    p = subprocess.run(["runuser", "-u", "postgres", "--"] + cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def psql(bindir, sock, port, sql):
    return as_postgres([os.path.join(bindir, "psql"), "-h", sock, "-p", str(port), "-d", "postgres",
                        "-At", "-c", sql]).stdout.strip()


def wal_stats(bindir, sock, port):
    """(syncs, sync ms, writes, write ms, WAL bytes) from pg_stat_wal."""
    row = psql(bindir, sock, port, "SELECT wal_sync, wal_sync_time, wal_write, wal_write_time, wal_bytes "
               "FROM pg_stat_wal")
    return [float(x) for x in row.split("|")]


def pgbench(bindir, sock, port, *args):
    out = as_postgres([os.path.join(bindir, "pgbench"), "-h", sock, "-p", str(port), "-n", "-N"] +
                      list(args) + ["postgres"]).stdout
    m = re.search(r"tps = ([\d.]+)", out)
    return float(m.group(1)) if m else float("nan")


def pg_phase(bindir, sock, port, name, *args):
    psql(bindir, sock, port, "SELECT pg_stat_reset_shared('wal')")
    t0 = time.monotonic()
    tps = pgbench(bindir, sock, port, *args)
    secs = time.monotonic() - t0
    syncs, sync_ms, writes, write_ms, nbytes = wal_stats(bindir, sock, port)
    mean = sync_ms / syncs / 1e3 if syncs else float("nan")
    print("  PostgreSQL %-34s %7.1f tps, %6d WAL syncs (%5.1f/s), mean sync %.3f ms, mean write %.3f ms, "
          "%.0f WAL bytes per sync" % (name, tps, syncs, syncs / secs, mean * 1e3,
                                       write_ms / writes if writes else float("nan"),
                                       nbytes / syncs if syncs else 0))
    return mean


def canary_phase(fs, name, seconds, *args):
    """Runs the daemon on fs for seconds (after its first cycle); prints and returns
    {regime: (median, mean)} over what it sampled meanwhile."""
    d = dp.Daemon(BIN, "--no-collector.smart", "--canary.path=" + os.path.join(fs.mnt, "canary"), *args)
    try:
        def count(m, regime):
            return dp.value(m, "diskpulse_sync_latency_seconds_count", regime=regime) or 0
        dp.wait_until(lambda: count(d.scrape(), "busy") >= 1, 120)
        m0 = d.scrape()
        time.sleep(seconds)
        m1 = d.scrape()
    finally:
        d.stop()
        d.__exit__()
    out = {}
    for regime in ("idle", "busy"):
        n = count(m1, regime) - count(m0, regime)
        s = (dp.value(m1, "diskpulse_sync_latency_seconds_sum", regime=regime) -
             dp.value(m0, "diskpulse_sync_latency_seconds_sum", regime=regime))
        med = dp.value(m1, "diskpulse_sync_recent_seconds", regime=regime, quantile="0.5")
        out[regime] = (med, s / n if n else float("nan"))
        print("  canary %-38s %s: %4d samples, median %.3f ms (last 5 min), mean %.3f ms" %
              (name, regime, n, med * 1e3, out[regime][1] * 1e3))
    return out


def ioping(path, interval, count):
    v, _ = dp.ioping(path, interval, count)
    print("  ioping -W -i %-4s %4d requests              median %.3f ms, mean %.3f ms" %
          (interval, len(v), statistics.median(v) * 1e3, statistics.mean(v) * 1e3))
    return statistics.median(v)


def pg_test_fsync(bindir, path):
    out = subprocess.run([os.path.join(bindir, "pg_test_fsync"), "-f", path, "-s", "5"], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"one 8kB write.*?fdatasync\s+([\d.]+) ops/sec\s+(\d+) usecs/op", out, re.S)
    if not m:
        print("  pg_test_fsync: no fdatasync line:\n" + out)
        return None
    print("  pg_test_fsync one 8kB write, fdatasync:    %s ops/sec, %s usecs/op (back to back)" %
          (m.group(1), m.group(2)))
    return float(m.group(2)) * 1e-6


def main():
    if os.geteuid() != 0:
        print("needs root (loop device, mount, runuser)")
        return 1
    bindir = pg_bin()
    if not bindir:
        print("PostgreSQL's server binaries are not installed (Debian: postgresql-15)")
        return 1
    pwd.getpwnam("postgres")
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    cycles = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    with dp.LoopFs(size_mb=2048, mkfs_args=["-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0"]) as fs:
        pgdata, sock = os.path.join(fs.mnt, "pg"), os.path.join(fs.tmp, "sock")
        os.chmod(fs.tmp, 0o755)  # the postgres user reaches its directories through them
        os.chmod(fs.mnt, 0o755)
        for d in (pgdata, sock):
            os.mkdir(d, 0o700)
            shutil.chown(d, "postgres", "postgres")
        os.mkdir(os.path.join(fs.mnt, "canary"))  # the daemon's own (it drops its capabilities)
        port = dp.free_port()
        as_postgres([os.path.join(bindir, "initdb"), "-D", pgdata, "--no-instructions", "-A", "trust"])
        with open(os.path.join(pgdata, "postgresql.conf"), "a") as f:
            f.write("listen_addresses = ''\nunix_socket_directories = '%s'\nport = %d\n"
                    "track_wal_io_timing = on\nwal_sync_method = fdatasync\nsynchronous_commit = on\n"
                    "shared_buffers = 128MB\nmax_wal_size = 8GB\ncheckpoint_timeout = 1h\n"
                    "autovacuum = off\n" % (sock, port))
        as_postgres([os.path.join(bindir, "pg_ctl"), "-D", pgdata, "-w", "-l", os.path.join(sock, "pg.log"),
                     "start"])
        kernel = os.uname().release
        print("ext4 (4 KiB blocks) on %s, kernel %s, PostgreSQL %s, %d s per phase" %
              (fs.dev, kernel, psql(bindir, sock, port, "SHOW server_version"), seconds))
        try:
            as_postgres([os.path.join(bindir, "pgbench"), "-h", sock, "-p", str(port), "-i", "-s", "10", "-q",
                         "postgres"])
            psql(bindir, sock, port, "CHECKPOINT")
            low = pg_phase(bindir, sock, port, "pgbench -N -c 1 -R 1:", "-c", "1", "-R", "1", "-T", str(seconds))
            high = pg_phase(bindir, sock, port, "pgbench -N -c 1 (unthrottled):", "-c", "1", "-T", str(seconds))
            group = pg_phase(bindir, sock, port, "pgbench -N -c 8 -j 2 (unthrottled):", "-c", "8", "-j", "2",
                             "-T", str(seconds))
        finally:
            as_postgres([os.path.join(bindir, "pg_ctl"), "-D", pgdata, "-m", "fast", "-w", "stop"])
        one = canary_phase(fs, "a cycle a second (--canary.interval=1s)", seconds, "--canary.interval=1s")
        dflt = canary_phase(fs, "at the defaults (a cycle every 3 minutes)", cycles * 180)
        io1 = ioping(fs.mnt, "1", min(seconds, 120))
        io0 = ioping(fs.mnt, "0", 500)
        tf = pg_test_fsync(bindir, os.path.join(fs.mnt, "pg_test_fsync.out"))
        print("summary (mean ms for PostgreSQL, median / mean ms for the canary):")
        print("  one commit a second:  PostgreSQL %.3f; canary idle at 1 s %.3f / %.3f (%+.0f %% by mean), "
              "at 1 min %.3f / %.3f; ioping -i 1 %.3f" %
              (low * 1e3, one["idle"][0] * 1e3, one["idle"][1] * 1e3, (one["idle"][1] / low - 1) * 100,
               dflt["idle"][0] * 1e3, dflt["idle"][1] * 1e3, io1 * 1e3))
        print("  busy:                 PostgreSQL %.3f (one client), %.3f (8 clients, group commit); canary busy "
              "at 1 s %.3f / %.3f (%+.0f %% by mean against one client), at 1 min %.3f / %.3f; ioping -i 0 %.3f; "
              "pg_test_fsync %s" %
              (high * 1e3, group * 1e3, one["busy"][0] * 1e3, one["busy"][1] * 1e3,
               (one["busy"][1] / high - 1) * 100, dflt["busy"][0] * 1e3, dflt["busy"][1] * 1e3, io0 * 1e3,
               "%.3f" % (tf * 1e3) if tf else "-"))
    return 0


if __name__ == "__main__":
    BIN = sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__)
    sys.exit(main())
