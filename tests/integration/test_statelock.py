"""One writer of a state directory, always (the real binary, no root needed): a second daemon
with the same --state.directory refuses to start (exit 1, naming the holder's pid); --once beside
a running daemon measures without the state and leaves its directory untouched; the reset refuses
while a daemon runs and a daemon refuses while a reset (or any holder of the lock) has it; the
reset takes "DIR/" for "DIR", lists the paths it knows for an unknown one and keeps the previous
file beside it; one disk's records exported from one directory and imported into another, the
disk's identity checked against the host (a fixture sysfs and udev database); the edits' usage
errors (exit 2) and what they cannot find (exit 1), each with its message.

Nothing lost, nothing claimed that did not happen: an import path that does not exist, lies on
a tmpfs or on another disk is refused (the fixture's sysfs copied, with the device of a test
directory's filesystem made the fixture's sda or nvme0n1), "/a/../b" is "/b", a path over 1 KiB
has its own message; two records that one import path would give one key are refused, and the
recipe the message gives imports them one at a time; an import into a file at its limit of 1024
records drops the least recently updated records of disks not on this host and says so (it used
to drop the record it had just imported), and refuses when only this host's disks' records
could go; reset and import remove a temp file a killed save left; a reset on a read-only
directory prints nothing on stdout (as root); an export refused for a bad line says how to fix
it without editing, and the fix it names works; an import without its header says what a records
file begins with; a reload that changes --state.directory (in the config file, no --canary.path)
leaves the default canary target where it is until a restart."""
import fcntl
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

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


# nvme0n1 of the fixture: udev's ID_WWN
NVME = "wwn:eui.0025385b71b07e2f"
TMP_PFX = "." + STATE + ".tmp-"


def record(disk, path, regime="idle", updated=5, mode="fdatasync"):
    return ("disk=%s mode=%s path=%s regime=%s baseline=0.004 updates=900 updated=%d warmup=- "
            "reference=0.002 refdays=final dayobs=- days=1717000000:0.0039,1717086400:0.004\n"
            % (disk, mode, path, regime, updated))


def run(*args, stdin=None):
    p = subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=60, input=stdin)
    return p.returncode, p.stdout, p.stderr


def listing(d):
    return sorted((n, os.stat(os.path.join(d, n)).st_ino, open(os.path.join(d, n)).read())
                  for n in os.listdir(d) if os.path.isfile(os.path.join(d, n)))


def block_dir():
    """A fresh directory on a filesystem with a block device (st_dev major > 0), or None."""
    for base in (tempfile.gettempdir(), os.getcwd()):
        if os.major(os.stat(base).st_dev) > 0:
            return tempfile.mkdtemp(prefix="diskpulse-statelock-", dir=base)
    return None


def sysfs_as(root, path, disk):
    """The roots of a copy of the fixture's sysfs in root where the device of path's filesystem
    is the fixture's disk (sda, nvme0n1)."""
    sys_dir = os.path.join(tempfile.mkdtemp(prefix="sys-%s-" % disk, dir=root), "sys")
    shutil.copytree(os.path.join(FIXTURE, "sys"), sys_dir, symlinks=True)
    st = os.stat(path)
    os.makedirs(os.path.join(sys_dir, "dev", "block"), exist_ok=True)
    os.symlink("../../block/" + disk, os.path.join(sys_dir, "dev", "block", "%d:%d"
                                                   % (os.major(st.st_dev), os.minor(st.st_dev))))
    return ["--path.procfs=" + os.path.join(FIXTURE, "proc"), "--path.sysfs=" + sys_dir,
            "--path.udev.data=" + os.path.join(FIXTURE, "udev")]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def imports(root):
    """The import's checks of its path, keys and the file's limit, with the test directory's
    filesystem on the fixture's sda."""
    here = os.path.join(root, "here")
    pg = os.path.join(here, "srv", "pg")
    os.makedirs(pg)
    sda = sysfs_as(root, here, "sda")
    nvme = sysfs_as(root, here, "nvme0n1")
    sd = "--state.directory=" + here
    exported = "diskpulse-canary-baselines 3\n" + record(SDA, "/data") + record(SDA, "/data", "busy")

    def imp(*args, stdin=exported, roots=sda):
        return run(sd, *roots, "--canary.import-records=-", *args, stdin=stdin)

    # a path that does not exist, one on a tmpfs, one on another disk: refused, nothing written
    for path, want in (("/nonexistent/dir", "it does not exist here"),
                       ("/dev/shm", "its filesystem has no block device of its own"),
                       (pg, "is on nvme0n1 (%s) here, not on the disk of the records (%s)"
                        % (NVME, SDA))):
        if path == "/dev/shm" and os.major(os.stat(path).st_dev) != 0:
            print("skip: /dev/shm is not a tmpfs here")
            continue
        rc, out, err = imp("--canary.import-path=" + path, roots=nvme if path == pg else sda)
        dp.check(rc == 1 and want in err and not out and read(os.path.join(here, STATE)) is None,
                 "an import to %s is refused, nothing written: %d %r %r" % (path, rc, out, err))
    # without --canary.import-path the records' own path is checked the same way
    rc, out, err = imp()
    dp.check(rc == 1 and "the records of /data cannot be used at /data: it does not exist here"
             in err and not out, "the records' own path is checked too: %d %r" % (rc, err))
    # a path over 1 KiB: its own message
    rc, out, err = imp("--canary.import-path=/" + "a" * 1100)
    dp.check(rc == 1 and "the path of --canary.import-path is 1101 bytes long; the state file "
             "keeps paths of up to 1023 bytes" in err and not out,
             "a path over 1 KiB has its own message: %r" % err)
    # "/a/../b" is "/b"; a temp file a killed save left is removed
    with open(os.path.join(here, TMP_PFX + "0123456789abcdef"), "w") as f:
        f.write("half a save")
    rc, out, err = imp("--canary.import-path=" + os.path.join(here, "x", "..", "srv", "pg", "."))
    text = read(os.path.join(here, STATE)) or ""
    dp.check(rc == 0 and "imported: disk=%s mode=fdatasync path=%s regime=idle\n" % (SDA, pg)
             in out and "path=%s regime=busy" % pg in text and "/.." not in text,
             "an import path with .. is normalised: %d %r %r" % (rc, out, err))
    dp.check(not glob.glob(os.path.join(here, TMP_PFX + "*")) and
             "removed: 1 temporary file of an interrupted save" in out,
             "the import removed the temp file a killed save left: %r" % out)

    # two targets of one mode, one import path: refused; the recipe of the message works
    two = exported + record(SDA, "/data2") + record(SDA, "/data2", "busy")
    before = read(os.path.join(here, STATE))
    rc, out, err = imp("--canary.import-path=" + pg, stdin=two)
    dp.check(rc == 1 and "hold two targets of mode fdatasync, /data and /data2" in err and
             not out and read(os.path.join(here, STATE)) == before,
             "two records on one key after the import path: refused: %d %r" % (rc, err))
    recipe = err[err.index("e.g. ") + 5:].strip() if "e.g. " in err else "false"
    two_file = os.path.join(root, "two.records")
    with open(two_file, "w") as f:
        f.write(two)
    recipe = recipe.replace("FILE", two_file).replace("DIR", pg)
    recipe = recipe.replace("diskpulse ", "%s %s %s " % (BIN, sd, " ".join(sda)))
    p = subprocess.run(["sh", "-c", recipe], capture_output=True, text=True, timeout=60)
    text = read(os.path.join(here, STATE)) or ""
    dp.check(p.returncode == 0 and "imported: disk=%s mode=fdatasync path=%s regime=busy "
             "(replaces the record this host had)" % (SDA, pg) in p.stdout and
             text.count("path=%s " % pg) == 2,
             "the message's recipe imports one target: %r -> %d %r %r"
             % (recipe, p.returncode, p.stdout, p.stderr))

    # the file at its limit: the least recently updated records of disks not here make room
    full = "diskpulse-canary-baselines 3\n" + "".join(
        record("wwn:0x5000f%04x" % i, "/gone%d" % i, updated=1000 + i) for i in range(1024))
    with open(os.path.join(here, STATE), "w") as f:
        f.write(full)
    rc, out, err = imp("--canary.import-path=" + pg)
    text = read(os.path.join(here, STATE)) or ""
    copies = glob.glob(os.path.join(here, STATE + ".import-*"))
    seq = lambda c: int(c.rsplit(".", 1)[1]) if c.rsplit(".", 1)[1].isdigit() else 0
    newest = max(copies, key=seq) if copies else ""
    dp.check(rc == 0 and text.count("\n") == 1025 and "path=%s regime=idle" % pg in text and
             "path=%s regime=busy" % pg in text,
             "an import into a full file keeps both imported records: %d %r" % (rc, err))
    dp.check("path=/gone0 " not in text and "path=/gone1 " not in text and
             "path=/gone2 " in text and read(newest) == full,
             "the two least recently updated records of absent disks made room, kept in the copy")
    dp.check("dropped: disk=wwn:0x5000f0000 mode=fdatasync path=/gone0 regime=idle (the state "
             "file's limit is 1024 records: the least recently updated of a disk not on this "
             "host, last updated 1970-01-01T00:00:00Z; %s still has it)"
             % os.path.basename(newest) in out and out.count("dropped: ") == 2,
             "each record dropped is named with the copy that has it: %r" % out[-600:])
    # full of this host's disk: nothing may go, refused with the limit named
    full = "diskpulse-canary-baselines 3\n" + "".join(
        record(SDA, "/p%d" % i, updated=1000 + i) for i in range(1024))
    with open(os.path.join(here, STATE), "w") as f:
        f.write(full)
    n_copies = len(glob.glob(os.path.join(here, STATE + ".*")))
    rc, out, err = imp("--canary.import-path=" + pg)
    dp.check(rc == 1 and "the state file holds 1024 records, its limit is 1024, and the import "
             "adds 2 new ones; only 0 records of disks that are not on this host could make "
             "room, so nothing is imported" in err and not out and
             read(os.path.join(here, STATE)) == full and
             len(glob.glob(os.path.join(here, STATE + ".*"))) == n_copies,
             "an import that would drop this host's records is refused: %d %r" % (rc, err))

    # an import without its header line: what a records file begins with
    rc, out, err = imp("--canary.import-path=" + pg, stdin=record(SDA, "/data"))
    dp.check(rc == 1 and 'does not begin with the line "diskpulse-canary-baselines 3"' in err and
             "Bad message" not in err, "an import without a header says what it needs: %r" % err)


def messages(root):
    """An export refused for a bad line says how to fix it without editing, and the fix works."""
    d = os.path.join(root, "bad")
    os.makedirs(d)
    with open(os.path.join(d, STATE), "w") as f:
        f.write(TEXT + "disk=bad line\n")
    sd = "--state.directory=" + d
    rc, out, err = run(sd, *ROOTS, "--canary.export-records=sda")
    dp.check(rc == 1 and not out and "bad line (the first: line 4)" in err and
             "the export only reads the file and changes nothing" in err and
             "diskpulse --once with the same --state.directory" in err,
             "an export refused for a bad line says how to fix it: %r" % err)
    rc, out, err = run("--once", *QUIET, *ROOTS, sd)
    dp.check(rc == 0, "diskpulse --once on that directory: %d %r" % (rc, err[-300:]))
    rc, out, err = run(sd, *ROOTS, "--canary.export-records=sda")
    dp.check(rc == 0 and SDA in out and "days=1717000000:0.0039,1717086400:0.004" in out and
             glob.glob(os.path.join(d, STATE + ".corrupt-*")),
             "after it the export works, the whole file kept aside: %d %r" % (rc, err))


def readonly_reset(root):
    """A reset on a read-only directory: exit 1, nothing said on stdout (as root)."""
    if os.geteuid() != 0:
        print("skip: a read-only mount needs root")
        return
    d = os.path.join(root, "ro")
    os.makedirs(d)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d]).returncode != 0:
        print("skip: cannot mount a tmpfs")
        return
    try:
        with open(os.path.join(d, STATE), "w") as f:
            f.write(TEXT)
        subprocess.run(["mount", "-o", "remount,ro", d], check=True)
        rc, out, err = run("--state.directory=" + d, "--canary.reset-reference=/data")
        dp.check(rc == 1 and out == "" and "Read-only file system" in err and
                 read(os.path.join(d, STATE)) == TEXT,
                 "a reset on a read-only directory says nothing on stdout: %d %r %r"
                 % (rc, out, err))
    finally:
        subprocess.run(["umount", d])


def reload_state_dir(root):
    """--state.directory changed in the config file and reloaded: the default canary target
    stays where it is until a restart."""
    a = os.path.join(root, "reload-a")
    b = os.path.join(root, "reload-b")  # not there: a target moved to it would be down
    os.makedirs(a)
    cfg = os.path.join(root, "reload.conf")
    with open(cfg, "w") as f:
        f.write("state.directory = %s\n" % a)
    port = dp.free_port()
    url = "http://127.0.0.1:%d" % port
    log = open(os.path.join(root, "reload.log"), "w+")
    proc = subprocess.Popen([BIN, "--web.listen-address=127.0.0.1:%d" % port, *QUIET, *ROOTS,
                             "--config.file=" + cfg], stdout=log, stderr=subprocess.STDOUT)

    def metrics():
        try:
            status, _, body = dp.http_get(url + "/metrics", timeout=2)
        except OSError:
            return None
        return dp.parse(body.decode()) if status == 200 else None

    def up(path):
        m = metrics()
        return m if m and dp.value(m, "diskpulse_sync_target_up", path=path) == 1 else None

    try:
        m = dp.wait_until(lambda: up(a), 20)
        dp.check(m is not None, "the default canary target, the state directory, is up")
        loaded = m and dp.value(m, "diskpulse_config_reload_success_timestamp_seconds")
        probes = m and dp.value(m, "diskpulse_sync_probes_total", path=a)
        with open(cfg, "w") as f:
            f.write("state.directory = %s\n" % b)
        time.sleep(1.1)  # the reload's timestamp is in seconds
        proc.send_signal(signal.SIGHUP)
        m = dp.wait_until(lambda: (lambda x: x if x and dp.value(
            x, "diskpulse_config_reload_success_timestamp_seconds") != loaded else None)(metrics()), 20)
        dp.check(m is not None, "the reload happened")
        # a few more cycles at 100 ms
        m = dp.wait_until(lambda: (lambda x: x if x and (dp.value(
            x, "diskpulse_sync_probes_total", path=a) or 0) > (probes or 0) + 20 else None)(metrics()), 20)
        targets = sorted({dict(ls).get("path") for ls in dp.series(metrics() or {}, "diskpulse_sync_target_up")})
        log.flush()
        log.seek(0)
        out = log.read()
        dp.check(m is not None and targets == [a] and dp.value(m, "diskpulse_sync_target_up", path=a) == 1,
                 "after the reload the target is still %s and up (targets: %s)" % (a, targets))
        dp.check("change only on restart" in out and "errno=ENOENT" not in out,
                 "the reload says the state directory changes on restart, and no probe failed")
    finally:
        dp.end_process(proc)
        log.close()


def main():
    blocks = block_dir()
    if blocks is None:
        dp.skip("no directory on a filesystem with a block device (temp dir and cwd are not)")
    state = os.path.join(blocks, "state")
    other = os.path.join(blocks, "other")
    os.makedirs(state)
    os.makedirs(other)
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
        with open(os.path.join(state, TMP_PFX + "0123456789abcdef"), "w") as f:
            f.write("half a save")
        rc, out, err = run(sd, "--canary.reset-reference=/data/")
        copies = glob.glob(os.path.join(state, STATE + ".reset-*"))
        dp.check(rc == 0 and "reset: disk=%s mode=fdatasync path=/data regime=idle" % SDA in out,
                 "the reset of /data/ resets /data: %d %r %r" % (rc, out, err))
        dp.check(not glob.glob(os.path.join(state, TMP_PFX + "*")) and
                 "removed: 1 temporary file of an interrupted save" in out,
                 "the reset removed the temp file a killed save left: %r" % out)
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
        pg = os.path.join(other, "srv", "pg")
        os.makedirs(pg)
        other_sda = sysfs_as(blocks, other, "sda")
        rc, out, err = run("--state.directory=" + other, *other_sda, "--canary.import-records=-",
                           "--canary.import-path=%s/" % pg, stdin=exported)
        text = open(os.path.join(other, STATE)).read() if os.path.exists(os.path.join(other, STATE)) else ""
        dp.check(rc == 0 and "disk=%s mode=fdatasync path=%s regime=idle" % (SDA, pg) in text and
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

        imports(blocks)
        messages(blocks)
        readonly_reset(blocks)
        reload_state_dir(blocks)
    finally:
        shutil.rmtree(blocks, ignore_errors=True)
    dp.finish()


if __name__ == "__main__":
    main()
