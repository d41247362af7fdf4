"""One writer of a state directory, always (the real binary, no root needed): a second daemon
with the same --state.directory refuses to start (exit 1, naming the holder's pid); --once beside
a running daemon measures without the state and leaves its directory untouched; the reset refuses
while a daemon runs and a daemon refuses while a reset (or any holder of the lock) has it; the
reset takes "DIR/" for "DIR", lists the paths it knows for an unknown one and keeps the previous
file beside it; one disk's records exported from one directory and imported into another, the
disk's identity checked against the host (a fixture sysfs and udev database); the edits' usage
errors (exit 2) and what they cannot find (exit 1), each with its message."""
import fcntl
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import dp

BIN = sys.argv[1]
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "linux-6.1")
ROOTS = ["--path.procfs=" + os.path.join(FIXTURE, "proc"),
         "--path.sysfs=" + os.path.join(FIXTURE, "sys"),
         "--path.udev.data=" + os.path.join(FIXTURE, "udev")]
QUIET = ["--no-collector.smart", "--no-collector.biolatency", "--canary.interval=100ms"]
STATE = "canary-baselines"
# sda of the fixture: udev's ID_WWN
SDA = "wwn:0x5000c500a1b2c3d4"
TEXT = ("diskpulse-canary-baselines 3\n"
        "disk=%s mode=fdatasync path=/data regime=idle baseline=0.004 updates=900 "
        "updated=5 warmup=- reference=0.002 refdays=final dayobs=- "
        "days=1717000000:0.0039,1717086400:0.004\n"
        "disk=wwn:0x5000bbbb mode=fdatasync path=/logs regime=idle baseline=0.003 "
        "updates=900 updated=5 warmup=- reference=0.001 refdays=final dayobs=- days=-\n" % SDA)


def run(*args, stdin=None):
    p = subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=60, input=stdin)
    return p.returncode, p.stdout, p.stderr


def listing(d):
    return sorted((n, os.stat(os.path.join(d, n)).st_ino, open(os.path.join(d, n)).read())
                  for n in os.listdir(d) if os.path.isfile(os.path.join(d, n)))


def main():
    state = tempfile.mkdtemp(prefix="diskpulse-statelock-")
    other = tempfile.mkdtemp(prefix="diskpulse-statelock-")
    try:
        with open(os.path.join(state, STATE), "w") as f:
            f.write(TEXT)
        os.chmod(os.path.join(state, STATE), 0o600)
        sd = "--state.directory=" + state

        with dp.Daemon(BIN, *QUIET, *ROOTS, sd) as a:
            before = listing(state)
            # a second daemon on another port: refused before it serves, exit 1
            p = subprocess.run([BIN, "--web.listen-address=127.0.0.1:%d" % dp.free_port(),
                                *QUIET, *ROOTS, sd], capture_output=True, text=True, timeout=60)
            dp.check(p.returncode == 1, "a second daemon with the same state directory exits 1 "
                     "(got %d)" % p.returncode)
            dp.check("in use by another process" in p.stderr and
                     "pid=%d" % a.proc.pid in p.stderr,
                     "it says the directory is in use and by which pid: %r" % p.stderr[-400:])
            dp.check(a.proc.poll() is None, "the first daemon still runs")

            # --once beside it: measures, says so, writes nothing there
            rc, out, err = run("--once", *QUIET, *ROOTS, sd)
            dp.check(rc == 0 and "diskpulse_sync_probes_total" in out,
                     "--once beside a running daemon exits 0 with its page (got %d)" % rc)
            dp.check("--once measures without its state" in err,
                     "--once says it leaves the state alone: %r" % err[-300:])
            dp.check(listing(state) == before, "the state directory is exactly as it was")

            # the reset refuses while the daemon runs
            rc, out, err = run(sd, "--canary.reset-reference=/data")
            dp.check(rc == 1 and "(pid %d)" % a.proc.pid in err and
                     "systemctl stop diskpulse.socket diskpulse" in err,
                     "the reset refuses while a daemon runs, naming it: %d %r" % (rc, err))
            dp.check(listing(state) == before, "the refused reset changed nothing")
            rc, _ = a.stop()
            dp.check(rc == 0, "the daemon stops with 0")

        # a holder of the lock (a reset in progress): the daemon refuses to start
        fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = subprocess.run([BIN, "--web.listen-address=127.0.0.1:%d" % dp.free_port(), *QUIET,
                            *ROOTS, sd], capture_output=True, text=True, timeout=60)
        dp.check(p.returncode == 1 and "pid=%d" % os.getpid() in p.stderr,
                 "a daemon does not start while another process holds the lock (got %d)"
                 % p.returncode)
        os.close(fd)

        # the reset: DIR/ is DIR, a copy kept; an unknown path lists the known ones
        rc, out, err = run(sd, "--canary.reset-reference=/nowhere")
        dp.check(rc == 1 and "the paths it knows: /data, /logs" in err,
                 "an unknown path lists the known ones: %r" % err)
        rc, out, err = run(sd, "--canary.reset-reference=/data/")
        copies = glob.glob(os.path.join(state, STATE + ".reset-*"))
        dp.check(rc == 0 and "reset: disk=%s mode=fdatasync path=/data regime=idle" % SDA in out,
                 "the reset of /data/ resets /data: %d %r %r" % (rc, out, err))
        dp.check(len(copies) == 1 and open(copies[0]).read() == TEXT and
                 os.path.basename(copies[0]) in out,
                 "the previous file is kept beside it and named: %s" % copies)
        dp.check("reference=0.004 refdays=- dayobs=- days=-" in open(os.path.join(state, STATE)).read(),
                 "the reset is in the file")
        # and a daemon started now keeps it
        with dp.Daemon(BIN, *QUIET, *ROOTS, sd) as b:
            b.stop()
        dp.check("reference=0.004 refdays=- dayobs=- days=-" in open(os.path.join(state, STATE)).read(),
                 "a daemon started after the reset keeps it")

        # export one disk by device name (the fixture's sda), import it elsewhere
        with open(os.path.join(state, STATE), "w") as f:
            f.write(TEXT)
        rc, out, err = run(sd, *ROOTS, "--canary.export-records=sda")
        dp.check(rc == 0 and out.startswith("diskpulse-canary-baselines 3\n") and SDA in out and
                 "0x5000bbbb" not in out, "export of sda: its records only: %d %r" % (rc, err))
        exported = out
        rc, out, err = run("--state.directory=" + other, *ROOTS, "--canary.import-records=-",
                           "--canary.import-path=/srv/pg/", stdin=exported)
        text = open(os.path.join(other, STATE)).read() if os.path.exists(os.path.join(other, STATE)) else ""
        dp.check(rc == 0 and "disk=%s mode=fdatasync path=/srv/pg regime=idle" % SDA in text and
                 "days=1717000000:0.0039,1717086400:0.004" in text,
                 "import into a new directory, path moved: %d %r" % (rc, err))
        rc, out, err = run(sd, *ROOTS, "--canary.export-records=wwn:0x5000bbbb")
        rc2, out2, err2 = run("--state.directory=" + other, *ROOTS, "--canary.import-records=-",
                              stdin=out)
        dp.check(rc == 0 and rc2 == 1 and "no disk with the identity wwn:0x5000bbbb" in err2,
                 "a disk this host does not have is refused: %d %r" % (rc2, err2))
        rc, out, err = run(sd, "--canary.import-path=/x")
        dp.check(rc == 2 and err == "diskpulse: --canary.import-path needs "
                 "--canary.import-records\n" and not out,
                 "--canary.import-path alone is a usage error: %d %r" % (rc, err))
        rc, out, err = run(sd, "--canary.reset-reference=/data", "--canary.export-records=sda")
        dp.check(rc == 2 and err == "diskpulse: --canary.reset-reference, --canary.export-records "
                 "and --canary.import-records are used one at a time\n" and not out,
                 "two edits at once are a usage error: %d %r" % (rc, err))
        # what an edit cannot find: exit 1, the reason on stderr, nothing on stdout
        missing = os.path.join(other, "missing")
        rc, out, err = run("--state.directory=" + missing, "--canary.reset-reference=/data")
        dp.check(rc == 1 and err.startswith("diskpulse: cannot open the state directory %s: "
                                            % missing) and not out,
                 "a state directory that is not there: %d %r" % (rc, err))
        rc, out, err = run(sd, *ROOTS, "--canary.export-records=sdz")
        dp.check(rc == 1 and err.startswith("diskpulse: no identity (WWN or serial) known for "
                                            "the device sdz: ") and not out,
                 "export of a device sysfs does not know: %d %r" % (rc, err))
        rc, out, err = run(sd, *ROOTS, "--canary.import-records=" + missing)
        dp.check(rc == 1 and err.startswith("diskpulse: cannot read %s: " % missing) and not out,
                 "import of a file that is not there: %d %r" % (rc, err))
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)
    dp.finish()


if __name__ == "__main__":
    main()
